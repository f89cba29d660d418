"""Clients waiting for work to finish: WAITJOB (these jobs) and QWAIT (a queue).

A WAITJOB waiter holds one status per ID it listed. An ID unknown here is
`unknown`, a job already acknowledged here `acked`, both settled when the
wait starts; every other position is `pending` until its job leaves this
node's live set, with the reason NodeCore gives: `acked`, `deleted` or
`expired`. A QWAIT waits for its queue's open jobs on this node (not yet
acknowledged: wait-repl, active or queued) to reach zero. The count is made
by one scan of the job table when the first QWAIT on that queue starts, then
kept by the hooks below, and shared by every QWAIT on that queue.

Hooks (NodeHooks, engine/node/hooks.pxd): the engine calls them only while
its switches say someone waits (NodeCore.watch_jobs: a WAITJOB is parked;
watch_queues: a QWAIT is), which this component keeps, so a node nobody
waits on pays nothing.
  * job_done(job, reason): a job not yet acknowledged was acknowledged, or
    left this node (the engine's GONE_* reasons). GONE_MOVED (an
    at-most-once job handed to another node) settles no WAITJOB position,
    since this node cannot learn its fate; it does leave the queue's count.
  * job_live(job): a job not acknowledged was registered here.
  * job_moved(job, old_queue): a live job changed queue (dead-lettering
    moves it from `q` to `q:dead`).

Rules kept:
  * job_waits maps a job ID to its waiters, queue_waits a queue name to its
    OpenCount; an entry lives only while someone waits on it. QWAIT never
    creates a Queue: a plain Disque client sees nothing of it.
  * A waiter with nothing to wait for is never parked: the command answers
    at once.
  * A waiter leaves through Parking.forget (waiters.py): released, timed
    out, or its client went away; forget then takes it off every entry that
    names it.
  * At the timeout a waiter answers what it knows (commands/waits.py):
    WAITJOB its statuses, `pending` where still open; QWAIT 0.
"""

from __future__ import annotations

from disque_py.engine import ACKED, GONE_ACKED, GONE_DELETED, GONE_EXPIRED, GONE_MOVED, Job
from disque_py.node.waiters import DONE, QWAIT, WAITJOB, Waiter

# A WAITJOB's statuses, as they go on the wire.
STATUS_ACKED = b"acked"
STATUS_DELETED = b"deleted"
STATUS_EXPIRED = b"expired"
STATUS_UNKNOWN = b"unknown"
STATUS_PENDING = b"pending"

STATUS_BY_REASON = {GONE_ACKED: STATUS_ACKED, GONE_DELETED: STATUS_DELETED,
                    GONE_EXPIRED: STATUS_EXPIRED}


class JobsWaiter(Waiter):
    """A parked WAITJOB: `statuses` holds one status per listed ID;
    `positions` maps each ID still pending to its places in that list."""

    __slots__ = ("statuses", "positions")

    def __init__(self, client, deadline_ms: int, statuses: list[bytes],
                 positions: dict[bytes, list[int]]) -> None:
        super().__init__(client, WAITJOB, deadline_ms)
        self.statuses = statuses
        self.positions = positions


class QueueWaiter(Waiter):
    """A parked QWAIT on the queue called `queue`."""

    __slots__ = ("queue",)

    def __init__(self, client, deadline_ms: int, queue: bytes) -> None:
        super().__init__(client, QWAIT, deadline_ms)
        self.queue = queue


class OpenCount:
    """A queue's open jobs on this node, and the QWAITs waiting for none."""

    __slots__ = ("open", "waiters")

    def __init__(self, open_jobs: int) -> None:
        self.open = open_jobs
        self.waiters: dict[QueueWaiter, None] = {}


class Waits:
    """The parked WAITJOBs and QWAITs of one node."""

    def __init__(self, core, parking) -> None:
        self.core = core
        self.parking = parking
        self.job_waits: dict[bytes, dict[JobsWaiter, None]] = {}   # job ID -> its waiters
        self.queue_waits: dict[bytes, OpenCount] = {}              # queue name -> its count
        parking.owns(WAITJOB, self.forget)
        parking.owns(QWAIT, self.forget)

    # ------------------------------------------------------------ WAITJOB

    def wait_for_jobs(self, client, job_ids: list[bytes],
                      deadline_ms: int) -> tuple[list[bytes], JobsWaiter | None]:
        """WAITJOB: the statuses known now, and the parked waiter (None when
        no listed job is still open here)."""
        statuses: list[bytes] = []
        positions: dict[bytes, list[int]] = {}
        jobs = self.core.jobs
        for index, job_id in enumerate(job_ids):
            job = jobs.get(job_id)
            if job is None:
                statuses.append(STATUS_UNKNOWN)
            elif job.state == ACKED:
                statuses.append(STATUS_ACKED)
            else:
                statuses.append(STATUS_PENDING)
                positions.setdefault(job_id, []).append(index)
        if not positions:
            return statuses, None
        waiter = JobsWaiter(client, deadline_ms, statuses, positions)
        job_waits = self.job_waits
        for job_id in positions:
            job_waits.setdefault(job_id, {})[waiter] = None
        self.core.watch_jobs = True
        self.parking.start(waiter)
        return statuses, waiter

    def _settle_job(self, job_id: bytes, status: bytes) -> None:
        """Every WAITJOB on `job_id` learns its status; those left with
        nothing pending are answered."""
        waiters = self.job_waits.pop(job_id, None)
        if waiters is None:
            return
        self.core.watch_jobs = bool(self.job_waits)
        for waiter in waiters:
            statuses = waiter.statuses
            for index in waiter.positions.pop(job_id):
                statuses[index] = status
            if not waiter.positions:
                self.parking.release(waiter, DONE)

    # -------------------------------------------------------------- QWAIT

    def wait_for_queue(self, client, name: bytes, deadline_ms: int) -> QueueWaiter | None:
        """QWAIT: the parked waiter, or None when the queue has no open job here."""
        count = self.queue_waits.get(name)
        if count is None:
            open_jobs = self.count_open_jobs(name)
            if not open_jobs:
                return None
            count = self.queue_waits[name] = OpenCount(open_jobs)
            self.core.watch_queues = True
        waiter = QueueWaiter(client, deadline_ms, name)
        count.waiters[waiter] = None
        self.parking.start(waiter)
        return waiter

    def count_open_jobs(self, name: bytes) -> int:
        """This node's jobs of queue `name` not yet acknowledged: one pass
        over the job table."""
        jobs = self.core.jobs
        return sum(1 for index in range(jobs.partition_count)
                   for job in jobs.partition(index)
                   if job.state != ACKED and job.queue == name)

    def _count_down(self, name: bytes) -> None:
        count = self.queue_waits.get(name)
        if count is None:
            return
        count.open -= 1
        if count.open <= 0:
            for waiter in list(count.waiters):
                self.parking.release(waiter, DONE)

    def _count_up(self, name: bytes) -> None:
        count = self.queue_waits.get(name)
        if count is not None:
            count.open += 1

    # -------------------------------------------------------------- hooks

    def job_done(self, job: Job, reason: int) -> None:
        if self.job_waits and reason != GONE_MOVED:
            self._settle_job(job.id, STATUS_BY_REASON[reason])
        if self.queue_waits:
            self._count_down(job.queue)

    def job_live(self, job: Job) -> None:
        self._count_up(job.queue)

    def job_moved(self, job: Job, old_queue: bytes) -> None:
        """A live job moved from `old_queue` to job.queue (dead-lettering)."""
        self._count_up(job.queue)
        self._count_down(old_queue)

    # ------------------------------------------------------------ leaving

    def forget(self, waiter: Waiter) -> None:
        """Take a WAITJOB or QWAIT off the entries that name it (called by
        Parking.forget, once)."""
        if waiter.kind == WAITJOB:
            job_waits = self.job_waits
            for job_id in waiter.positions:
                waiters = job_waits.get(job_id)
                if waiters is not None:
                    waiters.pop(waiter, None)
                    if not waiters:
                        del job_waits[job_id]
            self.core.watch_jobs = bool(job_waits)
            return
        count = self.queue_waits.get(waiter.queue)
        if count is not None:
            count.waiters.pop(waiter, None)
            if not count.waiters:
                del self.queue_waits[waiter.queue]
                self.core.watch_queues = bool(self.queue_waits)

    def flushed(self) -> None:
        """DEBUG FLUSHALL deleted every job: every WAITJOB position still
        open is `deleted`, and every QWAIT's queue is empty."""
        for job_id in list(self.job_waits):
            self._settle_job(job_id, STATUS_DELETED)
        for count in list(self.queue_waits.values()):
            for waiter in list(count.waiters):
                self.parking.release(waiter, DONE)
