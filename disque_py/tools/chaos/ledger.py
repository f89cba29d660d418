"""What the clients saw, and the verdict drawn from it.

Owns the record of every job the producers tried to add (keyed by its body,
unique per job: a delivery is matched to its ADDJOB by body, so even jobs
whose ADDJOB got no answer are recognised), every delivery, NACK and
acknowledged ACKJOB, and the checks run over that record at the end:

  lost          ADDJOB answered with an ID, and never delivered, or NACKed
                and never delivered again (a NACK hands the job back: it is
                owed a delivery as much as a new one);
  after-ack     a GETJOB sent after an ACKJOB of the same job was answered
                returned the job again (reported apart: Disque allows it
                when a copy missed the ack, for example on a node that was
                down when the ack was spread);
  duplicates    deliveries beyond the first that no NACK asked for;
  wrong         a body delivered under another ID than its ADDJOB answered,
                or on another queue, or a body no producer sent.

Times are time.monotonic() seconds. Every method takes the lock: producers,
consumers and the main thread share one ledger.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

BODY_PREFIX = "chaos"


@dataclass
class Delivery:
    asked_at: float     # when the GETJOB that returned it was sent
    node: int
    job_id: str
    queue: str


@dataclass
class JobRecord:
    body: str
    queue: str
    sent_at: float
    node: int                       # where ADDJOB was sent
    job_id: str | None = None
    added_at: float | None = None   # ADDJOB answered with an ID
    add_error: str = ""             # why not, when it was not
    deliveries: list[Delivery] = field(default_factory=list)
    nacks: int = 0
    acked_at: float | None = None   # first ACKJOB answered
    acked_on: int | None = None     # by this node

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


@dataclass
class Verdict:
    """The checks over a ledger; `failed` is what makes the run fail."""

    lost: list[JobRecord]
    after_ack: list[tuple[JobRecord, Delivery]]
    wrong: list[str]
    counts: dict[str, int]

    @property
    def failed(self) -> bool:
        return bool(self.lost or self.wrong)


def job_body(seed: int, producer: int, number: int, size: int) -> str:
    """A body no other job of any run with this seed has; padded to `size` bytes."""
    head = f"{BODY_PREFIX}:{seed}:{producer}:{number}:"
    return head + "x" * max(size - len(head), 0)


class Ledger:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, JobRecord] = {}
        self._strangers: list[str] = []
        self.add_errors: Counter[str] = Counter()

    # ---------------------------------------------------------- producers

    def sending(self, body: str, queue: str, node: int, now: float) -> None:
        with self._lock:
            self._jobs[body] = JobRecord(body, queue, now, node)

    def added(self, body: str, job_id: str, now: float) -> None:
        with self._lock:
            record = self._jobs[body]
            record.job_id, record.added_at = job_id, now

    def add_failed(self, body: str, kind: str, detail: str, final: bool = True) -> None:
        """`final`: the producer gives up on this body (else it tries another node)."""
        with self._lock:
            self._jobs[body].add_error = f"{kind}: {detail}"
            self.add_errors[kind if final else f"{kind} (then tried elsewhere)"] += 1

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

    def acked(self, body: str, node: int, now: float) -> None:
        with self._lock:
            record = self._jobs[body]
            if record.acked_at is None:
                record.acked_at, record.acked_on = now, node

    # ---------------------------------------------------------- progress

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
        with self._lock:
            records = list(self._jobs.values())
        return {"sent": len(records),
                "added": sum(r.added_at is not None for r in records),
                "delivered": sum(bool(r.deliveries) for r in records),
                "acked": sum(r.acked_at is not None for r in records)}

    # ---------------------------------------------------------- the checks

    def verdict(self) -> Verdict:
        with self._lock:
            records = list(self._jobs.values())
            wrong = list(self._strangers)
        added = [r for r in records if r.added_at is not None]
        lost = [r for r in added if r.owed_delivery]
        after_ack = [(r, d) for r in records if r.acked_at is not None
                     for d in r.deliveries if d.asked_at > r.acked_at]
        wrong += [problem for r in records for problem in _mismatches(r)]
        return Verdict(lost, after_ack, wrong, _counts(records, added))


def _mismatches(record: JobRecord) -> list[str]:
    problems = []
    for delivery in record.deliveries:
        if record.job_id is not None and delivery.job_id != record.job_id:
            problems.append(f"body {record.body[:40]!r} added as {record.job_id}, "
                            f"delivered by node{delivery.node} as {delivery.job_id}")
        if delivery.queue != record.queue:
            problems.append(f"{delivery.job_id} added to {record.queue}, "
                            f"delivered by node{delivery.node} from {delivery.queue}")
    return problems


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
