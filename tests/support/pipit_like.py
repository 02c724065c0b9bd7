"""What Pipit (github hpcgroup/pipit, 0.1.0: ``pipit.Trace.from_otf2(folder)``) requires of an
OTF2 archive and what it computes from it, with the ``otf2`` package's reader: PyPI's
``pipit`` is an empty placeholder (0.0.1, 2022) and Pipit installs from its repository only,
so the tests follow its reader's access pattern (pipit/readers/otf2_reader.py) and its
``flat_profile`` and ``comm_matrix`` (pipit/trace.py), step by step, here.

Where Pipit would raise, this raises an AssertionError that says why.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pandas as pd


def _member_id(member) -> int:
    # Pipit writes a definition as "MetricMember <ref>" and takes the string's last character
    # as the member's id (a ref of two digits is read by its last digit)
    return int(f"MetricMember {member._ref}"[-1])


def read(folder) -> tuple[pd.DataFrame, dict]:
    """Pipit's events DataFrame of the archive ``folder``/traces.otf2 (Timestamp (ns), Event
    Type, Name, Thread, Process, Attributes and a column per metric with values), and the
    names of its location groups (Pipit's processes) by ref."""
    import otf2
    with otf2.reader.open(str(folder / "traces.otf2")) as trace:
        defs = trace.definitions
        first_of_group = {}
        for loc in defs.locations:      # a process's threads counted from its lowest location
            if str(loc.type) == "LocationType.CPU_THREAD":
                g = loc.group._ref
                first_of_group[g] = min(first_of_group.get(g, loc._ref), loc._ref)
        classes = list(defs.metric_classes)
        # the first metric class's members are the metrics; a member is found by its id
        ids = [_member_id(m) for m in classes[0].members] if classes else []
        names = [m.name for m in defs.metric_members if m._ref in ids]
        metrics = {n: [] for n in names}
        clock = defs.clock_properties
        offset, resolution = clock.global_offset, clock.timer_resolution
        groups = {g._ref: g.name for g in defs.location_groups}
        rows = defaultdict(list)
        last_metric = {}
        for loc, event in trace.events:
            if str(loc.type)[13:] != "CPU_THREAD":
                continue            # Pipit reads threads only
            kind = type(event).__name__
            if kind == "Metric":
                members = [m.name for m in event.metric.members]
                for i, name in enumerate(members):
                    assert name in metrics, f"Pipit: KeyError {name!r} (not a member of the " \
                        "first metric class)"
                    metrics[name].append(event.values[i])
                last_metric[loc._ref] = event.time
                continue
            if event.time != last_metric.get(loc._ref, -1):
                for name in metrics:
                    metrics[name].append(float("nan"))
            last_metric[loc._ref] = -1
            rows["Timestamp (ns)"].append(event.time)
            rows["Event Type"].append(kind if kind in ("Enter", "Leave") else "Instant")
            rows["Name"].append(event.region.name if kind in ("Enter", "Leave") else kind)
            rows["Process"].append(loc.group._ref)
            rows["Thread"].append(loc._ref - first_of_group[loc.group._ref])
            rows["Attributes"].append(None if kind == "Leave" else
                                      {k: v for k, v in vars(event).items()
                                       if v is not None and k != "time"})
    df = pd.DataFrame(rows, columns=["Timestamp (ns)", "Event Type", "Name", "Process",
                                     "Thread", "Attributes"])
    for name, values in metrics.items():
        # Pipit sets a column per metric: its values must be one per event
        assert len(values) == len(df), f"Pipit: {len(values)} values of {name!r} for " \
            f"{len(df)} events (a Metric record not followed by an event of its time)"
        if not np.isnan(np.asarray(values, dtype=np.float64)).all():
            df[name] = values
    df["Timestamp (ns)"] = (df["Timestamp (ns)"] - offset) * (10**9 / resolution)
    df = df.sort_values(by="Timestamp (ns)", ascending=True, ignore_index=True)
    return df, groups


def _stacks(df: pd.DataFrame):
    """Pipit's _match_events: per thread, a Leave closes the innermost open Enter of its
    name (Enters it passes over stay open; a Leave with none is ignored).  Returns each
    row's matching row (-1: none)."""
    match = np.full(len(df), -1, np.int64)
    el = df[df["Event Type"].isin(["Enter", "Leave"])]
    for _, rows in el.groupby(["Process", "Thread"]):
        stack = []
        for i, typ, name in zip(rows.index, rows["Event Type"], rows["Name"]):
            if typ == "Enter":
                stack.append((i, name))
                continue
            for k in range(len(stack) - 1, -1, -1):
                if stack[k][1] == name:
                    match[stack[k][0]], match[i] = i, stack[k][0]
                    del stack[k]
                    break
    return match


def flat_profile(df: pd.DataFrame) -> dict[str, float]:
    """Pipit's flat_profile() (metrics "time.exc", by Name): per Enter its time to its
    Leave less its children's (by nesting of matched Enter/Leave per thread), summed per
    name and process, then the mean over the processes that have the name."""
    match = _stacks(df)
    ts = df["Timestamp (ns)"].to_numpy(np.float64)
    inc = np.full(len(df), np.nan)
    enter = (df["Event Type"] == "Enter").to_numpy() & (match >= 0)
    inc[enter] = ts[match[enter]] - ts[enter]
    exc = inc.copy()
    matched = df[(df["Event Type"].isin(["Enter", "Leave"])).to_numpy() & (match >= 0)]
    for _, rows in matched.groupby(["Process", "Thread"]):
        stack = []
        for i, typ in zip(rows.index, rows["Event Type"]):
            if typ == "Enter":
                if stack:
                    exc[stack[-1]] -= inc[i]
                stack.append(i)
            else:
                stack.pop()
    out = df.assign(**{"time.exc": exc})
    out = out[out["Event Type"] == "Enter"]
    per = out.groupby(["Name", "Process"], observed=True)["time.exc"].sum()
    return per.groupby("Name").mean().to_dict()


def comm_matrix(df: pd.DataFrame) -> np.ndarray:
    """Pipit's comm_matrix(): bytes from each MpiSend/MpiIsend's process to its receiver
    (the rank the record names taken as a process), a square of the processes with
    events."""
    ranks = set(df["Process"])
    matrix = np.zeros((len(ranks), len(ranks)))
    sends = df[df["Name"].isin(["MpiSend", "MpiIsend"])]
    for process, attrs in zip(sends["Process"], sends["Attributes"]):
        matrix[process, attrs["receiver"]] += attrs["msg_length"]
    return matrix
