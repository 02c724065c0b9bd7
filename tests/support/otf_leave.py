"""A small OTF trace (ASCII, written here) of the two things real OTF traces hold that OTF2,
Perfetto and Chrome JSON cannot take as they are:

- Leave records without a function (``L``: OTF's "leave the innermost open region", which
  VampirTrace 5.4 writes), two of them with no region open;
- names that are not UTF-8 (KOI8-R, as txt2otf wrote them, and Latin-1).

``RECORDS`` is what an OTF2 archive of it holds, per location, worked out by hand.
"""
from __future__ import annotations

from pathlib import Path

DEEP = 11       # nesting on process 3: deeper than the sink's first stack (8)

MAIN, COMPUTE, EXCHANGE, CAFE = "main", "вычисление", "обмен", "café"
NAMES = {1: MAIN, 2: COMPUTE, 3: EXCHANGE, 4: CAFE}
THREAD = "поток 1"          # process 2's name
ENCODING = {COMPUTE: "koi8-r", EXCHANGE: "koi8-r", THREAD: "koi8-r", CAFE: "latin-1"}


def escaped(text: str, encoding: str) -> str:
    """``text`` in ``encoding`` as partrace writes a name that is not UTF-8: ASCII as it is,
    every other byte as \\xNN."""
    return "".join(chr(b) if b < 0x80 else f"\\x{b:02x}" for b in text.encode(encoding))


def written(name: str) -> str:
    return escaped(name, ENCODING.get(name, "ascii"))


# (time, process, record) in time order; "L" leaves the innermost open region
EVENTS = [(0, 1, "L"), (0, 1, "E1"), (0, 2, "E1"), (16, 1, "E2"), (16, 2, "E3"),
          (32, 1, "E3"), (48, 1, "L"), (48, 2, "L"), (64, 1, "L2"), (64, 2, "L"),
          (80, 1, "L"), (80, 2, "L"), (128, 1, "E4"), (144, 1, "L")]
EVENTS += [(200 + 4 * d, 3, f"E{1 + d % 4:x}") for d in range(DEEP)]
EVENTS += [(300 + 4 * d, 3, "L") for d in range(DEEP)]

# per process: (record, time, region name as written)
RECORDS = {
    1: [("Enter", 0, MAIN), ("Enter", 16, COMPUTE), ("Enter", 32, EXCHANGE),
        ("Leave", 48, EXCHANGE), ("Leave", 64, COMPUTE), ("Leave", 80, MAIN),
        ("Enter", 128, CAFE), ("Leave", 144, CAFE)],
    2: [("Enter", 0, MAIN), ("Enter", 16, EXCHANGE), ("Leave", 48, EXCHANGE),
        ("Leave", 64, MAIN)],
    3: [("Enter", 200 + 4 * d, NAMES[1 + d % 4]) for d in range(DEEP)]
    + [("Leave", 300 + 4 * d, NAMES[1 + (DEEP - 1 - d) % 4]) for d in range(DEEP)],
}
LOST = 2            # leaves without a function and no region open (process 1 at 0, 2 at 80)
NOT_UTF8 = 4        # names: three regions and process 2


def write(folder: Path) -> Path:
    """The trace in ``folder``; returns its master file."""
    folder.mkdir(parents=True, exist_ok=True)
    name = lambda text: text.encode(ENCODING.get(text, "ascii"))  # noqa: E731
    defs = [b'DTR3b9aca00\n', b'DP1NM"rank 0"\n', b'DP2NM"' + name(THREAD) + b'"\n',
            b'DP3NM"deep"\n', b'DFG1NM"Application"\n']
    defs += [b'DF%dG1NM"' % i + name(n) + b'"\n' for i, n in NAMES.items()]
    (folder / "lz.0.def").write_bytes(b"".join(defs))
    lines = []
    for t, p, rec in EVENTS:
        lines += [f"{t:x}", f"*{p}", rec]
    (folder / "lz.1.events").write_text("\n".join(lines) + "\n")
    (folder / "lz.otf").write_text("1:1,2,3\n")
    return folder / "lz.otf"


def merged_at_1_and_3_ranks(tmp_path: Path, suffix: str) -> list[bytes]:
    """The trace merged to ``m{None,3}{suffix}`` at 1 and 3 ranks: each run says in one
    warning how many names were not UTF-8.  The outputs' bytes."""
    from tests.conftest import run_cli
    trace = write(tmp_path / "trace")
    data = []
    for n in (None, 3):
        out = tmp_path / f"m{n}{suffix}"
        r = run_cli(["merge", str(trace), "-o", str(out), "-q"], nranks=n)
        assert r.returncode == 0, r.stderr
        warned = [ln for ln in r.stderr.splitlines() if "warning" in ln]
        assert len(warned) == 1 and f"{NOT_UTF8} name(s) not valid UTF-8" in warned[0]
        data.append(out.read_bytes())
    return data
