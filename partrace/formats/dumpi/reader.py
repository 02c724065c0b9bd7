"""The DUMPI TraceReader: units = rank files, definitions = metafile + file tails."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from ...errors import TraceError
from ...model import LOCATION_COLUMNS, REGION_COLUMNS, Definitions, Schema, Table, conform
from ..base import TraceReader, Unit
from .layout import (NEWEST, RankFile, metafile_line, newer_version_warning, read_metafile,
                     read_rank_file, regular_file)

_RANK = re.compile(r"-(\d+)\.bin$")
ALWAYS = ("MPI_Function_enter", "MPI_Function_exit")   # labels without a footer slot


@dataclass
class RankSurvey:
    """What one rank file gives the definitions (read by the rank that decodes it)."""

    file: RankFile
    ops: list            # its communicator and group calls (comms.Op)
    mask: int | None     # config mask of its first record
    # per function label with records in its stream: (records, offset of the first);
    # only those labels, so that the surveys of many ranks stay small
    records: dict[int, tuple[int, int]]
    early_end: int | None = None   # an end-of-stream label before the stream's end


class DumpiReader(TraceReader):
    format_name = "dumpi"
    locations_in_one_unit = True     # a rank's events are all in its rank file
    surveyed = True

    def __init__(self, path: str | os.PathLike):
        super().__init__(path)
        p = self.path
        self.meta: dict[str, str] = {}
        if p.is_dir():
            metas = sorted(p.glob("*.meta"))
            if len(metas) > 1:
                raise TraceError(p, None, f"expected one .meta file in the folder, found "
                                 f"{len(metas)}")
            if not metas:                            # rank files published without it
                self.files = _rank_files_without_meta(p)
                for r, f in self.files.items():
                    regular_file(f, f"rank {r} file")
                self.metafile = p
                return
            p = metas[0]
        if p.suffix == ".bin":                       # a single rank file
            m = _RANK.search(p.name)
            self.files = {int(m[1]) if m else 0: p}
        else:
            self.meta = read_metafile(p)
            self.files, self.unread = _rank_files(p, self.meta)
        for r, f in self.files.items():
            regular_file(f, f"rank {r} file" + (f" (named by metafile {p})" if self.meta else ""))
        self.metafile = p

    def source_files(self) -> list[Path]:
        return ([self.metafile] if self.meta else []) + list(self.files.values())

    def units(self) -> list[Unit]:
        width = max(4, len(str(max(self.files))))
        return [Unit(f"{r:0{width}d}", f.stat().st_size, (str(f), r))
                for r, f in sorted(self.files.items())]

    def survey(self, unit: Unit) -> dict[int, RankSurvey]:
        from .comms import survey_stream
        path, rank = unit.info
        rf = read_rank_file(Path(path))
        s = survey_stream(rf)
        records = {int(f): (int(s.counts[f]), int(s.first[f])) for f in np.flatnonzero(s.counts)}
        return {rank: RankSurvey(rf, s.ops, _mask(rf), records, s.early_end)}

    @staticmethod
    def combine(a: dict, b: dict) -> dict:
        return {**a, **b}       # one entry per rank file: order-free

    def read_definitions(self, survey: dict[int, RankSurvey] | None = None) -> Definitions:
        from .comms import communicator_tables
        from .functable import FUNCTIONS
        if getattr(self, "unread", None):     # said once, by the rank reading the definitions
            import warnings
            warnings.warn(self.unread)
        survey = self.survey_all() if survey is None else survey
        ranks = sorted(survey)
        rfs = {r: survey[r].file for r in ranks}
        locs = conform(Table({"id": np.array(ranks, np.int64) + 1,    # 0 = none in peer/root
                      "name": np.array([f"rank {r}" for r in ranks] + [None], object)[:-1],
                      "parent": np.zeros(len(ranks), np.int64)}), LOCATION_COLUMNS)
        fids = [f for f, _n, _a in FUNCTIONS if f not in (290, 293)]   # all but footer total, end
        regions = conform(Table({"id": np.array(fids, np.int64) + 1,
                         "name": np.array([FUNCTIONS[f][1] for f in fids] + [None], object)[:-1],
                         "group": np.ones(len(fids), np.int64)}), REGION_COLUMNS)
        calls = np.array([rfs[r].calls for r in ranks], np.int64)
        ignored = np.array([rfs[r].ignored for r in ranks], np.int64)
        recorded = (calls - ignored)[:, :290].sum(axis=0)
        in_streams = {f for r in ranks for f in survey[r].records if f < 290}
        held = set(np.nonzero(recorded)[0].tolist()) | in_streams
        present = [FUNCTIONS[f][1] for f in sorted(held)] + list(ALWAYS)
        _warn_uncounted(survey, ranks, calls - ignored)
        _warn_early_end(survey, ranks)
        newer = [r for r in ranks if rfs[r].version > NEWEST]
        if newer:
            import warnings
            warnings.warn(newer_version_warning(rfs[newer[0]], len(newer) - 1))
        first = rfs[ranks[0]]
        attrs = {
            "clock": "wall: CLOCK_MONOTONIC of each host (not epoch); ns",
            "version": ".".join(map(str, first.version)), "starttime": first.starttime,
            "hostname": first.hostname, "username": first.username,
            "meshdim": len(first.meshcrd), "meshcrd": first.meshcrd, "meshsize": first.meshsize,
            "config_masks": sorted({survey[r].mask for r in ranks} - {None}),
            "numprocs": len(ranks), "metafile": self.meta,
            "calls_total": int(calls[:, 290].sum()), "ignored_total": int(ignored[:, 290].sum()),
            "calls_per_function": {FUNCTIONS[f][1]: int(c) for f, c in
                                   enumerate(calls[:, :290].sum(axis=0)) if c},
            "ignored_per_function": {FUNCTIONS[f][1]: int(c) for f, c in
                                     enumerate(ignored[:, :290].sum(axis=0)) if c},
            "recorded_functions": present,
            "perf_labels": first.perf_labels,
        }
        tables = {"locations": locs, "regions": regions, **_mpi_tables(),
                  **communicator_tables({r + 1: survey[r].ops for r in ranks}),
                  **_rank_tables(rfs, ranks)}
        source = {"metafile": self.meta, "ranks": {r: rfs[r].summary() for r in ranks}}
        return Definitions("dumpi", tables, attrs, source)

    def schema(self, defs: Definitions) -> Schema:
        from .functable import FUNCTIONS
        from .tables import (events_columns, function_columns, requests_columns, side_columns,
                             table_name)
        counters = defs.tables.get("counters")
        out = {"events": events_columns(counters is not None and len(counters) > 0),
               "requests": requests_columns()}
        wanted = set(defs.attrs["recorded_functions"])
        for _f, name, args in FUNCTIONS:
            if args is not None and name in wanted:
                out[table_name(name)] = function_columns(args)
        out.update(side_columns())
        return out

    def decode(self, unit: Unit, defs: Definitions) -> Iterator[dict[str, Table]]:
        from .decode import decode_rank
        path, rank = unit.info
        schema = self.schema(defs)
        want = None if self.selection is None else {
            t: self.selected(t, [c.name for c in cols]) for t, cols in schema.items()}
        yield from decode_rank(Path(path), rank, schema, defs, chunk_bytes=self.chunk_bytes,
                               want=want)


def _rank_files(meta: Path, facts: dict[str, str]) -> tuple[dict[int, Path], str | None]:
    """Rank r's file is ``<fileprefix>-<r:04d>.bin`` beside the metafile, for r below
    numprocs.  As sst-dumpi's readers (dumpi/bin/metadata.cc), a missing one is an
    error, and rank files of the same prefix beyond numprocs are not read; the second
    item, a warning that names them (said by read_definitions: once), so that their
    calls are not lost without a word."""
    prefix, numprocs = facts["fileprefix"], int(facts["numprocs"])
    line = metafile_line(meta, "numprocs")
    if numprocs < 1:
        raise TraceError.at_line(meta, line, f"numprocs={numprocs}: expected at least 1 rank")
    # metadata.cc tries rank numbers of 4 digits, then 5..9, then 0..3, and takes the first
    # width that names every rank's file (libdumpi writes 4)
    for width in (*range(4, 10), *range(4)):
        files = {r: meta.parent / f"{prefix}-{r:0{width}d}.bin" for r in range(numprocs)}
        if all(os.path.lexists(f) for f in files.values()):
            break
    else:
        files = {r: meta.parent / f"{prefix}-{r:04d}.bin" for r in range(numprocs)}
    for r, f in files.items():
        if not os.path.lexists(f):
            raise TraceError(f, None, f"rank {r} file is missing (metafile {meta} says "
                             f"numprocs={numprocs})")
    pattern = re.compile(re.escape(Path(prefix).name) + r"-(\d+)\.bin$")
    folder = (meta.parent / prefix).parent
    extra = sorted((p for p in folder.iterdir() if (m := pattern.match(p.name))
                    and int(m[1]) >= numprocs and p not in files.values()),
                   key=lambda p: p.name)
    if extra:
        names = ", ".join(p.name for p in extra[:5]) + (" ..." if len(extra) > 5 else "")
        return files, (f"{meta}: line {line}: numprocs={numprocs} but {len(extra)} more rank "
                       f"file(s) of prefix {prefix!r} lie beside it: {names}; not read, as "
                       f"sst-dumpi's readers do not read them")
    return files, None


def _rank_files_without_meta(folder: Path) -> dict[int, Path]:
    """A folder of ``<fileprefix>-<rank>.bin`` files and no metafile (as traces are often
    published): one prefix, ranks 0..n-1 all present (as the metafile would require)."""
    runs: dict[str, dict[int, Path]] = {}
    for f in sorted(folder.glob("*.bin")):
        if m := _RANK.search(f.name):
            runs.setdefault(f.name[:m.start()], {})[int(m[1])] = f
    if not runs:
        raise TraceError(folder, None, "no .meta file and no DUMPI rank file "
                         "(<prefix>-<rank>.bin) in the folder")
    if len(runs) > 1:
        raise TraceError(folder, None, f"no .meta file and rank files of {len(runs)} runs "
                         f"(prefixes {', '.join(sorted(runs))}): open one run's metafile "
                         f"or put each run in its own folder")
    (prefix, files), = runs.items()
    missing = sorted(set(range(max(files) + 1)) - set(files))
    if missing:
        raise TraceError(folder, None, f"no .meta file and rank {missing[0]} file "
                         f"({prefix}-{missing[0]:04d}.bin) is missing: "
                         f"{len(files)} rank files up to rank {max(files)}")
    return dict(sorted(files.items()))


def _mpi_tables() -> dict[str, Table]:
    """region_groups (1 = MPI) and collectives (id = region id, OTF collective type)."""
    from ...model import DEFINITION_TABLES
    from .events import COLL_TYPE
    from .functable import FUNCTIONS
    fids = sorted(COLL_TYPE)
    names = np.empty(len(fids), object)
    names[:] = [FUNCTIONS[f][1] for f in fids]
    group = np.empty(1, object)
    group[0] = "MPI"
    return {"region_groups": conform(Table({"id": np.ones(1, np.int64), "name": group}),
                                     DEFINITION_TABLES["region_groups"]),
            "collectives": conform(Table({"id": np.array(fids, np.int64) + 1, "name": names,
                                          "type": np.array([COLL_TYPE[f] for f in fids])}),
                                   DEFINITION_TABLES["collectives"])}


def _mask(rf: RankFile) -> int | None:
    """Config mask of the rank's first record (byte 18: after offsets and label)."""
    if rf.stream_end <= rf.stream_start:
        return None
    with open(rf.path, "rb") as f:
        f.seek(rf.stream_start + 2)
        return f.read(1)[0]


def _warn_uncounted(survey: dict[int, RankSurvey], ranks: list[int],
                    recorded: np.ndarray) -> None:
    """One warning if a stream holds records of a function its own footer counts no
    recorded call of (libdumpi's footers always count them; another writer's, or an
    edited file's, may not): libundumpi reads every record whatever the footer says, and
    so does partrace; the footer is kept as written (definitions table ``footer``)."""
    from .functable import FUNCTIONS
    found = [(r, f) for i, r in enumerate(ranks) for f in sorted(survey[r].records)
             if f < 290 and recorded[i, f] == 0]
    if not found:
        return
    import warnings
    r, f = found[0]
    rf = survey[r].file
    names = sorted({FUNCTIONS[f][1] for _r, f in found})
    count, at = survey[r].records[f]
    warnings.warn(f"{rf.path}: byte {at}: {count} "
                  f"{FUNCTIONS[f][1]} record(s) its footer counts no recorded call of "
                  f"(in all, {len(names)} function(s) in {len({r for r, _f in found})} rank "
                  f"file(s): {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}); "
                  f"read as libundumpi reads them, the footers kept as written")


def _warn_early_end(survey: dict[int, RankSurvey], ranks: list[int]) -> None:
    """One warning if a stream holds an end-of-stream label before its end: libundumpi
    (undumpi_read_single_call) stops reading there, and so does partrace; the calls
    after it are not read, and the warning says how many bytes that leaves."""
    early = [r for r in ranks if survey[r].early_end is not None]
    if not early:
        return
    import warnings
    rf, at = survey[early[0]].file, survey[early[0]].early_end
    more = f" (and in {len(early) - 1} more rank file(s))" if len(early) > 1 else ""
    warnings.warn(f"{rf.path}: byte {at}: end-of-stream label 293 before the end of the call "
                  f"stream{more}; the {rf.stream_end - at} bytes after it are not read, as "
                  f"libundumpi stops reading there")


def _rank_tables(rfs: dict[int, RankFile], ranks: list[int]) -> dict[str, Table]:
    """Per-rank header facts, footer counts, datatype sizes, perf labels (and the counters
    they define: counters.counter_tables), addresses and keyvals."""
    from .counters import counter_tables

    def obj(xs):
        return np.array(list(xs) + [None], object)[:-1]

    hdr = Table({"location": np.array(ranks, np.int64) + 1,
                 "version": obj(".".join(map(str, rfs[r].version)) for r in ranks),
                 "starttime": np.array([rfs[r].starttime for r in ranks], np.int64),
                 "hostname": obj(rfs[r].hostname for r in ranks),
                 "username": obj(rfs[r].username for r in ranks),
                 "cpu_offset": np.array([rfs[r].cpu_offset for r in ranks], np.int64),
                 "wall_offset": np.array([rfs[r].wall_offset for r in ranks], np.int64)})
    foot = [(r + 1, f, rfs[r].calls[f], rfs[r].ignored[f]) for r in ranks for f in range(291)
            if rfs[r].calls[f] or rfs[r].ignored[f]]
    footer = Table({k: np.array([x[i] for x in foot], np.int64) for i, k in
                    enumerate(("location", "function", "calls", "ignored"))})
    sizes = [(r + 1, d, s) for r in ranks for d, s in enumerate(rfs[r].datatype_sizes)]
    dts = Table({k: np.array([x[i] for x in sizes], np.int64) for i, k in
                 enumerate(("location", "datatype", "size"))})
    addr = [(r + 1, a, n) for r in ranks for a, n in rfs[r].addresses]
    kv = [(r + 1, k, v) for r in ranks for k, v in rfs[r].keyvals]
    return {
        "rank_headers": hdr, "footer": footer, "datatype_sizes": dts,
        **counter_tables(rfs, ranks),
        "function_addresses": Table({"location": np.array([x[0] for x in addr], np.int64),
                                     "address": np.array([x[1] for x in addr], np.uint64),
                                     "name": obj(x[2] for x in addr)}),
        "keyvals": Table({"location": np.array([x[0] for x in kv], np.int64),
                          "key": obj(x[1] for x in kv), "value": obj(x[2] for x in kv)}),
    }
