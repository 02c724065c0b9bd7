"""A rank's account (engine/accounts.py) in one process: phases and windows, busy CPU,
files opened, peak memory, and what a metered MPI call adds (a stand-in communicator:
the rules are arithmetic on what the call sent and got)."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from partrace.engine import accounts
from partrace.kernels import jit
from partrace.kernels.jit import njit
from tests.conftest import ROOT


@pytest.fixture(autouse=True)
def no_account_left():
    accounts.end()
    yield
    accounts.end()


def _spin(n=200_000):
    return sum(i * i for i in range(n))


def test_phases_count_busy_cpu_files_opened_and_peak_memory(tmp_path):
    import builtins
    import io
    openers = builtins.open, io.open, os.open
    accounts.begin(rank=0)
    accounts.phase("plan")
    _spin()
    accounts.phase("decode")
    (tmp_path / "a").write_text("x")
    with open(tmp_path / "a") as f:
        f.read()
    os.close(os.open(tmp_path / "a", os.O_RDONLY))
    with open(os.open(tmp_path / "a", os.O_RDONLY)) as f:   # a descriptor: no second open
        f.read()
    report = accounts.end().report()
    assert (builtins.open, io.open, os.open) == openers     # as they were, once it ends
    assert list(report["phases"]) == ["start-up", "plan", "decode"]
    plan, decode = report["phases"]["plan"], report["phases"]["decode"]
    assert plan["busy_s"] > 0 and plan["files_opened"] == 0
    assert decode["files_opened"] == 4
    assert report["phases"]["start-up"]["busy_s"] > 0      # imports: CPU since the process began
    assert all(p["peak_rss_bytes"] > 0 for p in report["phases"].values())
    assert report["peak_rss_bytes"] == max(p["peak_rss_bytes"] for p in report["phases"].values())
    assert report["busy_s"] == pytest.approx(sum(p["busy_s"] for p in report["phases"].values()))
    assert report["mpi_calls"] == 0 and report["windows"] == []


def test_window_phases_add_up_per_kind_and_stay_apart_per_window():
    accounts.begin(rank=2)
    for w in range(3):
        for _table in range(2):         # a window's tables: exchange, merge, exchange, merge
            accounts.phase("exchange", w)
            accounts.phase_in_window("merge")
        accounts.phase("write", w)
    accounts.phase("commit")
    report = accounts.end().report()
    assert report["rank"] == 2
    assert list(report["phases"]) == ["start-up", "exchange", "merge", "write", "commit"]
    assert [w["window"] for w in report["windows"]] == [0, 1, 2]
    for kind in accounts.WINDOW_PHASES:
        assert all(kind in w["phases"] for w in report["windows"])
        assert report["phases"][kind]["wall_s"] == pytest.approx(
            sum(w["phases"][kind]["wall_s"] for w in report["windows"]))


class FakeComm:
    """What the metered methods read of a Comm: rank, size and a communicator."""

    def __init__(self, rank, size, mpi=True):
        self.rank, self.size, self.mpi = rank, size, object() if mpi else None

    @accounts.metered(accounts.bcast_traffic)
    def bcast(self, obj, root=0):
        return obj

    @accounts.metered(accounts.alltoall_traffic)
    def alltoall(self, objs):
        return [np.zeros(10 * (r + 1), np.uint8) for r in range(self.size)]

    @accounts.metered()
    def alltoallv(self, sent, recv):
        accounts.bulk(sent, recv, self.rank)

    @accounts.metered()
    def check(self):
        return self.bcast(None)     # inside a metered call: counted once, as the outer call


def test_metered_calls_count_time_bytes_and_messages_between_other_ranks():
    account = accounts.begin(rank=1, keep_slices=True)
    accounts.phase("plan")
    root = FakeComm(0, 4)
    root.bcast(np.zeros(100, np.uint8))                  # 100 bytes to 3 ranks
    FakeComm(1, 4).bcast(np.zeros(100, np.uint8))        # one message received
    FakeComm(1, 3).alltoall([b"ab", b"cde", b"f"])       # own share (rank 1) left out
    FakeComm(1, 4).alltoallv([5, 0, 7, 0], [0, 9, 4, 4])
    FakeComm(1, 4).check()
    FakeComm(0, 1, mpi=False).bcast(b"serial")           # no MPI: nothing counted
    plan = accounts.end().report()["phases"]["plan"]
    assert plan["mpi_calls"] == 5
    assert plan["sent_bytes"] == 300 + 0 + (2 + 1) + (5 + 7)
    assert plan["recv_bytes"] == 0 + 100 + (10 + 30) + (4 + 4) + 8     # check: None
    assert plan["sent_messages"] == 3 + 0 + 2 + 2
    assert plan["recv_messages"] == 0 + 1 + 2 + 2 + 1
    assert plan["mpi_wait_s"] > 0 and plan["mpi_wait_s"] <= plan["wall_s"]
    calls = [s for s in account.slices if s[1]]
    assert [s[0] for s in calls] == ["bcast", "bcast", "alltoall", "alltoallv", "check"]
    phase = next(s for s in account.slices if s[0] == "plan")
    assert all(phase[2] <= s[2] <= s[3] <= phase[3] for s in calls)


def test_nothing_is_counted_without_an_account():
    FakeComm(0, 4).bcast(b"x")
    accounts.phase("plan")
    assert accounts.current() is None and accounts.end() is None


def test_estimate_is_about_the_pickled_size_without_pickling():
    import pickle
    assert accounts.estimate(np.zeros(1000)) == 8000
    assert accounts.estimate("abc") == 3 and accounts.estimate(b"abcd") == 4
    samples = [((i, i % 7, i * 3), 5) for i in range(4096)]
    est, real = accounts.estimate(samples), len(pickle.dumps(samples))
    assert real / 4 < est < real * 4
    nested = {"a": [list(range(1000 * i, 1000 * i + 50)) for i in range(50)]}
    real = len(pickle.dumps(nested))
    assert real / 8 < accounts.estimate(nested) < real * 8


def test_the_user_docs_name_every_field_and_phase():
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[2] / "docs" / "accounts.md").read_text()
    phases = ["start-up", accounts.KERNELS, "plan", "decode", "cuts", *accounts.WINDOW_PHASES,
              "commit"]
    first_cells = [line.split("|")[1] for line in doc.splitlines() if line.startswith("|")]
    missing = [name for name in (*accounts.FIELDS, *phases)
               if not any(f"`{name}`" in cell for cell in first_cells)]
    assert not missing


def test_an_estimate_is_the_same_on_the_receiving_side():
    """Bytes sent must equal bytes received: an object and its unpickled copy (in another
    process: another order of a set of strings) have the same estimate."""
    import pickle
    import subprocess
    import sys
    things = [{"x" * i for i in range(1, 40)}, {"k": [b"ab", (1, 2.5, None)]}, np.arange(7)]
    code = ("import pickle, sys; from partrace.engine.accounts import estimate; "
            "print([estimate(t) for t in pickle.loads(sys.stdin.buffer.read())])")
    other = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(things),
                           capture_output=True, check=True, env={**os.environ,
                           "PYTHONHASHSEED": "12345"}).stdout.decode()
    assert other.strip() == str([accounts.estimate(t) for t in things])


def test_self_trace_slices_stop_at_the_cap_and_calls_are_still_counted(monkeypatch):
    monkeypatch.setattr(accounts, "MAX_SLICES", 10)
    account = accounts.begin(rank=0, keep_slices=True)
    accounts.phase("plan")
    for _ in range(25):
        FakeComm(0, 2).bcast(b"x")
    accounts.phase("commit")
    report = accounts.end().report()
    assert report["phases"]["plan"]["mpi_calls"] == 25
    assert sum(1 for s in account.slices if s[1]) == 10 - 1     # after start-up's slice
    assert [s[0] for s in account.slices if not s[1]] == ["start-up", "plan", "commit"]


# --- making kernels -------------------------------------------------------------------------
# Kernels of these tests alone (a kernel is made once a process), without numba's cache.
@njit
def _inner(a):
    return a.sum()


@njit
def _outer(a):
    return _inner(a) + 1


@njit
def _on_python(a):
    return a.sum()


@njit
def _on_a_thread(a):
    return a.sum()


def _phase_slices(account):
    return [s for s in account.slices if not s[1]]


def test_making_a_kernel_is_its_own_phase_and_the_phase_it_broke_into_resumes():
    """The outer kernel's make (its dispatcher, then its overload, in which numba makes
    the inner kernel it calls) is taken out of window 0's exchange, which then goes on."""
    account = accounts.begin(rank=0, keep_slices=True)
    with jit.Scope(mode="numba"):
        accounts.phase("exchange", 0)
        assert _outer(np.arange(5)) == 11
        assert _inner.dispatcher is not None
        accounts.phase("commit")
    report = accounts.end().report()
    assert jit._on_make is None         # the account's hook went with it
    assert list(report["phases"]) == ["start-up", "exchange", accounts.KERNELS, "commit"]
    assert report["phases"][accounts.KERNELS]["busy_s"] > 0
    assert list(report["windows"][0]["phases"]) == ["exchange"]
    names = [s[0] for s in _phase_slices(account)]
    assert names == ["start-up", "exchange 0", accounts.KERNELS, "exchange 0", accounts.KERNELS,
                     "exchange 0", "commit"]
    slices = _phase_slices(account)
    assert all(a[3] == b[2] for a, b in zip(slices, slices[1:]))    # end to end, no overlap
    for field in ("wall_s", "busy_s"):
        assert report[field] == pytest.approx(sum(p[field] for p in report["phases"].values()))
    assert report["wall_s"] == pytest.approx((slices[-1][3] - slices[0][2]) / 1e9)


def test_phases_switched_inside_a_make_are_the_makes_own_work():
    """Rank 0's warm-up runs commands (their phases) to compile kernels: all of it is the
    make's, and the phase it broke into resumes after it."""
    accounts.begin(rank=0)
    accounts.phase("plan")
    with jit.making():
        accounts.phase("decode")
        accounts.phase("write", 0)
    accounts.phase("commit")
    report = accounts.end().report()
    assert list(report["phases"]) == ["start-up", "plan", accounts.KERNELS, "commit"]
    assert report["windows"] == []


def test_a_kernel_run_as_python_makes_nothing():
    accounts.begin(rank=0)
    with jit.Scope(mode="python"):
        accounts.phase("decode")
        assert _on_python(np.arange(5)) == 10
    report = accounts.end().report()
    assert _on_python.dispatcher is None
    assert list(report["phases"]) == ["start-up", "decode"]


def test_a_kernel_made_on_another_thread_stays_in_the_phase_that_ran_it():
    """The account's phases are its thread's: a make on another thread (the HDF5 writer's
    pool) cannot say which of them it interrupts."""
    import threading
    accounts.begin(rank=0)
    with jit.Scope(mode="numba"):
        accounts.phase("write", 0)
        results = []
        worker = threading.Thread(target=lambda: results.append(_on_a_thread(np.arange(5))))
        worker.start()
        worker.join()
        assert results == [10] and _on_a_thread.dispatcher is not None
    report = accounts.end().report()
    assert list(report["phases"]) == ["start-up", "write"]


def test_otf2_s_numba_import_and_c_callbacks_are_kernel_makes():
    """The OTF2 reader and writer import numba at their modules' import and load their C
    callbacks (cfunc) at decoration: both inside a make (the kernels phase), not in the
    plan or decode that first imports them.  In a fresh process: numba is not imported
    before the first make begins, and every module and callback is made inside one."""
    code = """if 1:
        import sys
        from partrace.kernels import jit
        seen = {"depth": 0, "before": None, "outside": []}
        def begin():
            seen["depth"] += 1
            if seen["before"] is None:
                seen["before"] = "numba" in sys.modules
        def end():
            seen["depth"] -= 1
        jit.account_makes(begin, end)
        import partrace.formats.otf2.readlib, partrace.formats.otf2.events
        import partrace.formats.otf2.replay
        assert seen["before"] is False, seen
        from numba.core.ccallback import CFunc
        compile_ = CFunc.compile
        def compile(self):
            seen["outside"].append(seen["depth"] == 0)
            return compile_(self)
        CFunc.compile = compile
        from partrace.formats.otf2.library import load, quiet_errors
        load()      # the library's symbols, which the callbacks link
        import partrace.formats.otf2.callbacks
        quiet_errors()
        assert len(seen["outside"]) > 80 and not any(seen["outside"]), seen["outside"]
        assert "numba" in sys.modules and seen["depth"] == 0
        print("ok")
    """
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=ROOT, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT), "PARTRACE_JIT": "numba"})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
