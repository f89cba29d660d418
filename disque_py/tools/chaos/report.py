"""The chaos run's report: what was checked, what was found, and the exit status.

Owns turning a Verdict, the fault record and the nodes' crash reports into
a printed report and a JSON document (the smoke test reads the JSON). The run
fails (exit status 1) on lost acknowledged jobs, wrong deliveries, server
crashes (a traceback in a log, an exit nobody asked for, a non-zero status
on SIGTERM) or a cluster that would not come back together; deliveries after
an acknowledged ACKJOB and duplicates are reported, never failed on (Disque
promises at least once, approximately once). `--json` with no file name
writes the JSON under REPORTS_DIR, which .gitignore lists, so a run from a
checkout leaves nothing for git to pick up.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field

from disque_py.tools.chaos.ledger import Verdict
from disque_py.tools.chaos.nodes import Crash

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
    wrong: list[str]
    crashes: list[Crash]
    problems: list[str] = field(default_factory=list)   # mesh not back, nodes not back
    jobs_held_at_end: dict[str, int | None] = field(default_factory=dict)

    @property
    def unexcused_lost(self) -> list[LostJob]:
        return [job for job in self.lost if not job.excused]

    @property
    def duplicate_rate(self) -> float:
        delivered = self.counts.get("jobs_delivered", 0)
        return self.counts.get("duplicated_jobs", 0) / delivered if delivered else 0.0

    @property
    def passed(self) -> bool:
        return not (self.unexcused_lost or self.wrong or self.crashes or self.problems)

    @property
    def exit_status(self) -> int:
        return 0 if self.passed else 1

    def to_json(self) -> str:
        document = asdict(self)
        document.update(duplicate_rate=self.duplicate_rate, passed=self.passed,
                        lost_count=len(self.unexcused_lost),
                        excused_lost_count=len(self.lost) - len(self.unexcused_lost),
                        after_ack_count=len(self.after_ack), crash_count=len(self.crashes))
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
            f"{f.get('resume', 0)} resumes",
            *self._network_faults(),
            f"ADDJOB: {c['adds_sent']} sent, {c['adds_acknowledged']} acknowledged with an ID, "
            f"{c['adds_failed']} not ({self.add_errors_text()})",
            f"delivered: {c['jobs_delivered']} jobs in {c['deliveries']} deliveries "
            f"({c['nacks']} NACKs); {c['failed_adds_delivered']} of them from ADDJOBs "
            f"that got no ID; {c['jobs_acked']} acknowledged by ACKJOB "
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
               f"have been on killed nodes without an AOF)" if self.lost != self.unexcused_lost
               else ""),
            f"server crashes: {len(self.crashes)}",
            f"jobs still held by the nodes at the end: {self.jobs_held_text()}",
        ]
        out += self._details()
        out.append(f"RESULT: {'PASS' if self.passed else 'FAIL'}")
        return out

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
        out += [f"  wrong delivery: {line}" for line in self.wrong[:SHOWN_LOST]]
        for crash in self.crashes[:SHOWN_CRASHES]:
            out.append(f"  crash {crash.node} {crash.where}: {crash.summary}")
            out += [f"    | {line}" for line in crash.text.splitlines()[-12:]]
        return out


def verdict_counts(verdict: Verdict, add_errors: dict[str, int]) -> dict[str, int]:
    counts = dict(verdict.counts)
    counts.update({f"add_error:{kind}": n for kind, n in sorted(add_errors.items())})
    return counts
