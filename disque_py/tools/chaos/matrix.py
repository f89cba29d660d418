"""`make chaos`: the whole matrix of fault sets x workloads, run and tabled.

Owns the rows (ROWS: a fault set, a workload, the options that go with
them, the server) and running them; table.py turns their runs' JSON
reports into one markdown table. Each row's seeds run one after another, each as its own `disque-py
chaos` process (`python -m disque_py.tools.cli chaos ... --json FILE`), so
that a run keeps its own signal handling, cleanup and replay command, a
crash or a leak of one run cannot spoil the next, and a row is measured
exactly as a user's single run would be. Everything a matrix writes goes
under one directory (chaos-reports/matrix-TIME/, git ignores
chaos-reports/): the table (matrix.md, copied to chaos-reports/matrix-TIME.md),
each run's output and JSON report, and the directories of the runs that
failed (kept by `chaos` itself). Rules kept: one run at a time (the
machine's cores are the budget); the seeds are 1..N unless told, so a
table can be reproduced; Disque C's rows run only when its binary is given,
and are listed as not run otherwise; the exit status is 1 if any row that
ran failed (a lost acknowledged job, an unexpected delivery, a broken
promise, a crash, or a run that did not finish with a report).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from disque_py.tools.chaos.disque_c import OURS, SERVER_NAME
from disque_py.tools.chaos.report import REPORTS_DIR
from disque_py.tools.chaos.table import Outcome, RowResult, write_table

ALL_KINDS = "kill,pause,partition,netem,clock,powerloss,corrupt,membership"
# A run's own deadlines (drain 180 s, recovery and mesh 60 s each, settle
# 30 s) plus start-up: past this beyond its duration, a run is stuck.
RUN_MARGIN_S = 600
# Each fault phase's length is the row's; the rest of a run (start, heal,
# drain, settle) took about this long in the default matrix's runs.
OVERHEAD_ESTIMATE_S = 20


@dataclass(frozen=True)
class Row:
    """One line of the table: a fault set under a workload, on one server."""

    name: str                          # what CHAOS_ROWS / --rows picks it by
    faults: str                        # --faults
    workload: str = "plain"
    label: str = ""                    # the fault set as the table shows it (default: faults)
    options: tuple[str, ...] = ()      # the row's other chaos options
    nodes: int = 5
    disque_c: bool = False

    @property
    def fault_set(self) -> str:
        return self.label or self.faults

    @property
    def server(self) -> str:
        return SERVER_NAME if self.disque_c else OURS


NO_AOF = ("--no-appendonly",)
# kill,pause under every workload; then each other kind of fault under the
# plain load with the AOF (appendfsync always unless the row says), and all
# of them at once; then Disque C where it can run the same row.
ROWS = (
    Row("kp-plain", "kill,pause"),
    Row("kp-backlog", "kill,pause", "backlog", "kill,pause (no AOF)", NO_AOF),
    Row("kp-dedup", "kill,pause", "dedup"),
    Row("kp-maxdeliveries", "kill,pause", "maxdeliveries"),
    Row("kp-waitjob", "kill,pause", "waitjob"),
    Row("kp-qrequeue", "kill,pause", "qrequeue"),
    Row("network", "partition,netem"),
    Row("clock", "clock"),
    Row("powerloss-always", "powerloss", label="powerloss (fsync always)"),
    Row("powerloss-everysec", "powerloss", label="powerloss (fsync everysec)",
        options=("--appendfsync", "everysec")),
    Row("corrupt-membership", "corrupt,membership"),
    Row("all", ALL_KINDS, label="all kinds at once"),
    Row("c-kp", "kill,pause", disque_c=True),
    Row("c-network", "partition,netem", disque_c=True),
    Row("c-clock", "clock", disque_c=True),
)


def pick_rows(names: str) -> list[Row]:
    """`--rows a,b` (or "" for all), in the matrix's order; ValueError naming
    the known rows for a name that is not one."""
    wanted = [word.strip() for word in names.split(",") if word.strip()]
    unknown = [name for name in wanted if name not in {row.name for row in ROWS}]
    if unknown:
        raise ValueError(f"unknown row(s) {', '.join(unknown)}; known: "
                         f"{', '.join(row.name for row in ROWS)}")
    return [row for row in ROWS if not wanted or row.name in wanted]


def chaos_command(row: Row, seed: int, seconds: float, report: Path, run_dir: Path,
                  disque_c: str | None) -> list[str]:
    command = [sys.executable, "-m", "disque_py.tools.cli", "chaos", "--nodes", str(row.nodes),
               "--duration", f"{seconds:g}", "--seed", str(seed), "--faults", row.faults,
               "--workload", row.workload, *row.options, "--dir", str(run_dir),
               "--json", str(report)]
    if row.disque_c:
        command += ["--disque-c", disque_c]
    return command


def run_row(row: Row, seeds: list[int], seconds: float, out_dir: Path,
            disque_c: str | None, echo: Callable[[str], None]) -> list[Outcome]:
    outcomes = []
    for seed in seeds:
        stem = out_dir / f"{row.name}-seed{seed}"
        report_path, output_path = stem.with_suffix(".json"), stem.with_suffix(".log")
        command = chaos_command(row, seed, seconds, report_path, out_dir / "runs", disque_c)
        echo(f"matrix: {row.name} seed {seed}: {' '.join(command[2:])}")
        began = time.monotonic()
        with open(output_path, "w") as output:
            try:
                status = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL,
                                        timeout=seconds + RUN_MARGIN_S).returncode
            except subprocess.TimeoutExpired:
                status = -1
        report = json.loads(report_path.read_text()) if report_path.exists() else None
        outcomes.append(Outcome(seed, report, status, output_path))
        verdict = "PASS" if status == 0 else f"FAIL (exit {status}; see {output_path})"
        echo(f"matrix: {row.name} seed {seed}: {verdict} in {time.monotonic() - began:.0f}s")
    return outcomes


def matrix_dir(now: float | None = None) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return Path(REPORTS_DIR) / f"matrix-{stamp}"


def estimate_minutes(rows: list[Row], seeds: int, seconds: float) -> float:
    return len(rows) * seeds * (seconds + OVERHEAD_ESTIMATE_S) / 60


def run_matrix(rows: list[Row], seeds: list[int], seconds: float, disque_c: str | None,
               echo: Callable[[str], None] = print, out_dir: Path | None = None) -> bool:
    """Run every row (Disque C's only with its binary), write the table;
    True if every row that ran passed."""
    out_dir = (out_dir or matrix_dir()).resolve()     # the nodes run in their own directories
    out_dir.mkdir(parents=True, exist_ok=True)
    runnable = [row for row in rows if disque_c or not row.disque_c]
    echo(f"matrix: {len(runnable)} rows x {len(seeds)} seeds x {seconds:g}s, about "
         f"{estimate_minutes(runnable, len(seeds), seconds):.0f} minutes; in {out_dir}")
    results = [RowResult(row, run_row(row, seeds, seconds, out_dir, disque_c, echo)
                         if row in runnable else []) for row in rows]
    table = write_table(results, seconds, out_dir, command_line())
    echo(f"matrix: table in {table}")
    return all(result.passed for result in results if result.outcomes)


def command_line() -> str:
    return " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]])
