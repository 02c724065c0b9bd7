"""Writes the small OTF2 archives of this folder with the otf2 package (the official
library's Python API): run from the repository root with
``python tests/data/otf2/make_archives.py``.  Deterministic: fixed times and values.

- mpi3/: 3 MPI processes (location groups under 2 nodes), one with 2 OpenMP threads;
  nested regions, MPI p2p (blocking and non-blocking) on MPI_COMM_WORLD and a
  sub-communicator, collectives with roots, a 2-member metric and a 1-value one, event
  attributes (int, double, string), OpenMP fork/join and a ParameterInt.
- threads2/: one process, 3 pthreads, nested regions, a 1-value metric per location,
  thread create/begin/end: timer resolution 1 GHz, global offset 0.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import otf2
from otf2.enums import (CollectiveOp, GroupType, LocationGroupType, LocationType, Paradigm,
                        RegionRole, Type)

HERE = Path(__file__).resolve().parent


def _fresh(name: str | Path) -> str:
    folder = HERE / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir()
    return str(folder)


def mpi3(folder: str | Path = "mpi3", thread_ref: int | None = None) -> None:
    """``thread_ref``: the OpenMP threads' location refs start there (Score-P numbers a
    process's threads ``k * 2**32 + rank``), else they follow the ranks' 0, 1, 2."""
    with otf2.writer.open(_fresh(folder), timer_resolution=1_000_000_000) as trace:
        d = trace.definitions
        root = d.system_tree_node("cluster", class_name="machine")
        nodes = [d.system_tree_node(f"node{i}", class_name="node", parent=root) for i in range(2)]
        groups = [d.location_group(f"MPI Rank {r}", location_group_type=LocationGroupType.PROCESS,
                                   system_tree_parent=nodes[r // 2]) for r in range(3)]
        ranks = [d.location(f"Master thread {r}", type=LocationType.CPU_THREAD, group=groups[r])
                 for r in range(3)]
        if thread_ref is not None:
            d._locations._ref = thread_ref - 1      # the library's registry counts on from it
        omp = [d.location(f"OMP thread {t}", type=LocationType.CPU_THREAD, group=groups[0])
               for t in (1, 2)]
        main = d.region("main", region_role=RegionRole.FUNCTION, paradigm=Paradigm.USER)
        solve = d.region("solve", region_role=RegionRole.FUNCTION, paradigm=Paradigm.USER)
        send_r = d.region("MPI_Send", region_role=RegionRole.POINT2POINT, paradigm=Paradigm.MPI)
        recv_r = d.region("MPI_Recv", region_role=RegionRole.POINT2POINT, paradigm=Paradigm.MPI)
        bcast_r = d.region("MPI_Bcast", region_role=RegionRole.COLL_ONE2ALL, paradigm=Paradigm.MPI)
        red_r = d.region("MPI_Allreduce", region_role=RegionRole.COLL_ALL2ALL, paradigm=Paradigm.MPI)
        par_r = d.region("!$omp parallel", region_role=RegionRole.PARALLEL, paradigm=Paradigm.OPENMP)
        world_locs = d.group("MPI locations", group_type=GroupType.COMM_LOCATIONS,
                             paradigm=Paradigm.MPI, members=ranks)
        world_g = d.group("MPI_COMM_WORLD", group_type=GroupType.COMM_GROUP,
                          paradigm=Paradigm.MPI, members=[0, 1, 2])
        sub_g = d.group("even ranks", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                        members=[2, 0])
        world = d.comm("MPI_COMM_WORLD", group=world_g)
        sub = d.comm("MPI_COMM_EVEN", group=sub_g, parent=world)
        flops = d.metric_member("FLOPS", unit="flop", value_type=Type.UINT64)
        temp = d.metric_member("temperature", unit="C", value_type=Type.DOUBLE)
        both = d.metric_class([flops, temp])
        mem = d.metric("memory", unit="bytes", value_type=Type.INT64)
        a_iter = d.attribute("iteration", "loop iteration", Type.INT64)
        a_res = d.attribute("residual", "solver residual", Type.DOUBLE)
        a_note = d.attribute("note", "a string", Type.STRING)
        param = d.parameter("block size", otf2.enums.ParameterType.INT64)
        assert world_locs is not None
        t0 = 1_000
        for r, loc in enumerate(ranks):
            w = trace.event_writer_from_location(loc)
            t = t0 + r
            w.enter(t, main)
            w.parameter_int(t + 1, param, -64 * (r + 1))
            for it in range(3):
                t += 100
                w.enter(t, solve, attributes={a_iter: it, a_res: 0.5 ** it,
                                              a_note: f"rank {r} it {it}"})
                w.metric(t + 5, both, [1000 * (it + 1) + r, 20.5 + it + r / 4])
                w.metric(t + 6, mem, -(r + 1) * 4096 * (it + 1))
                peer = (r + 1) % 3
                src = (r + 2) % 3
                w.enter(t + 10, send_r)
                if it == 1:
                    w.mpi_isend(t + 11, peer, world, 40 + it, 8 * (it + 1), 900 + it)
                    w.mpi_isend_complete(t + 12, 900 + it)
                else:
                    w.mpi_send(t + 11, peer, world, 40 + it, 8 * (it + 1))
                w.leave(t + 20, send_r)
                w.enter(t + 30, recv_r)
                if it == 1:
                    w.mpi_irecv_request(t + 31, 950 + it)
                    w.mpi_irecv(t + 32, src, world, 40 + it, 8 * (it + 1), 950 + it)
                else:
                    w.mpi_recv(t + 32, src, world, 40 + it, 8 * (it + 1))
                w.leave(t + 40, recv_r)
                w.leave(t + 50, solve)
            t += 100
            w.enter(t, bcast_r)
            w.mpi_collective_begin(t + 1)
            w.mpi_collective_end(t + 9, CollectiveOp.BCAST, world, 1, 64 if r == 1 else 0, 64)
            w.leave(t + 10, bcast_r)
            if r != 1:
                w.enter(t + 20, red_r)
                w.mpi_collective_begin(t + 21)
                w.mpi_collective_end(t + 29, CollectiveOp.ALLREDUCE, sub,
                                     0xFFFFFFFF,
                                     8, 8)
                w.leave(t + 30, red_r)
            if r == 0:
                w.enter(t + 40, par_r)
                w.omp_fork(t + 41, 3)
                w.omp_join(t + 60)
                w.leave(t + 61, par_r)
            w.leave(t + 100, main)
        for k, loc in enumerate(omp):
            w = trace.event_writer_from_location(loc)
            t = t0 + 340 + k
            w.enter(t, par_r)
            w.enter(t + 2, solve, attributes={a_iter: 10 + k})
            w.metric(t + 3, mem, 512 * (k + 1))
            w.leave(t + 8, solve)
            w.leave(t + 15, par_r)


def threads2() -> None:
    with otf2.writer.open(_fresh("threads2"), timer_resolution=1_000_000_000) as trace:
        d = trace.definitions
        node = d.system_tree_node("host")
        proc = d.location_group("process", system_tree_parent=node)
        locs = [d.location(f"pthread {i}", type=LocationType.CPU_THREAD, group=proc)
                for i in range(3)]
        work = d.region("work", paradigm=Paradigm.USER)
        inner = d.region("inner", paradigm=Paradigm.USER)
        create = d.region("pthread_create", paradigm=Paradigm.PTHREAD)
        ticks = d.metric("ticks", unit="cycles", value_type=Type.UINT64)
        team = d.comm("pthreads", group=d.group("threads", group_type=GroupType.COMM_LOCATIONS,
                                                paradigm=Paradigm.PTHREAD, members=locs))
        for i, loc in enumerate(locs):
            w = trace.event_writer_from_location(loc)
            t = 10 + 3 * i
            if i == 0:
                w.enter(t, create)
                w.thread_create(t + 1, team, 1)
                w.thread_create(t + 2, team, 2)
                w.leave(t + 3, create)
            else:
                w.thread_begin(t + 4, team, i)
            for k in range(4):
                t += 20
                w.enter(t, work)
                w.metric(t + 1, ticks, 1_000_000 * i + 17 * k)
                w.enter(t + 2, inner)
                w.leave(t + 7, inner)
                w.leave(t + 9, work)
            if i:
                w.thread_end(t + 12, team, i)


if __name__ == "__main__":
    mpi3()
    threads2()
