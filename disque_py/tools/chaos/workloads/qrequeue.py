"""The QREQUEUE workload: dead letters sent back to work, under faults.

Jobs carry MAXDELIVERIES LIMIT. A third of them are poison: consumers NACK
a poison job until it has been seen in a dead-letter queue (its work is
then "fixed"), so each goes dead, comes back, and is acknowledged; the
others are NACKed now and then as in the plain workload. A requeuer thread
every REQUEUE_EVERY_S picks a node, looks into its dead-letter queues
(QPEEK: what it sees there is recorded) and sends QREQUEUE for each, which
moves that node's dead jobs back to the queue each came from with fresh
counters (its other holders get the revised job). The drain reads the
dead-letter queues too, for what was never sent back.

The promise (docs/beyond-disque.md, QREQUEUE): requeuing loses nothing.
Every job seen dead (not acknowledged before) is delivered again after it
was seen: from its own queue once sent back, or from the dead-letter queue
by the drain. The figures say how many came back through QREQUEUE.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections import Counter
from dataclasses import dataclass

from disque_py.tools.chaos.ledger import JobRecord
from disque_py.tools.chaos.link import LinkError
from disque_py.tools.chaos.workloads.base import CheckContext, Findings, register
from disque_py.tools.chaos.workloads.clients import (CONSUMER_SOCKET_TIMEOUT_S, Consumer,
                                                    Worker)
from disque_py.tools.chaos.workloads.maxdeliveries import (DEAD_SUFFIX, DeadLetterWorkload,
                                                           Sighting, check_delivered_after,
                                                           dead_queue, first_dead, peek_dead)

LIMIT = 2
POISON_EVERY = 3                 # one body in this many is poison
REQUEUE_EVERY_S = 2.0


def poison(body: str) -> bool:
    return zlib.crc32(body.encode()) % POISON_EVERY == 0


@dataclass
class Requeue:
    node: int
    at: float
    queue: str
    moved: int


class Requeuer(Worker):
    """Every REQUEUE_EVERY_S: QPEEK then QREQUEUE the dead-letter queues of a random node."""

    def __init__(self, queues: tuple[str, ...], **kwargs) -> None:
        super().__init__("requeuer", socket_timeout=CONSUMER_SOCKET_TIMEOUT_S, **kwargs)
        self.queues = queues
        self.sightings: list[Sighting] = []
        self.requeues: list[Requeue] = []
        self._seen_dead: set[str] = set()
        self._lock = threading.Lock()

    def step(self) -> None:
        node = self.random_node()
        seen = peek_dead(self, node, self.queues)
        with self._lock:
            self.sightings += seen
            self._seen_dead.update(s.body for s in seen)
        for queue in self.queues:
            try:
                moved = self.links.call(node, "QREQUEUE", dead_queue(queue))
            except LinkError:
                break
            self.requeues.append(Requeue(node, time.monotonic(), queue, int(moved)))
        self.stopping.wait(REQUEUE_EVERY_S)

    def saw_dead(self, body: str) -> bool:
        with self._lock:
            return body in self._seen_dead


class PoisonConsumer(Consumer):
    """NACKs a poison job until the requeuer has seen it dead."""

    def __init__(self, number: int, requeuer: Requeuer, **kwargs) -> None:
        super().__init__(number, **kwargs)
        self.requeuer = requeuer

    def wants_nack(self, body: str, delivery) -> bool:
        if poison(body) and not self.requeuer.saw_dead(body):
            return True
        return super().wants_nack(body, delivery)


@register
class QRequeue(DeadLetterWorkload):
    name = "qrequeue"
    needs_disque_py = "QREQUEUE and dead letters are disque-py extensions"
    summary = (f"ADDJOB ... MAXDELIVERIES {LIMIT}, poison jobs NACKed until dead, sent back "
               f"by QREQUEUE: nothing lost")
    limit = LIMIT

    def __init__(self, setup) -> None:
        super().__init__(setup)
        self.requeuer = Requeuer(self.queues, **self.common())

    def consumers(self) -> list[Worker]:
        return [PoisonConsumer(n, self.requeuer, queues=self.queues,
                               drain_queues=self.drain_queues(), **self.common())
                for n in range(self.setup.consumers)]

    def observers(self) -> list[Worker]:
        return [self.requeuer]

    def check(self, records: list[JobRecord], context: CheckContext) -> Findings:
        return check_requeued(records, self.requeuer.sightings, self.requeuer.requeues)


def check_requeued(records: list[JobRecord], sightings: list[Sighting],
                   requeues: list[Requeue]) -> Findings:
    findings = Findings()
    seen: dict[str, list[Sighting]] = {}
    for sighting in sightings:
        seen.setdefault(sighting.body, []).append(sighting)
    tally: Counter[str] = Counter(seen_dead=0, came_back=0)
    for record in records:
        if record.body not in seen:
            continue
        dead = first_dead(record, seen[record.body])
        tally["seen_dead"] += 1
        later = [d for d in record.deliveries if d.at >= dead.asked_at]
        tally["came_back"] += any(not d.queue.endswith(DEAD_SUFFIX) for d in later)
        tally["drained_from_dead_queue"] += any(d.queue.endswith(DEAD_SUFFIX) for d in later)
        check_delivered_after(record, dead, findings)
    tally["poison_jobs"] = sum(1 for r in records if r.added_at is not None and poison(r.body))
    tally["qrequeue_calls"] = len(requeues)
    tally["jobs_moved"] = sum(r.moved for r in requeues)
    findings.figures.update(tally)
    findings.figures["lost_after_dead"] = len(findings.failures)
    return findings
