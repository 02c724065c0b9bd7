"""OTF2 input written back: its global definitions as the source archive had them (the
reader's lossless source form, globaldefs.source_form), refs unchanged, through the
library's bindings.  Only the location's record counts are the ones written.
"""
from __future__ import annotations

import hashlib
import json

import numpy as np

from ...errors import PartraceError

# the otf2 package's own writing order (registry.write): a definition only refers to
# definitions written before it; metric groups come after the metrics
ORDER = ["strings", "paradigms", "attributes", "system_tree_nodes",
         "system_tree_node_properties", "system_tree_node_domains", "location_groups",
         "location_group_properties", "locations", "location_properties", "regions", "groups",
         "metric_members", "metrics", "metric_class_recorders", "metric_groups", "comms",
         "parameters", "callsites", "callpaths", "callpath_parameters", "rma_wins",
         "cart_dimensions", "cart_topologies", "cart_coordinates", "source_code_locations",
         "calling_contexts", "calling_context_properties", "interrupt_generators",
         "paradigm_properties", "io_paradigms", "io_files", "io_file_properties", "io_handles",
         "io_pre_created_handle_states"]
# kinds whose definitions have a field named "type" (the source form's row "type" is that
# field's value there, not the class name)
CLASS_OF_KIND = {"attributes": "Attribute", "locations": "Location",
                 "system_tree_node_properties": "SystemTreeNodeProperty",
                 "location_group_properties": "LocationGroupProperty",
                 "location_properties": "LocationProperty",
                 "calling_context_properties": "CallingContextProperty",
                 "paradigm_properties": "ParadigmProperty", "io_file_properties": "IoFileProperty",
                 "callpath_parameters": "CallpathParameter"}
FIRST_REF_TYPE = 12          # OTF2_TYPE_ATTRIBUTE: types from here on hold a definition's ref
GROUP_TYPE_METRIC = 3        # OTF2_GROUP_TYPE_METRIC
GROUP_TYPE_COMM_LOCATIONS = 4
GROUP_TYPE_COMM_GROUP = 5


def is_own_source(defs) -> bool:
    """Whether ``defs.source`` is OTF2's own form (globaldefs.source_form), written back as it
    is.  Definitions.source is each format's own form, so only the OTF2 codec reads it."""
    return (defs.format == "otf2" and isinstance(defs.source, dict)
            and "clock_properties" in defs.source and "ref_shift" in defs.attrs)


def _rows_in_order(source: dict) -> list[tuple[str, dict]]:
    known = set(ORDER) | {"clock_properties"}
    unknown = sorted(k for k in source if k not in known and k != "groups")
    if unknown:
        raise PartraceError(f"OTF2 definitions of kind {unknown[0]!r}: partrace does not know "
                            "where they go when writing them back")
    groups = source.get("groups", [])
    parts = dict(source)
    parts["groups"] = [g for g in groups if g.get("group_type") != GROUP_TYPE_METRIC]
    parts["metric_groups"] = [g for g in groups if g.get("group_type") == GROUP_TYPE_METRIC]
    return [(kind, row) for kind in ORDER for row in parts.get(kind, [])]


def _as_ranks(groups: list[dict]) -> dict[int, list[int]]:
    """Members of each COMM_GROUP (by ref) as the archive stores them: ranks in the
    COMM_LOCATIONS group of its paradigm (the last one, as the otf2 package looks it up).
    The source form holds them as the locations the otf2 package made of those ranks."""
    parent = {}
    for g in groups:
        if g.get("group_type") == GROUP_TYPE_COMM_LOCATIONS:
            parent[g.get("paradigm")] = {loc: r for r, loc in enumerate(g["members"])}
    out = {}
    for g in groups:
        if g.get("group_type") == GROUP_TYPE_COMM_GROUP and g["members"]:
            rank = parent.get(g.get("paradigm"), {})
            missing = [m for m in g["members"] if m not in rank]
            if missing:
                raise PartraceError(f"OTF2 group {g.get('name')!r}: location {missing[0]} is "
                                    "in no COMM_LOCATIONS group of its paradigm")
            out[g["ref"]] = [rank[m] for m in g["members"]]
    return out


def _class(kind: str, row: dict):
    import otf2.definitions as D
    name = CLASS_OF_KIND.get(kind, row.get("type"))
    if kind in ("groups", "metric_groups"):
        name = "Group"
    cls = getattr(D, name, None) if isinstance(name, str) else None
    if cls is None or not getattr(cls, "_fields", None):
        raise PartraceError(f"OTF2 definition of kind {kind!r} ({name!r}): not a definition the "
                            "otf2 package writes")
    return cls


class _Ref:
    """A definition as the library's attribute_value.make sees it: its ref only."""
    def __init__(self, ref: int):
        self._ref = ref


class _Strings:
    """The string registry as attribute_value.make asks it: the ref of a text."""
    def __init__(self, refs: dict):
        self.refs = refs

    def get_ref(self, text: str, writer=None) -> int:
        return self.refs[text]


def _attribute_value(value, type_id: int, strings: dict):
    """A property's value (the source form: a number, a string's text or a definition's ref)
    as the OTF2_AttributeValue union the library's writer takes."""
    from types import SimpleNamespace

    from otf2.attribute_value import make
    from otf2.enums import Type
    if type_id >= FIRST_REF_TYPE:
        value = _Ref(value)
    return make(SimpleNamespace(strings=_Strings(strings)), value, Type(type_id))


def write_source_global(folder, name: str, source: dict, refs: np.ndarray, events: np.ndarray,
                        creator: str) -> None:
    """NAME.otf2 and NAME.def in ``folder``: ``source``'s definitions; location ``refs[i]``
    has ``events[i]`` records."""
    import otf2.definitions as D

    from .definitions import global_def_writer
    counts = dict(zip(refs.tolist(), np.asarray(events).tolist()))
    strings = {}
    for row in source.get("strings", []):
        strings.setdefault(row["name"], row["ref"])
    # a hash of what the archive holds as its trace id: the same on any rank count
    h = hashlib.blake2b(json.dumps(source, sort_keys=True).encode(), digest_size=8)
    h.update(np.ascontiguousarray(events, dtype=np.int64).tobytes())
    ranks = _as_ranks(source.get("groups", []))
    with global_def_writer(folder, name, creator, int.from_bytes(h.digest(), "little")) as (o, w):
        c = source["clock_properties"]
        o.GlobalDefWriter_WriteClockProperties(w, c["timer_resolution"], c["global_offset"],
                                               c["trace_length"], c["realtime_timestamp"])
        for kind, row in _rows_in_order(source):
            cls = _class(kind, row)
            args = []
            for f in cls._fields:
                v = row[f.name]
                if kind == "locations" and f.name == "number_of_events":
                    v = counts[row["ref"]]
                elif kind == "groups" and f.name == "members" and row["ref"] in ranks:
                    v = ranks[row["ref"]]
                if v is None:
                    v = f.type.undefined_ref
                elif f.type is D.String and kind != "strings":
                    v = strings[v]
                elif getattr(f.type, "__name__", "") == "AttributeValue":
                    v = _attribute_value(v, row["type"], strings)
                args.append(v)
            if kind == "io_paradigms":
                props = row.get("properties", [])
                args += [[p for p, _, _ in props], [t for _, t, _ in props],
                         [_attribute_value(v, t, strings) for _, t, v in props]]
            write = getattr(o, f"GlobalDefWriter_Write{cls.__name__}")
            write(w, *([row["ref"]] if "ref" in row else []), *args)
