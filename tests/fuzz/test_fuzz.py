"""Fuzz: damaged copies of every real fixture through ``info``, ``merge -o x.h5``, ``merge -o x.otf``.

The cases (tests/fuzz/damage.py) are generated from a fixed seed: bit flips,
byte changes at headers, size and id fields and record starts, truncations,
zeroed ranges, appended garbage, deleted, swapped and replaced files (a
folder or a named pipe in place of a file), broken metadata (OTF master and
.def lines, DUMPI .meta, ovni JSON); partrace's own HDF5 output read back, edited with
h5py to claim a layout it does not hold (tests/fuzz/hdf5_damage.py); bit flips of an
OTF2 archive's global definitions.  Each case runs on one rank (a child
forked from this process, tests/fuzz/driver.py) and a spread of them on two
ranks (``mpiexec -n 2``).  Run one case with ``-k c123``.

The rule asserted for every case:

* the run ends within its time limit (30 s on one rank, 60 s on two): no hang;
* exit status 0 or 2; nothing on stdout or stderr says ``Traceback``,
  ``internal error`` or ``MemoryError``;
* peak resident memory of every process of the run at most 2 GiB (read from
  ``wait4``/``RUSAGE_CHILDREN``; an address-space limit of 3 GiB stops a
  blow-up before it hurts the machine, and shows as MemoryError);
* the damaged input tree is the same after the run (every file's type and
  SHA-256, nothing added or removed);
* no spill files left in the ``--tmpdir`` given (and ``$TMPDIR``), no
  ``.x.*.partrace-*`` staging folder beside the output;
* exit 2: no output at all, and stderr is exactly one line (Python warnings
  that name a file of the trace, with their source line, are not counted)
  ``partrace: error: PATH[:line N|:byte N|:object /NAME]: MESSAGE`` where PATH is the
  trace argument, the trace folder, or a path inside it.  The line or byte offset (in
  partrace's own HDF5, the object: HDF5 names no offset) is required when PATH is an
  existing regular file; a missing file, a folder
  or a named pipe has no offset to give, so its name alone is accepted;
* exit 0 ("every row accounted for"): the expected output exists (x.h5, or
  x.otf and its x.* files), stderr holds only the summary line and warnings
  naming a file of the trace, and the rows per table (``info --json`` rows,
  the HDF5 tables' lengths, or for OTF output the summary line's total) are
  compared with the same command on the clean fixture:
    - never more rows than the clean trace;
    - the same rows, unless (a) a warning names a file of the trace (what was
      skipped is then said), or (b) the damage is one the format cannot
      notice, marked ``rows="fewer"`` in damage.py: a file cut at a record or
      line boundary in a format without a trailer or count (OTF text, ovni,
      ROSS), or a deleted file that nothing in the trace names (OTF .marker,
      a ROSS .bin).  A damage that only changes values (a time, an id, a
      flipped bit) must still give the clean row counts; so must a broken
      size field or a deleted or swapped file that the trace names or counts
      (DUMPI index and footer, .meta numprocs, the OTF master file, ovni
      stream.json beside its stream.obs).
"""
from __future__ import annotations

import pytest

from .damage import CLEAN, Case, cases, fast_cases, two_rank_cases
from .driver import RESULTS, run_case, warm_up

FAST = fast_cases()
FAST_IDS = {c.id for c in FAST}
SLOW = [c for c in cases() if c.id not in FAST_IDS]
TWO = two_rank_cases()


@pytest.fixture(scope="session")
def clean_rows(tmp_path_factory):
    """Rows per table of each clean fixture and command, computed by the same runner."""
    cache: dict = {}

    def get(case: Case) -> dict:
        key = (case.fixture.name, case.command)
        if case.fixture.name not in cache:
            warm_up(case.fixture, tmp_path_factory.mktemp(f"warm-{case.fixture.name}"))
            cache[case.fixture.name] = True
        if key not in cache:
            work = tmp_path_factory.mktemp(f"clean-{case.fixture.name}-{case.command}")
            r = run_case(Case("clean", case.fixture, CLEAN, case.command), work / "run", None,
                         1, timeout=300)          # the first run may compile kernels
            assert r.outcome.rc == 0 and not r.problems, (
                f"clean {case.fixture.name} {case.command}: {r.row()}\n{r.outcome.stderr}")
            cache[key] = r.outcome.rows
        return cache[key]
    return get


def _check(case: Case, nranks: int, clean_rows, tmp_path) -> None:
    # the clean run on one rank: rows do not depend on the rank count (tests exist for it)
    baseline = clean_rows(case)
    r = run_case(case, tmp_path / "run", baseline, nranks)
    if r.problems:
        RESULTS.append((nranks, r.row()))
    assert not r.problems, f"{r.row()}\n--- stderr ---\n{r.outcome.stderr[-3000:]}"


@pytest.mark.parametrize("case", FAST, ids=[c.id for c in FAST])
def test_damaged_fast(case, clean_rows, tmp_path):
    _check(case, 1, clean_rows, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("case", SLOW, ids=[c.id for c in SLOW])
def test_damaged_one_rank(case, clean_rows, tmp_path):
    _check(case, 1, clean_rows, tmp_path)


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.parametrize("case", TWO, ids=[c.id for c in TWO])
def test_damaged_two_ranks(case, clean_rows, tmp_path):
    _check(case, 2, clean_rows, tmp_path)


def test_the_checks_catch_each_failure_kind(tmp_path):
    """The rule itself: made-up outcomes of one case, each with one fault, are each caught."""
    from .damage import BY_NAME, copy_fixture, fixture_root
    from .driver import Outcome, check, snapshot
    case = Case("self-test", BY_NAME["otf-ring8"], CLEAN, "h5")
    trace = copy_fixture(case.fixture, tmp_path / "in")
    root = fixture_root(case.fixture, tmp_path / "in")
    out_dir, spill = tmp_path / "out", tmp_path / "spill"
    out_dir.mkdir()
    spill.mkdir()
    before = snapshot(tmp_path / "in")
    events = root / "ring8.3.events"

    def problems(rc, stderr, stdout=""):
        return check(case, Outcome(rc, stdout, stderr, 100 << 20, 1.0), tmp_path, root, trace,
                     out_dir, spill, before, {"events": 10}, 1)

    good = f"partrace: error: {events}:line 41: expected a record"
    assert problems(2, good) == []
    assert problems(2, f"partrace: error: {events}: expected a record")    # no offset
    assert problems(2, "partrace: error: events: location 0 is not in the table")  # no file
    assert problems(2, f"partrace: error: /etc/passwd:line 1: expected a record")  # not the trace's
    assert problems(2, good + "\n" + good)                                  # two lines
    assert problems(3, good)
    assert problems(None, "")
    assert problems(2, "Traceback (most recent call last):\n" + good)
    assert problems(2, "partrace: error: internal error: IndexError: x")
    (spill / "partrace-spill-0-abc").mkdir()
    assert any("--tmpdir" in p for p in problems(2, good))
    (spill / "partrace-spill-0-abc").rmdir()
    (out_dir / ".x.h5.partrace-1-2").mkdir()
    assert any("staging" in p for p in problems(2, good))
    (out_dir / ".x.h5.partrace-1-2").rmdir()
    events.write_bytes(events.read_bytes() + b"\n")
    assert "input changed" in problems(2, good)


def test_the_row_rule(tmp_path):
    """Exit 0: fewer rows only with a warning naming a trace file or a damage marked "fewer"."""
    import json
    from dataclasses import replace

    from .damage import BY_NAME, copy_fixture, fixture_root
    from .driver import Outcome, check, snapshot
    case = Case("self-test", BY_NAME["ovni-v3"], CLEAN, "info")
    trace = copy_fixture(case.fixture, tmp_path / "in")
    root = fixture_root(case.fixture, tmp_path / "in")
    for d in ("out", "spill"):
        (tmp_path / d).mkdir()
    before = snapshot(tmp_path / "in")

    def problems(rows, stderr="", c=case):
        return check(c, Outcome(0, json.dumps({"rows": rows}), stderr, 100 << 20, 1.0), tmp_path,
                     root, trace, tmp_path / "out", tmp_path / "spill", before,
                     {"events": 10, "jumbo": 2}, 1)

    assert problems({"events": 10, "jumbo": 2}) == []
    assert problems({"events": 9, "jumbo": 2})                 # lost in silence
    assert problems({"events": 10})                             # a table gone
    assert problems({"events": 11, "jumbo": 2})                 # more rows
    warning = (f"/x/reader.py:201: UserWarning: {root}/a/stream.obs: byte 8: stream ends inside "
               f"an event\n  warnings.warn(")
    assert problems({"events": 9, "jumbo": 2}, warning) == []
    assert problems({"events": 9, "jumbo": 2}, warning.replace(str(root), "/elsewhere"))
    fewer = replace(case, damage=replace(CLEAN, rows="fewer"))
    assert problems({"events": 9, "jumbo": 2}, c=fewer) == []
    assert problems({"events": 11, "jumbo": 2}, c=fewer)
