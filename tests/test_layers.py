"""The rooms of the package and which way their imports point, checked on the source.

    __main__, cli, api                  (top: the command and the Python API)
    warm, info                          -> what is below (warm runs info's folds)
    analysis/ folds and their answers   -> engine (Comm, Sink, run, fold), display, model,
                                           errors, timeunit, kernels; never formats or output
    output/   parallel sinks, staging   -> engine (Comm), formats (codecs), model, dealing
    engine/   plan, order, exchange     -> model, errors, kernels, dealing, and of formats
                                           only the registry (formats/__init__.py) and the
                                           interface (formats/base.py)
    formats/  one package per format    -> model, errors, timeunit, kernels, version,
                                           dealing, formats.base; never engine or output
    dealing   items in runs to ranks    -> nothing of partrace (the engine's units, a
                                           format's listing in parts, the sinks' locations)
    display                             -> model (text for people)
    kernels/  lazy njit, reductions     -> nothing of partrace
    model, errors, timeunit, version    -> nothing of partrace (model: errors)

A format is one package: it may not import another format's package (shared
helpers live in formats/base.py or a module of formats/ that is no format).  No module
imports itself through others: the graph of imports, those inside functions included,
has no cycle.
"""
from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "partrace"
FORMATS = sorted(p.name for p in (PKG / "formats").iterdir()
                 if p.is_dir() and (p / "__init__.py").exists())


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources():
    return sorted(PKG.rglob("*.py"))


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in _sources()}


def _imports(path: Path) -> dict[str, int]:
    """The partrace modules ``path`` imports, at any depth of the file (a function's imports
    too), with the line of the first: ``from pkg import mod`` names the module ``pkg.mod``,
    ``from mod import name`` the module ``mod``."""
    modules = _modules()
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    out: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            names = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod
                     for a in node.names]
        else:
            continue
        for name in names:
            if name.startswith("partrace") and name != me:
                assert name in modules, f"{me} imports {name}, which is no module of partrace"
                out.setdefault(name, node.lineno)
    return out


def _room(module: str) -> str:
    parts = module.split(".")
    if len(parts) >= 3 and parts[1] == "formats" and parts[2] in FORMATS:
        return f"formats.{parts[2]}"
    if len(parts) >= 2:
        return parts[1]
    return ""       # the package itself (partrace/__init__.py)


BELOW_TOP = {"model", "errors", "timeunit", "version", "kernels", "display", "dealing", "engine",
             "formats", *(f"formats.{f}" for f in FORMATS), "output", "analysis"}
ALLOWED = {
    "model": {"errors"},
    "errors": set(),
    "timeunit": set(),      # what the time column counts, read from a trace's definitions
    "version": set(),       # the package's version, stamped into what it writes
    "kernels": set(),       # the lazy njit and shared reductions: below every layer
    "display": {"model"},   # text for people: names that are not valid UTF-8 shown readably
    # items dealt to ranks in runs: the engine's units of an ordered reader, a format's
    # listing in parts (dealt alike), an output sink's locations
    "dealing": set(),
    "engine": {"model", "errors", "kernels", "dealing", "formats"},  # ENGINE_SEES_OF_FORMATS
    "formats": {"model", "errors", "timeunit", "kernels", "version", "dealing",
                "formats"},  # formats/: base, registry, shared helpers
    "output": {"model", "errors", "timeunit", "kernels", "dealing", "engine", "formats",
               *(f"formats.{f}" for f in FORMATS)},
    # a profile, a timeline, clock checks: folds run by the engine over any format, answered
    # as rows; they read no format and write through no output sink
    "analysis": {"model", "errors", "timeunit", "kernels", "engine", "display"},
    "info": BELOW_TOP,
    "warm": BELOW_TOP | {"info"},     # warms what info and the folds compile
    "sizes": set(),         # "4G" read alike by --memory and the API's memory=
    "merging": BELOW_TOP,   # the one merge the command line and the API both run
    "cli": BELOW_TOP | {"info", "warm", "sizes", "merging"},
    "api": BELOW_TOP | {"info", "warm", "sizes", "merging"},
    "__main__": {"cli", "engine"},
    "": {"version", "api"},         # the package: its version, and the API on first use
}
# the only modules of formats/ the engine may import: the registry and the interface
ENGINE_SEES_OF_FORMATS = {"partrace.formats", "partrace.formats.base"}
# the engine's face to the folds of analysis/: ranks, sinks, running a merge or a fold
ANALYSIS_SEES_OF_ENGINE = {"partrace.engine.mpi", "partrace.engine.sink",
                           "partrace.engine.pipeline", "partrace.engine.fold"}


def test_every_room_has_rules():
    rooms = {_room(m) for m in _modules()}
    assert not {r for r in rooms if not r.startswith("formats.")} - set(ALLOWED)


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(PKG)))
def test_imports_point_one_way(path):
    me = _module_name(path)
    room = _room(me)
    allowed = ALLOWED["formats" if room.startswith("formats.") else room]
    bad = []
    for target in sorted(_imports(path)):
        there = _room(target)
        if there == room:
            continue
        if there not in allowed:
            bad.append(target)
        elif room == "engine" and there == "formats" and target not in ENGINE_SEES_OF_FORMATS:
            bad.append(target)
        elif room == "analysis" and there == "engine" and target not in ANALYSIS_SEES_OF_ENGINE:
            bad.append(target)
    assert not bad, f"{me} ({room or 'the package'}) imports {bad}"


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_cycles_are_found():
    """The search itself, on a graph with a known loop (a -> b -> c -> a) and a tail."""
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1, "d": 1}, "d": {}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b": 1}, "b": {}}) == []


def test_no_import_cycles():
    """A function-local import that closes a loop only hides it: the shared piece belongs in
    a module below both.  (Imports inside functions stay where they keep start-up cheap.)"""
    modules = _modules()
    graph = {m: _imports(p) for m, p in modules.items()}
    found = []
    for component in _cycles(graph):
        ties = [f"{a} -> {b} (line {graph[a][b]})" for a in component for b in graph[a]
                if b in component]
        found.append("; ".join(ties))
    assert not found, "import cycles:\n" + "\n".join(found)


def _strings(path: Path) -> list[str]:
    """Every string in the code of ``path`` (docstrings and the pieces of f-strings too)."""
    return [n.value for n in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _format_suffixes() -> set[str]:
    """The file suffixes the formats and the sinks name (".otf", ".parts", ...): read from
    their code, so that a new format's are known the day it comes."""
    owners = [*(PKG / "formats").glob("*/*.py"), *(PKG / "output").glob("*.py")]
    return {s for path in owners for s in _strings(path) if re.fullmatch(r"\.[a-z][a-z0-9]*", s)}


# suffixes the engine names for files of its own, whatever a format calls its files
ENGINE_OWN = {".bin"}       # a spilled run's columns (runs.py)


def test_engine_knows_no_format_by_name():
    suffixes = _format_suffixes() - ENGINE_OWN
    assert {".otf", ".parts", ".otf2"} <= suffixes      # the scan finds them
    for path in (PKG / "engine").rglob("*.py"):
        text = path.read_text()
        for name in FORMATS:
            assert f"formats.{name}" not in text and f'"{name}"' not in text, (path, name)
        for s in _strings(path):
            named = [x for x in suffixes if re.search(re.escape(x) + r"(?![a-z0-9])", s)]
            assert not named, f"{path.name} names {named} (ask the reader: source_files): {s!r}"
