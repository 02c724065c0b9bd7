"""The run itself as an OTF2 archive (``--self-trace NAME.otf2``), for Vampir and the
other OTF2 readers: a location per rank (in a location group per rank, under a system
tree node per host), a region per phase kind (``exchange``, not ``exchange 3``: tools
sum a region's time) and per MPI call, Enter / Leave records.  A phase's Enter carries
its account as attributes.  Written with the otf2 package's own writer (a few thousand
records); NAME.otf2, NAME.def and NAME/ are made aside, then moved into place."""
from __future__ import annotations

import os
import shutil

from .self_trace_slices import BEGIN_CALL, BEGIN_PHASE, END_CALL, records

# an MPI call's region role, by the Comm method's name
ROLES = {"barrier": "BARRIER", "wait_for_all": "BARRIER", "bcast": "COLL_ONE2ALL",
         "scatter": "COLL_ONE2ALL", "gather": "COLL_ALL2ONE", "reduce": "COLL_ALL2ONE",
         "exscan": "COLL_OTHER"}


def parts(path: str) -> list[str]:
    """The three entries an archive NAME.otf2 is made of."""
    base = path[:-len(".otf2")]
    return [path, base + ".def", base]


def refusal(path: str) -> str | None:
    """Why ``path`` cannot take a self-trace (None: it can)."""
    import importlib.util
    if importlib.util.find_spec("otf2") is None:
        return "an OTF2 self-trace needs the otf2 package (pip install otf2)"
    taken = [p for p in parts(os.path.abspath(path)) if os.path.lexists(p)]
    if taken:
        return f"{taken[0]} exists (an OTF2 archive is never written over)"
    return None


def write_otf2(path: str | os.PathLike, reports: list[dict]) -> None:
    path = os.path.abspath(os.fspath(path))
    folder, name = os.path.split(path[:-len(".otf2")])
    aside = os.path.join(folder, f".{name}.otf2.partial")
    try:
        _write(aside, name, reports)
        for src, dst in zip(parts(os.path.join(aside, name + ".otf2")), parts(path)):
            if os.path.lexists(dst):
                raise FileExistsError(17, "exists (an OTF2 archive is never written over)", dst)
            os.rename(src, dst)
    finally:
        shutil.rmtree(aside, ignore_errors=True)


def _write(folder: str, name: str, reports: list[dict]) -> None:
    import otf2
    from otf2.enums import Type
    with otf2.writer.open(folder, archive_name=name, timer_resolution=1_000_000_000) as trace:
        defs = trace.definitions
        root = defs.system_tree_node("partrace run")
        hosts, regions, attributes = {}, {}, {}

        def region(label: str, is_call: bool):
            key = label if is_call else label.split(" ")[0]
            if key not in regions:
                role = ROLES.get(key, "COLL_ALL2ALL") if is_call else "FUNCTION"
                regions[key] = defs.region(
                    key, paradigm=otf2.Paradigm.MPI if is_call else otf2.Paradigm.USER,
                    region_role=getattr(otf2.RegionRole, role))
            return regions[key]

        def attribute(field: str, value):
            if field not in attributes:
                kind = Type.DOUBLE if isinstance(value, float) else Type.UINT64
                attributes[field] = defs.attribute(field, f"the phase's {field}", kind)
            return attributes[field]

        for r in reports:
            host = r.get("host", "")
            if host not in hosts:
                hosts[host] = defs.system_tree_node(host or "host", parent=root)
            group = defs.location_group(f"rank {r['rank']}", system_tree_parent=hosts[host])
            # the thread named as Score-P names a process's first ("Master thread"), so that
            # readers showing "group/location" show "rank 3/main thread", not the rank twice
            writer = trace.event_writer_from_location(defs.location("main thread", group=group))
            for t, order, label, args in records(r.get("slices", ())):
                where = region(label, order in (BEGIN_CALL, END_CALL))
                if order in (BEGIN_PHASE, BEGIN_CALL):
                    writer.enter(t, where, attributes={attribute(k, v): v
                                                       for k, v in (args or {}).items()})
                else:
                    writer.leave(t, where)
