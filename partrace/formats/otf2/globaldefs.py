"""An OTF2 archive's global definitions, read once through the otf2 package's own reader
(definitions are few), as partrace's definitions tables plus the complete source form.

Ids: a location's partrace id is its position in ref order, from 1 (0 means "none" in
partrace's common columns); its ref, any 64-bit number (Score-P numbers a process's threads
and GPU streams ``k * 2**32 + rank``), is ``otf2_locations/ref``.  Region and metric ids are
OTF2 refs + 1 where the archive uses ref 0, else the refs themselves (``attrs["ref_shift"]``
per kind).  So an archive written by partrace (refs 0..n-1) reads back with its own ids.
Communicators are OTF2 comm ref + 1 and collective operations OTF2_CollectiveOp + 1 (both
always have a 0).
"""
from __future__ import annotations

import contextlib
import enum
import io
import sys

import numpy as np

from ...model import Definitions, Table

COLLECTIVE_NAMES = ["BARRIER", "BCAST", "GATHER", "GATHERV", "SCATTER", "SCATTERV", "ALLGATHER",
                    "ALLGATHERV", "ALLTOALL", "ALLTOALLV", "ALLTOALLW", "ALLREDUCE", "REDUCE",
                    "REDUCE_SCATTER", "SCAN", "EXSCAN", "REDUCE_SCATTER_BLOCK", "CREATE_HANDLE",
                    "DESTROY_HANDLE", "ALLOCATE", "DEALLOCATE", "CREATE_HANDLE_AND_ALLOCATE",
                    "DESTROY_HANDLE_AND_DEALLOCATE"]
COLLECTIVE_TYPES = {"BARRIER": 1, "BCAST": 2, "SCATTER": 2, "SCATTERV": 2, "GATHER": 3,
                    "GATHERV": 3, "REDUCE": 3}


def _json(value):
    """A definition field in JSON form: definitions by ref, enums by value."""
    if hasattr(value, "_ref"):
        return value._ref
    if isinstance(value, enum.Enum) or hasattr(type(value), "_names"):    # the library's enums
        return int(value.value)
    if isinstance(value, (tuple, list)):
        return [_json(v) for v in value]
    if hasattr(value, "name") and type(value).__name__ == "String":
        return value.name
    return value


def source_form(registry) -> dict:
    """Every definition of the registry: {kind: [{field: value}]} (lossless, JSON-able)."""
    out = {}
    for attr, reg in sorted(vars(registry).items()):
        if not attr.startswith("_") or not hasattr(reg, "__iter__") or attr == "_registry":
            continue
        rows = []
        for d in reg:
            row = {"type": type(d).__name__}
            if hasattr(d, "_ref"):
                row["ref"] = d._ref
            for f in d._fields:
                row[f.name] = _json(getattr(d, f.name))
            if attr == "_io_paradigms":
                # an I/O paradigm's properties are no fields of it: [property, type, value]
                row["properties"] = [[_json(p), _json(v.type_id), _json(v.value)]
                                     for p, v in d._properties.items()]
            rows.append(row)
        if rows:
            out[attr.lstrip("_")] = rows
    c = registry.clock_properties
    out["clock_properties"] = {f.name: _json(getattr(c, f.name)) for f in c._fields}
    return out


# a metric value is an OTF2_MetricValue: int64, uint64 or double
METRIC_VALUE_TYPES = {"INT64": "int64", "UINT64": "uint64", "DOUBLE": "float64"}


def _shift(refs) -> int:
    return 1 if 0 in refs else 0


def _with_callback_error(exc: Exception, printed: str) -> str:
    """The library's error, with the exception a definition callback of the otf2 package
    raised (the last line of the traceback it printed), if one did."""
    lines = [ln.strip() for ln in printed.splitlines() if ln.strip()]
    if not lines or "Traceback" not in printed:
        return str(exc)
    last = lines[-1]
    if last.startswith("KeyError: "):
        last = f"a definition refers to ref {last.removeprefix('KeyError: ')}, which is not defined"
    return f"{exc} ({last})"


def read_global(anchor: str, errors) -> Definitions:
    """The definitions of the archive whose anchor file is ``anchor``; ``errors``: a function
    turning the library's failure into a TraceError."""
    import otf2
    said = io.StringIO()
    try:
        # the otf2 package prints a traceback to sys.stderr when one of its definition
        # callbacks raises (a flipped byte: a reference to a definition that is not there)
        # and makes the library stop: kept here and folded into the one error line
        with contextlib.redirect_stderr(said), otf2.reader.open(anchor) as trace:
            reg = trace.definitions
            locations = list(reg.locations)
            regions = list(reg.regions)
            comms = list(reg.comms)
            metrics = list(reg.metrics)
            groups = list(reg.location_groups)
            nodes = list(reg.system_tree_nodes)
            attributes = list(reg.attributes)
            source = source_form(reg)
            clock = reg.clock_properties
    except Exception as exc:        # the library's errors carry no type of their own
        raise errors(_with_callback_error(exc, said.getvalue())) from None
    if said.getvalue():             # not ours to hide: printed as the package printed it
        sys.stderr.write(said.getvalue())
    dense = {ref: i + 1 for i, ref in enumerate(sorted(loc._ref for loc in locations))}
    rshift = _shift([r._ref for r in regions])
    mshift = _shift([m._ref for m in metrics])
    loc_ids = np.asarray([dense[x._ref] for x in locations], np.int64)
    tables = {
        "locations": location_rows(locations, groups, dense),
        "regions": Table({"id": np.asarray([r._ref + rshift for r in regions], np.int64),
                          "name": np.asarray([r.name for r in regions], object),
                          "group": np.asarray([int(r.paradigm.value) + 1 for r in regions],
                                              np.int64)}),
    }
    import otf2.enums as E
    paradigms = sorted(E.Paradigm._names.items())
    tables["region_groups"] = Table({"id": np.asarray([v + 1 for v, _ in paradigms], np.int64),
                                     "name": np.asarray([_paradigm_name(n) for _, n in paradigms],
                                                        object)})
    tables["otf2_locations"] = Table({
        "id": loc_ids, "ref": np.asarray([x._ref for x in locations], np.uint64),
        "type": np.asarray([x.type.value for x in locations], np.int64),
        "events": np.asarray([x.number_of_events for x in locations], np.int64),
        "group": np.asarray([x.group._ref for x in locations], np.int64)})
    tables["otf2_location_groups"] = Table({
        "id": np.asarray([g._ref for g in groups], np.int64),
        "name": np.asarray([g.name for g in groups], object),
        "type": np.asarray([g.location_group_type.value for g in groups], np.int64),
        "node": np.asarray([g.system_tree_parent._ref if g.system_tree_parent else -1
                            for g in groups], np.int64)})
    tables["otf2_system_tree"] = Table({
        "id": np.asarray([n._ref for n in nodes], np.int64),
        "name": np.asarray([n.name for n in nodes], object),
        "class": np.asarray([n.class_name for n in nodes], object),
        "parent": np.asarray([n.parent._ref if n.parent else -1 for n in nodes], np.int64)})
    tables["otf2_regions"] = Table({
        "id": tables["regions"]["id"],
        "role": np.asarray([r.region_role.value for r in regions], np.int64),
        "paradigm": np.asarray([r.paradigm.value for r in regions], np.int64),
        "canonical_name": np.asarray([r.canonical_name for r in regions], object),
        "description": np.asarray([r.description for r in regions], object)})
    # communicators: members in rank order, as partrace locations
    cids, cnames, mcomm, mloc = [], [], [], []
    for c in comms:
        cids.append(c._ref + 1)
        cnames.append(c.name)
        members = list(getattr(c.group, "members", ()) or ())
        for m in members:
            if hasattr(m, "group") and hasattr(m, "number_of_events"):     # a Location
                mcomm.append(c._ref + 1)
                mloc.append(dense[m._ref])
    tables["communicators"] = Table({"id": np.asarray(cids, np.int64),
                                     "name": np.asarray(cnames, object)})
    tables["communicator_members"] = Table({"comm": np.asarray(mcomm, np.int64),
                                            "location": np.asarray(mloc, np.int64)})
    tables["collectives"] = Table({
        "id": np.arange(1, len(COLLECTIVE_NAMES) + 1, dtype=np.int64),
        "name": np.asarray(COLLECTIVE_NAMES, object),
        "type": np.asarray([COLLECTIVE_TYPES.get(n, 4 if n.startswith("ALL") else 0)
                            for n in COLLECTIVE_NAMES], np.int64)})
    names, units, types, modes = [], [], [], []
    for m in metrics:
        cls = m if hasattr(m, "members") else m.metric_class
        names.append(", ".join(x.name for x in cls.members))
        units.append(", ".join(x.unit for x in cls.members))
        # events/value holds a Metric record's first value: its member says how it reads
        first = cls.members[0] if len(cls.members) else None
        types.append(METRIC_VALUE_TYPES.get(str(first.value_type).split(".")[-1], "uint64")
                     if first else "")
        modes.append(str(first.metric_mode).split(".")[-1].lower() if first else "")
    tables["counters"] = Table({"id": np.asarray([m._ref + mshift for m in metrics], np.int64),
                                "name": np.asarray(names, object),
                                "unit": np.asarray(units, object),
                                "group": np.zeros(len(metrics), np.int64),
                                "value_type": np.asarray(types, object),
                                "mode": np.asarray(modes, object)})
    # the members of metrics of several members: each a value of its own (model's
    # counter_members); the values table's rows of a Metric record hold them
    member_rows = [(m._ref + mshift, k, x.name, x.unit,
                    METRIC_VALUE_TYPES.get(str(x.value_type).split(".")[-1], "uint64"))
                   for m in metrics
                   for cls in [m if hasattr(m, "members") else m.metric_class]
                   if len(cls.members) > 1 for k, x in enumerate(cls.members)]
    if member_rows:
        c, k, nm, un, vt = zip(*member_rows)
        tables["counter_members"] = Table({
            "counter": np.asarray(c, np.int64), "index": np.asarray(k, np.int64),
            "name": np.asarray(nm, object), "unit": np.asarray(un, object),
            "value_type": np.asarray(vt, object)})
    tables["otf2_attributes"] = Table({
        "id": np.asarray([a._ref for a in attributes], np.int64),
        "name": np.asarray([a.name for a in attributes], object),
        "type": np.asarray([a.type.value for a in attributes], np.int64)})
    attrs = {"ticks_per_second": int(clock.timer_resolution),
             "global_offset": int(clock.global_offset), "trace_length": int(clock.trace_length),
             "ref_shift": {"region": rshift, "metric": mshift}}
    # communicators of a COMM_SELF group: rank 0 in them is the event's own location (the
    # group lists no members); Score-P 2 gives some communicators of its own one
    self_comms = sorted(c._ref + 1 for c in comms
                        if getattr(c.group, "group_type", None) == E.GroupType.COMM_SELF)
    if self_comms:
        attrs["self_comms"] = self_comms
    return Definitions("otf2", tables, attrs, source)


def location_rows(locations, groups, dense: dict) -> Table:
    """The ``locations`` table: every OTF2 location (id ``dense[ref]``), named after its
    location group as well ("MPI Rank 17/Master thread": Score-P names every rank's thread
    alike), under a row of its own for each group that has locations (ids after the
    locations')."""
    used = sorted({x.group._ref for x in locations})
    top = max(dense.values(), default=0)
    group_id = {g: top + 1 + i for i, g in enumerate(used)}
    group_name = {g._ref: str(g.name) for g in groups}
    names = [f"{group_name.get(x.group._ref, '')}/{x.name}" for x in locations]
    seen: dict[str, int] = {}
    for n in names:
        seen[n] = seen.get(n, 0) + 1
    # the source's names alike within one group too: the ref tells them apart
    names = [n if seen[n] == 1 else f"{n} (location {x._ref})" for n, x in zip(names, locations)]
    return Table({
        "id": np.asarray([dense[x._ref] for x in locations] + list(group_id.values()), np.int64),
        "name": np.asarray(names + [group_name.get(g, "") for g in used], object),
        "parent": np.asarray([group_id[x.group._ref] for x in locations] + [0] * len(used),
                             np.int64)})


def _paradigm_name(name: str) -> str:
    """MPI, OpenMP (the names partrace's writers know), else the library's own."""
    return {"MPI": "MPI", "OPENMP": "OpenMP", "USER": "user"}.get(name, name)
