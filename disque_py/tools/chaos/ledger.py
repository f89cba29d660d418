"""What the clients saw, and the total-queue verdict drawn from it.

Owns the record of every job the producers tried to add (keyed by its body,
unique per job: a delivery is matched to its ADDJOB by body, so even jobs
whose ADDJOB got no answer are recognised), every ADDJOB attempt for that
body and its answer (a DEDUP producer sends one body several times), every
delivery, NACK, ACKJOB sent and ACKJOB answered, and the total-queue checks
run over that record at the end (Jepsen's Disque test classifies each job
the same way):

  lost          ADDJOB answered with an ID, and never delivered, or NACKed
                and never delivered again (a NACK hands the job back: it is
                owed a delivery as much as a new one);
  unexpected    a delivery of a job never added: a body no producer sent,
                or a body delivered under an ID no ADDJOB of it answered
                while every ADDJOB of it was answered (none could have made
                that job), or from a queue the job could not be in;
  recovered     delivered although no ADDJOB of it was answered with an ID;
  after-ack     a GETJOB sent after an ACKJOB of the same job (the same ID)
                was answered returned the job again (reported apart: Disque allows it
                when a copy missed the ack, for example on a node that was
                down when the ack was spread);
  duplicates    deliveries beyond the first that no NACK asked for;
  delays        the longest wait for a first delivery: of the jobs not yet
                delivered when the last fault was undone, from that moment;
                and of every job, from its ADDJOB's answer.

Times are time.monotonic() seconds. Every method takes the lock: producers,
consumers and the main thread share one ledger.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

BODY_PREFIX = "chaos"
NOT_SENT = "not sent"      # an attempt's answer when it never left: it made nothing


@dataclass
class Delivery:
    asked_at: float     # when the GETJOB that returned it was sent
    node: int
    job_id: str
    queue: str
    got_at: float | None = None              # when its reply came (None: asked_at)
    counters: tuple[int, int] | None = None  # WITHCOUNTERS: (nacks, additional deliveries)

    @property
    def at(self) -> float:
        return self.asked_at if self.got_at is None else self.got_at


@dataclass
class Attempt:
    """One ADDJOB of a body: where, when, and its answer (a job ID, or what
    went wrong; "" while it waits)."""

    node: int
    sent_at: float
    answer: str = ""
    answered_at: float | None = None
    job_id: str | None = None

    @property
    def may_have_made_a_job(self) -> bool:
        """Sent, and not answered with an ID: its job may exist all the same."""
        return self.job_id is None and self.answer != NOT_SENT


@dataclass
class JobRecord:
    body: str
    queue: str
    sent_at: float
    node: int                       # where the ADDJOB that got its ID (else the last) went
    job_id: str | None = None       # the first ID an ADDJOB of it was answered
    added_at: float | None = None   # ... and when
    add_error: str = ""             # why the last attempt failed, when it did
    attempts: list[Attempt] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    nacks: int = 0
    ack_sent_at: float | None = None   # first ACKJOB sent (answered or not)
    acked_at: float | None = None   # first ACKJOB answered
    acked_on: int | None = None     # by this node
    acks: dict[str, float] = field(default_factory=dict)   # job ID: its first ACKJOB answered

    @property
    def owed_delivery(self) -> bool:
        """Added, not acknowledged, and no delivery since its last NACK
        (counting never delivered, never NACKed). Deliveries are counted,
        not ordered: a consumer records its NACK after the node answered,
        and another consumer may record the redelivery before that."""
        return self.added_at is not None and self.acked_at is None \
            and len(self.deliveries) <= self.nacks

    @property
    def unrequested_redeliveries(self) -> int:
        return max(len(self.deliveries) - 1 - self.nacks, 0)

    @property
    def answered_ids(self) -> list[str]:
        """The distinct IDs its ADDJOBs were answered, first answered first."""
        return list(dict.fromkeys(a.job_id for a in self.attempts if a.job_id is not None))

    @property
    def first_delivered_at(self) -> float | None:
        return min((d.at for d in self.deliveries), default=None)


@dataclass
class Delays:
    """The longest waits for a first delivery, in seconds (None: no such job)."""

    after_heal: float | None = None      # jobs undelivered at the heal, from the heal
    after_heal_jobs: int = 0             # how many jobs that was
    after_heal_job: str = ""             # the one that waited longest
    from_add: float | None = None        # every job, from its ADDJOB's answer
    from_add_job: str = ""


@dataclass
class Verdict:
    """The checks over a ledger; `failed` is what makes the run fail."""

    lost: list[JobRecord]
    after_ack: list[tuple[JobRecord, Delivery]]
    unexpected: list[str]
    counts: dict[str, int]
    delays: Delays = field(default_factory=Delays)

    @property
    def failed(self) -> bool:
        return bool(self.lost or self.unexpected)


def job_body(seed: int, producer: int, number: int, size: int) -> str:
    """A body no other job of any run with this seed has; padded to `size` bytes."""
    head = f"{BODY_PREFIX}:{seed}:{producer}:{number}:"
    return head + "x" * max(size - len(head), 0)


def same_queue(queue: str) -> set[str]:
    """Where a job added to `queue` may be delivered from, by default."""
    return {queue}


class Ledger:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, JobRecord] = {}
        self._strangers: list[str] = []

    # ---------------------------------------------------------- producers

    def sending(self, body: str, queue: str, node: int, now: float) -> None:
        """An ADDJOB of `body` is about to be sent to `node` (the first, or another try)."""
        with self._lock:
            record = self._jobs.get(body)
            if record is None:
                record = self._jobs[body] = JobRecord(body, queue, now, node)
            elif record.job_id is None:
                record.node = node
            record.attempts.append(Attempt(node, now))

    def added(self, body: str, job_id: str, now: float) -> None:
        with self._lock:
            record = self._jobs[body]
            attempt = record.attempts[-1]
            attempt.answer, attempt.answered_at, attempt.job_id = job_id, now, job_id
            if record.job_id is None:
                record.job_id, record.added_at, record.node = job_id, now, attempt.node

    def add_failed(self, body: str, kind: str, detail: str) -> None:
        with self._lock:
            record = self._jobs[body]
            record.add_error = f"{kind}: {detail}"
            record.attempts[-1].answer = kind

    # ---------------------------------------------------------- consumers

    def delivered(self, body: str, delivery: Delivery) -> None:
        with self._lock:
            record = self._jobs.get(body)
            if record is None:
                self._strangers.append(f"{delivery.job_id} from node{delivery.node}: "
                                       f"body {body[:60]!r} no producer sent")
                return
            record.deliveries.append(delivery)

    def nacked(self, body: str) -> None:
        with self._lock:
            self._jobs[body].nacks += 1

    def acking(self, body: str, now: float) -> None:
        """An ACKJOB of it is about to be sent (its effect may come without an answer)."""
        with self._lock:
            record = self._jobs[body]
            if record.ack_sent_at is None:
                record.ack_sent_at = now

    def acked(self, body: str, node: int, now: float, job_id: str | None = None) -> None:
        """An ACKJOB of the job `job_id` (default: the ID its ADDJOB got) was answered."""
        with self._lock:
            record = self._jobs[body]
            if record.acked_at is None:
                record.acked_at, record.acked_on = now, node
            record.acks.setdefault(job_id or record.job_id, now)

    # ---------------------------------------------------------- reading it

    def records(self) -> list[JobRecord]:
        """Every record, in the order the bodies were first sent."""
        with self._lock:
            return list(self._jobs.values())

    def add_errors(self) -> Counter[str]:
        """Failed ADDJOBs by what went wrong, up to the first that got an ID
        (a workload's ADDJOBs of a job that has one are its own business); a
        failure the producer tried again after is counted apart."""
        errors: Counter[str] = Counter()
        for record in self.records():
            for attempt in record.attempts:
                if attempt.job_id is not None:
                    break
                if attempt.answer:
                    again = attempt is not record.attempts[-1]
                    errors[f"{attempt.answer} (then tried again)" if again
                           else attempt.answer] += 1
        return errors

    def recent(self, count: int) -> list[JobRecord]:
        """The last `count` records made, newest first."""
        with self._lock:
            return list(itertools.islice(reversed(self._jobs.values()), count))

    def undelivered(self) -> int:
        """Jobs whose ADDJOB returned an ID that a consumer is still owed
        (never delivered, or NACKed since their last delivery)."""
        with self._lock:
            return sum(1 for r in self._jobs.values() if r.owed_delivery)

    def unacked(self) -> int:
        """Delivered jobs no ACKJOB was answered for yet."""
        with self._lock:
            return sum(1 for r in self._jobs.values() if r.deliveries and r.acked_at is None)

    def progress(self) -> dict[str, int]:
        records = self.records()
        return {"sent": len(records),
                "added": sum(r.added_at is not None for r in records),
                "delivered": sum(bool(r.deliveries) for r in records),
                "acked": sum(r.acked_at is not None for r in records)}

    # ---------------------------------------------------------- the checks

    def verdict(self, healed_at: float | None = None,
                queues_of: Callable[[str], set[str]] = same_queue,
                drain_only: tuple[str, ...] = ()) -> Verdict:
        """`queues_of(queue)`: the queues a job added to `queue` may come
        from (its dead-letter queue, say); `drain_only`: queues nobody reads
        before the drain, left out of the delay from ADDJOB."""
        with self._lock:
            records = list(self._jobs.values())
            unexpected = list(self._strangers)
        added = [r for r in records if r.added_at is not None]
        lost = [r for r in added if r.owed_delivery]
        after_ack = [(r, d) for r in records for d in r.deliveries
                     if d.asked_at > r.acks.get(d.job_id, d.asked_at)]
        unexpected += [problem for r in records for problem in _mismatches(r, queues_of)]
        delays = _delays(added, healed_at, drain_only)
        return Verdict(lost, after_ack, unexpected, _counts(records, added), delays)


def _mismatches(record: JobRecord, queues_of: Callable[[str], set[str]]) -> list[str]:
    problems = []
    ids = record.answered_ids
    could_be_another = any(a.may_have_made_a_job for a in record.attempts)
    allowed = queues_of(record.queue)
    for delivery in record.deliveries:
        if ids and delivery.job_id not in ids and not could_be_another:
            problems.append(f"body {record.body[:40]!r} added as {', '.join(ids)}, "
                            f"delivered by node{delivery.node} as {delivery.job_id}")
        if delivery.queue not in allowed:
            problems.append(f"{delivery.job_id} added to {record.queue}, "
                            f"delivered by node{delivery.node} from {delivery.queue}")
    return problems


def _delays(added: list[JobRecord], healed_at: float | None,
            drain_only: tuple[str, ...]) -> Delays:
    delays = Delays()
    for record in added:
        first = record.first_delivered_at
        if first is None:
            continue                  # lost: reported as such
        if record.queue not in drain_only:
            wait = first - record.added_at
            if delays.from_add is None or wait > delays.from_add:
                delays.from_add, delays.from_add_job = wait, record.job_id
        if healed_at is not None and first >= healed_at:
            delays.after_heal_jobs += 1
            wait = first - healed_at
            if delays.after_heal is None or wait > delays.after_heal:
                delays.after_heal, delays.after_heal_job = wait, record.job_id
    return delays


def _counts(records: list[JobRecord], added: list[JobRecord]) -> dict[str, int]:
    delivered = [r for r in records if r.deliveries]
    return {
        "adds_sent": len(records),
        "adds_acknowledged": len(added),
        "adds_failed": len(records) - len(added),
        "failed_adds_delivered": sum(1 for r in delivered if r.added_at is None),
        "jobs_delivered": len(delivered),
        "deliveries": sum(len(r.deliveries) for r in records),
        "nacks": sum(r.nacks for r in records),
        "delivered_more_than_once": sum(1 for r in delivered if len(r.deliveries) > 1),
        "duplicated_jobs": sum(1 for r in delivered if r.unrequested_redeliveries),
        "duplicate_deliveries": sum(r.unrequested_redeliveries for r in delivered),
        "jobs_acked": sum(1 for r in records if r.acked_at is not None),
    }
