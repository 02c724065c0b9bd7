"""Print a compact table of the failing fuzz cases at the end of the run."""
from __future__ import annotations


def pytest_terminal_summary(terminalreporter):
    from .driver import RESULTS
    if not RESULTS:
        return
    tr = terminalreporter
    tr.section(f"fuzz failures ({len(RESULTS)})")
    tr.write_line("ranks | case | damage | exit | problems | stderr")
    for nranks, row in RESULTS:
        tr.write_line(f"{nranks} | {row}")
