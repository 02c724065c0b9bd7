"""Regenerate ``functable.py`` from the upstream sst-dumpi sources.

Usage: ``python scripts/dumpi_maketable.py funclabels.h dumpiio.c``
(files from github.com/sstsimulator/sst-dumpi, dumpi/common/).  The table is
committed; this script only documents and repeats how it was derived: the
label enum gives ids and names, each ``dumpi_read_<name>`` gives the argument
order, widths (``GET_*`` macro) and root-only conditions.  Branches for
traces older than 0.6.9 are not taken (the current layout is kept).
"""
from __future__ import annotations

import re
import sys
from pprint import pformat

# GET_ macro -> (kind, role).  kind is the byte layout, role what it means.
SCALARS = {
    "GET_INT": ("i32", "int"), "get32": ("i32", "int"),
    "GET_DUMPI_TAG": ("i32", "tag"), "GET_DUMPI_SOURCE": ("i32", "source"),
    "GET_DUMPI_DEST": ("i32", "dest"), "GET_DUMPI_REQUEST": ("i32", "request"),
    "GET_DUMPIO_REQUEST": ("i32", "iorequest"),
    "GET_DUMPI_DATATYPE": ("u16", "datatype"), "GET_DUMPI_COMM": ("u16", "comm"),
    "GET_DUMPI_FILE": ("u16", "file"), "GET_DUMPI_GROUP": ("u16", "group"),
    "GET_DUMPI_INFO": ("u16", "info"), "GET_DUMPI_WIN": ("u16", "win"),
    "GET_DUMPI_ERRHANDLER": ("u16", "errhandler"), "GET_DUMPI_KEYVAL": ("u16", "keyval"),
    "GET_DUMPI_COMM_KEYVAL": ("u16", "comm_keyval"),
    "GET_DUMPI_TYPE_KEYVAL": ("u16", "type_keyval"),
    "GET_DUMPI_WIN_KEYVAL": ("u16", "win_keyval"),
    "GET_DUMPI_OP": ("u8", "op"), "GET_DUMPI_WIN_ASSERT": ("u8", "win_assert"),
    "GET_DUMPI_THREADLEVEL": ("u8", "threadlevel"), "GET_DUMPI_WHENCE": ("u8", "whence"),
    "GET_DUMPI_ORDERING": ("u8", "ordering"), "GET_DUMPI_FILEMODE": ("u8", "filemode"),
    "GET_DUMPI_COMPARISON": ("u8", "comparison"), "GET_DUMPI_TYPECLASS": ("u8", "typeclass"),
    "GET_DUMPI_TOPOLOGY": ("u8", "topology"), "GET_DUMPI_LOCKTYPE": ("u8", "locktype"),
    "GET_DUMPI_COMBINER": ("u8", "combiner"), "GET_INT64_T": ("i64", "int64"),
    "GET_DUMPI_STATUS": ("status", "status"),
}
ARRAYS = {
    "GET_INT_ARRAY_1": ("a32", "int"), "GET_DUMPI_REQUEST_ARRAY_1": ("a32", "request"),
    "GET_DUMPIO_REQUEST_ARRAY_1": ("a32", "iorequest"),
    "GET_DUMPI_ERRCODE_ARRAY_1": ("a32", "errcode"),
    "GET_DUMPI_DATATYPE_ARRAY_1": ("a16", "datatype"), "GET_DUMPI_INFO_ARRAY_1": ("a16", "info"),
    "GET_DUMPI_DISTRIBUTION_ARRAY_1": ("a8", "distribution"),
    "GET_INT_ARRAY_2": ("aa32", "int"), "GET_DUMPI_STATUS_ARRAY_1": ("status", "statuses"),
    "GET_CHAR_ARRAY_1": ("str", "string"), "GET_CHAR_ARRAY_2": ("str2", "string"),
    "GET_CHAR_ARRAY_3": ("str3", "string"),
}
COND = re.compile(r"if\(val->(\w+) == val->(\w+)\)\s*(.*)")
SCALAR = re.compile(r"val->([\w.]+) = (?:\(\w+\))?\s*(\w+)\(profile\);")
ARRAY = re.compile(r"(GET_\w+)\(profile, (.*)\);")


def labels(header: str) -> list[str]:
    body = re.search(r"typedef enum dumpi_function \{(.*?)\} dumpi_function;", header, re.S)[1]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    names = [n.strip().split("=")[0] for n in body.split(",") if n.strip()]
    return [("MPIO_" + n[7:]) if n.startswith("DUMPIO_") else "MPI_" + n[6:] for n in names]


def parse_reader(body: str) -> tuple[str, list]:
    label = re.search(r"STARTREAD\(profile, (\w+)\)", body)[1]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    # keep the branch for current versions only
    body = re.sub(r"if\(dumpi_have_version\([^)]*\)\) \{(.*?)\}\s*else \{.*?\}", r"\1", body, flags=re.S)
    body = re.sub(r"if\(! dumpi_have_version\([^)]*\)\)\s*get32\(profile\);", "", body)
    args = []
    if "getchararr(profile, &scratch" in body:        # MPI_Init / MPI_Init_thread argv
        args.append(("argv", "argv", "string", None))    # u32 argc, argc x char array
        body = re.sub(r"val->argc = get32\(profile\);.*?val->argv = NULL;\s*\}", "", body, flags=re.S)
    for line in body.splitlines():
        line = line.strip()
        if not line or line.startswith(("STARTREAD", "ENDREAD", "return")) or line in "{}":
            continue
        cond = None
        m = COND.match(line)
        if m:
            cond, line = (m[1], m[2]), m[3]
        m = SCALAR.match(line)
        if m:
            kind, role = SCALARS[m[2]]
            args.append((m[1], kind, role, cond))
            continue
        m = ARRAY.match(line)
        if not m:
            raise ValueError(f"{label}: cannot parse {line!r}")
        kind, role = ARRAYS[m[1]]
        name = m[2].split(",")[-1].strip().replace("val->", "")
        args.append((name, kind, role, cond))
    return label, args


def main(funclabels_h: str, dumpiio_c: str) -> str:
    names = labels(open(funclabels_h).read())
    src = open(dumpiio_c).read()
    by_label = {}
    for body in re.findall(r"^int dumpio?_read_\w+\(.*?\n(.*?)^}", src, re.M | re.S):
        label, args = parse_reader(body)
        by_label[label.replace("DUMPI_", "MPI_", 1) if label.startswith("DUMPI_")
                 else "MPIO_" + label[7:]] = args
    table = [(i, n, tuple(by_label[n]) if n in by_label else None) for i, n in enumerate(names)]
    return ('"""DUMPI function labels and argument layouts (generated by scripts/dumpi_maketable.py).\n\n'
            'FUNCTIONS[id] = (id, name, args or None); args are (name, kind, role, cond)\n'
            'in byte order; cond = (a, b): present only when arg a == arg b (root-only).\n'
            'None = a label with no record of its own (footer slot, end of stream).\n"""\n'
            f"FUNCTIONS = {pformat(table, width=100)}\n")


if __name__ == "__main__":
    sys.stdout.write(main(*sys.argv[1:3]))
