"""Encoder <-> decoder: every function of the label table, byte-exact re-encoding
of the real fixtures from dumpi2ascii's text, and bad-input errors."""
from __future__ import annotations

import re
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from partrace.errors import TraceError
from partrace.formats.dumpi import DUMPI
from tests.support.dumpi_encode import BY_NAME, Call, rank_path, write_meta, write_rank
from partrace.formats.dumpi.functable import FUNCTIONS
from partrace.formats.dumpi.layout import read_rank_file
from partrace.formats.dumpi.tables import SIDE_ARG_ID
from partrace.model import Kind

from tests.formats.test_dumpi_fixtures import DATA, ints, parse_ascii

RECORDED = [name for _f, name, args in FUNCTIONS if args is not None]


def sample_args(name: str, seed: int, root: bool) -> dict:
    """Distinct values of each argument's kind; root-only conditions hold iff ``root``."""
    args = {}
    for k, (an, kind, _role, cond) in enumerate(BY_NAME[name][1]):
        x = seed * 31 + k * 7 + 3
        args[an] = {"i32": -x * 1001, "u16": x % 65536, "u8": x % 256,
                    "i64": -(x << 40), "a32": [x, -x, 2**31 - 1][: 1 + x % 3],
                    "a16": [x, 65535], "a8": [x % 256, 0, 255],
                    "aa32": [[x, x + 1, 2], [], [-5]],
                    "status": [(x, -1, 1, 24, -x), (0, -2, 0, 0, 7)][: 1 + x % 2],
                    "str": f"s{x}", "str2": [f"a{x}", ""], "str3": [[f"b{x}"], [], ["c", "d"]],
                    "argv": [f"/bin/p{x}", "-v"]}[kind]
    for _an, _k, _r, cond in BY_NAME[name][1]:
        if cond:
            args[cond[1]] = args[cond[0]] if root else args[cond[0]] + 1
    return args


def write_all(folder: Path, mask: int = 0xCF) -> list[Call]:
    calls = []
    t = 1000 * 10**9
    for i, name in enumerate(RECORDED * 2):
        root = i >= len(RECORDED)
        calls.append(Call(name, sample_args(name, i, root), wall=(t + i * 5000, t + i * 5000 + 7),
                          cpu=(2 * 10**9 + i, 2 * 10**9 + i + 3), thread=i % 3,
                          perf=((i, i + 10), (2**63 + i, 5))))
    write_meta(folder, "all", 1)
    write_rank(rank_path(folder, "all", 0), calls, mask=mask, cpu_offset=1, wall_offset=999,
               perf_labels=["PAPI_TOT_CYC", "PAPI_L1_DCM"], keyvals=[("k", "v")],
               addresses=[(0xDEADBEEF, "main")], meshcrd=[1, 2], meshsize=[4, 4])
    return calls


def decode_one(folder: Path):
    reader = DUMPI.open(folder)
    defs = reader.read_definitions()
    (chunk,) = list(reader.decode(reader.units()[0], defs))
    return reader, defs, chunk


@pytest.mark.parametrize("mask", [0xCF, 0x48, 0x4D])
def test_every_function_round_trip(tmp_path, mask):
    calls = write_all(tmp_path, mask)
    reader, defs, chunk = decode_one(tmp_path)
    schema = reader.schema(defs)
    assert set(RECORDED) <= set(defs.attrs["recorded_functions"])
    ev = chunk["events"]
    enter = ev["kind"] == Kind.ENTER
    assert list(ev["region"][enter] - 1) == [BY_NAME[c.name][0] for c in calls]
    assert list(ev["time"][enter]) == [c.wall[0] for c in calls]
    assert list(ev["time"][ev["kind"] == Kind.LEAVE]) == [c.wall[1] for c in calls]
    want_cpu = [c.cpu[0] for c in calls] if mask & 0x04 else [0] * len(calls)
    assert list(ev["cpu_time"][enter]) == want_cpu
    assert list(ev["thread"][enter]) == [c.thread for c in calls]
    perf = chunk["perf"]
    if mask & 0x80:
        assert list(zip(perf["call"], perf["counter"], perf["entry"], perf["exit"])) == [
            (i, j, a, b) for i, c in enumerate(calls) for j, (a, b) in enumerate(c.perf)]
    else:
        assert len(perf) == 0
    for i, c in enumerate(calls):
        t = chunk[f"calls/{c.name}"]
        row = np.nonzero(t["call"] == i)[0]
        assert len(row) == 1, c.name
        row = row[0]
        for an, kind, _role, cond in BY_NAME[c.name][1]:
            present = not cond or c.args[cond[0]] == c.args[cond[1]]
            v = c.args[an]
            where = (c.name, an, kind)
            if kind in ("i32", "u16", "u8", "i64"):
                assert t[an][row] == (v if present else 0), where
            elif kind == "str":
                assert t[an][row] == (v if present else ""), where
                continue
            elif kind == "status":
                st = chunk["statuses"]
                sel = (st["call"] == i) & (st["arg"] == SIDE_ARG_ID[an])
                got = list(zip(st["bytes"][sel], st["source"][sel], st["cancelled"][sel],
                               st["error"][sel], st["tag"][sel]))
                recorded = present and bool(mask & 0x03)
                assert got == (v if recorded else []), where
                assert t[f"{an}_count"][row] == (len(v) if recorded else -1), where
            elif kind in ("a32", "a16", "a8", "aa32"):
                ar = chunk["arrays"]
                sel = (ar["call"] == i) & (ar["arg"] == SIDE_ARG_ID[an])
                flat = [(j, k, x) for j, xs in enumerate(v) for k, x in enumerate(xs)] \
                    if kind == "aa32" else [(j, 0, x) for j, x in enumerate(v)]
                got = list(zip(ar["i0"][sel], ar["i1"][sel], ar["value"][sel]))
                assert got == (flat if present else []), where
                assert t[f"{an}_count"][row] == (len(v) if present else -1), where
            else:
                s = chunk["strings"]
                sel = (s["call"] == i) & (s["arg"] == SIDE_ARG_ID[an])
                flat = ([(j, k, x) for j, xs in enumerate(v) for k, x in enumerate(xs)]
                        if kind == "str3" else [(j, 0, x) for j, x in enumerate(v)])
                got = list(zip(s["i0"][sel], s["i1"][sel], s["text"][sel]))
                assert got == (flat if present else []), where
                col = "argc" if kind == "argv" else f"{an}_count"
                assert t[col][row] == (len(v) if present else -1), where
    for name, table in chunk.items():
        assert [col.name for col in schema[name]] == table.names
    src = defs.source["ranks"][0]
    assert src["keyvals"] == [["k", "v"]] and src["addresses"] == [[0xDEADBEEF, "main"]]
    assert src["perf_labels"] == ["PAPI_TOT_CYC", "PAPI_L1_DCM"]
    assert (src["meshcrd"], src["meshsize"]) == ([1, 2], [4, 4])
    assert list(defs.tables["function_addresses"]["name"]) == ["main"]


def _calls_from_ascii(ref: dict, mask: int) -> list[Call]:
    """Build encoder input from dumpi2ascii's text only (names and printed values)."""
    out = []
    for c in ref["calls"]:
        layout = dict((a[0], a[1]) for a in BY_NAME[c["name"]][1])
        args = {}
        for _ctype, name, text in c["args"]:
            if name == "argc":                  # written with argv
                continue
            kind = layout[name]
            if text == "<IGNORED>":
                args[name] = []
            elif kind == "status":
                args[name] = [tuple(ints(s)[i] for i in (0, 2, 1, 4, 3))
                              for s in re.findall(r"\{(.*?)\}", text)]
            elif kind == "argv":
                args[name] = re.findall(r'"(.*?)"', text)
            elif kind.startswith("a"):
                args[name] = ints(text)
            else:
                args[name] = ints(text.split(" (")[0])[0]
        out.append(Call(c["name"], args, wall=(c["wall_in"], c["wall_out"]),
                        cpu=(c["cpu_in"], c["cpu_out"]), thread=c["thread"]))
    return out


@pytest.mark.parametrize("trace", ["p2p-4rank", "coll-4rank"])
def test_reencode_fixture_byte_exact(tmp_path, trace):
    """Encoding dumpi2ascii's view of each rank reproduces libdumpi's bytes."""
    import time
    for binf in sorted((DATA / trace).glob("*.bin")):
        data = binf.read_bytes()
        ref = parse_ascii(binf.with_suffix(".txt"))
        h = ref["header"]
        mask = data[18]                                   # first record's config mask
        cpu_off, wall_off = struct.unpack(">II", data[8:16])
        ignored = {k: i for k, (_c, i) in ref["footer"].items()
                   if i and k != "MPI_ALL_FUNCTIONS"}       # the encoder sums the total
        calls = _calls_from_ascii(ref, mask)
        out = tmp_path / binf.name
        write_rank(out, calls, mask=mask, cpu_offset=cpu_off, wall_offset=wall_off,
                   version=tuple(map(int, h["version"].split("."))),
                   starttime=int(time.mktime(time.strptime(h["starttime"] + " UTC",
                                                           "%a %b %d %H:%M:%S %Y %Z")))
                   - time.timezone, hostname=h["hostname"], username=h["username"],
                   ignored=ignored, datatype_sizes=[s for _d, _n, s in ref["sizes"]])
        assert out.read_bytes() == data, binf.name


# --- errors -------------------------------------------------------------------------

def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "t"
    shutil.copytree(DATA / "p2p-4rank", dst)
    for f in dst.iterdir():
        f.chmod(0o644)
    return dst


def _decode_all(folder: Path):
    reader = DUMPI.open(folder)
    defs = reader.read_definitions()
    for u in reader.units():
        list(reader.decode(u, defs))


def test_missing_rank_file(tmp_path):
    d = _copy(tmp_path)
    victim = next(d.glob("*-0002.bin"))
    victim.unlink()
    with pytest.raises(TraceError, match="rank 2 file is missing") as e:
        DUMPI.open(d)
    assert e.value.path == str(victim)


def _same_tables(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for unit in a:
        assert a[unit].keys() == b[unit].keys(), unit
        for name, table in a[unit].items():
            for col, values in table.columns.items():
                assert np.array_equal(values, b[unit][name].columns[col]), (unit, name, col)


def test_folder_without_metafile_reads_as_with_it(tmp_path):
    """Traces are often published without their .meta (MPINET's, in the corpus): a folder
    of one run's rank files reads as the run, with every rank file's calls."""
    from tests.support.damage import decode_units
    d = _copy(tmp_path)
    want = decode_units(DUMPI.open(d))
    (meta,) = d.glob("*.meta")
    meta.unlink()
    assert DUMPI.sniff(d)
    reader = DUMPI.open(d)
    assert sorted(reader.files) == [0, 1, 2, 3] and reader.source_files() == sorted(
        d.glob("*.bin"))
    _same_tables(decode_units(reader), want)
    assert reader.read_definitions().attrs["metafile"] == {}


def test_folder_without_metafile_needs_every_rank_of_one_run(tmp_path):
    d = _copy(tmp_path)
    next(d.glob("*.meta")).unlink()
    first = next(d.glob("*-0000.bin"))
    shutil.copy(first, d / "other-run-0000.bin")
    with pytest.raises(TraceError, match="rank files of 2 runs"):
        DUMPI.open(d)
    (d / "other-run-0000.bin").unlink()
    victim = next(d.glob("*-0001.bin"))
    victim.unlink()
    with pytest.raises(TraceError, match=r"no \.meta file and rank 1 file .*-0001\.bin\) is "
                                         r"missing: 3 rank files up to rank 3"):
        DUMPI.open(d)
    for f in d.glob("*.bin"):
        f.unlink()
    assert not DUMPI.sniff(d)


def test_wrong_magic(tmp_path):
    d = _copy(tmp_path)
    f = next(d.glob("*-0001.bin"))
    f.write_bytes(b"\0" + f.read_bytes()[1:])
    with pytest.raises(TraceError, match="head magic") as e:
        _decode_all(d)
    assert e.value.path == str(f) and e.value.where == "byte 0"


def test_truncated_file(tmp_path):
    d = _copy(tmp_path)
    f = next(d.glob("*-0000.bin"))
    data = f.read_bytes()
    f.write_bytes(data[:len(data) // 2])
    with pytest.raises(TraceError, match="index record") as e:
        _decode_all(d)
    assert e.value.path == str(f) and e.value.where.startswith("byte ")


def test_bad_index_record(tmp_path):
    d = _copy(tmp_path)
    f = next(d.glob("*-0000.bin"))
    data = bytearray(f.read_bytes())
    data[-32:-24] = struct.pack(">Q", len(data) * 2)      # header offset beyond the end
    f.write_bytes(bytes(data))
    with pytest.raises(TraceError, match="bad index record: header") as e:
        _decode_all(d)
    assert e.value.where == f"byte {len(data) - 64}"


@pytest.mark.parametrize("label", [128, 290, 300])   # 293: test_dumpi_leniency
def test_unknown_function_id(tmp_path, label):
    d = _copy(tmp_path)
    f = next(d.glob("*-0003.bin"))
    data = bytearray(f.read_bytes())
    rf = read_rank_file(f)
    reader = DUMPI.open(d)
    defs = reader.read_definitions()
    (chunk,) = list(reader.decode(reader.units()[3], defs))
    from partrace.formats.dumpi.walk import Walk       # record offsets are not a column
    at = int(Walk(bytes(data), rf).off[5])
    data[at:at + 2] = struct.pack(">H", label)
    f.write_bytes(bytes(data))
    with pytest.raises(TraceError, match=f"unknown DUMPI function id {label}") as e:
        _decode_all(d)
    assert e.value.path == str(f) and e.value.where == f"byte {at}"
    assert chunk["events"]["call"][chunk["events"]["kind"] == Kind.ENTER][5] == 5


def test_record_cut_inside_stream(tmp_path):
    """A record running into the end-of-stream label is reported at its offset."""
    calls = [Call("MPI_Send", dict(count=1, datatype=9, dest=0, tag=1, comm=2))] * 3
    write_meta(tmp_path, "cut", 1)
    f = rank_path(tmp_path, "cut", 0)
    write_rank(f, calls)
    data = bytearray(f.read_bytes())
    rf = read_rank_file(f)
    # drop the last 2 argument bytes of the last record, shift the rest, fix the index
    cut = rf.stream_end - 2
    data = data[:cut] + data[cut + 2:]
    idx = list(struct.unpack(">8Q", data[-64:]))
    idx[1:] = [x - 2 if x > cut else x for x in idx[1:]]
    idx[5] = 8
    data[-64:] = struct.pack(">8Q", *idx)
    f.write_bytes(bytes(data))
    with pytest.raises(TraceError, match="runs past the end of the call stream") as e:
        _decode_all(tmp_path)
    assert e.value.path == str(f)


def test_generator_script(tmp_path):
    """scripts/gen_dumpi.py writes a trace the reader decodes completely."""
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, str(root / "scripts" / "gen_dumpi.py"), str(tmp_path),
                    "--ranks", "3", "--calls", "52"], check=True, capture_output=True,
                   env={"PYTHONPATH": str(root)})
    reader = DUMPI.open(tmp_path)
    defs = reader.read_definitions()
    assert defs.attrs["calls_total"] == 3 * 52
    for u in reader.units():
        (chunk,) = list(reader.decode(u, defs))
        ev = chunk["events"]
        assert (ev["kind"] == Kind.ENTER).sum() == 52
        assert (np.diff(ev["time"]) >= 0).all()
        sends = ev["kind"] == Kind.SEND
        assert (ev["peer"][sends] == (u.info[1] + 1) % 3 + 1).all() and sends.sum() == 10
        assert (ev["size"][sends] == 64).all()


def test_walk_resumes_where_an_output_array_ran_full(tmp_path, monkeypatch, jit_mode):
    """The walk stops at the record that finds an array full and goes on from it once the
    array is grown: with room for one element per side array to start with (so that every
    argument array, string, status and perf value overflows them), every array it makes
    equals those of a walk that never ran out of room."""
    from partrace.formats.dumpi import walk
    write_all(tmp_path)
    path = rank_path(tmp_path, "all", 0)
    data, rf = path.read_bytes(), read_rank_file(path)
    roomy = walk.Walk(data, rf)
    made = walk._walk_arrays
    grown = []
    monkeypatch.setattr(walk, "_walk_arrays", lambda nc, *side: made(nc, 1, 1, 1, 1))
    monkeypatch.setattr(walk, "_grown", lambda g, used: grown.append(used) or
                        _grown_by_one(g, used))
    tight = walk.Walk(data, rf)
    assert len(grown) > 4 and tight.end == roomy.end == rf.stream_end
    for name in ("func", "thread", "times", "perfn", "vals", "e", "s", "t", "p"):
        a, b = getattr(roomy, name), getattr(tight, name)
        if name == "vals":          # slots past a call's function hold nothing
            fn = [len(FUNCTIONS[f][2] or ()) for f in roomy.func]
            a = [a[k][c] for c in range(len(fn)) for k in range(fn[c])]
            b = [b[k][c] for c in range(len(fn)) for k in range(fn[c])]
        assert np.array_equal(np.asarray(a), np.asarray(b)), name


def _grown_by_one(group, used):
    """Room for one more element: the walk stops at the next one again."""
    out = tuple(np.empty(a.shape[:-1] + (a.shape[-1] + 1,), a.dtype) for a in group)
    for a, b in zip(group, out):
        b[..., :used] = a[..., :used]
    return out
