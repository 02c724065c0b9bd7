"""Pictures of the answers: the profile as bars, the message matrix as a heatmap, a time
window as a timeline.  matplotlib is an optional extra (the ``plot`` extra of the package);
the figure type follows the file name (.png, .svg, .pdf, or any type matplotlib writes).

Thousands of locations do not fit as rows of labels: the heatmap and the timeline
then group consecutive locations into at most MAX_LANES bands, labelled by their
first and last location.
"""
from __future__ import annotations

import numpy as np

from ..errors import UsageError

MAX_LANES = 64
MAX_LABELS = 40


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install matplotlib (in a source "
                         "checkout: pip install -e '.[plot]')") from None
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"    # text stays text in SVG (searchable, small)
    matplotlib.rcParams["svg.hashsalt"] = "partrace"  # the same data gives the same file
    import matplotlib.pyplot as plt
    return plt


def check_target(path) -> None:
    """Refuse, before any work, a picture that could not be written: no matplotlib, a
    type matplotlib does not write (.bmp, no suffix), a folder that is missing or not
    writable, a folder in the file's place."""
    import os
    from pathlib import Path
    _pyplot()
    from matplotlib.backend_bases import FigureCanvasBase
    types = FigureCanvasBase.get_supported_filetypes()
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{path}: --plot: is a folder")
    kind = path.suffix.lower().lstrip(".")
    if kind not in types:
        said = f"a .{kind} file" if kind else "no file type in the name"
        raise UsageError(f"{path}: --plot: {said}; matplotlib writes "
                         f"{', '.join('.' + t for t in sorted(types))}")
    folder = path.parent
    if not folder.is_dir():
        raise UsageError(f"{path}: --plot: no such folder {folder}")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"{path}: --plot: permission denied")


def _save(fig, path) -> None:
    fig.tight_layout()
    dated = {"Date": None} if str(path).lower().endswith((".svg", ".pdf")) else {}
    fig.savefig(path, dpi=120, metadata=dated or None)


def _say_empty(plt, path, title: str, why: str) -> None:
    """A picture that says why there is nothing to draw (an empty answer is an answer,
    with or without --plot: no empty axes with a made-up scale)."""
    fig, ax = plt.subplots(figsize=(6, 2))
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes)
    _save(fig, path)
    plt.close(fig)


def profile_bars(result: dict, path, top: int = 25) -> None:
    """Exclusive and inclusive time (s) of the regions with the most exclusive time."""
    plt = _pyplot()
    if not result["regions"]:
        from .render import NO_REGIONS
        _say_empty(plt, path, "profile", NO_REGIONS)
        return
    regions = sorted(result["regions"], key=lambda r: (-r["exclusive_ns"], r["region"]))[:top]
    names = [r["region"] for r in regions][::-1]
    excl = np.array([r["exclusive_ns"] for r in regions][::-1]) / 1e9
    incl = np.array([r["inclusive_ns"] for r in regions][::-1]) / 1e9
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(names) + 1.5))
    y = np.arange(len(names))
    ax.barh(y, incl, color="#c6dbef", label="inclusive")
    ax.barh(y, excl, color="#2171b5", label="exclusive")
    ax.set_yticks(y, names, fontsize=8)
    positive = excl[excl > 0]
    if len(positive) and incl.max() > 1000 * positive.min():
        ax.set_xscale("log")        # one region dwarfs the others: keep them visible
    ax.set_xlabel("time summed over locations (s)")
    ax.set_title(f"profile: the {len(names)} regions with the most exclusive time")
    ax.legend(loc="lower right")
    _save(fig, path)
    plt.close(fig)


def _bands(ids: np.ndarray, names: dict[int, str]):
    """Consecutive locations grouped into at most MAX_LANES bands: (band of each id, labels)."""
    n = len(ids)
    per = max(1, -(-n // MAX_LANES))
    band = np.arange(n) // per
    labels = []
    for b in range(int(band.max()) + 1 if n else 0):
        members = ids[band == b]
        first, last = names.get(int(members[0]), str(members[0])), names.get(int(members[-1]), str(members[-1]))
        labels.append(first if first == last else f"{first} .. {last}")
    return band, labels


def comm_heatmap(result: dict, path, location_names: dict[int, str]) -> None:
    """Bytes (or messages where no sizes are recorded) from each sender to each receiver."""
    plt = _pyplot()
    pairs = result["pairs"]
    if not pairs:
        from .render import NO_MESSAGES
        _say_empty(plt, path, "messages", NO_MESSAGES)
        return
    cols = pairs.columns
    ids = np.union1d(np.fromiter(location_names, np.int64, len(location_names)),
                     np.concatenate([cols["sender_id"], cols["receiver_id"]]).astype(np.int64))
    s = np.searchsorted(ids, cols["sender_id"])
    r = np.searchsorted(ids, cols["receiver_id"])
    use_bytes = bool(cols["bytes"].any())
    val = (cols["bytes"] if use_bytes else cols["messages"]).astype(np.float64)
    # only locations that take part, so a matrix of ranks is not lost among thread lanes
    active = np.unique(np.concatenate([s, r]))
    ids = ids[active]
    s, r = np.searchsorted(active, s), np.searchsorted(active, r)
    band, labels = _bands(ids, location_names)
    m = np.zeros((len(labels), len(labels)))
    np.add.at(m, (band[s], band[r]), val)
    fig, ax = plt.subplots(figsize=(8, 7))
    shown = np.ma.masked_equal(m, 0)
    from matplotlib.colors import LogNorm
    im = ax.imshow(shown, cmap="viridis", norm=LogNorm(vmin=max(shown.min(), 1), vmax=max(shown.max(), 1)),
                   interpolation="nearest")
    fig.colorbar(im, ax=ax, label="bytes" if use_bytes else "messages")
    step = max(1, -(-len(labels) // MAX_LABELS))
    ticks = np.arange(0, len(labels), step)
    ax.set_xticks(ticks, [labels[i] for i in ticks], rotation=90, fontsize=7)
    ax.set_yticks(ticks, [labels[i] for i in ticks], fontsize=7)
    ax.set_xlabel("receiver")
    ax.set_ylabel("sender")
    ax.set_title("messages: " + ("bytes" if use_bytes else "count") + " per sender and receiver")
    _save(fig, path)
    plt.close(fig)


def _time_axis(unit, t0: int) -> tuple[float, str]:
    """Time-column ticks per axis unit, and the axis label: ms of a wall clock in ns, else
    the trace's own unit (ROSS's virtual time is not stretched x 1e9 into "ns")."""
    if unit.wall_ns:
        return 1e6, f"time (ms) from {t0:,} ns"
    return unit.per_unit, f"{unit.name} from {unit.shown(t0):g}"


def timeline(data: dict, path) -> None:
    """Regions as coloured bars per location lane, messages as lines (``timeline_data``)."""
    plt = _pyplot()
    from matplotlib.collections import LineCollection
    ids, names = data["location_ids"], data["location_names"]
    band, labels = _bands(ids, names)
    lane_of = dict(zip(ids.tolist(), band.tolist()))
    iv = data["intervals"]
    fig, ax = plt.subplots(figsize=(12, 0.28 * len(labels) + 2))
    t0 = data["t0"]
    scale, axis = _time_axis(data["time_unit"], t0)
    cmap = plt.get_cmap("tab20")
    regions = np.unique(iv["region"])
    colour = {int(g): cmap(i % 20) for i, g in enumerate(regions.tolist())}
    lanes = np.array([lane_of[int(x)] for x in iv["location"].tolist()]) if len(iv["location"]) else np.zeros(0, int)
    # one broken_barh per region: a few calls for thousands of bars
    for g in regions.tolist():
        sel = iv["region"] == g
        height = 0.8 / (1 + iv["depth"][sel].astype(float) * 0.35)
        for lane in np.unique(lanes[sel]).tolist():
            k = sel.copy()
            k[sel] = lanes[sel] == lane
            starts = (iv["start"][k] - t0) / scale
            widths = (iv["end"][k] - iv["start"][k]) / scale
            h = float(height[lanes[sel] == lane].min())
            ax.broken_barh(list(zip(starts, widths)), (lane - h / 2, h), facecolors=colour[g], linewidth=0)
    msg = data["messages"]
    if len(msg["send_time"]):
        segs = np.stack([np.stack([(msg["send_time"] - t0) / scale,
                                   [lane_of.get(int(x), 0) for x in msg["sender"].tolist()]], axis=1),
                         np.stack([(msg["recv_time"] - t0) / scale,
                                   [lane_of.get(int(x), 0) for x in msg["receiver"].tolist()]], axis=1)], axis=1)
        ax.add_collection(LineCollection(segs, colors="black", linewidths=0.5, alpha=0.6))
    step = max(1, -(-len(labels) // MAX_LABELS))
    ticks = np.arange(0, len(labels), step)
    ax.set_yticks(ticks, [labels[i] for i in ticks], fontsize=7)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xlim(0, (data["t1"] - t0) / scale)
    ax.set_xlabel(axis)
    shown = sorted(colour, key=lambda g: -float(np.sum(iv["end"][iv["region"] == g] - iv["start"][iv["region"] == g])))[:12]
    from matplotlib.patches import Patch
    if shown:       # no regions (a ROSS run: messages only): no empty legend box
        ax.legend([Patch(color=colour[g]) for g in shown],
                  [data["region_names"].get(g, str(g)) for g in shown],
                  fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(f"timeline: {len(iv['start']):,} region visits, {len(msg['send_time']):,} messages, "
                 f"{len(ids):,} locations in {len(labels)} lanes")
    _save(fig, path)
    plt.close(fig)
