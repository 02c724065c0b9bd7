"""DUMPI's predefined handle values and their names (dumpi/common/constants.h).

Columns keep the raw values; these maps go into ``Column.enum`` so tools
show names.  Values at or above the "first user" value are user handles.
"""
from __future__ import annotations


def _seq(*names: str, start: int = 0) -> dict[str, int]:
    return {n: i for i, n in enumerate(names, start)}


DATATYPE = _seq(
    "MPI_DATATYPE_ERROR", "MPI_DATATYPE_NULL", "MPI_CHAR", "MPI_SIGNED_CHAR",
    "MPI_UNSIGNED_CHAR", "MPI_BYTE", "MPI_WCHAR", "MPI_SHORT", "MPI_UNSIGNED_SHORT",
    "MPI_INT", "MPI_UNSIGNED", "MPI_LONG", "MPI_UNSIGNED_LONG", "MPI_FLOAT",
    "MPI_DOUBLE", "MPI_LONG_DOUBLE", "MPI_LONG_LONG_INT", "MPI_UNSIGNED_LONG_LONG",
    "MPI_LONG_LONG", "MPI_PACKED", "MPI_LB", "MPI_UB", "MPI_FLOAT_INT",
    "MPI_DOUBLE_INT", "MPI_LONG_INT", "MPI_SHORT_INT", "MPI_2INT", "MPI_LONG_DOUBLE_INT")
COMM = _seq("MPI_COMM_ERROR", "MPI_COMM_NULL", "MPI_COMM_WORLD", "MPI_COMM_SELF")
GROUP = _seq("MPI_GROUP_ERROR", "MPI_GROUP_NULL", "MPI_GROUP_EMPTY")
OP = _seq("MPI_OP_ERROR", "MPI_MAX", "MPI_MIN", "MPI_SUM", "MPI_PROD", "MPI_LAND",
          "MPI_BAND", "MPI_LOR", "MPI_BOR", "MPI_LXOR", "MPI_BXOR", "MPI_MINLOC",
          "MPI_MAXLOC", "MPI_REPLACE", "MPI_OP_NULL")
COMPARISON = _seq("MPI_COMPARISON_ERROR", "MPI_IDENT", "MPI_CONGRUENT", "MPI_SIMILAR",
                  "MPI_UNEQUAL")
TOPOLOGY = _seq("MPI_GRAPH", "MPI_CART", "MPI_UNDEFINED")
THREADLEVEL = _seq("MPI_THREADLEVEL_ERROR", "MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED",
                   "MPI_THREAD_SERIALIZED", "MPI_THREAD_MULTIPLE")
REQUEST = _seq("MPI_REQUEST_ERROR", "MPI_REQUEST_NULL")
ERRHANDLER = _seq("MPI_ERRHANDLER_ERROR", "MPI_ERRHANDLER_NULL")
KEYVAL = _seq("MPI_TAG_UB", "MPI_HOST", "MPI_IO", "MPI_WTIME_IS_GLOBAL", "MPI_UNIVERSE_SIZE",
              "MPI_LASTUSEDCODE", "MPI_APPNUM", "MPI_WIN_BASE", "MPI_WIN_SIZE",
              "MPI_WIN_DISP_UNIT")
FILE = {"MPI_FILE_NULL": 0}
INFO = {"MPI_INFO_NULL": 0}
SOURCE = {"MPI_ANY_SOURCE": -1, "MPI_ROOT": -2}
DEST = {"MPI_ROOT": -2}
TAG = {"MPI_ANY_TAG": -1}

# argument role (functable) -> enum shown for its raw values
ROLE_ENUM = {
    "datatype": DATATYPE, "comm": COMM, "group": GROUP, "op": OP,
    "comparison": COMPARISON, "topology": TOPOLOGY, "threadlevel": THREADLEVEL,
    "request": REQUEST, "iorequest": REQUEST, "errhandler": ERRHANDLER, "keyval": KEYVAL,
    "file": FILE, "info": INFO, "source": SOURCE, "dest": DEST, "tag": TAG,
}
