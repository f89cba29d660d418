"""The chaos run's report: what was checked, what was found, and the exit status.

Owns turning a Verdict, the workload's Findings, the fault record and the
nodes' crash reports into a printed report and a JSON document (the smoke
test reads the JSON). The run fails (exit status 1) on lost acknowledged
jobs, unexpected deliveries (a job never added), a promise of the workload
broken, server crashes (a traceback or a sanitizer report in a log, a
segmentation fault, an exit nobody asked for, a non-zero status on SIGTERM)
or a cluster that would not come back together; deliveries after an
acknowledged ACKJOB and duplicates are reported, never failed on (Disque
promises at least once, approximately once). A failing report ends with
the command that replays its fault schedule and the clients' choices
(`replay`, given by the command line: thread timing still varies). `--json` with no file name
writes the JSON under REPORTS_DIR, which .gitignore lists, so a run from a
checkout leaves nothing for git to pick up.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field

from disque_py.tools.chaos.ledger import Delays, Verdict
from disque_py.tools.chaos.nodes import Crash
from disque_py.tools.chaos.workloads import Findings

SHOWN_LOST = 10
SHOWN_AFTER_ACK = 5
SHOWN_CRASHES = 5
REPORTS_DIR = "chaos-reports"
NETWORK_KINDS = ("partition", "netem")    # faults/network.py: counted by shape or effect


def default_json_path(seed: int, now: float | None = None) -> str:
    """Where `--json` without a file name writes: REPORTS_DIR (git-ignored)
    in the current directory, one file per run."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return os.path.join(REPORTS_DIR, f"chaos-{seed}-{stamp}.json")


@dataclass
class LostJob:
    job_id: str
    body: str
    queue: str
    added_after_s: float
    excused: str       # why the loss is allowed (copies lost without an AOF), else ""
    nodes_say: str


@dataclass
class Report:
    seed: int
    settings: dict
    directory: str
    elapsed_s: dict[str, float]
    counts: dict[str, int]
    faults: dict[str, int]
    lost: list[LostJob]
    after_ack: list[str]
    unexpected: list[str]
    crashes: list[Crash]
    problems: list[str] = field(default_factory=list)   # mesh not back, nodes not back
    jobs_held_at_end: dict[str, int | None] = field(default_factory=dict)
    measures: dict[str, float] = field(default_factory=dict)    # what fault kinds measured
    workload: str = "plain"
    findings: Findings = field(default_factory=Findings)
    delays: Delays = field(default_factory=Delays)
    replay: str = ""              # the command that replays this run's schedule

    @property
    def unexcused_lost(self) -> list[LostJob]:
        return [job for job in self.lost if not job.excused]

    @property
    def duplicate_rate(self) -> float:
        delivered = self.counts.get("jobs_delivered", 0)
        return self.counts.get("duplicated_jobs", 0) / delivered if delivered else 0.0

    @property
    def passed(self) -> bool:
        return not (self.unexcused_lost or self.unexpected or self.crashes or self.problems
                    or self.findings.failures)

    @property
    def exit_status(self) -> int:
        return 0 if self.passed else 1

    def to_json(self) -> str:
        document = asdict(self)
        document.update(duplicate_rate=self.duplicate_rate, passed=self.passed,
                        lost_count=len(self.unexcused_lost),
                        excused_lost_count=len(self.lost) - len(self.unexcused_lost),
                        after_ack_count=len(self.after_ack), crash_count=len(self.crashes),
                        unexpected_count=len(self.unexpected),
                        workload_failure_count=len(self.findings.failures))
        return json.dumps(document, indent=2, sort_keys=True)

    def lines(self) -> list[str]:
        c, f = self.counts, self.faults
        out = [
            "",
            "=== disque-py chaos report ===",
            f"seed {self.seed}; " + ", ".join(f"{k} {v}" for k, v in self.settings.items()),
            "time: " + ", ".join(f"{k} {v:.1f}s" for k, v in self.elapsed_s.items()),
            f"faults: {f.get('kill', 0)} kill -9, {f.get('pause', 0)} SIGSTOP/SIGCONT, "
            f"{f.get('rewrite', 0)} BGREWRITEAOF; {f.get('restarts', 0)} node restarts, "
            f"{f.get('resume', 0)} resumes" + self._other_faults_text(),
            *self._network_faults(),
            f"ADDJOB: {c['adds_sent']} sent, {c['adds_acknowledged']} acknowledged with an ID, "
            f"{c['adds_failed']} not ({self.add_errors_text()})",
            f"delivered: {c['jobs_delivered']} jobs in {c['deliveries']} deliveries "
            f"({c['nacks']} NACKs); {c['failed_adds_delivered']} of them recovered (from "
            f"ADDJOBs that got no ID); {c['jobs_acked']} acknowledged by ACKJOB "
            f"({c.get('unacked_at_end', 0)} delivered jobs never got an ACKJOB answer)",
            f"duplicates: {c['duplicated_jobs']} jobs delivered again without a NACK "
            f"({c['duplicate_deliveries']} extra deliveries); duplicate rate "
            f"{self.duplicate_rate:.4%}",
            f"delivered after an acknowledged ACKJOB: {len(self.after_ack)} "
            f"({c.get('after_ack_within_grace', 0)} within a second of the ack, "
            f"{len(self.after_ack) - c.get('after_ack_within_grace', 0)} later; "
            f"{c.get('after_ack_node_down_at_ack', 0)} acked while a node was down)",
            f"LOST acknowledged jobs: {len(self.unexcused_lost)}"
            + (f" (+{len(self.lost) - len(self.unexcused_lost)} excused: every copy could "
               f"have been lost by what the promise allows, e.g. {self._an_excuse()})"
               if self.lost != self.unexcused_lost else ""),
            f"UNEXPECTED deliveries (jobs never added): {len(self.unexpected)}",
            self.delays_text(),
            f"server crashes: {len(self.crashes)}",
            f"jobs still held by the nodes at the end: {self.jobs_held_text()}",
            *self.findings.lines(self.workload),
        ]
        if self.measures:
            out.append("measured: " + ", ".join(f"{k} {v:g}" for k, v in self.measures.items()))
        out += self._details()
        out.append(f"RESULT: {'PASS' if self.passed else 'FAIL'}")
        if not self.passed and self.replay:
            out.append(f"replay (same faults and client choices; thread timing still "
                       f"varies): {self.replay}")
        return out

    def _an_excuse(self) -> str:
        return next((job.excused for job in self.lost if job.excused), "")

    def _other_faults_text(self) -> str:
        """Events beyond kill, pause, rewrite and the network faults (clock,
        power loss, repairs...)."""
        shown = {"kill", "pause", "rewrite", "restarts", "resume", "restart"}
        others = [f"{n} {kind}" for kind, n in sorted(self.faults.items())
                  if kind not in shown and kind.split(":")[0] not in NETWORK_KINDS and n]
        return "; " + ", ".join(others) if others else ""

    def delays_text(self) -> str:
        d = self.delays
        if d.after_heal is None:
            after = "no job was waiting for its first delivery at the heal"
        else:
            after = (f"{d.after_heal:.1f}s ({d.after_heal_job}; {d.after_heal_jobs} jobs "
                     f"were first delivered after the heal)")
        since_add = "none" if d.from_add is None else f"{d.from_add:.1f}s ({d.from_add_job})"
        return (f"longest delay to a first delivery: after the faults healed {after}; "
                f"from ADDJOB's answer {since_add}")

    def _network_faults(self) -> list[str]:
        """`partition 4 (2 halves, 1 isolated, 1 ring), netem 2 (...)`, when asked for."""
        parts = []
        for kind in NETWORK_KINDS:
            if kind in self.faults:
                kinds = self.counts_by_prefix(f"{kind}:", self.faults)
                parts.append(f"{self.faults[kind]} {kind} ("
                             + (", ".join(f"{n} {k}" for k, n in kinds.items()) or "none") + ")")
        return ["network faults: " + ", ".join(parts)] if parts else []

    def add_errors_text(self) -> str:
        errors = self.counts_by_prefix("add_error:")
        return ", ".join(f"{n} {kind}" for kind, n in errors.items()) or "none"

    def counts_by_prefix(self, prefix: str, counts: dict[str, int] | None = None
                         ) -> dict[str, int]:
        counts = self.counts if counts is None else counts
        return {k[len(prefix):]: v for k, v in counts.items() if k.startswith(prefix)}

    def jobs_held_text(self) -> str:
        return ", ".join(f"{name} {'?' if n is None else n}"
                         for name, n in self.jobs_held_at_end.items())

    def _details(self) -> list[str]:
        out = [f"  problem: {problem}" for problem in self.problems]
        for job in self.unexcused_lost[:SHOWN_LOST]:
            out.append(f"  lost {job.job_id} ({job.queue}, acknowledged {job.added_after_s:.1f}s "
                       f"into the run): {job.nodes_say}")
        out += [f"  after ack: {line}" for line in self.after_ack[:SHOWN_AFTER_ACK]]
        out += [f"  unexpected delivery: {line}" for line in self.unexpected[:SHOWN_LOST]]
        for crash in self.crashes[:SHOWN_CRASHES]:
            out.append(f"  crash {crash.node} {crash.where}: {crash.summary}")
            out += [f"    | {line}" for line in crash.text.splitlines()[-12:]]
        return out


def verdict_counts(verdict: Verdict, add_errors: dict[str, int]) -> dict[str, int]:
    counts = dict(verdict.counts)
    counts.update({f"add_error:{kind}": n for kind, n in sorted(add_errors.items())})
    return counts
