"""What the OTF2 archive defines, decided from partrace's definitions and schema alone
(the same on every rank, whatever the source format), and written by rank 0 through
the library's bindings.

- System tree, location groups, locations: every partrace location is an OTF2
  location (same id; every one may carry records).  A location's group is its
  parent (a thread's process, a ROSS LP's KP), or itself where it has none (a
  DUMPI or OTF rank); a group sits under the system tree node of its own parent
  location (an ovni process under its loom, a KP under its PE), else under the root
  node.
- Regions: one per partrace region (ref = rank in id order); the paradigm is MPI
  for regions of a group named "MPI", OpenMP for "OMP"/"OpenMP", else USER.
- Strings are UTF-8 (OTF2's rule): a name holding bytes of another character set (kept by
  the readers as lone surrogates) is written with each such byte as ``\\xNN``
  (model.utf8_name, as the Perfetto and Chrome outputs and partrace's own printing do).
- Communicators: ref 0 holds every location (rank = index in id order); then one per
  communicator of the ``communicators`` table whose members
  ``communicator_members`` lists, ranks in member order.  A message on any other
  communicator is written on ref 0.
- Metrics, in Score-P's shape: the counters sampled together in one class.  One class per
  counter group of the ``counters`` table (its counters in id order; a counter of group 0
  a class of its own): the COUNTER events of a group at one time on one location are one
  Metric record of its class when every member is there; a sample missing members is
  written member by member through a class of one member each (defined after the group
  classes, for the counters of groups of several).  Each member keeps its counter's unit,
  value type (float32 values as doubles) and mode (the counters table's value_type and
  mode).  Then one class per sample table (the numeric measure columns the Perfetto output
  also draws), each column a member.
- Metric locations: the Metric records that Score-P would not record on the thread go to a
  location of type METRIC of the location's group, named "<location> metrics" (ids after
  the largest location id, in location id order, so that they stay 32-bit where the
  locations' do; defined only where it has records): every record but
  those of class 0 directly followed by another record of the same time on the location
  (a synchronous metric, written before the event it goes with, as Score-P does).
  Readers that take the metrics of a thread from its records (Pipit: the first metric
  class's members as columns of the event that follows) read such an archive whole.
"""
from __future__ import annotations

import ctypes
import hashlib
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from ...model import Definitions, Schema, utf8_name, utf8_names

WORLD = "all locations"
OMP_NAMES = {"omp", "openmp"}
# OTF2_Type codes of the values a metric member can hold
TYPE_UINT64, TYPE_INT64, TYPE_DOUBLE = 4, 8, 10
VALUE_TYPES = {"uint64": TYPE_UINT64, "int64": TYPE_INT64, "float64": TYPE_DOUBLE,
               "float32": TYPE_DOUBLE}
SYNC_CLASS = 0          # the class whose records may stand on the thread, before their event
UNDEFINED_U32 = 0xFFFFFFFF
# OTF2_CollectiveOp by the operation's name (MPI_Bcast -> BCAST); else by the collectives
# table's type: barrier, one-to-all, all-to-one, all-to-all
COLLECTIVE_OPS = {"BARRIER": 0, "BCAST": 1, "GATHER": 2, "GATHERV": 3, "SCATTER": 4,
                  "SCATTERV": 5, "ALLGATHER": 6, "ALLGATHERV": 7, "ALLTOALL": 8, "ALLTOALLV": 9,
                  "ALLTOALLW": 10, "ALLREDUCE": 11, "REDUCE": 12, "REDUCE_SCATTER": 13,
                  "SCAN": 14, "EXSCAN": 15, "REDUCE_SCATTER_BLOCK": 16}
OP_BY_TYPE = {1: 0, 2: 1, 3: 12, 4: 8}


def _sorted(table, key="id"):
    ids = np.asarray(table[key], dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    return ids[order], order


def _type_of(dtype: np.dtype) -> int:
    return TYPE_DOUBLE if dtype.kind == "f" else TYPE_UINT64 if dtype.kind == "u" else TYPE_INT64


@dataclass
class Layout:
    loc_ids: np.ndarray
    loc_names: list
    loc_group: np.ndarray            # per location: index into group_locs
    group_locs: np.ndarray           # per location group: the partrace location it stands for
    group_node: np.ndarray           # per location group: system tree node (0: root)
    node_locs: np.ndarray            # per system tree node after the root: its location
    node_parent: np.ndarray          # per such node: its parent node
    reg_ids: np.ndarray
    reg_names: list
    reg_paradigm: list
    comm_ids: np.ndarray             # source communicator ids with members (OTF2 ref = 1 + index)
    comm_names: list
    comm_members: list               # per such communicator: member location indices, rank order
    rank_keys: np.ndarray            # sorted ref * (nloc + 1) + location index, and ...
    rank_values: np.ndarray          # ... the rank it has there
    coll_ids: np.ndarray
    coll_ops: np.ndarray
    counter_ids: np.ndarray          # defined counters, sorted
    counter_class: np.ndarray        # per counter: its group's class
    counter_member: np.ndarray       # per counter: its place among the class's members
    counter_single: np.ndarray       # per counter: its class of one member
    counter_float32: np.ndarray      # per counter: its values are floats in the low 32 bits
    metrics: list                    # per metric class: [(member name, unit, OTF2 type, mode)]
    sample_tables: list = field(default_factory=list)   # [(table, [columns], first metric ref)]

    def names_not_utf8(self) -> int:
        """How many of the names written (locations, regions, communicators, metric members
        and units) are not valid UTF-8 (written with such bytes as \\xNN)."""
        return utf8_names(self.loc_names + self.reg_names + self.comm_names
                          + [x for members in self.metrics for m in members for x in m[:2]])[1]

    @property
    def metric_ids(self) -> np.ndarray:
        """Each location's metric location id: after the largest location id."""
        n = len(self.loc_ids)
        return (int(self.loc_ids.max()) + 1 + np.arange(n, dtype=np.int64)) if n \
            else np.zeros(0, np.int64)

    @property
    def stride(self) -> int:
        """Event files per location: its own, and its metric location's where there are
        metrics (the sink's location index * stride + 1)."""
        return 2 if self.metrics else 1

    @property
    def sync_class(self) -> int:
        """The class whose records may stand on the thread (a counter group's; -1: none)."""
        return SYNC_CLASS if len(self.counter_ids) else -1

    # -- lookups, vectorized ------------------------------------------------------------
    def location_index(self, locations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        i = np.minimum(np.searchsorted(self.loc_ids, locations), max(len(self.loc_ids) - 1, 0))
        ok = (self.loc_ids[i] == locations) if len(self.loc_ids) else np.zeros(len(i), bool)
        return i, ok

    def lookup(self, ids: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Index of each of ``values`` in the sorted ``ids``, and where it is there."""
        i = np.minimum(np.searchsorted(ids, values), max(len(ids) - 1, 0))
        ok = (ids[i] == values) if len(ids) else np.zeros(len(values), bool)
        return i, ok

    def ranks(self, comm_ref: np.ndarray, loc_index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rank of each location in each communicator, and where it is a member."""
        if not len(self.rank_keys):
            return np.zeros(len(loc_index), np.int64), np.zeros(len(loc_index), bool)
        i, ok = self.lookup(self.rank_keys, comm_ref * (len(self.loc_ids) + 1) + loc_index)
        return self.rank_values[i], ok


def plan(defs: Definitions, schema: Schema, sample_tables: list) -> Layout:
    locs = defs.tables["locations"]
    loc_ids, order = _sorted(locs)
    n = len(loc_ids)
    names = [str(locs["name"][i]) for i in order]
    parent = np.asarray(locs["parent"], dtype=np.int64)[order]
    pi = np.minimum(np.searchsorted(loc_ids, parent), max(n - 1, 0))
    has_parent = (parent != 0) & (loc_ids[pi] == parent) if n else np.zeros(0, bool)
    owner = np.where(has_parent, pi, np.arange(n))          # the location standing for the group
    group_locs = np.unique(owner)
    loc_group = np.searchsorted(group_locs, owner)
    # a group's node: its location's parent (a node per such parent location), else the root
    g_parent = has_parent[group_locs]
    node_locs = np.unique(pi[group_locs][g_parent])
    group_node = np.zeros(len(group_locs), np.int64)
    group_node[g_parent] = 1 + np.searchsorted(node_locs, pi[group_locs][g_parent])
    # a node's parent: the node of its own parent location where that is a node, else the root
    nparent = np.zeros(len(node_locs), np.int64)
    if len(node_locs):
        up = pi[node_locs]
        j = np.minimum(np.searchsorted(node_locs, up), len(node_locs) - 1)
        is_node = has_parent[node_locs] & (node_locs[j] == up) & (up != node_locs)
        nparent[is_node] = 1 + j[is_node]

    regs = defs.tables["regions"]
    reg_ids, rorder = _sorted(regs)
    groups = next((defs.tables[t] for t in ("region_groups", "function_groups")
                   if t in defs.tables), None)
    group_name = {int(i): str(nm).strip().lower() for i, nm in
                  zip(groups["id"], groups["name"])} if groups is not None else {}
    rgroup = np.asarray(regs["group"], dtype=np.int64)[rorder] if "group" in regs \
        else np.zeros(len(reg_ids), np.int64)
    paradigm = ["mpi" if group_name.get(int(g)) == "mpi" else
                "openmp" if group_name.get(int(g)) in OMP_NAMES else "user" for g in rgroup]

    comm_ids, comm_names, comm_members = [], [], []
    keys, values = [np.arange(n, dtype=np.int64)], [np.arange(n, dtype=np.int64)]
    if "communicators" in defs.tables and "communicator_members" in defs.tables:
        comms = defs.tables["communicators"]
        cids, corder = _sorted(comms)
        mem = defs.tables["communicator_members"]
        mcomm = np.asarray(mem["comm"], dtype=np.int64)
        mloc = np.asarray(mem["location"], dtype=np.int64)
        for cid, ci in zip(cids.tolist(), corder.tolist()):
            rows = np.flatnonzero(mcomm == cid)       # few communicators: a loop over them
            li = np.searchsorted(loc_ids, mloc[rows])
            if not len(rows) or (li >= n).any() or (loc_ids[np.minimum(li, n - 1)] != mloc[rows]).any():
                continue
            ref = 1 + len(comm_ids)
            comm_ids.append(cid)
            comm_names.append(str(comms["name"][ci]))
            comm_members.append(li)
            keys.append(ref * (n + 1) + li)
            values.append(np.arange(len(li), dtype=np.int64))
    k, v = np.concatenate(keys), np.concatenate(values)
    ko = np.argsort(k, kind="stable")
    # a location twice in one communicator keeps its first rank
    k, v = k[ko], v[ko]
    first = np.r_[True, k[1:] != k[:-1]] if len(k) else np.zeros(0, bool)

    coll_ids = np.zeros(0, np.int64)
    coll_ops = np.zeros(0, np.uint8)
    if "collectives" in defs.tables:
        c = defs.tables["collectives"]
        coll_ids, corder = _sorted(c)
        ops = []
        for i in corder.tolist():
            nm = str(c["name"][i]).upper()
            nm = nm[4:] if nm.startswith("MPI_") else nm
            typ = int(c["type"][i]) if "type" in c else 0
            ops.append(COLLECTIVE_OPS.get(nm, OP_BY_TYPE.get(typ, 0)))
        coll_ops = np.asarray(ops, dtype=np.uint8)

    counters, metrics = _counter_classes(defs)
    samples = []
    for table, cols in sample_tables:
        samples.append((table, [col.name for col in cols], len(metrics)))
        metrics.append([(f"{table}.{col.name}", col.unit or "", _type_of(col.numpy_dtype()),
                         "absolute_point") for col in cols])
    return Layout(loc_ids, names, loc_group, group_locs, group_node, node_locs, nparent,
                  reg_ids, [str(regs["name"][i]) for i in rorder], paradigm,
                  np.asarray(comm_ids, np.int64), comm_names, comm_members, k[first], v[first],
                  coll_ids, coll_ops, *counters, metrics, samples)


def _counter_classes(defs: Definitions) -> tuple[tuple, list]:
    """(counter ids, their group class, member place, one-member class, float32 flag) and
    the metric classes: a class per counter group, then one per counter of a larger group."""
    from ...model import counter_value_types
    c = defs.tables.get("counters")
    if c is None or not len(c):
        empty = np.zeros(0, np.int64)
        return (empty, empty, empty, empty, np.zeros(0, bool)), []
    ids, order = _sorted(c)
    n = len(ids)
    group = np.asarray(c["group"], dtype=np.int64)[order] if "group" in c else np.zeros(n, np.int64)
    # a counter of no group is a group of its own (keys below every group id)
    key = np.where(group != 0, group, -1 - np.arange(n))
    types = np.asarray(counter_value_types(c), object)[order]
    modes = [str(c["mode"][i]) if "mode" in c and str(c["mode"][i]) else "absolute_point"
             for i in order]
    member = [(str(c["name"][i]), str(c["unit"][i]) if "unit" in c else "",
               VALUE_TYPES[t], m) for i, t, m in zip(order.tolist(), types.tolist(), modes)]
    keys, cls = np.unique(key, return_inverse=True)
    place = np.zeros(n, np.int64)
    metrics = []
    for k in range(len(keys)):      # a class per group (few): its counters in id order
        rows = np.flatnonzero(cls == k)
        place[rows] = np.arange(len(rows))
        metrics.append([member[r] for r in rows])
    single = cls.copy()
    for r in np.flatnonzero(np.bincount(cls)[cls] > 1).tolist():
        single[r] = len(metrics)
        metrics.append([member[r]])
    return (ids, cls.astype(np.int64), place, single.astype(np.int64), types == "float32"), \
        metrics


def write_global(folder, name: str, layout: Layout, events: np.ndarray, first: int,
                 last: int, creator: str) -> None:
    """The anchor file NAME.otf2 and the global definitions NAME.def in ``folder``;
    ``events``: the number of records of each location; [first, last]: the time range."""
    with global_def_writer(folder, name, creator,
                           trace_id(layout, events, first, last)) as (o, w):
        strings: dict[str, int] = {}

        def s(text: str) -> int:
            if text not in strings:     # OTF2's strings are UTF-8: a name's other bytes as \xNN
                strings[text] = len(strings)
                o.GlobalDefWriter_WriteString(w, strings[text], utf8_name(text))
            return strings[text]

        o.GlobalDefWriter_WriteClockProperties(w, 1_000_000_000, first, last - first,
                                               o.UNDEFINED_TIMESTAMP)
        o.GlobalDefWriter_WriteSystemTreeNode(w, 0, s("partrace trace"), s("machine"),
                                              o.UNDEFINED_SYSTEM_TREE_NODE)
        for j, (li, up) in enumerate(zip(layout.node_locs.tolist(), layout.node_parent.tolist())):
            o.GlobalDefWriter_WriteSystemTreeNode(w, 1 + j, s(layout.loc_names[li]), s("node"), up)
        for g, (li, node) in enumerate(zip(layout.group_locs.tolist(), layout.group_node.tolist())):
            o.GlobalDefWriter_WriteLocationGroup(w, g, s(layout.loc_names[li]),
                                                 o.LOCATION_GROUP_TYPE_PROCESS, node,
                                                 o.UNDEFINED_LOCATION_GROUP)
        stride, metric_ids = layout.stride, layout.metric_ids.tolist()
        for i, (lid, g) in enumerate(zip(layout.loc_ids.tolist(), layout.loc_group.tolist())):
            o.GlobalDefWriter_WriteLocation(w, lid, s(layout.loc_names[i]),
                                            o.LOCATION_TYPE_CPU_THREAD, int(events[i * stride]),
                                            g)
            if stride == 2 and events[i * 2 + 1]:       # its metric location, where it has records
                o.GlobalDefWriter_WriteLocation(w, metric_ids[i],
                                                s(f"{layout.loc_names[i]} metrics"),
                                                o.LOCATION_TYPE_METRIC, int(events[i * 2 + 1]), g)
        paradigms = {"mpi": o.PARADIGM_MPI, "openmp": o.PARADIGM_OPENMP, "user": o.PARADIGM_USER}
        empty = s("")
        for r, (nm, par) in enumerate(zip(layout.reg_names, layout.reg_paradigm)):
            o.GlobalDefWriter_WriteRegion(w, r, s(nm), s(nm), empty, o.REGION_ROLE_FUNCTION,
                                          paradigms[par], o.REGION_FLAG_NONE, empty, 0, 0)
        # groups: 0 maps MPI ranks to locations; then one rank list per communicator
        o.GlobalDefWriter_WriteGroup(w, 0, s(WORLD), o.GROUP_TYPE_COMM_LOCATIONS, o.PARADIGM_MPI,
                                     o.GROUP_FLAG_NONE, layout.loc_ids.tolist())
        o.GlobalDefWriter_WriteGroup(w, 1, s(WORLD), o.GROUP_TYPE_COMM_GROUP, o.PARADIGM_MPI,
                                     o.GROUP_FLAG_NONE, list(range(len(layout.loc_ids))))
        o.GlobalDefWriter_WriteComm(w, 0, s(WORLD), 1, o.UNDEFINED_COMM, o.COMM_FLAG_NONE)
        for c, (nm, members) in enumerate(zip(layout.comm_names, layout.comm_members)):
            o.GlobalDefWriter_WriteGroup(w, 2 + c, s(nm), o.GROUP_TYPE_COMM_GROUP, o.PARADIGM_MPI,
                                         o.GROUP_FLAG_NONE, members.tolist())
            o.GlobalDefWriter_WriteComm(w, 1 + c, s(nm), 2 + c, o.UNDEFINED_COMM,
                                        o.COMM_FLAG_NONE)
        types = {TYPE_UINT64: o.TYPE_UINT64, TYPE_INT64: o.TYPE_INT64, TYPE_DOUBLE: o.TYPE_DOUBLE}
        member = 0
        for m, values in enumerate(layout.metrics):
            refs = []
            for nm, unit, typ, mode in values:
                o.GlobalDefWriter_WriteMetricMember(w, member, s(nm), empty, o.METRIC_TYPE_OTHER,
                                                    # OTF2 has no absolute/relative_start
                                                    getattr(o, f"METRIC_{mode.upper()}",
                                                            o.METRIC_ABSOLUTE_POINT),
                                                    types[typ], o.BASE_DECIMAL, 0, s(unit))
                refs.append(member)
                member += 1
            # the synchronous class's records stand before the events they go with; the others
            # are samples of their own (on metric locations)
            o.GlobalDefWriter_WriteMetricClass(w, m, refs, o.METRIC_SYNCHRONOUS
                                               if m == layout.sync_class else
                                               o.METRIC_ASYNCHRONOUS, o.RECORDER_KIND_ABSTRACT)


@contextmanager
def global_def_writer(folder, name: str, creator: str, trace_id: int):
    """(the otf2 module, the global definition writer) of an archive that writes NAME.otf2
    and NAME.def in ``folder``; on leaving, the writer is closed, the trace id set and the
    archive closed (which writes the anchor file)."""
    from .library import DEF_CHUNK, EVENT_CHUNK, error_name, load
    o, lib = load()
    archive = o.Archive_Open(str(folder), name, o.FILEMODE_WRITE, EVENT_CHUNK, DEF_CHUNK,
                             o.SUBSTRATE_POSIX, o.COMPRESSION_NONE)
    try:
        flush = o.FlushCallbacks(pre_flush=_flush, post_flush=None)
        o.Archive_SetFlushCallbacks(archive, flush, None)
        o.Archive_SetSerialCollectiveCallbacks(archive)
        o.Archive_SetCreator(archive, creator)
        w = o.Archive_GetGlobalDefWriter(archive)
        yield o, w
        o.Archive_CloseGlobalDefWriter(archive, w)
        # the library draws a random trace id; a hash of what the archive holds instead keeps
        # the anchor file the same on any rank count (an exported function of libotf2 that its
        # public API does not declare: it sets the id read from an anchor file)
        code = lib.otf2_archive_set_trace_id(ctypes.cast(archive, ctypes.c_void_p), trace_id)
        if code:
            raise OSError(f"{folder}: OTF2 library: {error_name(code)}")
    finally:
        o.Archive_Close(archive)


def trace_id(layout: Layout, events: np.ndarray, first: int, last: int) -> int:
    """A 64-bit hash of the definitions and record counts (the same on every rank count)."""
    h = hashlib.blake2b(digest_size=8)
    for part in (layout.loc_ids, events, np.asarray([first, last], np.int64)):
        h.update(np.ascontiguousarray(part, dtype=np.int64).tobytes())
    h.update(repr((layout.loc_names, layout.reg_names, layout.comm_names, layout.metrics))
             .encode("utf-8", "replace"))
    return int.from_bytes(h.digest(), "little")


def _flush(user, file_type, location, caller, final):
    from .library import load
    return load()[0].FLUSH
