"""The MCV (model, category, value) tables of the models ovni knows.

Facts from ovni 1.14.0 (bsc-pm/ovni, doc/user/emulation/events.md): each
event's MCV, its payload signature (``+`` marks a jumbo event) and a short
name.  The second field says how partrace reads the event: ``<`` enters and
``>`` leaves a region (an enter is always followed by its leave in the table),
``.`` is a point event.  Imported only by ``read_definitions``/``decode``.

Region ids: the enter/leave regions are 1..R in table order; each point
event's MCV is a region of its own after them (R+1.. in table order), so a
writer can give point events a name (OTF writes them as markers).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

# code character -> (model name, model version in ovni 1.14.0)
MODELS = {
    "O": ("ovni", "1.1.0"), "M": ("mpi", "1.0.0"), "6": ("nanos6", "1.1.0"),
    "V": ("nosv", "2.7.0"), "T": ("tampi", "1.0.0"), "D": ("nodes", "1.0.0"),
    "K": ("kernel", "1.0.0"), "P": ("openmp", "1.2.1"),
}

# model character -> category character -> category name
CATEGORIES = {
    "O": {"H": "thread", "A": "affinity", "B": "burst", "C": "cpus", "F": "flush",
          "U": "unordered", "M": "mark"},
    "M": {"U": "init/finalize", "W": "wait", "T": "test", "S": "send", "R": "recv",
          "A": "all-to-all collective", "C": "barrier/scan", "D": "rooted collective",
          "E": "reduce", "s": "non-blocking send", "r": "non-blocking recv",
          "a": "non-blocking all-to-all collective", "c": "non-blocking barrier/scan",
          "d": "non-blocking rooted collective", "e": "non-blocking reduce"},
    "6": {"Y": "task type", "T": "task", "W": "worker", "P": "progress", "C": "task creation",
          "U": "task submission", "F": "function spawn", "t": "task body", "O": "taskfor",
          "M": "memory", "D": "dependencies", "S": "scheduler", "B": "blocking",
          "H": "thread role"},
    "V": {"T": "task", "Y": "task type", "S": "scheduler", "U": "submission", "M": "memory",
          "A": "API", "H": "thread role", "P": "progress", "W": "hardware counters"},
    "P": {"B": "barrier", "I": "critical", "W": "worksharing", "T": "tasking", "A": "attached",
          "M": "microtask", "H": "worker loop", "C": "runtime call", "O": "type", "P": "task",
          "Q": "worksharing type"},
    "T": {"C": "communication", "G": "global array", "L": "library", "Q": "queue",
          "R": "request", "T": "ticket"},
    "D": {"R": "register", "U": "unregister", "W": "wait", "I": "inline", "T": "taskwait",
          "C": "create", "S": "submit", "P": "spawn"},
    "K": {"C": "context switch"},
}

# MCV  kind  payload signature  name
EVENTS = """\
6Yc . +(u32 typeid, str label)       task type creation
6Tc . (u32 taskid, u32 typeid)       task create
6Tx . (u32 taskid)                   task execute
6Te . (u32 taskid)                   task end
6Tp . (u32 taskid)                   task pause
6Tr . (u32 taskid)                   task resume
6W[ < -                              worker main loop, looking for tasks
6W] > -                              worker main loop, looking for tasks
6Wt < -                              handling a task via handleTask()
6WT > -                              handling a task via handleTask()
6Ww < -                              switching to another worker via switchTo()
6WW > -                              switching to another worker via switchTo()
6Wm < -                              migrating the current worker to another CPU
6WM > -                              migrating the current worker to another CPU
6Ws < -                              suspending the worker via suspend()
6WS > -                              suspending the worker via suspend()
6Wr < -                              resuming another worker via resume()
6WR > -                              resuming another worker via resume()
6Wg < -                              sponge mode (absorbing system noise)
6WG > -                              sponge mode (absorbing system noise)
6W* . -                              wake another worker
6Pp . -                              progress: progressing
6Pr . -                              progress: resting
6Pa . -                              progress: absorbing
6C[ < -                              creating a new task
6C] > -                              creating a new task
6U[ < -                              submitting a task via submitTask()
6U] > -                              submitting a task via submitTask()
6F[ < -                              spawning a function via spawnFunction()
6F] > -                              spawning a function via spawnFunction()
6t[ < -                              task body
6t] > -                              task body
6O[ < -                              running the task body as taskfor collaborator
6O] > -                              running the task body as taskfor collaborator
6Ma < -                              allocating memory
6MA > -                              allocating memory
6Mf < -                              freeing memory
6MF > -                              freeing memory
6Dr < -                              registration of task dependencies
6DR > -                              registration of task dependencies
6Du < -                              unregistration of task dependencies
6DU > -                              unregistration of task dependencies
6S[ < -                              scheduler serving mode
6S] > -                              scheduler serving mode
6Sa < -                              submitting a ready task via addReadyTask()
6SA > -                              submitting a ready task via addReadyTask()
6Sp < -                              processing ready tasks via processReadyTasks()
6SP > -                              processing ready tasks via processReadyTasks()
6S@ . -                              self-assigned task
6Sr . -                              task received from another thread
6Ss . -                              task sent to another thread
6Bb < -                              blocking the current task
6BB > -                              blocking the current task
6Bu < -                              unblocking a task
6BU > -                              unblocking a task
6Bw < -                              a task wait
6BW > -                              a task wait
6Bf < -                              a wait for
6BF > -                              a wait for
6He < -                              execution as external thread
6HE > -                              execution as external thread
6Hw < -                              execution as worker
6HW > -                              execution as worker
6Hl < -                              execution as leader
6HL > -                              execution as leader
6Hm < -                              execution as main thread
6HM > -                              execution as main thread
DR[ < -                              registering task accesses
DR] > -                              registering task accesses
DU[ < -                              unregistering task accesses
DU] > -                              unregistering task accesses
DW[ < -                              a blocking condition (waiting for an If0 task)
DW] > -                              a blocking condition (waiting for an If0 task)
DI[ < -                              inline execution of an If0 task
DI] > -                              inline execution of an If0 task
DT[ < -                              a taskwait
DT] > -                              a taskwait
DC[ < -                              creating a task
DC] > -                              creating a task
DS[ < -                              submitting a task
DS] > -                              submitting a task
DP[ < -                              spawning a function
DP] > -                              spawning a function
KCO . -                              thread out of CPU
KCI . -                              thread back on CPU
MUf < -                              MPI_Finalize()
MUF > -                              MPI_Finalize()
MUi < -                              MPI_Init()
MUI > -                              MPI_Init()
MUt < -                              MPI_Init_thread()
MUT > -                              MPI_Init_thread()
MW[ < -                              MPI_Wait()
MW] > -                              MPI_Wait()
MWa < -                              MPI_Waitall()
MWA > -                              MPI_Waitall()
MWs < -                              MPI_Waitsome()
MWS > -                              MPI_Waitsome()
MWy < -                              MPI_Waitany()
MWY > -                              MPI_Waitany()
MT[ < -                              MPI_Test()
MT] > -                              MPI_Test()
MTa < -                              MPI_Testall()
MTA > -                              MPI_Testall()
MTy < -                              MPI_Testany()
MTY > -                              MPI_Testany()
MTs < -                              MPI_Testsome()
MTS > -                              MPI_Testsome()
MS[ < -                              MPI_Send()
MS] > -                              MPI_Send()
MSb < -                              MPI_Bsend()
MSB > -                              MPI_Bsend()
MSr < -                              MPI_Rsend()
MSR > -                              MPI_Rsend()
MSs < -                              MPI_Ssend()
MSS > -                              MPI_Ssend()
MR[ < -                              MPI_Recv()
MR] > -                              MPI_Recv()
MRs < -                              MPI_Sendrecv()
MRS > -                              MPI_Sendrecv()
MRo < -                              MPI_Sendrecv_replace()
MRO > -                              MPI_Sendrecv_replace()
MAg < -                              MPI_Allgather()
MAG > -                              MPI_Allgather()
MAr < -                              MPI_Allreduce()
MAR > -                              MPI_Allreduce()
MAa < -                              MPI_Alltoall()
MAA > -                              MPI_Alltoall()
MCb < -                              MPI_Barrier()
MCB > -                              MPI_Barrier()
MCe < -                              MPI_Exscan()
MCE > -                              MPI_Exscan()
MCs < -                              MPI_Scan()
MCS > -                              MPI_Scan()
MDb < -                              MPI_Bcast()
MDB > -                              MPI_Bcast()
MDg < -                              MPI_Gather()
MDG > -                              MPI_Gather()
MDs < -                              MPI_Scatter()
MDS > -                              MPI_Scatter()
ME[ < -                              MPI_Reduce()
ME] > -                              MPI_Reduce()
MEs < -                              MPI_Reduce_scatter()
MES > -                              MPI_Reduce_scatter()
MEb < -                              MPI_Reduce_scatter_block()
MEB > -                              MPI_Reduce_scatter_block()
Ms[ < -                              MPI_Isend()
Ms] > -                              MPI_Isend()
Msb < -                              MPI_Ibsend()
MsB > -                              MPI_Ibsend()
Msr < -                              MPI_Irsend()
MsR > -                              MPI_Irsend()
Mss < -                              MPI_Issend()
MsS > -                              MPI_Issend()
Mr[ < -                              MPI_Irecv()
Mr] > -                              MPI_Irecv()
Mrs < -                              MPI_Isendrecv()
MrS > -                              MPI_Isendrecv()
Mro < -                              MPI_Isendrecv_replace()
MrO > -                              MPI_Isendrecv_replace()
Mag < -                              MPI_Iallgather()
MaG > -                              MPI_Iallgather()
Mar < -                              MPI_Iallreduce()
MaR > -                              MPI_Iallreduce()
Maa < -                              MPI_Ialltoall()
MaA > -                              MPI_Ialltoall()
Mcb < -                              MPI_Ibarrier()
McB > -                              MPI_Ibarrier()
Mce < -                              MPI_Iexscan()
McE > -                              MPI_Iexscan()
Mcs < -                              MPI_Iscan()
McS > -                              MPI_Iscan()
Mdb < -                              MPI_Ibcast()
MdB > -                              MPI_Ibcast()
Mdg < -                              MPI_Igather()
MdG > -                              MPI_Igather()
Mds < -                              MPI_Iscatter()
MdS > -                              MPI_Iscatter()
Me[ < -                              MPI_Ireduce()
Me] > -                              MPI_Ireduce()
Mes < -                              MPI_Ireduce_scatter()
MeS > -                              MPI_Ireduce_scatter()
Meb < -                              MPI_Ireduce_scatter_block()
MeB > -                              MPI_Ireduce_scatter_block()
OAr . (i32 cpu, i32 tid)             set affinity of another thread
OAs . (i32 cpu)                      set own affinity
OB. . -                              burst (latency probe)
OHC . (i32 cpu, u64 tag)             thread create
OHc . -                              thread cooling
OHe . -                              thread end
OHp . -                              thread pause
OHr . -                              thread resume
OHw . -                              thread warming
OHx . (i32 cpu, i32 tid, u64 tag)    thread execute
OCn . (i32 cpu)                      number of CPUs
OF[ < -                              flushing events to disk
OF] > -                              flushing events to disk
OU[ < -                              unordered event region
OU] > -                              unordered event region
OM[ . (i64 value, i32 type)          mark push
OM] . (i64 value, i32 type)          mark pop
OM= . (i64 value, i32 type)          mark set
PBb < -                              plain barrier
PBB > -                              plain barrier
PBj < -                              join barrier
PBJ > -                              join barrier
PBf < -                              fork barrier
PBF > -                              fork barrier
PBt < -                              tasking barrier
PBT > -                              tasking barrier
PBs < -                              spin wait
PBS > -                              spin wait
PIa < -                              critical acquiring
PIA > -                              critical acquiring
PIr < -                              critical releasing
PIR > -                              critical releasing
PI[ < -                              critical section
PI] > -                              critical section
PWd < -                              distribute
PWD > -                              distribute
PWy < -                              dynamic for init
PWY > -                              dynamic for init
PWc < -                              dynamic for chunk
PWC > -                              dynamic for chunk
PWs < -                              static for
PWS > -                              static for
PWe < -                              section
PWE > -                              section
PWi < -                              single
PWI > -                              single
PTa < -                              task allocation
PTA > -                              task allocation
PTc < -                              checking task dependencies
PTC > -                              checking task dependencies
PTd < -                              duplicating a task
PTD > -                              duplicating a task
PTr < -                              releasing task dependencies
PTR > -                              releasing task dependencies
PT[ < -                              running a task
PT] > -                              running a task
PTi < -                              running an if0 task
PTI > -                              running an if0 task
PTs < -                              scheduling a task
PTS > -                              scheduling a task
PTg < -                              a taskgroup
PTG > -                              a taskgroup
PTt < -                              a taskwait
PTT > -                              a taskwait
PTw < -                              waiting for taskwait dependencies
PTW > -                              waiting for taskwait dependencies
PTy < -                              a taskyield
PTY > -                              a taskyield
PA[ < -                              attached state
PA] > -                              attached state
PMi < -                              microtask internal
PMI > -                              microtask internal
PMu < -                              microtask user code
PMU > -                              microtask user code
PH[ < -                              worker loop
PH] > -                              worker loop
PCf < -                              fork call
PCF > -                              fork call
PCi < -                              initialization
PCI > -                              initialization
POc . +(u32 typeid, str label)       type creation
PPc . (u32 taskid, u32 typeid)       task create
PPx . (u32 taskid)                   task execute
PPe . (u32 taskid)                   task end
PQx . (u32 typeid)                   worksharing begin
PQe . (u32 typeid)                   worksharing end
TCi < -                              issuing a non-blocking communication operation
TCI > -                              issuing a non-blocking communication operation
TGc < -                              checking pending requests from the global array
TGC > -                              checking pending requests from the global array
TLi < -                              library code at an API function
TLI > -                              library code at an API function
TLp < -                              library code at a polling function
TLP > -                              library code at a polling function
TQa < -                              adding a ticket/requests to a queue
TQA > -                              adding a ticket/requests to a queue
TQt < -                              transferring tickets/requests from queues to global array
TQT > -                              transferring tickets/requests from queues to global array
TRc < -                              processsing a completed request
TRC > -                              processsing a completed request
TRt < -                              testing a single request with MPI_Test
TRT > -                              testing a single request with MPI_Test
TRa < -                              testing several requests with MPI_Testall
TRA > -                              testing several requests with MPI_Testall
TRs < -                              testing several requests with MPI_Testsome
TRS > -                              testing several requests with MPI_Testsome
TTc < -                              creating a ticket linked to a set of requests and a task
TTC > -                              creating a ticket linked to a set of requests and a task
TTw < -                              waiting for a ticket completion
TTW > -                              waiting for a ticket completion
VTc . (u32 taskid, u32 typeid)       task create
VTC . (u32 taskid, u32 typeid)       parallel task create
VTx . (u32 taskid, u32 bodyid)       task execute
VTe . (u32 taskid, u32 bodyid)       task end
VTp . (u32 taskid, u32 bodyid)       task pause
VTr . (u32 taskid, u32 bodyid)       task resume
VYc . +(u32 typeid, str label)       task type creation
VSr . -                              task received from another thread
VSs . -                              task sent to another thread
VS@ . -                              self-assigned task
VSh < -                              hungry, waiting for work
VSf > -                              hungry, waiting for work
VS[ < -                              scheduler server blocking mode
VS] > -                              scheduler server blocking mode
VSN < -                              scheduler server non-blocking mode
VSn > -                              scheduler server non-blocking mode
VU[ < -                              submitting a task
VU] > -                              submitting a task
VMa < -                              allocating memory
VMA > -                              allocating memory
VMf < -                              freeing memory
VMF > -                              freeing memory
VAr < -                              nosv_create()
VAR > -                              nosv_create()
VAd < -                              nosv_destroy()
VAD > -                              nosv_destroy()
VAs < -                              nosv_submit()
VAS > -                              nosv_submit()
VAp < -                              nosv_pause()
VAP > -                              nosv_pause()
VAy < -                              nosv_yield()
VAY > -                              nosv_yield()
VAw < -                              nosv_waitfor()
VAW > -                              nosv_waitfor()
VAc < -                              nosv_schedpoint()
VAC > -                              nosv_schedpoint()
VAa < -                              nosv_attach()
VAA > -                              nosv_attach()
VAe < -                              nosv_detach()
VAE > -                              nosv_detach()
VAl < -                              nosv_mutex_lock()
VAL > -                              nosv_mutex_lock()
VAt < -                              nosv_mutex_trylock()
VAT > -                              nosv_mutex_trylock()
VAu < -                              nosv_mutex_unlock()
VAU > -                              nosv_mutex_unlock()
VAb < -                              nosv_barrier_wait()
VAB > -                              nosv_barrier_wait()
VAo < -                              nosv_cond_wait()
VAO > -                              nosv_cond_wait()
VAg < -                              nosv_cond_signal()
VAG > -                              nosv_cond_signal()
VAk < -                              nosv_cond_broadcast()
VAK > -                              nosv_cond_broadcast()
VAj < -                              nosv_join()
VAJ > -                              nosv_join()
VAm < -                              nosv_join_all()
VAM > -                              nosv_join_all()
VAi < -                              nosv_wait()
VAI > -                              nosv_wait()
VAn < -                              nosv_wait_all()
VAN > -                              nosv_wait_all()
VHa < -                              nosv_attach()
VHA > -                              nosv_dettach()
VHw < -                              execution as worker
VHW > -                              execution as worker
VHd < -                              execution as delegate
VHD > -                              execution as delegate
VPp . -                              progress: progressing
VPr . -                              progress: resting
VPa . -                              progress: absorbing
VWC . +(i64 value)                   hardware counters
"""

# Events that set the CPU a thread runs on (payload starts with an i32 CPU
# index), and the one that takes it off any CPU.
SET_CPU = ("OHx", "OAs")
CLEAR_CPU = ("OHe",)


def code(mcv: str) -> int:
    """The 24-bit integer of an MCV: model << 16 | category << 8 | value."""
    b = mcv.encode("latin-1")
    return b[0] << 16 | b[1] << 8 | b[2]


@lru_cache(maxsize=1)
def parse() -> list[dict]:
    """One dict per known MCV, with its region id (enter/leave regions first, then point events)."""
    lines = EVENTS.splitlines()
    rows, region, point = [], 0, sum(1 for line in lines if line[4] == "<")
    for line in lines:
        mcv, kind, sig, name = line[:3], line[4], line[6:36].strip(), line[37:].strip()
        if kind == "<":
            region += 1
        elif kind == ".":
            point += 1
        model, mver = MODELS[mcv[0]]
        rows.append({"code": code(mcv), "mcv": mcv, "model": model,
                     "category": CATEGORIES[mcv[0]].get(mcv[1], ""), "value": mcv[2],
                     "signature": "" if sig == "-" else sig, "name": name,
                     "kind": kind, "region": region if kind in "<>" else point,
                     "jumbo": sig.startswith("+")})
    return rows


@lru_cache(maxsize=1)
def lookup() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted codes and, for each, its Kind value and region id (for searchsorted)."""
    from ...model import Kind
    rows = sorted(parse(), key=lambda r: r["code"])
    kinds = {"<": Kind.ENTER, ">": Kind.LEAVE, ".": Kind.EVENT}
    return (np.array([r["code"] for r in rows], np.int64),
            np.array([kinds[r["kind"]] for r in rows], np.uint8),
            np.array([r["region"] for r in rows], np.int32))      # events/region's dtype
