"""The README and docs/ say what the code does: their commands exist and run as written.

The quick start's lines run in one shell, in a scratch folder that looks like the
repository root (tests/ and .venv/ linked), so that the outputs land there.
``scripts/demo`` is left out: it installs into .venv (pip) before running the
same commands; the test suite runs in that .venv already.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, mpiexec

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))     # docs/results/ is written by the benchmarks


def section(title: str) -> str:
    return README.read_text().split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def quick_start() -> list[str]:
    block = next(body for lang, body in code_blocks(section("Quick start")) if lang == "sh")
    return [line.split("  #")[0].rstrip() for line in block.splitlines() if line.strip()]


def scratch_root(tmp_path: Path) -> dict:
    """tmp_path made to look like the repository root; the environment to run there."""
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    env = {k: v for k, v in os.environ.items() if k not in ("PARTRACE_MPI", "PARTRACE_FORMATS")}
    env["PYTHONPATH"] = str(ROOT)   # this checkout, whatever the .venv's editable install is
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    return env


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced code block, in order."""
    blocks, lang, body = [], None, []
    for line in text.splitlines():
        if line.startswith("```"):
            if lang is None:
                lang, body = line[3:].strip(), []
            else:
                blocks.append((lang, "\n".join(body)))
                lang = None
        elif lang is not None:
            body.append(line)
    return blocks


def partrace_lines(text: str) -> list[list[str]]:
    """The partrace command lines of the text's sh and plain code blocks, as words
    (a launcher before `partrace` dropped, comments cut, `[...]` option lists kept)."""
    lines = []
    for lang, block in code_blocks(text):
        if lang not in ("", "sh"):
            continue
        command = None
        for raw in block.splitlines():
            line = raw.split("  #")[0].strip()
            m = re.search(r"(?:^|\s)partrace\s+(\w+)(.*)$", line)
            if m and not line.startswith(("sbatch", "srun")):
                command, rest = [m[1]], m[2]
                lines.append(command)
            elif command is not None and raw.startswith(" ") and line:   # a continuation
                rest = line
            else:
                command = None
                continue
            command += re.findall(r"(?<![\w-])(-{1,2}[a-z][\w-]*)", rest)
    return lines


def test_readme_is_short_and_leads_with_install_quick_start_and_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 300
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[:3] == ["Install", "Quick start", "Commands"], headings


def test_quick_start_block_is_found_and_starts_with_the_demo():
    lines = quick_start()
    assert lines[0] == "scripts/demo" and (ROOT / "scripts" / "demo").is_file()
    assert any(line.startswith("mpiexec -n 4 partrace merge") for line in lines)
    # every output goes to the scratch folder out/, which git ignores
    outputs = [shlex.split(line)[shlex.split(line).index("-o") + 1]
               for line in lines if " -o " in line]
    assert outputs and all(o.startswith("out/") for o in outputs), outputs
    assert "/out/" in (ROOT / ".gitignore").read_text().split()


def test_every_command_and_option_shown_exists():
    import argparse

    from partrace.cli import build_parser
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    shown = set()
    for path in [README] + DOCS:
        for words in partrace_lines(path.read_text()):
            command, options = words[0], words[1:]
            assert command in subs, (path.name, command)
            known = {o for a in subs[command]._actions for o in a.option_strings}
            unknown = [o for o in options if o not in known]
            assert not unknown, (path.name, command, unknown)
            shown.add(command)
    assert shown >= set(subs), set(subs) - shown      # the README shows every command


def test_links_to_files_exist():
    for path in [README] + DOCS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
            if not re.match(r"\w+://", target):
                assert (path.parent / target).exists(), (path.name, target)


def test_docs_hold_no_session_numbers_issue_numbers_or_commit_hashes():
    for path in [README] + DOCS:
        text = path.read_text()
        assert not re.search(r"\bsessions? \d+", text, re.I), path.name
        assert not re.search(r"\bissues? #?\d+", text, re.I), path.name
        hashes = [w for w in re.findall(r"\b[0-9a-f]{7,40}\b", text)
                  if re.search(r"[a-f]", w) and re.search(r"\d", w)]
        assert not hashes, (path.name, hashes)


def test_package_description_names_every_input_and_output():
    import partrace
    from partrace import formats, output
    pyproject = (ROOT / "pyproject.toml").read_text()
    description = re.search(r'^description = "([^"]*)"$', pyproject, re.M)[1]
    names = {"otf": "OTF", "otf2": "OTF2", "dumpi": "DUMPI", "ovni": "ovni", "ross": "ROSS",
             "hdf5": "HDF5", "perfetto": "Perfetto", "chrome": "Chrome JSON"}
    wanted = [names[n] for n in list(formats.BUILTIN) + list(output.OUTPUTS)]
    for text in (description, partrace.__doc__.split("\n\n")[0]):
        missing = [w for w in wanted if not re.search(rf"\b{re.escape(w)}\b", text)]
        assert not missing, (text, missing)


def test_python_example_runs_from_the_repository_root(tmp_path):
    block = next(body for lang, body in code_blocks(README.read_text()) if lang == "python")
    env = scratch_root(tmp_path)
    (tmp_path / "out").mkdir()
    r = subprocess.run([sys.executable, "-c", block + "\nprint(len(df), len(events))"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["5972", "5972"]     # ring8's events, read both ways
    assert (tmp_path / "out" / "ring8.h5").is_file()


@pytest.mark.slow
@pytest.mark.mpi
def test_quick_start_commands_run_as_written(tmp_path):
    if mpiexec() is None:
        pytest.fail("mpiexec not found: install the test extras (pip install -e '.[mpich,test]')")
    env = scratch_root(tmp_path)
    script = "set -eu\n" + "\n".join(line for line in quick_start() if line != "scripts/demo")
    r = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    out = tmp_path / "out"
    assert (out / "ring8.h5").is_file() and (out / "back.otf").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".venv", "out", "tests"]
    master = (out / "r3.otf").read_text()
    assert len(set(re.findall(r"^(\d+):", master, re.M))) == 3, master   # 3 streams
    assert "rank 0" in r.stdout and "MPI_Recv" in r.stdout     # comm and profile answered

    def info(path):
        p = subprocess.run([sys.executable, "-m", "partrace", "info", str(path), "--json"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)
    original = info(tmp_path / "tests/data/otf/ring8/trace/ring8.otf")
    for name in ("ring8.h5", "back.otf", "r3.otf"):
        got = info(out / name)
        assert got["events"] == original["events"] > 0, name
        assert got["events_per_kind"] == original["events_per_kind"], name
