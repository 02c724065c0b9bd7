"""Which launchers partrace recognises: under one it starts MPI, else it runs serially
without loading mpi4py (a laptop run, a login-node `info`)."""
from __future__ import annotations

import pytest

from partrace.engine import mpi


@pytest.mark.parametrize("var", ["PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE",
                                 "PALS_RANKID", "ALPS_APP_PE", "MV2_COMM_WORLD_SIZE"])
def test_a_launcher_variable_means_mpi(monkeypatch, var):
    for v in mpi._LAUNCHER_VARS + ("PARTRACE_MPI",):
        monkeypatch.delenv(v, raising=False)
    assert not mpi.launched_by_mpi()
    monkeypatch.setenv(var, "0")
    assert mpi.launched_by_mpi()
    monkeypatch.setenv("PARTRACE_MPI", "0")     # the user's word wins
    assert not mpi.launched_by_mpi()


YIELD = "MPIR_CVAR_ENABLE_HEAVY_YIELD"


@pytest.mark.parametrize("var", mpi._LOCAL_SIZE_VARS)
def test_oversubscribed_ranks_sleep_in_their_waits_unless_the_user_chose(monkeypatch, var):
    for v in mpi._LOCAL_SIZE_VARS + (YIELD,):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(mpi, "_usable_cores", lambda: 2)
    monkeypatch.setenv(var, "2")
    mpi.sleep_when_oversubscribed()
    assert YIELD not in mpi.os.environ          # as many ranks as cores: MPI's own default
    monkeypatch.setenv(var, "3")
    mpi.sleep_when_oversubscribed()
    assert mpi.os.environ[YIELD] == "1"
    monkeypatch.setenv(YIELD, "0")
    mpi.sleep_when_oversubscribed()
    assert mpi.os.environ[YIELD] == "0"


def test_oversubscribed_mpich_ranks_see_the_setting_at_mpi_init():
    """Under mpiexec with more ranks than cores, each rank's MPICH has the setting."""
    import subprocess
    import sys
    from tests.conftest import ROOT, mpiexec
    n = mpi._usable_cores() + 1
    code = ("from partrace.engine import mpi; mpi.world(); import os; "
            f"print(os.environ.get('{YIELD}'))")
    env = {k: v for k, v in mpi.os.environ.items() if k != YIELD}
    r = subprocess.run([mpiexec(), "-n", str(n), sys.executable, "-c", code], capture_output=True,
                       text=True, env={**env, "PYTHONPATH": str(ROOT)}, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    said = "".join(r.stdout.split())     # the ranks' lines may interleave
    assert said == "1" * n, r.stdout
