"""The MAXDELIVERIES workload: dead letters under faults.

Jobs carry MAXDELIVERIES LIMIT (their dead-letter queue is `<queue>:dead`);
consumers NACK half of what they get, so a share of the jobs reach the
limit; they read with WITHCOUNTERS, to learn the nodes' RETRY re-queues.
Nobody reads a dead-letter queue before the drain, which reads them all.
A watcher thread looks into every node's dead-letter queues every second
(QPEEK) and asks the node that holds a dead job for its counters (SHOW)
the first time it sees it there.

The promises (docs/beyond-disque.md, "Failed jobs"), as clients can see them:
  early    a job is dead-lettered only once it was handed out LIMIT times:
           its GETJOB deliveries the clients saw before it was first seen
           dead, plus the RETRY re-queues its dead copy counts (a job
           re-queued by its timer is presumed delivered and lost, as
           Disque's additional-deliveries says; clients cannot see those,
           so the node's own count is taken), must reach LIMIT;
  lost     a job seen dead is delivered again (the drain reads the dead
           queues), unless it was acknowledged before it was seen dead.
And one it measures: a job is dead-lettered by one holder per partition
side (the others hear it, QUEUED flagged dead, and move their copies
without queueing them). Clients cannot tell that decision from a holder's
RETRY re-queue of its dead copy, which Disque's best-effort re-queue allows
whenever the holder that has it queued does not answer WILLQUEUE in time
(down, paused, on the other side, or slow), exactly as for live jobs; so
the run counts the jobs seen queued dead on two nodes in one look, each
excused with the fault that explains it (or the race), and the dead-letter
duplicates the drain got. The decision itself is checked where it can be
seen, by the simulation (tests/sim/checker.py, (7)).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, replace
from typing import NamedTuple

from disque_py.tools.chaos.faults.base import CLUSTER
from disque_py.tools.chaos.ledger import JobRecord
from disque_py.tools.chaos.link import LinkError
from disque_py.tools.chaos.workloads.base import CheckContext, Findings, Workload, register
from disque_py.tools.chaos.workloads.clients import (CONSUMER_SOCKET_TIMEOUT_S, Consumer, JobSpec,
                                                    Worker)

LIMIT = 3
DEAD_SUFFIX = ":dead"
NACK_PROBABILITY = 0.5
WATCH_EVERY_S = 1.0
PEEK_COUNT = 10000


def dead_queue(queue: str) -> str:
    return queue + DEAD_SUFFIX


@dataclass
class Sighting:
    """A job seen queued in a node's dead-letter queue (QPEEK): dead at some
    moment between the QPEEK's sending (`asked_at`) and its answer (`at`)."""

    body: str
    job_id: str
    node: int
    asked_at: float
    at: float
    nacks: int | None = None          # its counters there (SHOW), when asked
    deliveries: int | None = None


def peek_dead(worker: Worker, node: int, queues: tuple[str, ...]) -> list[Sighting]:
    """The jobs queued in `node`'s dead-letter queues, now ([] if it does not answer)."""
    found = []
    for queue in queues:
        asked_at = time.monotonic()
        try:
            items = worker.links.call(node, "QPEEK", dead_queue(queue), PEEK_COUNT)
        except LinkError:
            return found
        now = time.monotonic()
        found += [Sighting(body.decode(), job_id.decode(), node, asked_at, now)
                  for _, job_id, body in items or []]
    return found


class DeadLetterWatcher(Worker):
    """Every WATCH_EVERY_S, every node's dead-letter queues; SHOW for the
    counters of a job the first time a node is seen holding it dead."""

    def __init__(self, queues: tuple[str, ...], **kwargs) -> None:
        super().__init__("dead-letter-watcher", socket_timeout=CONSUMER_SOCKET_TIMEOUT_S,
                         **kwargs)
        self.queues = queues
        self.sightings: dict[tuple[str, int], Sighting] = {}   # (body, node): the first
        self.at_once: dict[str, list[Sighting]] = {}           # body: the first look with 2+

    def step(self) -> None:
        look: dict[str, list[Sighting]] = {}
        for node in range(self.nodes):
            for sighting in peek_dead(self, node, self.queues):
                look.setdefault(sighting.body, []).append(sighting)
                if (sighting.body, node) not in self.sightings:
                    self._ask_counters(sighting)
                    self.sightings[(sighting.body, node)] = sighting
        for body, seen in look.items():
            if len(seen) > 1:
                self.at_once.setdefault(body, seen)
        self.stopping.wait(WATCH_EVERY_S)

    def _ask_counters(self, sighting: Sighting) -> None:
        try:
            show = self.links.call(sighting.node, "SHOW", sighting.job_id)
        except LinkError:
            return
        fields = dict(zip(show[::2], show[1::2])) if show else {}
        if b"nacks" in fields:
            sighting.nacks = int(fields[b"nacks"])
            sighting.deliveries = int(fields[b"additional-deliveries"])

    def by_body(self) -> dict[str, list[Sighting]]:
        found: dict[str, list[Sighting]] = {}
        for sighting in sorted(self.sightings.values(), key=lambda s: s.at):
            found.setdefault(sighting.body, []).append(sighting)
        return found


class DeadLetterWorkload(Workload):
    """What the workloads with dead letters share: the job option, the
    dead-letter queues read by the drain, and the consumers' counters."""

    nack_probability = NACK_PROBABILITY

    limit = LIMIT

    def spec(self) -> JobSpec:
        spec = self.setup.spec
        return replace(spec, options=spec.options + ("MAXDELIVERIES", self.limit))

    def drain_queues(self) -> tuple[str, ...]:
        return tuple(dead_queue(queue) for queue in self.queues)

    def queues_of(self, queue: str) -> set[str]:
        return {queue, dead_queue(queue)}

    def settings(self) -> dict:
        return {**super().settings(), "max-deliveries": self.limit}


@register
class MaxDeliveries(DeadLetterWorkload):
    name = "maxdeliveries"
    needs_disque_py = "ADDJOB ... MAXDELIVERIES (dead letters) is a disque-py extension"
    summary = (f"ADDJOB ... MAXDELIVERIES {LIMIT}, half the deliveries NACKed: dead letters "
               f"never early, on one node, never lost")

    def __init__(self, setup) -> None:
        super().__init__(setup)
        self.watcher: DeadLetterWatcher | None = None

    def consumers(self) -> list[Worker]:
        return [Consumer(n, queues=self.queues, drain_queues=self.drain_queues(),
                         nack_probability=self.nack_probability, withcounters=True,
                         **self.common()) for n in range(self.setup.consumers)]

    def observers(self) -> list[Worker]:
        self.watcher = DeadLetterWatcher(self.queues, **self.common())
        return [self.watcher]

    def check(self, records: list[JobRecord], context: CheckContext) -> Findings:
        watcher = self.watcher
        if watcher is None:
            return check_dead_letters(records, {}, {}, context, self.limit)
        return check_dead_letters(records, watcher.by_body(), watcher.at_once, context,
                                  self.limit)


def check_dead_letters(records: list[JobRecord], sightings: dict[str, list[Sighting]],
                       at_once: dict[str, list[Sighting]], context: CheckContext,
                       limit: int = LIMIT) -> Findings:
    """The dead-letter promises over the ledger and the watcher's sightings
    (`at_once`: per job, the first look that found it on two nodes or more)."""
    findings = Findings()
    tally: Counter[str] = Counter(dead_lettered=0, dead_on_two_nodes_at_once=0)
    for record in records:
        seen = sightings.get(record.body, [])
        dead = first_dead(record, seen)
        if dead is None:
            continue
        tally["dead_lettered"] += 1
        tally["seen_dead_by_the_watcher"] += bool(seen)
        tally["dead_moved_to_another_node"] += len({s.node for s in seen}) > 1
        dead_deliveries = sum(1 for d in record.deliveries if d.queue.endswith(DEAD_SUFFIX))
        tally["dead_deliveries"] += dead_deliveries
        tally["dead_letter_duplicates"] += max(dead_deliveries - 1, 0)
        _check_early(record, seen, dead, limit, findings)
        check_delivered_after(record, dead, findings)
        if record.body in at_once:
            tally["dead_on_two_nodes_at_once"] += 1
            findings.excused.append(_two_nodes_excuse(record, at_once[record.body], context))
    added = sum(1 for r in records if r.added_at is not None) or 1
    findings.figures.update(tally)
    findings.figures["dead_rate"] = tally["dead_lettered"] / added
    return findings


class Dead(NamedTuple):
    """A job known dead at some moment between `asked_at` and `at`: a
    QPEEK, or a GETJOB from a dead-letter queue, from sending to answer."""

    asked_at: float
    at: float


def first_dead(record: JobRecord, seen: list[Sighting]) -> Dead | None:
    """The first time it was known dead: seen in a dead queue, or delivered from one."""
    known = [Dead(s.asked_at, s.at) for s in seen] + \
        [Dead(d.asked_at, d.at) for d in record.deliveries if d.queue.endswith(DEAD_SUFFIX)]
    return min(known, key=lambda dead: dead.at, default=None)


def _check_early(record: JobRecord, seen: list[Sighting], dead: Dead, limit: int,
                 findings: Findings) -> None:
    """Deliveries asked for before it was known dead, and the RETRY re-queues
    its dead copies count, reach the limit."""
    handed = sum(1 for d in record.deliveries
                 if d.asked_at < dead.at and not d.queue.endswith(DEAD_SUFFIX))
    requeues = max([s.deliveries or 0 for s in seen] +
                   [d.counters[1] for d in record.deliveries if d.counters is not None
                    and (d.asked_at < dead.at or d.queue.endswith(DEAD_SUFFIX))],
                   default=0)
    if handed + requeues < limit:
        findings.failures.append(
            f"{record.job_id} dead-lettered early: {handed} GETJOB deliveries and "
            f"{requeues} RETRY re-queues before it was seen dead, MAXDELIVERIES {limit}")


def _two_nodes_excuse(record: JobRecord, seen: list[Sighting], context: CheckContext) -> str:
    """Why a job was queued dead on two nodes at once: a fault on one of
    them since its first delivery, or the re-queue race (see the docstring)."""
    nodes = sorted({s.node for s in seen})
    start = min([d.asked_at for d in record.deliveries] + [s.asked_at for s in seen])
    faults = context.faults_on({*nodes, CLUSTER}, start, seen[-1].at)
    why = (f"{faults[0].kind} node{faults[0].node} in between" if faults else
           "no fault on them: a holder's RETRY re-queue raced the QUEUED answer of the one "
           "that had it queued (WILLQUEUE is answered 500 ms before the re-queue)")
    return (f"{record.job_id} queued dead on {', '.join(f'node{n}' for n in nodes)} at once: "
            f"{why} (a dead copy re-queued, as live jobs are; one dead-lettering per "
            f"partition side is checked by the simulation)")


def check_delivered_after(record: JobRecord, dead: Dead, findings: Findings) -> None:
    """A job known dead is delivered again (unless acknowledged before):
    a delivery answered once the look that saw it dead was sent counts."""
    if record.acked_at is not None and record.acked_at < dead.asked_at:
        return
    if not any(d.at >= dead.asked_at for d in record.deliveries):
        findings.failures.append(f"{record.job_id} lost after it was dead-lettered: seen dead, "
                                 f"never delivered again (the drain reads the dead queues)")
