"""The generic OTF writer merges sample counters with the events in the formatter itself
(writekernel.format_rows): the text equals the records laid out one by one in (time,
process, table, seq, column) order, written by grammar.format_record with the short
format's time and process lines."""
import numpy as np

from partrace.formats.otf import generic as g
from partrace.formats.otf import grammar as G
from partrace.formats.otf.grammar import format_record
from partrace.formats.otf.writer import StreamWriter
from partrace.model import Column, Definitions, Kind, Table, column


def _expected(events: Table, samples: Table, counters: list[tuple[str, int]]) -> bytes:
    """The file by hand: every record with its key, sorted, time/process lines as OTF writes them."""
    recs = []
    for t, p, s, r in zip(*(events[c].tolist() for c in ("time", "location", "seq", "region"))):
        recs.append(((t, p, 0, s, 0), format_record(G.BY_NAME["Enter"], {"region": r})))
    for t, p, s, *vals in zip(*(samples[c].tolist() for c in ("time", "location", "seq",
                                                                  *(c for c, _ in counters)))):
        for j, ((_, cid), v) in enumerate(zip(counters, vals)):
            bits = int(np.array(v, np.int64).view(np.uint64))
            recs.append(((t, p, 1, s, j), format_record(G.BY_NAME["Counter"], {"counter": cid, "value": bits})))
    out, now, proc = [], None, None
    for (t, p, *_), line in sorted(recs, key=lambda x: x[0]):
        if t != now:
            out.append(f"{t:x}\n*{p:x}\n")
        elif p != proc:
            out.append(f"*{p:x}\n")
        now, proc = t, p
        out.append(line)
    out.append(f"{now:x}\n*{proc:x}\n")     # closing lines (OTF_WBuffer_close)
    return "".join(out).encode()


def test_counters_and_events_interleave_as_their_keys_say(tmp_path):
    rng = np.random.default_rng(11)
    n, m = 300, 200
    events = Table({"time": np.sort(rng.integers(1, 60, n)), "location": rng.integers(1, 4, n),
                    "seq": np.arange(n), "kind": np.full(n, int(Kind.ENTER), np.int8),
                    "region": rng.integers(1, 6, n)})
    order = np.lexsort((events["location"], events["time"]))       # (time, location, seq) order
    events = events.take(order)
    events = Table({**events.columns, "seq": np.arange(n)})
    samples = Table({"time": rng.integers(1, 60, m), "location": rng.integers(1, 4, m),
                     "seq": np.arange(m), "a": rng.integers(-5, 5, m), "b": rng.integers(0, 9, m)})
    samples = samples.take(np.lexsort((samples["location"], samples["time"])))
    samples = Table({**samples.columns, "seq": np.arange(m)})
    locs = np.arange(1, 4)
    defs = Definitions(format="test", tables={
        "locations": Table({"id": locs, "name": np.array([f"p{i}" for i in locs], object),
                            "parent": np.zeros(3, np.int64)}),
        "regions": Table({"id": np.arange(1, 6), "name": np.array(list("abcde"), object),
                          "group": np.zeros(5, np.int64)})})
    key = [column("time"), column("location"), column("seq")]
    schema = {"events": [*key, column("kind"), column("region")],
              "samples": [*key, Column("a", "i8"), Column("b", "i8")]}
    lay = g.Layout(kv=[], counters={"samples": [("a", 1, 0), ("b", 2, 0)]}, counter_groups={"samples": 2})
    w = StreamWriter(tmp_path / "x", 1, defs, schema, shared={"layout": lay})
    # in two appends cut at a time, as the sink's windows are
    cut = 30
    w.append({"events": events.rows(0, int(np.searchsorted(events["time"], cut))),
              "samples": samples.rows(0, int(np.searchsorted(samples["time"], cut)))})
    w.append({"events": events.rows(int(np.searchsorted(events["time"], cut)), n),
              "samples": samples.rows(int(np.searchsorted(samples["time"], cut)), m)})
    path, = w.close()
    assert path.read_bytes() == _expected(events, samples, [("a", 1), ("b", 2)])
