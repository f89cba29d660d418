"""The WAITJOB workload: completion waits under faults.

The plain load, plus two askers: each picks one to WAIT_IDS_MAX jobs among
the latest ones added, and sends WAITJOB id ... TIMEOUT to the node that
answered their ADDJOB (the first job's), or now and then to another node,
and records every status it gets back with the moment the answer came.

The promise (docs/beyond-disque.md, "Waiting for completion"): WAITJOB
settles a job only when it is done: `acked` once acknowledged, `deleted`
once deleted (clients here delete nothing; a copy removed by the ack's
collection, on a node that forgot its ack, says `deleted`), `expired` once
its TTL ran out (the jobs' TTL outlasts the run). So each of these answers
needs an ACKJOB of the job sent before the answer came (the ledger records
ACKJOBs when they are sent: one may act without its answer); `unknown` and
`pending` promise nothing and are counted.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

from disque_py.tools.chaos.ledger import JobRecord
from disque_py.tools.chaos.link import LinkError
from disque_py.tools.chaos.workloads.base import CheckContext, Findings, Workload, register
from disque_py.tools.chaos.workloads.clients import Worker

ASKERS = 2
WAIT_IDS_MAX = 4
RECENT_JOBS = 50
WAIT_TIMEOUT_MS = 2000
WAIT_SOCKET_TIMEOUT_S = WAIT_TIMEOUT_MS / 1000 + 3
OTHER_NODE_PROBABILITY = 0.25
IDLE_S = 0.1
SETTLED = ("acked", "deleted", "expired")


@dataclass
class Answer:
    body: str
    job_id: str
    node: int
    sent_at: float
    answered_at: float
    status: str


class WaitjobAsker(Worker):
    def __init__(self, number: int, **kwargs) -> None:
        super().__init__(f"waitjob{number}", socket_timeout=WAIT_SOCKET_TIMEOUT_S, **kwargs)
        self.answers: list[Answer] = []
        self.unanswered = 0

    def step(self) -> None:
        jobs = [(r.body, r.job_id, r.node) for r in self.ledger.recent(RECENT_JOBS)
                if r.job_id is not None and r.acked_at is None]
        if not jobs:
            self.stopping.wait(IDLE_S)
            return
        chosen = self.rng.sample(jobs, min(len(jobs), self.rng.randint(1, WAIT_IDS_MAX)))
        node = chosen[0][2]
        if self.rng.random() < OTHER_NODE_PROBABILITY:
            node = self.random_node(exclude=node)
        sent_at = time.monotonic()
        try:
            statuses = self.links.call(node, "WAITJOB", *(job_id for _, job_id, _ in chosen),
                                       "TIMEOUT", WAIT_TIMEOUT_MS)
        except LinkError:
            self.unanswered += 1
            return
        answered_at = time.monotonic()
        self.answers += [Answer(body, job_id, node, sent_at, answered_at, status.decode())
                         for (body, job_id, _), status in zip(chosen, statuses)]


@register
class Waitjob(Workload):
    name = "waitjob"
    needs_disque_py = "WAITJOB is a disque-py extension"
    summary = "plain, plus WAITJOB on recent jobs: `acked` (any settled status) only for " \
              "jobs an ACKJOB was sent for"

    def __init__(self, setup) -> None:
        super().__init__(setup)
        self.askers: list[WaitjobAsker] = []

    def observers(self) -> list[Worker]:
        self.askers = [WaitjobAsker(n, **self.common()) for n in range(ASKERS)]
        return list(self.askers)

    def check(self, records: list[JobRecord], context: CheckContext) -> Findings:
        answers = [answer for asker in self.askers for answer in asker.answers]
        findings = check_answers(records, answers)
        findings.figures["waitjob_unanswered"] = sum(asker.unanswered for asker in self.askers)
        return findings


def check_answers(records: list[JobRecord], answers: list[Answer]) -> Findings:
    findings = Findings()
    by_body = {record.body: record for record in records}
    statuses: Counter[str] = Counter()
    for answer in answers:
        statuses[answer.status] += 1
        if answer.status not in SETTLED:
            continue
        record = by_body.get(answer.body)
        ack_sent = record.ack_sent_at if record is not None else None
        if ack_sent is None or ack_sent > answer.answered_at:
            when = "never" if ack_sent is None else \
                f"only {ack_sent - answer.answered_at:.2f}s after the answer"
            findings.failures.append(
                f"WAITJOB on node{answer.node} answered {answer.status} for {answer.job_id} "
                f"({answer.answered_at - answer.sent_at:.2f}s after it was sent); an ACKJOB "
                f"of it was sent {when}")
    findings.figures["waitjob_answers"] = len(answers)
    findings.figures.update({f"waitjob_{status}": n for status, n in sorted(statuses.items())})
    return findings
