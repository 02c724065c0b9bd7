"""Write docs/cli.md, the command-line reference, from partrace's argparse parsers.

    python scripts/gen_cli_docs.py            # rewrite docs/cli.md
    python scripts/gen_cli_docs.py --check    # exit 1 if docs/cli.md differs from the parsers

The page is built from the parsers' actions (not from argparse's help text), so it does
not depend on the terminal's width or on the Python version's help layout.
"""
from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "cli.md"
COMMAND = "python scripts/gen_cli_docs.py"
WIDTH = 96    # the synopsis is wrapped here, whatever the terminal


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """name -> (parser, one-line help), in the order the commands were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return {name: (p, helps.get(name, "")) for name, p in action.choices.items()}
    return {}


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        return action.metavar
    if action.choices is not None:
        return "{" + ",".join(map(str, action.choices)) + "}"
    return action.dest.upper() if action.option_strings else action.dest.upper()


def _takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0


def _synopsis_item(action: argparse.Action) -> str:
    if not action.option_strings:
        name = _metavar(action)
        return f"[{name} ...]" if action.nargs == "*" else name
    opt = action.option_strings[0]
    text = f"{opt} {_metavar(action)}" if _takes_value(action) else opt
    return text if action.required else f"[{text}]"


def _visible(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions
            if a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _option_row(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(action.option_strings)
        name = f"`{names} {_metavar(action)}`" if _takes_value(action) else f"`{names}`"
    else:
        name = f"`{_metavar(action)}`"
    notes = []
    if action.required and action.option_strings:
        notes.append("required")
    if action.nargs == "*":
        notes.append("any number")
    help = action.help or ""
    if isinstance(action, argparse._AppendAction) and "repeatable" not in help:
        notes.append("repeatable")
    if (action.default not in (None, False, [], argparse.SUPPRESS) and _takes_value(action)
            and "default" not in help):
        notes.append(f"default `{action.default}`")
    extra = f" ({'; '.join(notes)})" if notes else ""
    if not help and not action.option_strings:
        help = "the input trace (file or folder)"
    return f"| {_cell(name)} | {_cell(help)}{extra} |"


def _exclusive_note(parser: argparse.ArgumentParser) -> list[str]:
    lines = []
    for group in parser._mutually_exclusive_groups:
        names = " and ".join(f"`{max(a.option_strings, key=len)}`" for a in group._group_actions)
        lines.append(f"{names} exclude each other.")
    return lines


def render() -> str:
    """The whole page, as the parsers define it now."""
    from partrace.cli import build_parser
    parser = build_parser()
    out = ["# Command-line reference", "",
           f"Generated from `partrace/cli.py` by `{COMMAND}`; do not edit by hand",
           "(`tests/test_cli_docs.py` fails when this page and the parsers differ).", "",
           parser.description or "", "", "| command | what it does |", "|---|---|"]
    commands = _subcommands(parser)
    out += [f"| [`{name}`](#partrace-{name}) | {_cell(help)} |"
            for name, (_, help) in commands.items()]
    out += ["", "`partrace --version` prints the version. Every command runs as a plain process "
            "or under `mpiexec`/`srun`."]
    for name, (sub, help) in commands.items():
        actions = _visible(sub)
        items = [_synopsis_item(a).replace(" ", "\0") for a in actions]   # wrap between items
        synopsis = textwrap.fill(" ".join(items), width=WIDTH, break_on_hyphens=False,
                                 initial_indent=f"partrace {name} ",
                                 subsequent_indent=" " * len(f"partrace {name} "))
        synopsis = synopsis.replace("\0", " ")
        out += ["", f"## partrace {name}", "", sub.description or help, "",
                "```", synopsis, "```", "", "| argument | meaning |", "|---|---|"]
        out += [_option_row(a) for a in actions]
        note = _exclusive_note(sub)
        if note:
            out += [""] + note
    if parser.epilog:
        out += ["", "## Examples", "", "```"] + parser.epilog.strip().splitlines()[1:] + ["```"]
    return "\n".join(line.rstrip() for line in out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="compare docs/cli.md with the parsers; exit 1 if they differ")
    ap.add_argument("--output", type=Path, default=TARGET, help="the page (default docs/cli.md)")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text() if args.output.is_file() else ""
        if current != text:
            print(f"{args.output} differs from partrace/cli.py's parsers: run `{COMMAND}`",
                  file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
