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
PE, KP, LP, VT_MODEL, EVTRACE, MODEL_GVT, MODEL_RT = 0, 1, 2, 4, 5, 6, 7

HEADERS: dict[int, list] = {
    PE: METADATA + PE_BODY, KP: METADATA + KP_BODY, LP: METADATA + LP_BODY,
    VT_MODEL: VT_MODEL_HEADER, EVTRACE: EVTRACE_HEADER,
    MODEL_GVT: METADATA + MODEL_HEADER, MODEL_RT: METADATA + MODEL_HEADER,
}
HEADER_DTYPES = {code: np.dtype(fields) for code, fields in HEADERS.items()}
assert HEADER_DTYPES[PE].itemsize == 128 and HEADER_DTYPES[KP].itemsize == 68
assert HEADER_DTYPES[LP].itemsize == 72 and HEADER_DTYPES[MODEL_GVT].itemsize == 48
assert HEADER_DTYPES[VT_MODEL].itemsize == 48 and HEADER_DTYPES[EVTRACE].itemsize == 24

# Field holding the byte count of the model data that follows the header (None: no data).
MODEL_SIZE_FIELD = {PE: None, KP: None, LP: None, VT_MODEL: "sample_size",
                    EVTRACE: "model_data_sz", MODEL_GVT: "model_size", MODEL_RT: "model_size"}

# File kinds by name suffix: <prefix>-<suffix>.bin
FILE_KINDS = ("gvt", "rt", "analysis-lps", "evtrace", "model")
FAMILY = {"gvt": 0, "rt": 0, "analysis-lps": 1, "evtrace": 2, "model": 3}   # hop.py families
TABLE_PREFIX = {"gvt": "gvt", "rt": "rt", "analysis-lps": "vt"}
CODES_OF_KIND = {"gvt": (PE, KP, LP), "rt": (PE, KP, LP), "analysis-lps": (PE, KP, LP, VT_MODEL),
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
    return f"{TABLE_PREFIX[kind]}_{('pe', 'kp', 'lp')[code]}"


# Location ids (0 means "none" in peer columns, so ids start at 1):
#   PE p       -> 1 + p
#   KP (p, k)  -> 1 + npe + p * nkp + k          (k = KP index local to its PE)
#   LP g       -> 1 + npe + npe * nkp + g        (g = global LP id)
# npe / nkp / nlp are 1 + the largest id seen anywhere in the run's files.
def pe_location(pe, npe: int, nkp: int):
    return 1 + np.asarray(pe, np.int64)


def kp_location(pe, kp, npe: int, nkp: int):
    return 1 + npe + np.asarray(pe, np.int64) * nkp + np.asarray(kp, np.int64)


def lp_location(lp, npe: int, nkp: int):
    return 1 + npe + npe * nkp + np.asarray(lp, np.int64)
