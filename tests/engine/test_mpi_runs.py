"""The CLI under mpiexec: identical output for any rank count; failures end cleanly."""
import pytest

from tests.conftest import run_cli
from tests.support.compare import assert_same_content

pytestmark = pytest.mark.mpi


def test_identical_hdf5_for_1_to_4_ranks_and_more_ranks_than_units(synth_trace, tmp_path):
    trace = synth_trace(locations=5, events=3000, units=3)
    outputs = []
    for n in (None, 1, 2, 3, 4):
        out = tmp_path / f"out-{n}.h5"
        r = run_cli(["merge", str(trace), "-o", str(out), "--format", "synth", "-q"], nranks=n)
        assert r.returncode == 0, r.stderr
        outputs.append(out)
    for out in outputs[1:]:
        assert_same_content(outputs[0], out)


def test_output_is_in_global_key_order(synth_trace, tmp_path):
    import h5py
    import numpy as np
    trace = synth_trace(locations=6, events=1000, units=6)
    out = tmp_path / "o.h5"
    assert run_cli(["merge", str(trace), "-o", str(out), "--format", "synth", "-q"],
                   nranks=3).returncode == 0
    with h5py.File(out) as f:
        t, loc, seq = f["events/time"][:], f["events/location"][:], f["events/seq"][:]
        assert len(t) == 6 * 1000
        assert np.array_equal(np.lexsort((seq, loc, t)), np.arange(len(t)))
        assert f["events/kind"].dtype.metadata["enum"]["ENTER"] == 1


def test_existing_output_is_refused_and_untouched(synth_trace, tmp_path):
    trace = synth_trace()
    out = tmp_path / "exists.h5"
    out.write_bytes(b"precious")
    r = run_cli(["merge", str(trace), "-o", str(out), "--format", "synth"], nranks=2)
    assert r.returncode == 2
    assert "output exists" in r.stderr and str(out) in r.stderr
    assert r.stderr.count("error") == 1           # one line, from rank 0 only
    assert out.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([out.name, trace.name])


def test_a_failing_rank_ends_the_whole_job_without_output(synth_trace, tmp_path):
    trace = synth_trace(units=4)
    out = tmp_path / "o.h5"
    # rank 1's decode fails: the other ranks must not hang in the exchange.
    r = run_cli(["merge", str(trace), "-o", str(out), "--format", "synth"], nranks=3,
                env={"PARTRACE_TEST_FAIL_DECODE": "0001"}, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "injected failure in unit 0001" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [trace.name]


def test_missing_input_is_one_clear_line(tmp_path):
    r = run_cli(["merge", str(tmp_path / "nope.otf"), "-o", str(tmp_path / "o.h5")], nranks=2)
    assert r.returncode == 2
    assert "no such file or directory" in r.stderr
    assert not (tmp_path / "o.h5").exists()


def test_a_tiny_memory_budget_gives_the_same_output(synth_trace, tmp_path):
    """Windows and spilling (budget far below the trace) change nothing in the output."""
    trace = synth_trace(locations=6, events=40000, units=4)
    ref = tmp_path / "ref.h5"
    assert run_cli(["merge", str(trace), "-o", str(ref), "--format", "synth", "-q"]
                   ).returncode == 0
    spill = tmp_path / "spill"
    spill.mkdir()
    for n in (None, 3):
        out = tmp_path / f"budget-{n}.h5"
        r = run_cli(["merge", str(trace), "-o", str(out), "--format", "synth", "--memory", "1M",
                     "--tmpdir", str(spill)], nranks=n)
        assert r.returncode == 0, r.stderr
        windows = int(r.stderr.split(" window(s)")[0].rsplit(" ", 1)[1])
        assert windows >= 8 and "MB spilled" in r.stderr, r.stderr
        assert_same_content(ref, out)
        assert list(spill.iterdir()) == []          # spill files are cleaned up
