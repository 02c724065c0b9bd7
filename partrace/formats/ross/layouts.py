"""Record layouts of ROSS instrumentation files, as ROSS 8.1.1 really writes them.

See FORMAT-NOTES (shared fixtures) for the evidence.  All structs are native
little-endian with natural alignment; field names follow FORMAT-NOTES.
"""
from __future__ import annotations

import numpy as np

# The 24-byte sample_metadata in front of engine samples and model-file records.
METADATA = [("sample_type", "<i4"), ("sample_size", "<i4"),
            ("virtual_time", "<f8"), ("real_time", "<f8")]

PE_BODY = [(n, "<u4") for n in (
    "pe_id", "events_processed", "events_aborted", "events_rolled_back", "total_rollbacks",
    "secondary_rollbacks", "fossil_collect_attempts", "priority_queue_size", "network_sends",
    "network_receives", "num_gvts", "pe_event_ties", "all_reduce_count")] + [(n, "<f4") for n in (
    "efficiency", "network_read_time", "network_other_time", "gvt_time", "fossil_collect_time",
    "events_aborted_time", "events_processed_time", "priority_queue_time", "rollback_time",
    "cancel_q_time", "avl_tree_time", "buddy_time", "lz4_time")]

KP_BODY = [(n, "<u4") for n in (
    "pe_id", "kp_id", "events_processed", "events_aborted", "events_rolled_back",
    "total_rollbacks", "secondary_rollbacks", "network_sends", "network_receives")] + [
    ("time_ahead_gvt", "<f4"), ("efficiency", "<f4")]

# 48 bytes, not the 36 the docs imply: a never-filled u64 and 4 pad bytes (garbage, kept raw).
LP_BODY = [(n, "<u4") for n in (
    "pe_id", "kp_id", "lp_id", "events_processed", "events_aborted", "events_rolled_back",
    "network_sends", "network_receives")] + [
    ("process_event_cycles", "<u8"), ("efficiency", "<f4"), ("padding", "<u4")]

# The LP sample of ROSS before commit fee5c10 (Dec 2023, "Outputing time spent per LP
# processing events"), which added `tw_clock s_process_event` to struct st_lp_stats:
# 8 u32 + the float efficiency, 36 bytes.  ROSS writes sample_size = sizeof(st_lp_stats),
# so each record says which layout it has (36 or 48); a file holds only one of them.
LP_BODY_V1 = [(n, "<u4") for n in (
    "pe_id", "kp_id", "lp_id", "events_processed", "events_aborted", "events_rolled_back",
    "network_sends", "network_receives")] + [("efficiency", "<f4")]
LP_V1_MISSING = ("process_event_cycles", "padding")

# Model-file record: metadata (type 3, size 24) + this header + model_size bytes.
MODEL_HEADER = [("pe_id", "<u4"), ("kp_id", "<u4"), ("lp_id", "<u4"), ("gvt", "<f4"),
                ("stats_type", "<i4"), ("model_size", "<u4")]

# VT model sample (analysis-lps file): a different 48-byte header, ids first.
VT_MODEL_HEADER = [("lp_id", "<u8"), ("kp_id", "<u8"), ("pe_id", "<u8"),
                   ("virtual_time", "<f8"), ("real_time", "<f8"),
                   ("sample_size", "<i4"), ("flag", "<i4")]

# Event-trace record: no metadata; 24 bytes + model_data_sz bytes.
EVTRACE_HEADER = [("src_lp", "<u4"), ("dest_lp", "<u4"), ("send_vts", "<f4"),
                  ("recv_vts", "<f4"), ("real_ts", "<f4"), ("model_data_sz", "<u4")]

# Record type codes produced by the boundary hop (hop.py); one table per code and file.
PE, KP, LP, LP_V1, VT_MODEL, EVTRACE, MODEL_GVT, MODEL_RT = 0, 1, 2, 3, 4, 5, 6, 7

HEADERS: dict[int, list] = {
    PE: METADATA + PE_BODY, KP: METADATA + KP_BODY, LP: METADATA + LP_BODY,
    LP_V1: METADATA + LP_BODY_V1,
    VT_MODEL: VT_MODEL_HEADER, EVTRACE: EVTRACE_HEADER,
    MODEL_GVT: METADATA + MODEL_HEADER, MODEL_RT: METADATA + MODEL_HEADER,
}
HEADER_DTYPES = {code: np.dtype(fields) for code, fields in HEADERS.items()}
assert HEADER_DTYPES[PE].itemsize == 128 and HEADER_DTYPES[KP].itemsize == 68
assert HEADER_DTYPES[LP].itemsize == 72 and HEADER_DTYPES[LP_V1].itemsize == 60
assert HEADER_DTYPES[MODEL_GVT].itemsize == 48
assert HEADER_DTYPES[VT_MODEL].itemsize == 48 and HEADER_DTYPES[EVTRACE].itemsize == 24

# Field holding the byte count of the model data that follows the header (None: no data).
MODEL_SIZE_FIELD = {PE: None, KP: None, LP: None, LP_V1: None, VT_MODEL: "sample_size",
                    EVTRACE: "model_data_sz", MODEL_GVT: "model_size", MODEL_RT: "model_size"}

# File kinds by name suffix: <prefix>-<suffix>.bin
FILE_KINDS = ("gvt", "rt", "analysis-lps", "evtrace", "model")
FAMILY = {"gvt": 0, "rt": 0, "analysis-lps": 1, "evtrace": 2, "model": 3}   # hop.py families
TABLE_PREFIX = {"gvt": "gvt", "rt": "rt", "analysis-lps": "vt"}
CODES_OF_KIND = {"gvt": (PE, KP, LP, LP_V1), "rt": (PE, KP, LP, LP_V1),
                 "analysis-lps": (PE, KP, LP, LP_V1, VT_MODEL),
                 "evtrace": (EVTRACE,), "model": (MODEL_GVT, MODEL_RT)}


def table_name(kind: str, code: int) -> str:
    """Output table of records of type ``code`` in a file of ``kind``."""
    if code == EVTRACE:
        return "events"
    if code == MODEL_GVT:
        return "model_gvt"
    if code == MODEL_RT:
        return "model_rt"
    if code == VT_MODEL:
        return "vt_model"
    return f"{TABLE_PREFIX[kind]}_{('pe', 'kp', 'lp', 'lp')[code]}"


# Location ids (0 means "none" in peer columns, so ids start at 1), from the ids that occur
# (never from the largest id: one corrupt id must not size an array), each list sorted:
#   PE p       -> 1 + index of p in pe_ids
#   KP (p, k)  -> 1 + npe + index of kp_key(p, k) in kp_keys   (k = KP index local to its PE)
#   LP g       -> 1 + npe + nkp + index of g in lp_ids          (g = global LP id)
# npe / nkp / nlp = len(pe_ids) / len(kp_keys) / len(lp_ids).  ROSS files carry no count
# of PEs, KPs or LPs (no header), so there is no bound to check the ids against.
def kp_key(pe, kp):
    """One int64 per (PE, local KP) pair; both ids are u32."""
    return (np.asarray(pe, np.int64) << 32) | np.asarray(kp, np.int64)


def index_in(ids: np.ndarray, values) -> np.ndarray:
    """Index of each value in the sorted ``ids``; -1 where it is absent."""
    values = np.asarray(values, np.int64)
    if not len(ids):
        return np.full(len(values), -1, np.int64)
    i = np.minimum(np.searchsorted(ids, values), len(ids) - 1)
    return np.where(ids[i] == values, i, -1)
