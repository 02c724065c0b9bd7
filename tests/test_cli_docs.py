"""docs/cli.md is what scripts/gen_cli_docs.py makes from the parsers now."""
import argparse
import importlib.util
import os
import subprocess
import sys

from tests.conftest import ROOT


def generator():
    path = ROOT / "scripts" / "gen_cli_docs.py"
    spec = importlib.util.spec_from_file_location("gen_cli_docs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_cli_reference_matches_the_parsers():
    text = (ROOT / "docs" / "cli.md").read_text()
    assert text == generator().render(), (
        "docs/cli.md differs from partrace/cli.py's parsers: run `python scripts/gen_cli_docs.py`")


def test_reference_lists_every_command_and_option():
    from partrace.cli import build_parser
    text = (ROOT / "docs" / "cli.md").read_text()
    commands = generator()._subcommands(build_parser())
    assert set(commands) >= {"merge", "convert", "info", "profile", "comm", "dump", "timeline",
                             "warm"}
    for name, (sub, _) in commands.items():
        section = text.split(f"\n## partrace {name}\n", 1)[1].split("\n## ", 1)[0]
        for action in sub._actions:
            if action.help == argparse.SUPPRESS:      # hidden: for partrace's own use
                continue
            for opt in action.option_strings:
                if opt not in ("-h", "--help"):
                    assert opt in section, (name, opt)


def test_output_does_not_depend_on_the_terminal_width(tmp_path):
    outputs = []
    for columns in ("40", "250"):
        out = tmp_path / f"cli{columns}.md"
        env = dict(os.environ, COLUMNS=columns, PYTHONPATH=str(ROOT))
        r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_cli_docs.py"),
                            "--output", str(out)], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1]


def test_check_mode_names_the_command_to_regenerate(tmp_path):
    stale = tmp_path / "cli.md"
    stale.write_text("# stale\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_cli_docs.py"), "--check",
                        "--output", str(stale)], env=env, capture_output=True, text=True)
    assert r.returncode == 1 and "python scripts/gen_cli_docs.py" in r.stderr
