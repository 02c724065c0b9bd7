"""What every damage test checks: a damaged copy of a fixture fails with one clear line (the
API's TraceError, the CLI's exit 2), writes nothing and leaves the input as it was."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from partrace.errors import TraceError
from partrace.model import Table
from tests.conftest import run_cli


def snapshot(root: Path) -> dict:
    """Every entry below root: its kind and, for regular files, its bytes (a FIFO is never opened)."""
    out = {}
    for p in sorted(Path(root).rglob("*")):
        st = os.lstat(p)
        out[str(p.relative_to(root))] = (stat.S_IFMT(st.st_mode),
                                         p.read_bytes() if stat.S_ISREG(st.st_mode) else None)
    return out


def decode_units(reader, every_table: bool = False) -> dict[str, dict[str, Table]]:
    """Per unit of an opened reader, its tables concatenated: those its chunks hold, or with
    `every_table` every table of the schema (empty where no chunk has it)."""
    defs = reader.read_definitions()
    schema = reader.schema(defs)
    out = {}
    for u in reader.units():
        chunks = list(reader.decode(u, defs))
        out[u.key] = {n: Table.concat([c[n] for c in chunks if n in c], schema[n])
                      for n in schema if every_table or any(n in c for c in chunks)}
    return out


def api_error(decode, *args, **kwargs) -> TraceError:
    """The TraceError that decode(*args, **kwargs) raises (the test fails if there is none)."""
    with pytest.raises(TraceError) as e:
        decode(*args, **kwargs)
    return e.value


def cli_fails(trace: Path, out_dir: Path, damaged, where: str | None = None, nranks: int | None = None,
              outputs=(".h5",), info: bool = False, options=(), folder: Path | None = None) -> str:
    """`partrace merge trace -o out_dir/o<suffix>` for each output suffix (and `info` if asked)
    exits 2 with one line naming `damaged` (at `where`), leaves `out_dir` empty and the input
    folder (`folder`, else the trace's) as it was.  Returns the first error line."""
    folder = folder or (trace if trace.is_dir() else trace.parent)
    before = snapshot(folder)
    out_dir.mkdir(parents=True, exist_ok=True)
    loc = f"{damaged}:{where}: " if where else f"{damaged}: "
    commands = [["merge", str(trace), "-o", str(out_dir / f"o{s}"), "-q"] for s in outputs]
    lines = []
    for args in commands + [["info", str(trace)]] * info:
        r = run_cli(args + list(options), nranks=nranks, timeout=120)
        assert r.returncode == 2, r.stderr
        err = [x for x in r.stderr.splitlines() if x.strip()]
        assert len(err) == 1 and err[0].startswith(f"partrace: error: {loc}"), (r.stderr, loc)
        assert "internal error" not in err[0], err[0]
        lines.append(err[0])
    assert list(out_dir.iterdir()) == []
    assert snapshot(folder) == before
    return lines[0]


def info_json(trace: Path, nranks: int | None = None) -> dict:
    """What `partrace info --json` says of `trace` (which must succeed), its path taken out."""
    r = run_cli(["info", str(trace), "--json"], nranks=nranks)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info.pop("path") == str(trace)
    return info


def check(decode, trace: Path, tmp_path: Path, damaged: Path, where: str | None, match: str,
          nranks: int | None = None) -> None:
    """decode(trace) raises a TraceError at (damaged, where) saying `match`; the CLI says it too."""
    e = api_error(decode, trace)
    assert (e.path, e.where) == (str(damaged), where), str(e)
    assert match in e.message, str(e)
    assert match in cli_fails(trace, tmp_path / f"out-{nranks}", damaged, where, nranks)


def truncated_dumpi_leaves_nothing(tmp_path: Path, dumpi_trace: Path, output_name: str,
                                   nranks: int | None = None) -> None:
    """Merge a copy of ``dumpi_trace`` whose rank-1 file is cut at byte 3000 to
    ``output_name``: exit 2 naming the file, and nothing left in the output's folder."""
    import shutil
    src = tmp_path / "in"
    shutil.copytree(dumpi_trace, src)
    damaged = sorted(src.glob("*-0001.bin"))[0]
    damaged.write_bytes(damaged.read_bytes()[:3000])
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    r = run_cli(["merge", str(src), "-o", str(out_dir / output_name), "-q"], nranks=nranks)
    assert r.returncode == 2, r.stderr
    assert damaged.name in r.stderr
    assert list(out_dir.iterdir()) == []
