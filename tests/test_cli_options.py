"""The options every decoding command shares come from one place and parse alike."""
import pytest

from partrace.cli import build_parser, cmd_clocks, cmd_comm, cmd_dump, cmd_info, cmd_profile, \
    cmd_run, cmd_timeline, cmd_warm

EXTRA = {"merge": ["-o", "o.h5"], "convert": ["-o", "o.otf"], "timeline": ["--plot", "t.png"]}
FUNCS = {"merge": cmd_run, "convert": cmd_run, "info": cmd_info, "profile": cmd_profile,
         "comm": cmd_comm, "dump": cmd_dump, "timeline": cmd_timeline, "clocks": cmd_clocks}
BUDGETED = ("merge", "convert", "profile", "comm", "dump", "timeline")


@pytest.mark.parametrize("command", sorted(FUNCS))
def test_input_options(command):
    args = build_parser().parse_args([command, "t.otf", *EXTRA.get(command, []), "--format", "otf",
                                      "--reader-option", "a=1", "--reader-option", "b=x"])
    assert (args.trace, args.format, args.reader_option) == ("t.otf", "otf", ["a=1", "b=x"])
    assert args.func is FUNCS[command]


@pytest.mark.parametrize("command", BUDGETED)
def test_memory_options(command):
    args = build_parser().parse_args([command, "t", *EXTRA.get(command, []), "--memory", "512M",
                                      "--tmpdir", "/scratch"])
    assert (args.memory, args.tmpdir) == (512 << 20, "/scratch")
    args = build_parser().parse_args([command, "t", *EXTRA.get(command, [])])
    assert (args.memory, args.tmpdir) == (2 << 30, None)


def test_warm_options():
    args = build_parser().parse_args(["warm", "a.otf", "b", "--format", "ovni", "--format", "ross",
                                      "-q"])
    assert (args.traces, args.formats, args.quiet, args.func) == (["a.otf", "b"], ["ovni", "ross"],
                                                                  True, cmd_warm)


def test_summary_of_a_small_merge_counts_its_bytes_exactly(tmp_path):
    """A 9 KB trace is not 'from 0.0 MB': below a megabyte the bytes are given exactly, and
    they are the input's files as ``info`` counts them (not a reader's measure of its units:
    an HDF5 input's decoded rows are bigger than the file)."""
    import json
    import re

    from tests.conftest import DATA, run_cli
    trace = DATA / "ovni" / "v3-mpisim-small" / "ovni"
    ring = DATA / "otf" / "ring8" / "trace" / "ring8.otf"
    r = run_cli(["merge", str(ring), "-o", str(tmp_path / "ring.h5")])
    assert r.returncode == 0, r.stderr
    for path in (trace, ring, tmp_path / "ring.h5"):
        info = json.loads(run_cli(["info", str(path), "--json"]).stdout)
        r = run_cli(["convert", str(path), "-o", str(tmp_path / "o.h5"), "--overwrite"])
        assert r.returncode == 0, r.stderr
        said = re.search(r"from ([\d,]+) bytes in ([\d,]+) files? in ", r.stderr)
        assert said, r.stderr
        assert int(said[1].replace(",", "")) == info["size_bytes"] > 0, (path, r.stderr)
        assert int(said[2]) == info["files"], (path, r.stderr)
    assert info["files"] == 1 and " 1 file in " in r.stderr
