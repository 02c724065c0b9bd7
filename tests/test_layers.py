"""The rooms of the package and which way their imports point, checked on the source.

    cli, api, info                      (top: may use everything below)
    output/   parallel sinks, staging   -> engine (Comm), formats (codecs), model
    engine/   plan, order, exchange     -> model, errors, kernels, formats.base (the interface only)
    formats/  one package per format    -> model, errors, timeunit, kernels, formats.base; never engine
                                           or output
    kernels/  lazy njit, reductions     -> nothing of partrace
    model, errors, timeunit             -> nothing of partrace

A format is one package: it may not import another format's package (shared
helpers live in formats/base.py or a module of formats/ that is no format).
"""
from __future__ import annotations

import ast
import re
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


def _imports(path: Path) -> set[str]:
    """Absolute names of the partrace modules ``path`` imports (at any depth of the file)."""
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("partrace"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.startswith("partrace"):
                out.add(mod)
                out.update(f"{mod}.{a.name}" for a in node.names)
    return out


def _room(module: str) -> str:
    parts = module.split(".")
    if len(parts) >= 3 and parts[1] == "formats" and parts[2] in FORMATS:
        return f"formats.{parts[2]}"
    if len(parts) >= 2:
        return parts[1]
    return ""


ALLOWED = {
    "model": {"errors"},
    "errors": set(),
    "timeunit": set(),      # what the time column counts, read from a trace's definitions
    "kernels": set(),       # the lazy njit and shared reductions: below every layer
    "engine": {"model", "errors", "kernels", "formats"},   # formats: base.py and the registry only
    "version": set(),       # the package's version, stamped into what it writes
    "formats": {"model", "errors", "timeunit", "kernels", "version", "formats"},  # formats/: base,
    # registry, shared helpers
    "output": {"model", "errors", "timeunit", "kernels", "engine", "formats",
               *(f"formats.{f}" for f in FORMATS)},
}


def _sources():
    return sorted(PKG.rglob("*.py"))


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(PKG)))
def test_imports_point_one_way(path):
    me = _module_name(path)
    room = _room(me)
    bad = []
    for target in sorted(_imports(path)):
        there = _room(target)
        if there in ("", room):
            continue
        if room.startswith("formats."):
            allowed = ALLOWED["formats"]
        else:
            allowed = ALLOWED.get(room)
        if allowed is None:             # cli, api, info, __main__: the top may use everything
            continue
        if there not in allowed:
            bad.append(target)
    assert not bad, f"{me} ({room}) imports {bad}"


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
