"""The OTF v1 ASCII record grammar as data: one table drives reader and writer.

Each record is a keyword followed by fields.  The first field has no tag; the
others carry a tag (short and long spelling, plus deprecated aliases the OTF
library still accepts).  Facts from OTF_Keywords.h / OTF_Parse.c /
OTF_WStream.c of OTF 1.12.4.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...model import Kind

HEX, STRING, HEXSTR, MEMBERS, VERSION = 0, 1, 2, 3, 4
REQ, OPT, OPT0 = 0, 1, 2   # required; optional when reading; optional and left out when 0 on writing


@dataclass(frozen=True)
class Field:
    col: str
    short: str
    long: tuple[str, ...]
    ftype: int = HEX
    opt: int = REQ


@dataclass(frozen=True)
class Rec:
    name: str
    table: str            # events / snapshots / statistics / kv / defs / markers
    kind: int              # model.Kind (0 for non-row records)
    short: str
    long: str
    fields: tuple[Field, ...]


def F(col, short, long="", ftype=HEX, opt=REQ, alt=()):
    return Field(col, short, (long,) + tuple(alt), ftype, opt)


SCL = F("scl", "X", "SCL", opt=OPT0, alt=("S",))
SCLN = F("scl", "X", "SCL", opt=OPT0)          # records without the deprecated "S" alias
FIRST = ""

_RMA = lambda col0: (F(col0, FIRST), F("peer", "P", "PROCESS"), F("comm", "C", "COMM"),
                     F("tag", "T", "TAG"), F("size", "L", "LEN"), SCLN)

EVENT_RECORDS = (
    Rec("EventComment", "events", Kind.COMMENT, "#", "#EVTCOMMENT", (F("text", FIRST, ftype=STRING),)),
    Rec("NoOp", "events", Kind.NOOP, "N", "NOOP", ()),
    Rec("Enter", "events", Kind.ENTER, "E", "ENTER", (F("region", FIRST), SCL)),
    Rec("Leave", "events", Kind.LEAVE, "L", "LEAVE", (F("region", FIRST, opt=OPT0), SCL)),
    Rec("SendMsg", "events", Kind.SEND, "S", "SEND",
        (F("peer", FIRST), F("size", "L", "LEN"), F("tag", "T", "TAG"), F("comm", "C", "COMM"), SCL)),
    Rec("RecvMsg", "events", Kind.RECV, "R", "RECEIVE",
        (F("peer", FIRST), F("size", "L", "LEN"), F("tag", "T", "TAG"), F("comm", "C", "COMM"), SCL)),
    Rec("Counter", "events", Kind.COUNTER, "CNT", "COUNTER", (F("counter", FIRST), F("value", "V", "VALUE"))),
    Rec("CollectiveOperation", "events", Kind.COLLECTIVE, "COP", "COLLOP",
        (F("collop", FIRST), F("comm", "C", "COMM"), F("root", "RT", "ROOT"), F("size", "S", "SENT"),
         F("received", "R", "RECVD"), F("duration", "D", "DUR"), SCL)),
    Rec("BeginCollectiveOperation", "events", Kind.COLLECTIVE_BEGIN, "COPB", "COLLOPBEGIN",
        (F("collop", FIRST), F("match_id", "H", "HANDLEID"), F("comm", "C", "COMM"), F("root", "RT", "ROOT"),
         F("size", "S", "SENT"), F("received", "R", "RECVD"), SCL)),
    Rec("EndCollectiveOperation", "events", Kind.COLLECTIVE_END, "COPE", "COLLOPEND", (F("match_id", FIRST),)),
    Rec("FileOperation", "events", Kind.FILE_OP, "F", "FILEOP",
        (F("file", FIRST), F("handle", "H", "HANDLEID"), F("operation", "OP", "OPERATION"),
         F("size", "B", "BYTES"), F("duration", "D", "DUR"), SCLN)),
    Rec("BeginFileOperation", "events", Kind.FILE_BEGIN, "FA", "FILEOPBEGINNEW", (F("match_id", FIRST), SCLN)),
    Rec("EndFileOperation", "events", Kind.FILE_END, "FF", "FILEOPENDNEW",
        (F("file", FIRST), F("match_id", "MI", "MATCHID"), F("handle", "H", "HANDLEID"),
         F("operation", "OP", "OPERATION"), F("size", "B", "BYTES"), SCLN)),
    # pre-1.8 forms, read only (the writer emits the new ones)
    Rec("BeginFileOperationOld", "events", Kind.FILE_BEGIN, "FB", "FILEOPBEGIN", (F("match_id", FIRST), SCLN)),
    Rec("EndFileOperationOld", "events", Kind.FILE_END, "FE", "FILEOPEND",
        (F("file", FIRST), F("handle", "H", "HANDLEID"), F("operation", "OP", "OPERATION"),
         F("size", "B", "BYTES"), SCLN)),
    Rec("RMAPut", "events", Kind.RMA_PUT, "T", "TRMAPUT", _RMA("origin")),
    Rec("RMAPutRemoteEnd", "events", Kind.RMA_PUT_REMOTE_END, "U", "URMAPUTRE", _RMA("origin")),
    Rec("RMAGet", "events", Kind.RMA_GET, "G", "GRMAGET", _RMA("origin")),
    Rec("RMAEnd", "events", Kind.RMA_END, "M", "MRMAEND",
        (F("peer", FIRST), F("comm", "C", "COMM"), F("tag", "T", "TAG"), SCLN)),
    Rec("BeginProcess", "events", Kind.PROCESS_BEGIN, "PB", "PROCESSBEGIN", ()),
    Rec("EndProcess", "events", Kind.PROCESS_END, "PE", "PROCESSEND", ()),
)

SNAPSHOT_RECORDS = (
    Rec("SnapshotComment", "snapshots", Kind.SNAP_COMMENT, "TC", "TCOMMENT", (F("text", FIRST, ftype=STRING),)),
    Rec("EnterSnapshot", "snapshots", Kind.SNAP_ENTER, "TE", "TENTER",
        (F("region", FIRST), F("otime", "O", "OTIME"), SCL)),
    Rec("SendSnapshot", "snapshots", Kind.SNAP_SEND, "TS", "TSEND",
        (F("peer", FIRST), F("otime", "O", "OTIME"), F("comm", "G", "GROUP"), F("tag", "T", "TAG"),
         F("size", "L", "LEN", opt=OPT), SCL)),
    Rec("OpenFileSnapshot", "snapshots", Kind.SNAP_OPEN_FILE, "TOF", "TOPENFILE",
        (F("file", FIRST), F("otime", "O", "OTIME"), F("handle", "H", "HANDLEID"), SCL)),
    Rec("BeginCollopSnapshot", "snapshots", Kind.SNAP_BEGIN_COLLOP, "TBC", "TBEGINCOLLOP",
        (F("otime", FIRST), F("collop", "CL", "COLL"), F("match_id", "H", "HANDLEID"), F("comm", "G", "GROUP"),
         F("root", "RT", "ROOT"), F("size", "S", "SENT"), F("received", "R", "RECVD"), SCLN)),
    Rec("BeginFileOpSnapshot", "snapshots", Kind.SNAP_BEGIN_FILE_OP, "TBF", "TBEGINFILEOP",
        (F("otime", FIRST), F("match_id", "MI", "MATCHID"), SCLN)),
    Rec("CollopCountSnapshot", "snapshots", Kind.SNAP_COLLOP_COUNT, "TCOC", "TCOLLOPCOUNT",
        (F("comm", FIRST), F("count", "N", "COUNT"))),
    Rec("CounterSnapshot", "snapshots", Kind.SNAP_COUNTER, "TCNT", "TCOUNTER",
        (F("otime", FIRST), F("counter", "CNT", "COUNTER"), F("value", "V", "VALUE"))),
)

_FLSTAT = (F("n_open", "NO", "NUMOPEN"), F("n_close", "NC", "NUMCLOSE"), F("n_read", "NRD", "NUMREAD"),
           F("n_write", "NW", "NUMWRITTEN"), F("n_seek", "NSK", "NUMSEEK"),
           F("bytes_read", "BR", "BYTESREAD"), F("bytes_written", "BW", "BYTESWRITE"))
_CEI = (F("count", "N", "COUNT", alt=("C",)), F("excl_time", "E", "EXCL"), F("incl_time", "I", "INCL"))

STATISTICS_RECORDS = (
    Rec("SummaryComment", "statistics", Kind.STAT_COMMENT, "SC", "SUMCOMMENT", (F("text", FIRST, ftype=STRING),)),
    Rec("FunctionSummary", "statistics", Kind.STAT_FUNCTION, "SF", "SUMFUNCTION", (F("region", FIRST),) + _CEI),
    Rec("FunctionGroupSummary", "statistics", Kind.STAT_FUNCTION_GROUP, "SG", "SUMFUNCTIONGROUP",
        (F("function_group", FIRST),) + _CEI),
    Rec("MessageSummary", "statistics", Kind.STAT_MESSAGE, "SM", "SUMMESSAGE",
        (F("peer", FIRST), F("comm", "C", "COMM"), F("tag", "T", "TAG"), F("n_sent", "NS", "NUMSENT"),
         F("n_recv", "NR", "NUMRECVD"), F("size", "S", "SENT"), F("received", "R", "RECVD"))),
    Rec("CollopSummary", "statistics", Kind.STAT_COLLOP, "SCO", "SUMCOLLMESSAGE",
        (F("comm", FIRST), F("collop", "CL", "COLL"), F("n_sent", "NS", "NUMSENT"),
         F("n_recv", "NR", "NUMRECVD"), F("size", "S", "SENT"), F("received", "R", "RECVD"))),
    Rec("FileOperationSummary", "statistics", Kind.STAT_FILE, "SFL", "SUMFILEOPERATION",
        (F("file", FIRST),) + _FLSTAT),
    Rec("FileGroupOperationSummary", "statistics", Kind.STAT_FILE_GROUP, "SFLG", "SUMFILEGROUPOPERATION",
        (F("file_group", FIRST),) + _FLSTAT),
)

BYTE_ARRAY = 0xB
MAX_KV_TYPE = 0xB       # OTF_Type: 0 char .. 0xa double, 0xb byte array (OTF_KeyValue.h)
KEYVALUE = Rec("KeyValue", "kv", 0, "K", "KEY",
               (F("key", FIRST), F("type", "Y", "TYPE"), F("value", "V", "VALUE", ftype=HEXSTR),
                F("length", "L", "LEN", opt=OPT)))

MARKER_RECORDS = (
    Rec("DefMarker", "markerdefs", 0, "MD", "MARKERDEF",
        (F("token", FIRST), F("name", "NM", "NAME", STRING), F("type", "Y", "TYPE"))),
    Rec("MarkerSpot", "markers", int(Kind.MARKER), "MS", "MARKERSPOT",
        (F("marker", FIRST), F("ticks", "T", "TIME"), F("location", "P", "PROCESS"), F("text", "V", "VALUE", STRING))),
)

_NM = F("name", "NM", "NAME", STRING)
DEF_RECORDS = (
    Rec("DefVersion", "defs", 0, "DV", "DEFVERSION", (F("version", FIRST, ftype=VERSION),)),
    Rec("DefUniqueId", "defs", 0, "DUI", "DEFUNIQUEID", (F("uid", FIRST),)),
    Rec("DefinitionComment", "defs", 0, "DCMT", "DEFCOMMENT", (F("comment", FIRST, ftype=STRING),)),
    Rec("DefCreator", "defs", 0, "DCR", "DEFCREATOR", (F("creator", FIRST, ftype=STRING),)),
    Rec("DefTimerResolution", "defs", 0, "DTR", "DEFTIMERRESOLUTION", (F("ticks_per_second", FIRST),)),
    Rec("DefTimeRange", "defs", 0, "DTRG", "DEFTIMERANGE", (F("min", FIRST), F("max", "T", "TIME"))),
    Rec("DefKeyValue", "defs", 0, "DK", "DEFKEYVALUE",
        (F("key", FIRST), F("type", "Y", "TYPE"), _NM, F("description", "T", "TAG", STRING))),
    Rec("DefProcess", "defs", 0, "DP", "DEFPROCESS", (F("token", FIRST), _NM, F("parent", "PT", "PARENT", opt=OPT0))),
    Rec("DefProcessGroup", "defs", 0, "DPG", "DEFPROCESSGROUP",
        (F("token", FIRST), F("members", "M", "MEMBERS", MEMBERS), _NM)),
    Rec("DefAttributeList", "defs", 0, "DA", "DEFATTRIBUTELIST",
        (F("token", FIRST), F("members", "M", "MEMBERS", MEMBERS))),
    Rec("DefProcessOrGroupAttributes", "defs", 0, "DPGA", "DEFPROCESSORGROUPATTR",
        (F("token", FIRST), F("attributes", "V", "VALUE"))),
    Rec("DefSclFile", "defs", 0, "DSF", "DEFSCLFILE", (F("token", FIRST), _NM)),
    Rec("DefScl", "defs", 0, "DS", "DEFSCL", (F("token", FIRST), F("file", "F", "FILE"), F("line", "LN", "LINE"))),
    Rec("DefFunctionGroup", "defs", 0, "DFG", "DEFFUNCTIONGROUP", (F("token", FIRST), _NM)),
    Rec("DefFunction", "defs", 0, "DF", "DEFFUNCTION",
        (F("token", FIRST), F("group", "G", "GROUP"), _NM, F("scl", "X", "SCL", opt=OPT0, alt=("S",)))),
    Rec("DefCollectiveOperation", "defs", 0, "DCO", "DEFCOLLOP",
        (F("token", FIRST), _NM, F("type", "Y", "TYPE"))),
    Rec("DefCounterGroup", "defs", 0, "DCG", "DEFCOUNTERGROUP", (F("token", FIRST), _NM)),
    Rec("DefCounter", "defs", 0, "DCNT", "DEFCOUNTER",
        (F("token", FIRST), F("group", "G", "GROUP"), _NM, F("properties", "P", "PROPERTIES"),
         F("unit", "U", "UNIT", STRING))),
    Rec("DefCounterAssignments", "defs", 0, "DCA", "DEFCOUNTERASSIGNMENTS",
        (F("token", FIRST), F("members", "M", "MEMBERS", MEMBERS))),
    Rec("DefFileGroup", "defs", 0, "DFLG", "DEFFILEGROUP", (F("token", FIRST), _NM)),
    Rec("DefFile", "defs", 0, "DFL", "DEFFILE", (F("token", FIRST), _NM, F("group", "G", "GROUP"))),
    Rec("DefProcessSubstitutes", "defs", 0, "DPS", "DEFPROCESSSUBSTITUTES",
        (F("token", FIRST), F("members", "M", "MEMBERS", MEMBERS))),
    Rec("DefAuxSamplePoint", "defs", 0, "DAUX", "DEFAUXSAMPLEPOINT", (F("ticks", FIRST), F("type", "Y", "TYPE"))),
)

# Records the numba stream parser knows; the index in this tuple is the record type code.
STREAM_RECORDS = EVENT_RECORDS + SNAPSHOT_RECORDS + STATISTICS_RECORDS + (KEYVALUE,)
KV_CODE = len(STREAM_RECORDS) - 1
# Which records each file kind may hold (OTF_Parse.c: events files also take inline snapshots).
FILE_RECORDS = {
    "events": EVENT_RECORDS + SNAPSHOT_RECORDS + (KEYVALUE,),
    "snaps": SNAPSHOT_RECORDS + (KEYVALUE,),
    "stats": STATISTICS_RECORDS + (KEYVALUE,),
}
BY_NAME = {r.name: r for r in STREAM_RECORDS + MARKER_RECORDS + DEF_RECORDS}
# Writer choice for each Kind (new file-op forms).
BY_KIND = {r.kind: r for r in STREAM_RECORDS if r.kind and not r.name.endswith("Old")}

TABLES = ("events", "snapshots", "statistics", "markers")
TABLE_CODE = {t: i for i, t in enumerate(TABLES)}   # keyvalues/text `ref_table` values
MARKER_TABLE = TABLE_CODE["markers"]                 # ref_table of a marker spot's key-values


# --- one record as a line, as the grammar spells it (definitions, markers, key-values) ---
def _quoted(s: str) -> str:
    return '"' + s.replace('"', " ").replace("\n", " ") + '"'


def kv_line(key: int, typ: int, value, length: int, raw: bytes = b"") -> str:
    if typ == 0xB:
        text = raw.hex() if raw or not isinstance(value, str) else value
        return f"K{key:x}Y{typ:x}V{text}L{length:x}\n"
    v = int(value, 16) if isinstance(value, str) else int(value)
    return f"K{key:x}Y{typ:x}V{v:x}\n"


def format_records(rec: Rec, cols: dict[str, list], n: int) -> str:
    """The lines of many records of one type, each as format_record's, built field by field
    over all of them (a definition per location or region: tens of thousands in a ROSS run).
    ``cols``: per field's column, its n values; a column left out is format_record's
    default (0, or "" for a string)."""
    pieces = [[rec.short] * n]
    for j, f in enumerate(rec.fields):
        vals = cols.get(f.col, ["" if f.ftype == STRING else 0] * n)
        tag = f.short if j else ""
        if f.ftype == STRING:
            text = [tag + _quoted(v) for v in vals]
        elif f.ftype == MEMBERS:
            text = [tag + "".join(f"{m:x}," for m in v) for v in vals]
        elif f.ftype == VERSION:
            text = [f"{tag}{v[0]:x}.{v[1]:x}.{v[2]:x}{_quoted(v[3])}" for v in vals]
        else:
            text = [f"{tag}{int(v):x}" for v in vals]
        if f.opt == OPT0:
            text = [t if v else "" for t, v in zip(text, vals)]
        pieces.append(text)
    return "".join(["".join(line) + "\n" for line in zip(*pieces)])


def format_record(rec: Rec, vals: dict) -> str:
    """One record line in short format (definitions and markers)."""
    out = [rec.short]
    for j, f in enumerate(rec.fields):
        v = vals.get(f.col, "" if f.ftype == STRING else 0)
        if f.opt == OPT0 and not v:
            continue
        out.append(f.short if j else "")
        if f.ftype == STRING:
            out.append(_quoted(v))
        elif f.ftype == MEMBERS:
            out.append("".join(f"{m:x}," for m in v))
        elif f.ftype == VERSION:
            out.append(f"{v[0]:x}.{v[1]:x}.{v[2]:x}{_quoted(v[3])}")
        else:
            out.append(f"{int(v):x}")
    return "".join(out) + "\n"
