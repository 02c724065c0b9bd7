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
