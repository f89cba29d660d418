"""Federation: jobs move to the nodes where consumers wait.

Disque's protocol (queue.c): a node with clients blocked on an empty queue
sends NEEDJOBS(queue, count); a node that has jobs queued answers YOURJOBS
with some of them, taken out of its queue. The asking node remembers who
answered (QSTAT import-from) and the rate it imports at (import-rate):
under traffic it asks those nodes again at once whenever its queue runs
dry, and otherwise broadcasts to everyone with a growing delay.

Beyond Disque: an empty-handed NEEDJOBS is remembered by its receiver as
an interest in that queue for INTEREST_TTL_MS. When a job is later queued
there and nobody waits for it locally, the receiver offers it to an
interested node at once instead of waiting to be asked again. So the first
job reaches a consumer blocked elsewhere in one hop at any traffic level,
and a node with waiters renews its interest every BCAST_MAX_DELAY_MS, far
fewer messages than polling.

Moving a job keeps its guarantees: only queued jobs are handed out; the
receiver queues its copy and the giver keeps an active one (or none, for an
at-most-once job, which must exist once); the receiver is added to the
job's holders here and at the other holders (a NOREPLY REPLJOB refreshes
their lists), so an ACK anywhere reaches the moved copy.
"""

from __future__ import annotations

from disque_py.formats import bus as msg
from disque_py.engine import (ACKED, ACTIVE, FLAG_BCAST_QUEUED, GONE_MOVED, PAUSED_OUT, Job, Queue,
                              deserialize_jobs)

NEEDJOBS_MIN_REQUEST = 5
NEEDJOBS_MAX_REQUEST = 100
BCAST_MIN_DELAY_MS = 2000
BCAST_MAX_DELAY_MS = 5000          # Disque: 30 s; here it also renews interest
ADHOC_MIN_DELAY_MS = 25
ADHOC_MAX_DELAY_MS = 2000
RESPONDER_TTL_S = 5
INTEREST_TTL_MS = 12_000           # outlives a renewal period with margin
NEEDJOBS_CRON_MS = 100             # blocked queues ask again this often (with backoff)


class Federation:
    """One node's part in moving jobs to where consumers wait; its counters
    are INFO's and /metrics'."""

    def __init__(self, core, acks, waiting_queues) -> None:
        """`waiting_queues()`: the queues some parked consumer waits on
        (Consumers.queues_with_waiters), which keep asking."""
        self.core = core
        self.acks = acks
        self.waiting_queues = waiting_queues
        self.needjobs_sent = self.needjobs_received = 0
        self.jobs_sent = self.jobs_received = self.offers = 0
        self._cron_ran = 0

    # ------------------------------------------------------------ asking

    def need_jobs(self, q: Queue, reached_zero: bool) -> None:
        """Ask peers for jobs for `q` (clients wait on it, or it just ran dry)."""
        core = self.core
        if core.leaving or not core.known_peers or len(q.name) > msg.MAX_QUEUE_NAME:
            return
        now = core.clock.now_ms()
        rate = q.import_rate(now)
        if reached_zero and rate == 0:
            return          # no flow to keep going: wait for a client to block
        responders = self._valid_responders(q, now // 1000)
        to_fetch = rate // len(responders) if responders else NEEDJOBS_MIN_REQUEST
        to_fetch = max(NEEDJOBS_MIN_REQUEST, min(to_fetch, NEEDJOBS_MAX_REQUEST))
        bcast_delay = min(BCAST_MIN_DELAY_MS << min(q.needjobs_bcast_attempt, 16),
                          BCAST_MAX_DELAY_MS)
        if now - q.needjobs_bcast_time > bcast_delay:
            q.needjobs_bcast_time = now
            q.needjobs_bcast_attempt += 1
            self._send_needjobs(core.known_peers, q.name, 1)
        adhoc_delay = min(ADHOC_MIN_DELAY_MS << min(q.needjobs_adhoc_attempt, 16),
                          ADHOC_MAX_DELAY_MS)
        if responders and (reached_zero or now - q.needjobs_adhoc_time > adhoc_delay):
            q.needjobs_adhoc_time = now
            q.needjobs_adhoc_attempt += 1
            self._send_needjobs(responders, q.name, to_fetch)

    def _send_needjobs(self, nodes, name: bytes, count: int) -> None:
        self.needjobs_sent += self.core.send_to(nodes, msg.NEEDJOBS, msg.QueueOp(name, count))

    def _valid_responders(self, q: Queue, now_s: int) -> list[bytes]:
        responders = q.responders
        if not responders:
            return []
        for node_id, last in list(responders.items()):
            if now_s - last > RESPONDER_TTL_S:
                del responders[node_id]
        return list(responders)

    def tick(self, now: int) -> None:
        """Blocked queues keep asking (need_jobs applies the backoff)."""
        if now - self._cron_ran < NEEDJOBS_CRON_MS:
            return
        self._cron_ran = now
        for q in list(self.waiting_queues()):
            if not q.jobs:
                self.need_jobs(q, False)

    # ------------------------------------------------------------ giving

    def on_needjobs(self, sender: bytes, name: bytes, count: int) -> None:
        core = self.core
        self.needjobs_received += 1
        q = core.queues.get(name)
        now = core.clock.now_ms()
        if q is None or not q.jobs or q.flags & PAUSED_OUT or q.import_rate(now) > 0:
            if q is None:
                q = core.queue(name)
            if q.interested is None:
                q.interested = {}
            q.interested[sender] = (now + INTEREST_TTL_MS, max(count, 1))
            return
        self._give(q, sender, count)

    def _give(self, q: Queue, receiver: bytes, count: int) -> None:
        """YOURJOBS: hand some queued jobs over (never more than half the
        queue unless it holds twice what was asked; always at least one)."""
        core = self.core
        queued = len(q.jobs)
        howmany = count if queued >= 2 * count else max(queued // 2, 1)
        now_s = core.clock.now_ms() // 1000
        for _ in range(howmany):
            job = core.fetch(q, False)      # moved, not delivered
            if job is None:
                break
            if job.retry and job.delivered and receiver not in job.delivered:
                job.delivered = job.delivered + (receiver,)
                self._refresh_holders(job, receiver, now_s)
            core.send(receiver, msg.YOURJOBS, core.job_bytes(job, now_s, receiver))
            self.jobs_sent += 1
            if job.retry == 0:
                core.unregister(job, GONE_MOVED)   # at most once: the only copy moves
        if q.interested:
            q.interested.pop(receiver, None)

    def _refresh_holders(self, job: Job, receiver: bytes, now_s: int) -> None:
        core = self.core
        for node_id in job.delivered:
            if node_id not in (core.id, receiver):
                core.send(node_id, msg.REPLJOB, core.job_bytes(job, now_s, node_id),
                          msg.MSG_NOREPLY)

    def offer_to_interested(self, q: Queue) -> None:
        """Jobs sit in `q` and nobody here waits: push them to a node that
        said it needs them, at once."""
        if q.flags & PAUSED_OUT or not q.jobs or q.waiters is not None:
            return
        core = self.core
        now = core.clock.now_ms()
        if q.import_rate(now) > 0:
            # Jobs come here because consumers here asked: keep them for
            # those (as on_needjobs does). Passing them on would bounce a
            # job between nodes whose consumers poll rather than block,
            # each keeping its interest fresh: in no queue long enough to
            # be fetched, for as long as they poll.
            return
        interested = q.interested
        for node_id, (expires, count) in list(interested.items()):
            if not q.jobs:
                break
            if expires < now or node_id not in core.known_peers:
                del interested[node_id]
                continue
            self.offers += 1
            self._give(q, node_id, count)
        if not interested:
            q.interested = None

    # ------------------------------------------------------------ receiving

    def on_yourjobs(self, sender: bytes, mflags: int, jobs: list[bytes]) -> None:
        core = self.core
        now = core.clock.now_ms()
        for record in deserialize_jobs(jobs, now // 1000):
            job = core.jobs.get(record.id)
            if job is None:
                job = core.adopt_record(record, now, ACTIVE)
            elif job.state == ACKED:
                self.acks.send_setack(sender, job)    # delivered already: tell the giver
                continue
            else:
                core.learn_holders(job, record.delivered)
            self.jobs_received += 1
            job.flags &= ~FLAG_BCAST_QUEUED     # moved, not re-delivered: no QUEUED
            if job.retry == 0:
                job.qtime = now                  # queueable once, here
                job.delivered = core._only_me
            elif core.id not in job.delivered and job.delivered:
                job.delivered = job.delivered + (core.id,)
            if not core.enqueue(job):
                continue
            q = core.queues.get(job.queue)
            if q.responders is None:
                q.responders = {}
            if sender not in q.responders:
                q.needjobs_bcast_attempt = 0     # a new source: broadcasts restart fast
            q.responders[sender] = now // 1000
            q.count_import(now)
            q.needjobs_adhoc_attempt = 0
