"""Shared by the benchmarks that put disque-py beside Disque 1.0-rc1 (Disque C)
in the same run: bench_engine.py, bench_cluster.py, bench_aof.py and
bench_aof_load.py.

What this module owns:
- the servers compared: Disque C, when `--disque PATH` (or DISQUE_BINARY)
  names its disque-server, and disque-py (common.OriginalDisque and
  common.DisqueServer), and the labels PY and C their figures go under;
- the compiled loader, benchmarks/loader/cycle.c: built with `cc -O2` into a
  scratch directory, run with its "measuring" handshake while the servers'
  CPU is measured over the same window;
- Row: one line of a comparison table, each server's figure per round, the
  median of the per-round ratios disque-py / Disque C with their range, and
  the target that ratio (or disque-py's own figure) must meet; the summary,
  per-round and details tables;
- the versions of what ran (the commit disque-py runs from, cc, Disque C).

common.py holds what every benchmark uses (servers, redis-benchmark, /proc,
tables); this module only what the comparisons with Disque C add.
"""

from __future__ import annotations

import math
import os
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from common import (REPO_ROOT, CpuMeter, DisqueServer, OriginalDisque, median, print_table,
                    ratio)

PY = DisqueServer.label
C = OriginalDisque.label
SHORT = {C: "C", PY: "py"}
LOADER_SOURCE = Path(__file__).resolve().parent / "loader" / "cycle.c"
COMPILER = "cc"


# -------------------------------------------------------------------- servers

def add_disque_option(parser) -> None:
    parser.add_argument("--disque", default=os.environ.get("DISQUE_BINARY", ""),
                        help="path of Disque 1.0-rc1's disque-server (default $DISQUE_BINARY); "
                             "without it, disque-py only")


def server_kinds(disque_binary: str) -> list:
    """The server classes to measure: Disque C first when there is one."""
    if not disque_binary:
        return [DisqueServer]
    if not os.access(disque_binary, os.X_OK):
        raise SystemExit(f"--disque {disque_binary}: not an executable")
    OriginalDisque.binary = disque_binary
    return [OriginalDisque, DisqueServer]


# --------------------------------------------------------------------- loader

def compile_loader(directory: Path) -> tuple[Path, list[str]]:
    """loader/cycle.c built into `directory`; returns the binary and the command."""
    binary = directory / "cycle"
    cmd = [COMPILER, "-O2", "-o", str(binary), str(LOADER_SOURCE)]
    subprocess.run(cmd, check=True)
    return binary, cmd


@dataclass
class LoaderRun:
    """What the loader printed (its rate and own CPU, as numbers) and the
    servers' CPU over its measured window: % of one core, user and system s."""

    fields: dict[str, float]
    server_cpu: float
    server_user_s: float
    server_system_s: float


def run_loader(cmd: list[str], server_pids: Sequence[int]) -> LoaderRun:
    """Run the loader; measure the servers' CPU from its "measuring" line to its result."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as proc:
        started = proc.stdout.readline().strip() == "measuring"
        meter = CpuMeter(*server_pids)
        result = proc.stdout.readline()
        server_cpu = meter.percent()
        user, system = meter.user_system()
    if not started or proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} failed ({proc.returncode})")
    fields = {key: float(value) for key, value in (item.split("=") for item in result.split())}
    return LoaderRun(fields, server_cpu, user, system)


# ----------------------------------------------------------------------- rows

@dataclass
class Row:
    """One line of the table: each server's value, one per round (or run).

    The target is on the median of the per-round ratios disque-py / Disque C,
    at least `at_least` (rates) or at most `at_most` (latency, CPU: lower is
    better), or on disque-py's own median, at most `value_at_most`; a row
    with none is shown for information."""

    name: str
    target: str = ""                     # shown in the target column
    at_least: float | None = None
    at_most: float | None = None
    value_at_most: float | None = None
    values: dict[str, list[float]] = field(default_factory=dict)
    server_cpu: dict[str, list[float]] = field(default_factory=dict)
    loader_cpu: dict[str, list[float]] = field(default_factory=dict)
    loader_user: dict[str, list[float]] = field(default_factory=dict)
    details: dict[str, dict] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)

    def add(self, label: str, value: float, server_cpu: float | None = None,
            loader_cpu: float | None = None, loader_user: float | None = None) -> None:
        self.values.setdefault(label, []).append(value)
        if server_cpu is not None:
            self.server_cpu.setdefault(label, []).append(server_cpu)
            self.loader_cpu.setdefault(label, []).append(loader_cpu)
        if loader_user is not None:
            self.loader_user.setdefault(label, []).append(loader_user)

    def ratios(self, ours: str = PY, theirs: str = C) -> list[float]:
        """Per round, ours / theirs (rounds paired by their index)."""
        return [ratio(a, b) for a, b in zip(self.values.get(ours, []),
                                            self.values.get(theirs, []))]

    def met(self) -> str:
        if self.value_at_most is not None:
            return "met" if median(self.values[PY]) <= self.value_at_most else "missed"
        if self.at_least is None and self.at_most is None:
            return ""
        if not self.ratios():
            return "n/a"
        value = median(self.ratios())
        ok = value >= self.at_least if self.at_least is not None else value <= self.at_most
        return "met" if ok else "missed"


def value_cell(row: Row, label: str) -> str:
    values = row.values.get(label)
    if not values:
        return "-"
    return number_text(median(values))


def number_text(value: float) -> str:
    """Three significant figures or so for small values, whole numbers from 100."""
    if value < 1:
        return f"{value:.3f}"
    return f"{value:.2f}" if value < 10 else f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def ratio_cell(row: Row, ours: str = PY, theirs: str = C) -> str:
    ratios = [r for r in row.ratios(ours, theirs) if not math.isnan(r)]   # nan: theirs was 0
    if not ratios:
        return "-"
    if len(ratios) == 1:
        return f"{ratios[0]:.2f}x"
    return f"{median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"


def cpu_cell(labels: Sequence[str], per_label: dict[str, list[float]],
             user: dict[str, list[float]] | None = None) -> str:
    """Median CPU % of each server's runs, in the order of `labels`; with
    `user`, its user-space part."""
    if not per_label:
        return ""
    cells = []
    for label in labels:
        cell = f"{median(per_label[label]):.0f}%" if label in per_label else "-"
        if user and label in user:
            cell += f" (user {median(user[label]):.0f}%)"
        cells.append(cell)
    return " / ".join(cells)


def row_labels(rows: Sequence[Row]) -> list[str]:
    """Every server label in the rows: Disque C, disque-py, then any other."""
    seen = dict.fromkeys(label for row in rows for label in row.values)
    return [label for label in (C, PY) if label in seen] + [
        label for label in seen if label not in (C, PY)]


def print_summary(rows: Sequence[Row], title: str) -> None:
    """Each server's median, the ratio disque-py / Disque C (and any other
    server / disque-py), the target, and the server and loader CPU."""
    measured = [row for row in rows if row.values]
    labels = row_labels(measured)
    others = [label for label in labels if label not in (C, PY)]
    shorts = " / ".join(SHORT.get(label, label) for label in labels)
    print_table(["load", *labels, "ratio (range)", *(f"{SHORT.get(o, o)} / py" for o in others),
                 "target", f"server CPU {shorts}", f"loader CPU {shorts}"],
                [[row.name, *(value_cell(row, label) for label in labels), ratio_cell(row),
                  *(ratio_cell(row, other, PY) for other in others),
                  f"{row.target}: {row.met()}" if row.target else "",
                  cpu_cell(labels, row.server_cpu),
                  cpu_cell(labels, row.loader_cpu, row.loader_user)] for row in measured],
                title=title)


def print_latest(row: Row) -> None:
    """One progress line: each server's latest value of the row."""
    print("  " + row.name.ljust(max(44, len(row.name) + 2)) + "   ".join(
        f"{SHORT.get(label, label)} {number_text(values[-1]):>10}"
        for label, values in row.values.items()), flush=True)


def print_rounds(rows: Sequence[Row], title: str) -> None:
    """Each round's value of every server, for `rows` (those measured in rounds)."""
    table = [[row.name, label, *map(number_text, values)]
             for row in rows for label, values in row.values.items()]
    if table:
        rounds = max(len(r) for r in table) - 2
        print_table(["load", "server", *(f"round {i + 1}" for i in range(rounds))], table,
                    title=title)


def print_details(rows: Sequence[Row]) -> None:
    for row in rows:
        if row.details:
            keys = list(next(iter(row.details.values())))
            print_table(["server", *keys],
                        [[label, *(_detail(d[k]) for k in keys)]
                         for label, d in row.details.items()], title=row.name)


def _detail(value) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if value < 10 else f"{value:,.1f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


# ------------------------------------------------------------------ versions

def first_line(cmd: list[str]) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True)
    return (done.stdout or done.stderr).splitlines()[0].strip()


def tool_versions(disque_binary: str) -> list[tuple[str, str]]:
    """The commit disque-py runs from, cc and Disque C, for the header."""
    rows = [("disque-py source", source_state()), ("cc", first_line([COMPILER, "--version"]))]
    if disque_binary:
        rows.append(("Disque C", f"{first_line([disque_binary, '--version'])} ({disque_binary})"))
    return rows


def source_state() -> str:
    """The commit disque-py runs from, and whether its package has uncommitted changes."""
    def git(*args) -> str:
        done = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""
    commit = git("rev-parse", "--short", "HEAD")
    if not commit:
        return "not a git checkout"
    return commit + (" + uncommitted changes in disque_py/"
                     if git("status", "--porcelain", "--", "disque_py") else "")
