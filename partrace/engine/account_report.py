"""Every rank's account, met on rank 0 once at the end: the closing summary line and the
``--stats`` JSON.  One gather of one small dict per rank (its phases and windows), no
message between other pairs of ranks."""
from __future__ import annotations

import json
import os

from . import accounts
from .mpi import Comm


def gather(comm: Comm) -> list[dict] | None:
    """Collective: close this rank's account; every rank's report on rank 0 (None
    elsewhere, and on every rank when no account was kept)."""
    account = accounts.end()
    if account is None:     # the same on every rank: the CLI begins one on all or none
        return None
    return comm.gather(account.report())


def spread(reports: list[dict], field: str) -> tuple[float, float, float]:
    """min, mean, max over ranks of a rank total."""
    values = [r[field] for r in reports]
    return min(values), sum(values) / len(values), max(values)


def working(report: dict) -> float:
    """Wall time not spent waiting in MPI: busy, reading, or off the CPU."""
    return report["wall_s"] - report["mpi_wait_s"]


def slowest(reports: list[dict]) -> dict:
    """The rank the others wait for: the most time not waiting in MPI (the lowest rank
    on a tie).  Busy time alone would miss a rank slowed by its reads."""
    return max(reports, key=lambda r: (working(r), -r["rank"]))


def summary_line(reports: list[dict]) -> str:
    busy = spread(reports, "busy_s")
    wait = spread(reports, "mpi_wait_s")
    last = slowest(reports)
    other = max(0.0, working(last) - last["busy_s"])
    said = output(reports).get("summary")
    return (f"partrace: per rank: busy {_mmm(busy)} s, waiting in MPI {_mmm(wait)} s "
            f"(min / mean / max); slowest rank {last['rank']}: {last['busy_s']:.2f} s busy, "
            f"{other:.2f} s in I/O or off the CPU, {last['mpi_wait_s']:.2f} s in MPI"
            + (f"; {said}" if said else ""))


def output(reports: list[dict]) -> dict:
    """How the output was written, as rank 0 (the rank that publishes it) noted it."""
    return reports[0].get("output") or {} if reports else {}


def _mmm(values) -> str:
    return " / ".join(f"{v:.2f}" for v in values)


def stats(reports: list[dict]) -> dict:
    """The ``--stats`` document: a summary, and every rank's totals, phases and windows."""
    ranks = [{k: v for k, v in r.items() if k != "slices"} for r in reports]
    summary = {field: dict(zip(("min", "mean", "max"), spread(reports, field)))
               for field in accounts.FIELDS}
    summary["slowest_rank"] = slowest(reports)["rank"]
    summary["busy_balance"] = summary["busy_s"]["mean"] / max(summary["busy_s"]["max"], 1e-9)
    summary["output"] = output(reports)
    return {"ranks_count": len(reports), "fields": list(accounts.FIELDS),
            "summary": summary, "ranks": ranks}


def write_stats(path: str | os.PathLike, reports: list[dict]) -> None:
    """The stats document as JSON at ``path``."""
    write_whole(path, json.dumps(stats(reports), indent=1).encode() + b"\n")


def write_whole(path: str | os.PathLike, data: bytes) -> None:
    """``data`` at ``path``, whole or not at all: written aside, then renamed into place
    (an OSError names ``path``)."""
    tmp = f"{path}.partial"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise OSError(exc.errno, exc.strerror, os.fspath(path)) from None
