"""ROSSReader: units = fixed-size byte regions of each file; tables per sample kind."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, Mapping

import numpy as np

from ...errors import TraceError
from ...model import (REGION_COLUMNS, Column, Definitions, Schema, Table,
                      column)
from ..base import TraceReader, Unit
from . import layouts as L
from .files import kind_of, run_files

DEFAULT_REGION = 512 << 10
# A rank surveys and decodes its share's consecutive regions of a file as one unit of up
# to this many bytes (joined): the regions' size sets only how finely ranks are balanced.
DECODE_SPAN = 4 << 20
# Regions of a run at most, by default: every rank holds the whole unit list (a unit is
# ~450 bytes of Python objects, and making and sorting 250,000 of them, a terabyte in
# 4 MiB regions, took 7.9 s and 113 MB here on each rank), so beyond 32 GiB the regions
# grow instead, by whole MiB (a region's decode is cut in chunks all the same).
MAX_REGIONS = 1 << 16
# Bytes of record offsets and codes (9 a record) that units() keeps for the surveys and
# decodes that follow on this process (the suite's 150 MB ROSS trace needs 27 MB); the
# regions beyond are hopped again.
HOP_CACHE = 64 << 20

MODE = {"gvt": "GVT-based engine sampling", "rt": "real-time engine sampling",
        "analysis-lps": "virtual-time sampling (analysis LPs)", "evtrace": "event trace",
        "model": "model sampling at GVT / real time"}

TIME_MEANING = {
    "events": "SEND rows: send_vts, RECV rows: recv_vts (virtual times, float32) x 1e9",
    "gvt": "virtual_time = GVT of the sampling round x 1e9",
    "rt": "real_time = cycle counter / clock-rate, seconds x 1e9",
    "vt": "virtual_time = GVT when the VT-sampling event ran x 1e9",
    "vt_model": "virtual_time = the sample's virtual time x 1e9",
    "model_gvt": "gvt (float32) of the sampling round x 1e9",
    "model_rt": "real_time = cycle counter / clock-rate, seconds x 1e9",
}

# Table-name aliases accepted in model_dtypes.
DTYPE_ALIASES = {"evtrace": ("events",), "model": ("model_gvt", "model_rt"),
                 "analysis-lps": ("vt_model",)}
MODEL_TABLES = ("events", "model_gvt", "model_rt", "vt_model")

# header fields that say what a record is and how long, not what it measures
BOOKKEEPING = {"sample_type", "sample_size", "stats_type", "model_size", "flag"}
FIELD_DOC = {"offset": "byte offset of the record in its file",
             "process_event_cycles": "never filled by ROSS: raw garbage bytes",
             "padding": "struct padding: raw garbage bytes",
             "model_data": "model bytes of the record, zero-padded (size field tells the length)"}

# LP samples of ROSS before Dec 2023 (36 bytes): the fields added later are absent.
LP_V1_DOC = {"sample_size": "36: the LP sample of ROSS before Dec 2023, which has no "
                            "process_event_cycles and no padding (those columns are absent)"}


def _descr(dt: np.dtype) -> list:
    if dt.names is None:
        raise ValueError("model dtype must be a structured numpy dtype")
    return [[n, dt.fields[n][0].base.str] + ([list(dt.fields[n][0].shape)]
            if dt.fields[n][0].shape else []) for n in dt.names]


class ROSSReader(TraceReader):
    """Units are byte regions; the ranks find their bounds (each hops the headers of
    some of the files: list_part), the owning ranks survey them, and a location's seq
    runs on from the regions before (the survey of earlier ranks, then this rank's own)."""

    format_name = "ross"
    surveyed = ordered = True

    def __init__(self, path: str | os.PathLike, region_size: int | None = None,
                 model_dtypes: Mapping[str, np.dtype] | None = None):
        super().__init__(path)
        self.files = run_files(self.path)
        if not self.files:
            raise TraceError(self.path, None, "no ROSS stats file (<prefix>-{gvt,rt,"
                             "analysis-lps,evtrace,model}.bin) here")
        if region_size is None:
            region_size = default_region_size(self.files)
        if region_size < 1:
            raise ValueError("region_size must be positive")
        self.region_size = int(region_size)
        self.model_dtypes = {}
        for key, dt in (model_dtypes or {}).items():
            if key not in DTYPE_ALIASES and key not in MODEL_TABLES:
                raise ValueError(f"model_dtypes: unknown table {key!r}; known: "
                                 f"{sorted(set(DTYPE_ALIASES) | set(MODEL_TABLES))}")
            for table in DTYPE_ALIASES.get(key, (key,)):
                self.model_dtypes[table] = _descr(np.dtype(dt))
        self._lister = 0        # the rank whose part list_part made here
        self._before = None     # file -> FileFacts of the regions before this rank's
        self._carry = {}        # (file, start) -> records per key of the file before it
        self._hops = {}         # (file, start) -> (starts, codes) units() found there
        self._surveyed = set()  # the keys of _hops this process surveyed
        self._counted = {}      # (file, start, end) -> records per raw key its survey found
        self._room = HOP_CACHE  # bytes of hops _keep may still keep
        self._schema = None     # (defs, schema): decode asks for it every unit

    def source_files(self) -> list[Path]:
        return list(self.files)

    def holdings(self, defs: Definitions) -> dict[str, dict[str, int]]:
        """Files per kind: nothing in a ROSS run lists them (a deleted one is not seen)."""
        out: dict[str, int] = {}
        for p in self.files:
            kind = kind_of(Path(p))
            out[kind] = out.get(kind, 0) + 1
        return {"files per kind": dict(sorted(out.items()))}

    def units(self) -> list[Unit]:
        """The regions, from one hop over each file; each region's hop is kept (up to
        HOP_CACHE bytes) for its survey and decode here, which then need not hop again:
        used by the first decode, dropped by start_after() unless surveyed here."""
        return self.units_from([self.list_part(0, 1)])

    def list_part(self, rank: int, size: int) -> list:
        """This rank's stretch of the regions in file order, hopped from a plausible record
        start (listing.py); the hops are kept as units() keeps them, and handed to the
        regions' owners later."""
        from .listing import list_piece, pieces_of
        self._hops, self._surveyed, self._room = {}, set(), HOP_CACHE
        self._counted, self._lister = {}, rank
        return [list_piece(piece, self.region_size,
                           lambda *a, p=piece.path: self._keep(p, *a))
                for piece in pieces_of(self.files, self.region_size, rank, size)]

    def units_from(self, parts: list) -> list[Unit]:
        """The units, from every rank's pieces checked in file order (listing.py); this
        rank's kept hops of regions not on the true chain are dropped."""
        from .listing import unit_key, verified_files
        units = []
        for path, kind, size, regions, stale in verified_files(parts, self.region_size):
            name, count = Path(path).name, max(1, -(-size // self.region_size))
            for k, start, end in regions:
                units.append(Unit(unit_key(k, count, name), end - start,
                                  {"path": path, "kind": kind, "start": start, "end": end}))
            for rank, j, before in stale:
                if rank == self._lister:
                    self._forget(parts[rank][j], before)
        return sorted(units, key=lambda u: u.key)

    def _forget(self, piece, before: int) -> None:
        """Drop the kept hops of this rank's ``piece``'s regions that begin before byte
        ``before``: listed on a speculative chain, not the true one (their owners hop them)."""
        for _, start, _ in piece.chain.regions:
            got = self._hops.pop((piece.path, start), None) if start < before else None
            if got is not None:
                self._room += _hop_bytes(*got[1:])

    def _keep(self, path: str, start: int, end: int, starts, codes) -> None:
        """Keep a region's hop for its survey and decode here, while HOP_CACHE has room."""
        size = _hop_bytes(starts, codes)
        if size <= self._room:
            self._room -= size
            self._hops[(path, start)] = (end, starts, codes)

    def hand_over(self, share: list[Unit]) -> dict | None:
        """The hops the listing kept for ``share``'s regions, forgotten here: their owner
        surveys and decodes them without hopping again (a rank hops whole files to list
        their regions; at 2 ranks on the suite trace the owner hopped its half again, 0.4 s)."""
        out = {}
        for u in share:
            key = (u.info["path"], u.info["start"])
            if key in self._hops:
                out[key] = self._hops.pop(key)
        return out or None

    def take_over(self, handed: dict) -> None:
        for key, (end, starts, codes) in handed.items():
            self._room -= _hop_bytes(starts, codes)     # kept whatever the room: paid for
            self._hops[key] = (end, starts, codes)

    def joined(self, share: list[Unit]) -> list[Unit]:
        """A file's consecutive regions in ``share`` as one unit, up to DECODE_SPAN bytes
        (a region read alone pays ~10 ms of fixed cost in its survey and decode); their
        kept hops joined too, or, if any is missing, dropped (the joined unit hops once)."""
        groups: list[list] = []     # [units, bytes]
        last: dict[str, list] = {}  # path -> the group it may extend
        for u in share:
            g = last.get(u.info["path"])
            if g is not None and g[0][-1].info["end"] == u.info["start"] and \
                    g[1] + u.size <= DECODE_SPAN:
                g[0].append(u)
                g[1] += u.size
            else:
                groups.append([[u], u.size])
                last[u.info["path"]] = groups[-1]
        out = []
        for units, size in groups:
            info = dict(units[0].info, end=units[-1].info["end"])
            self._join_hops(info, [u.info for u in units])
            out.append(Unit(units[0].key, size, info))
        return out

    def _join_hops(self, info: dict, parts: list[dict]) -> None:
        """The kept hop of the unit ``info`` joins from ``parts``: theirs, end to end."""
        if len(parts) == 1:
            return
        got = [self._hops.pop((p["path"], p["start"]), None) for p in parts]
        if all(g is not None and g[0] == p["end"] for g, p in zip(got, parts)):
            self._hops[(info["path"], info["start"])] = (
                info["end"], np.concatenate([g[1] for g in got]),
                np.concatenate([g[2] for g in got]))
            return
        for g in got:
            if g is not None:
                self._room += _hop_bytes(*g[1:])

    def _hop(self, info: dict, take: bool):
        """(starts, codes) units() kept for this region, or None; ``take``: forget it."""
        key = (info["path"], info["start"])
        got = self._hops.pop(key, None) if take else self._hops.get(key)
        return got[1:] if got is not None and got[0] == info["end"] else None

    def survey(self, unit: Unit) -> dict:
        from .scan import hop_region, open_bytes, survey_region
        i = unit.info
        self._surveyed.add((i["path"], i["start"]))
        hop = self._hop(i, take=False)
        if hop is None:     # units() ran on another rank: hopped here once, for survey and decode
            path = Path(i["path"])
            hop = hop_region(path, open_bytes(path), i["start"], i["end"], i["kind"])
            self._keep(i["path"], i["start"], i["end"], *hop)
        facts = survey_region(Path(i["path"]), i["kind"], i["start"], i["end"], hop)
        self._counted[(i["path"], i["start"], i["end"])] = facts.keys     # decode's carry
        return {i["path"]: facts}

    @staticmethod
    def combine(a: dict, b: dict) -> dict:
        out = dict(a)
        for path, facts in b.items():
            out[path] = out[path] + facts if path in out else facts
        return out

    def start_after(self, before: dict | None) -> None:
        self._before, self._carry = before or {}, {}
        # the surveys are done: the hops of regions other ranks survey are not needed here
        self._hops = {k: v for k, v in self._hops.items() if k in self._surveyed}

    def _facts(self, survey: dict | None):
        from .scan import FileFacts
        survey = (self.survey_all() if survey is None else survey) or {}
        return [survey.get(str(p)) or FileFacts(kind_of(p), p.stat().st_size)
                for p in self.files]

    def read_definitions(self, survey: dict | None = None) -> Definitions:
        scans = self._facts(survey)
        # Locations from the ids that occur, never from the largest id (a corrupt id must
        # not size anything): O(distinct ids) whatever their values.
        from .scan import check_one_size_per_lp, first_rows
        rows = first_rows(np.concatenate([fs.lp_map for fs in scans]))     # (lp, pe, kp)
        pe_ids, kp_keys, lp_ids = (np.unique(np.concatenate(
            [np.empty(0, np.int64), extra] + [getattr(fs, a) for fs in scans])) for a, extra in (
            ("pe_ids", rows[:, 1]), ("kp_keys", L.kp_key(rows[:, 1], rows[:, 2])),
            ("lp_ids", rows[:, 0])))
        npe, nkp, nlp = len(pe_ids), len(kp_keys), len(lp_ids)
        lp_pe = np.full(nlp, -1, np.int64)
        lp_kp = np.full(nlp, -1, np.int64)
        at = L.index_in(lp_ids, rows[:, 0])
        lp_pe[at], lp_kp[at] = rows[:, 1], rows[:, 2]
        kp_pe, kp_local = kp_keys >> 32, kp_keys & 0xFFFFFFFF
        pe_loc = 1 + np.arange(npe, dtype=np.int64)
        kp_loc = 1 + npe + np.arange(nkp, dtype=np.int64)
        lp_loc = 1 + npe + nkp + np.arange(nlp, dtype=np.int64)
        names = ([f"PE {p}" for p in pe_ids.tolist()]
                 + [f"KP {p}.{k}" for p, k in zip(kp_pe.tolist(), kp_local.tolist())]
                 + [f"LP {g}" for g in lp_ids.tolist()])
        lp_parent = L.index_in(pe_ids, lp_pe)
        parent = np.concatenate([np.zeros(npe, np.int64), 1 + L.index_in(pe_ids, kp_pe),
                                 np.where((lp_pe >= 0) & (lp_parent >= 0), 1 + lp_parent, 0)])
        locations = Table({"id": np.concatenate([pe_loc, kp_loc, lp_loc]),
                           "name": np.array(names, dtype=object), "parent": parent})
        lps_table = Table({"location": lp_loc, "lp_id": lp_ids, "pe_id": lp_pe, "kp_id": lp_kp})
        pes_table = Table({"location": pe_loc, "pe_id": pe_ids})
        kps_table = Table({"location": kp_loc, "pe_id": kp_pe, "kp_id": kp_local})
        regions = Table.empty(REGION_COLUMNS)
        files, widths, sizes = {}, {}, {}
        for p, fs in zip(self.files, scans):
            recs = {L.table_name(fs.kind, c): n for c, n in sorted(fs.counts.items())}
            files[fs.kind] = {"name": p.name, "bytes": fs.size, "records": recs}
            if L.LP in fs.counts or L.LP_V1 in fs.counts:     # one layout per file (scan checks)
                files[fs.kind]["lp_sample_bytes"] = 36 if L.LP_V1 in fs.counts else 48
            for c, (pairs, offs) in fs.size_pairs.items():
                check_one_size_per_lp(p, c, pairs, offs)
            for c, s in fs.sizes.items():
                t = L.table_name(fs.kind, c)
                sizes[t] = sorted(s)
                widths[t] = model_data_width(s)
        attrs = {
            "modes": {k: MODE[k] for k in files},
            "files": files, "file_header": "none (ROSS files have no header, magic or version)",
            "byte_order": "little", "npe": int(npe), "nkp": int(nkp), "nlp": int(nlp),
            "location_scheme": "the ids that occur, sorted: PE p -> 1 + its index among the PE "
                               "ids; KP (p,k) -> 1+npe + index among the (PE, local KP) pairs; "
                               "LP g -> 1+npe+nkp + index among the LP ids (tables pes, kps, lps)",
            "time_ns_per_unit": 1e9, "time_meaning": TIME_MEANING,
            "events_source": "evtrace" if "evtrace" in files else "none (no event trace file)",
            "model_data_sizes": sizes, "model_data_width": widths,
            "model_dtypes": self.model_dtypes, "region_size": self.region_size,
        }
        source = {"files": files, "lps": lps_table_to_json(lps_table)}
        return Definitions("ross", {"locations": locations, "regions": regions,
                                    "lps": lps_table, "pes": pes_table, "kps": kps_table},
                           attrs, source)

    def schema(self, defs: Definitions) -> Schema:
        out: Schema = {"events": self._columns("events", L.EVTRACE, defs)}
        for info in defs.attrs["files"].values():
            for table in info["records"]:
                if table != "events":
                    out[table] = self._columns(table, _code_of(table, info), defs)
        return out

    @staticmethod
    def _columns(table: str, code: int, defs: Definitions) -> list[Column]:
        key = "vt" if table.startswith("vt_") and table != "vt_model" else table.split("_")[0]
        cols = [column("time", description="ordering key: " + TIME_MEANING.get(
                    table, TIME_MEANING.get(key, ""))), column("location"), column("seq")]
        if code == L.EVTRACE:
            cols += [column("kind"), column("region"),
                     column("peer", description="destination LP location")]
        cols.append(Column("offset", "uint64", FIELD_DOC["offset"], "bytes", measure=False))
        dt = L.HEADER_DTYPES[code]
        doc = dict(FIELD_DOC, **(LP_V1_DOC if code == L.LP_V1 else {}))
        cols += [Column(n, dt.fields[n][0].newbyteorder("=").str, doc.get(n, ""),
                        measure=n not in BOOKKEEPING and not n.endswith("_id"))
                 for n in dt.names]
        width = defs.attrs["model_data_width"].get(table, 0)
        if width == "variable":
            cols.append(Column("model_data", "bytes", "model bytes of the record"))
        elif width:
            cols.append(Column("model_data", ("u1", width), FIELD_DOC["model_data"]))
        descr = defs.attrs["model_dtypes"].get(table)
        if descr:
            for f in descr:
                cols.append(Column("model_" + f[0], (f[1], tuple(f[2])) if len(f) > 2 else f[1],
                                   "from the user's model dtype (0 where the size differs)"))
        return cols

    def decode(self, unit: Unit, defs: Definitions) -> Iterator[dict[str, Table]]:
        from .decode import decode_region
        from .scan import add_keyed, survey_region
        i = unit.info
        hop = self._hop(i, take=True)
        if self._schema is None or self._schema[0] is not defs:
            self._schema = defs, self.schema(defs)
        schema = self._schema[1]
        wanted = {t: cols for t, c in schema.items()
                  if (cols := self.selected(t, [x.name for x in c])) is not None}
        mine = {L.table_name(i["kind"], code) for code in L.CODES_OF_KIND[i["kind"]]}
        # a location's seq needs the records per key of the file before this region; a
        # selection without seq skips that count, and the next region then knows no carry
        need_seq = any("seq" in cols for t, cols in wanted.items() if t in mine)
        if not need_seq and not mine & set(wanted):     # nothing asked of this file (its
            self._carry[(i["path"], i["end"])] = UNKNOWN    # survey has checked the records)
            return
        prefix = self._carry.pop((i["path"], i["start"]), None)
        if need_seq and (prefix is None or prefix is UNKNOWN):
            if prefix is None and self._before is not None:    # the engine's first unit of this file here
                facts = self._before.get(i["path"])
                prefix = facts.keys if facts else {}
            elif prefix is None and i["start"] == 0:
                prefix = {}
            else:                           # decoded out of order, or after a region without seq
                prefix = survey_region(Path(i["path"]), i["kind"], 0, i["start"]).keys
        known = self._counted.pop((i["path"], i["start"], i["end"]), None)
        chunks, counts = decode_region(i, defs, schema, prefix if need_seq else None, wanted,
                                       hop, known)
        self._carry[(i["path"], i["end"])] = add_keyed(prefix, counts) if need_seq else UNKNOWN
        yield from chunks


def default_region_size(files: list[Path]) -> int:
    """DEFAULT_REGION, or the whole MiB that keep the run's regions to MAX_REGIONS: from the
    files' bytes alone, so the same on every rank and at every rank count."""
    from .listing import size_or_0
    total = sum(size_or_0(p) for p in files)
    need = -(-total // MAX_REGIONS)
    return DEFAULT_REGION if need <= DEFAULT_REGION else -(-need // (1 << 20)) << 20


# The carry of a region decoded without seq: the records per key before the next are unknown.
UNKNOWN = "unknown"


# Zero-padding a fixed-width model_data column may cost at most this much beyond the data.
PAD_SLACK = 16 << 20


def model_data_width(records_of_size: dict) -> int | str:
    """0 (no model data), the one non-zero size, or "variable".

    One size but few records that have it (e.g. a corrupt size field that still fits
    the file) would make an (n, size) column of mostly padding, a blow-up: then the
    data become bytes objects, whose memory is the data's own."""
    nz = [z for z in records_of_size if z]
    if not nz:
        return 0
    if len(nz) > 1:
        return "variable"
    w = nz[0]
    padding = records_of_size.get(0, 0) * w
    return w if padding <= records_of_size[w] * w + PAD_SLACK else "variable"


def _code_of(table: str, file_info: dict | None = None) -> int:
    """Record code of a table; for LP tables the layout its file holds (48 or 36 bytes)."""
    fixed = {"events": L.EVTRACE, "model_gvt": L.MODEL_GVT, "model_rt": L.MODEL_RT,
             "vt_model": L.VT_MODEL}
    if table in fixed:
        return fixed[table]
    code = {"pe": L.PE, "kp": L.KP, "lp": L.LP}[table.rsplit("_", 1)[1]]
    if code == L.LP and (file_info or {}).get("lp_sample_bytes") == 36:
        return L.LP_V1
    return code


def lps_table_to_json(t: Table) -> dict:
    return {k: t[k].tolist() for k in t.names}


def _hop_bytes(starts: np.ndarray, codes: np.ndarray) -> int:
    """Memory a region's hop holds (what HOP_CACHE bounds)."""
    return len(starts) * (starts.itemsize + codes.itemsize)
