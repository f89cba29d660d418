"""The chaos matrix's table: each row's runs, summed into one markdown line.

Owns reading the runs' JSON reports (report.py's to_json) into the
figures of a row and writing the markdown: the table, then each run's
details (its faults, its workload's and faults' figures, the replay
command of a failure, where its output and kept directory are). Rules
kept: counts are summed over a row's seeds, rates are recomputed from the
summed counts (the duplicate rate) or, for a workload's own rates, given
per seed; the longest delay is the longest of any seed; a run that ended
without a report fails its row and says so, never counts as zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

NOT_RUN = "not run (no --disque-c BINARY)"
COLUMNS = ("fault set", "workload", "server", "nodes", "seeds", "acknowledged",
           "lost (unexcused / excused)", "unexpected", "duplicate rate",
           "longest delay after heal", "crashes", "workload findings", "result")
MATRIX_FILE = "matrix.md"
# The counts a workload's cell shows (summed over seeds) beside its rates;
# every figure is in the details below the table.
HEADLINE_COUNTS = {"maxdeliveries": ("dead_lettered", "dead_on_two_nodes_at_once"),
                   "qrequeue": ("poison_jobs", "came_back"),
                   "waitjob": ("waitjob_answers", "waitjob_acked")}
# The clock's measures (how early or late a node queued a DELAYed job), the
# worst of any seed.
HEADLINE_MEASURES = ("clock_probe_most_early_s", "clock_probe_most_late_s")


class TableRow(Protocol):
    """What the table reads of a matrix.Row."""

    name: str
    workload: str
    nodes: int
    options: tuple[str, ...]

    @property
    def fault_set(self) -> str: ...

    @property
    def server(self) -> str: ...


@dataclass
class Outcome:
    """One run of a row: its seed, its JSON report (None: it ended without
    one), its exit status and where its output is."""

    seed: int
    report: dict | None
    status: int
    output: Path


@dataclass
class RowResult:
    row: TableRow
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def reports(self) -> list[dict]:
        return [o.report for o in self.outcomes if o.report is not None]

    @property
    def passed(self) -> bool:
        return all(o.status == 0 and o.report is not None and o.report["passed"]
                   for o in self.outcomes)

    def total(self, key: str) -> int:
        return sum(report[key] for report in self.reports)

    def count(self, key: str) -> int:
        return sum(report["counts"].get(key, 0) for report in self.reports)

    def duplicate_rate(self) -> str:
        delivered = self.count("jobs_delivered")
        return f"{self.count('duplicated_jobs') / delivered:.3%}" if delivered else "-"

    def longest_delay(self) -> str:
        delays = [r["delays"]["after_heal"] for r in self.reports
                  if r["delays"]["after_heal"] is not None]
        return f"{max(delays):.1f} s" if delays else "none waiting"

    def findings(self) -> str:
        """The workload's own rates per seed, and its broken and excused outcomes."""
        parts = []
        rates = sorted({k for r in self.reports for k, v in r["findings"]["figures"].items()
                        if k.endswith("_rate") and isinstance(v, float)})
        for key in rates:
            values = "/".join(f"{r['findings']['figures'].get(key, 0):.2%}" for r in self.reports)
            parts.append(f"{key.replace('_', ' ')} {values}")
        for key in HEADLINE_COUNTS.get(self.row.workload, ()):
            total = sum(r["findings"]["figures"].get(key, 0) for r in self.reports)
            parts.append(f"{key.replace('_', ' ')} {total}")
        for key in HEADLINE_MEASURES:
            worst = [r["measures"][key] for r in self.reports if key in r["measures"]]
            if worst:
                parts.append(f"{key.replace('_', ' ')} {max(worst):g}")
        broken = sum(len(r["findings"]["failures"]) for r in self.reports)
        excused = sum(len(r["findings"]["excused"]) for r in self.reports)
        if broken or excused or parts:
            parts.append(f"{broken} broken, {excused} excused")
        return "; ".join(parts) or "-"

    def result(self) -> str:
        if not self.outcomes:
            return NOT_RUN
        if self.passed:
            return "PASS"
        unfinished = sum(1 for o in self.outcomes if o.report is None)
        return "**FAIL**" + (f" ({unfinished} run(s) without a report)" if unfinished else "")

    def cells(self) -> list[str]:
        row = self.row
        options = f" ({' '.join(row.options)})" if row.options and not row.label else ""
        if not self.outcomes:
            return [row.fault_set + options, row.workload, row.server, str(row.nodes),
                    *["-"] * (len(COLUMNS) - 5), self.result()]
        return [row.fault_set + options, row.workload, row.server, str(row.nodes),
                ", ".join(str(o.seed) for o in self.outcomes),
                str(self.count("adds_acknowledged")),
                f"{self.total('lost_count')} / {self.total('excused_lost_count')}",
                str(self.total("unexpected_count")), self.duplicate_rate(),
                self.longest_delay(), str(self.total("crash_count")), self.findings(),
                self.result()]

    def details(self) -> list[str]:
        out = []
        for o in self.outcomes:
            r = o.report
            if r is None:
                out.append(f"- {self.row.name} seed {o.seed}: exit {o.status}, no report "
                           f"(output: {o.output})")
                continue
            faults = ", ".join(f"{k} {v}" for k, v in sorted(r["faults"].items()) if v)
            figures = ", ".join(f"{k} {_figure(v)}" for k, v in
                                {**r["findings"]["figures"], **r["measures"]}.items())
            elapsed = sum(r["elapsed_s"].values())
            out.append(f"- {self.row.name} seed {o.seed}: "
                       f"{'PASS' if r['passed'] else 'FAIL'} in {elapsed:.0f} s; "
                       f"faults: {faults or 'none'}" + (f"; figures: {figures}" if figures else ""))
            if not r["passed"]:
                out.append(f"  - replay: `{r['replay']}`; output {o.output}; "
                           f"directory {r['directory']}")
        return out


def _figure(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def markdown(results: list[RowResult], seconds: float, command: str) -> str:
    lines = [f"# disque-py chaos matrix: {seconds:g} s of faults per seed", "",
             f"Command: `{command}`", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(result.cells()) + " |" for result in results]
    lines += ["", "## Runs", ""]
    for result in results:
        lines += result.details()
    return "\n".join(lines) + "\n"


def write_table(results: list[RowResult], seconds: float, out_dir: Path, command: str) -> Path:
    """The table in out_dir/matrix.md, and beside out_dir as out_dir's name + .md."""
    text = markdown(results, seconds, command)
    (out_dir / MATRIX_FILE).write_text(text)
    beside = out_dir.with_suffix(".md")
    beside.write_text(text)
    return beside
