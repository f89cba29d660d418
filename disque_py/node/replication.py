"""Synchronous replication: ADDJOB waits until REPLICATE copies exist.

The producing node keeps a copy (unless it is leaving or short of memory:
then every copy is external) and sends REPLJOB to repl-1 (or repl) random
reachable peers; each answers GOTJOB. When enough copies are confirmed the
producer gets the ID and only then is the job queued, here only: the other
copies stay active, ready to re-queue it if nobody acknowledges it in time.
While copies are missing, one more node is asked and REPLJOB is sent again
to the nodes that have not answered, so slow or lost nodes do not stall
ADDJOB. Disque does this every 50 ms; here the wait is also at least a few
times the recent copy round trip, because a loaded cluster answers late
for everyone and asking more nodes then only doubles its load (pipelined
ADDJOBs can park thousands of jobs at once). If the producer's timeout passes first, or
it goes away, or the job expires, the job is deleted here and DELJOB is
sent to every node that may have got a copy (best effort), flagged
MSG_ABANDONED so that they forget its DEDUP key with it. An ADDJOB with the
same DEDUP key meanwhile follows the first: it gets the same answer.

A copy can be in flight to this node or a holder when the job is deleted
there: a holder that heals the job (healing.py) when another holder fails
sends REPLJOB to every holder it lists, and that frame crosses the DELJOB.
So each node that deletes a job for a failed ADDJOB remembers its ID for
ABANDONED_REFUSE_MS and makes no copy of it meanwhile (copies.pxi), unless
the copy is flagged MSG_KEPT: the job was promised to a duplicate ADDJOB
(DEDUP), so it lives on, and healing copies it back (keep_promised). Only
a failed ADDJOB's ID is remembered, so no job whose ADDJOB succeeded is
ever refused.
"""

from __future__ import annotations

from collections import deque

from disque_py.base.errors import NoReplError
from disque_py.base.replies import FIRST_ADD_GONE, REMOVED_BEFORE_COPIES, TIMEOUT_BEFORE_COPIES
from disque_py.engine import (ACKED, ACTIVE, FLAG_BCAST_QUEUED, FLAG_CONFIRMED, FLAG_PROMISED,
                              PAUSED_IN, QUEUED, Job)
from disque_py.formats import bus as msg
from disque_py.node.waiters import DUPLICATE_ADD, JOB_REPLICATION, Waiter

REPLICATION_RETRY_MS = 50
RTT_RETRY_FACTOR = 4          # retry once a job waited this many recent round trips
# A copy crossing a failed ADDJOB's DELJOB is refused this long: a few
# (default) node timeouts, far longer than any frame stays in flight ...
ABANDONED_REFUSE_MS = 60_000
ABANDONED_IDS_MAX = 65_536    # ... and for that many IDs at most (the oldest go first)


class Replication:
    """The copies this node waits for: its producers' and its DEDUP
    duplicates' (promise rounds)."""

    def __init__(self, core, parking, healing) -> None:
        self.core = core
        self.parking = parking
        self.healing = healing
        # Jobs whose producer awaits copies, by last ask: the engine's
        # copies_achieved (copies.pxi) takes a job off when its copies exist.
        self.replicating: dict[Job, None] = core.replicating
        self.confirming: dict = core.confirming  # copies promised to duplicate ADDJOBs: job -> extra
        # A producer's waiter is on no structure of its own: the job's extra
        # record holds it, and copies_achieved (copies.pxi) or abandon() take it off.
        self._abandoned_order: deque = deque()   # (until, job ID) of core.abandoned, oldest first
        parking.owns(JOB_REPLICATION, None, cancel=self._producer_gone)
        parking.owns(DUPLICATE_ADD, self.forget_follower)

    # ------------------------------------------------------------ producer

    def wait_for_copies(self, job: Job, client, deadline_ms: int, extra_copies: int,
                        external: bool, now: int) -> None:
        """Park the producer on `job` and ask peers for the copies."""
        core = self.core
        extra = core.more(job)
        extra.confirmed = set() if external else {core.id}
        waiter = Waiter(client, JOB_REPLICATION, deadline_ms)
        waiter.job = job
        extra.waiter = waiter
        self.parking.start(waiter)
        self.replicating[job] = None
        core.update_awake(job)          # its TTL runs while it waits
        core.replicate(job, extra_copies, noreply=False)
        extra.repl_added_at = now

    def tick(self, now: int) -> None:
        """Ask one more node for the jobs that waited too long. `replicating`
        is ordered by when each job last asked, so only due jobs are seen."""
        core = self.core
        replicating = self.replicating
        wait = max(REPLICATION_RETRY_MS, RTT_RETRY_FACTOR * core.repl_rtt_ms)
        due = []
        extras = core.extras
        for job in replicating:
            if now - extras[job].repl_added_at < wait:
                break
            due.append(job)
        for job in due:
            core.replicate(job, 1, noreply=False)
            extras[job].repl_added_at = now
            del replicating[job]
            replicating[job] = None         # to the back: asked last

    def abandon(self, job: Job, outcome, keep_promised: bool = False) -> None:
        """Give up waiting for copies: delete the job everywhere (best
        effort) and answer the producer with `outcome` (None: it is gone).
        With `keep_promised`, a job a holder promised to a duplicate ADDJOB
        (DEDUP) stays, as an ordinary job: only this ADDJOB failed."""
        core = self.core
        self.replicating.pop(job, None)
        extra = core.more(job)
        waiter, extra.waiter = extra.waiter, None
        job.state = ACTIVE
        if keep_promised and job.flags & FLAG_PROMISED:
            extra.confirmed = None
            core.enqueue(job)
            core.persist_job(job)
        else:
            core.send_to(job.delivered, msg.DELJOB, (job.id, 0), msg.MSG_ABANDONED)
            core.forget_dedup(job)
            core.unregister(job)
            self.refuse_copies(job.id)
        if waiter is not None:
            if outcome is None:
                self.parking.forget(waiter)
            else:
                self.parking.release(waiter, outcome)
        self._release_followers(extra, NoReplError(FIRST_ADD_GONE) if outcome is None
                                else outcome)

    def abandon_all(self, outcome) -> None:
        """This node is leaving: every waiting ADDJOB fails with `outcome`,
        but a job whose copy here was promised to a duplicate ADDJOB
        elsewhere stays, as when the ADDJOB times out: the duplicate may
        have counted this copy."""
        for job in list(self.replicating):
            self.abandon(job, outcome, keep_promised=True)

    def refuse_copies(self, job_id: bytes) -> None:
        """The job's ADDJOB failed and its copy here is gone: a REPLJOB not
        flagged MSG_KEPT makes none again for ABANDONED_REFUSE_MS."""
        abandoned, order = self.core.abandoned, self._abandoned_order
        until = self.core.clock.now_ms() + ABANDONED_REFUSE_MS
        abandoned[job_id] = until
        order.append((until, job_id))
        while len(order) > ABANDONED_IDS_MAX:
            self._forget_oldest_abandoned()

    def expire_abandoned(self, now: int) -> None:
        """Forget the failed ADDJOBs' IDs whose time is up."""
        order = self._abandoned_order
        while order and order[0][0] <= now:
            self._forget_oldest_abandoned()

    def _forget_oldest_abandoned(self) -> None:
        until, job_id = self._abandoned_order.popleft()
        abandoned = self.core.abandoned
        if abandoned.get(job_id) == until:      # not remembered again since
            del abandoned[job_id]

    def _producer_gone(self, waiter: Waiter) -> None:
        """The client of a waiting ADDJOB went away (Parking.cancel)."""
        self.abandon(waiter.job, None, keep_promised=True)

    def timed_out(self, waiter: Waiter) -> None:
        if waiter.kind == DUPLICATE_ADD:       # the first ADDJOB still waits
            self.parking.release(waiter, NoReplError(TIMEOUT_BEFORE_COPIES))
        else:
            self.abandon(waiter.job, NoReplError(TIMEOUT_BEFORE_COPIES), True)

    def keep_promised(self, job: Job) -> None:
        """The producer gave up on `job` (DELJOB flagged MSG_ABANDONED), but
        its ID was promised to a duplicate ADDJOB: this holder keeps it
        (the other promised holders too), queues it, and has it healed back
        to its level (healing.py: after_abandon), since the producer
        and every holder that promised nothing deleted their copies."""
        core = self.core
        if job.state != QUEUED:
            core.enqueue(job)
        core.persist_job(job)
        self.healing.after_abandon(job)

    def confirm_copies(self, job: Job, client, deadline_ms: int, copies: int) -> Waiter:
        """A duplicate ADDJOB found a copy here whose first ADDJOB's fate
        this node does not know: it gets the ID once `copies` of the job's
        holders (its own REPLICATE, at most the job's) confirm their copy
        (GOTJOB), asked by REPLJOB flagged MSG_PROMISED so that each keeps
        its copy if that first ADDJOB fails (a holder without one makes
        none). A duplicate that joins a round under way asks again (frames
        may have been lost); its own timeout gives NOREPL."""
        core = self.core
        core.promise_copy(job)
        waiter = self.follow(job, client, deadline_ms)
        waiter.copies = copies
        extra = core.more(job)
        if extra.confirmed is None:
            extra.confirmed = {core.id}
        core.replicate(job, 0, noreply=False, promised=True)
        extra.repl_added_at = core.clock.now_ms()
        self.confirming[job] = extra
        return waiter

    def tick_promises(self, now: int) -> None:
        """Promise rounds still short of copies ask the holders again (a
        frame may have been lost); a round nobody waits for any more ends,
        and one whose job left this node or was acked answers its
        duplicates (the ID if it was acked, else NOREPL)."""
        core = self.core
        wait = max(REPLICATION_RETRY_MS, RTT_RETRY_FACTOR * core.repl_rtt_ms)
        for job, extra in list(self.confirming.items()):
            if core.extras.get(job) is not extra or job.state == ACKED:
                self.end_promise_round(job, extra)
            elif not extra.followers or extra.confirmed is None:
                del self.confirming[job]
                extra.confirmed = None
            elif now - extra.repl_added_at >= wait:
                core.replicate(job, 0, noreply=False, promised=True)
                extra.repl_added_at = now

    def end_promise_round(self, job: Job, extra) -> None:
        """The job was acked (its ID is the answer) or left this node (NOREPL)
        while duplicates waited for a round of confirmations."""
        del self.confirming[job]
        extra.confirmed = None
        self._release_followers(extra, job.id if job.state == ACKED else
                                NoReplError(REMOVED_BEFORE_COPIES))

    def promise_progress(self, job: Job, extra) -> None:
        """One more copy confirmed in a promise round: the duplicates that
        asked for that many get the ID; at the job's REPLICATE level (or
        with nobody left waiting) the round ends."""
        confirmed = len(extra.confirmed)
        for waiter in [w for w in extra.followers if w.copies <= confirmed]:
            self.parking.release(waiter, job.id)
        if confirmed >= job.repl:
            job.flags |= FLAG_CONFIRMED
            self._release_followers(extra, job.id)
        if not extra.followers:
            extra.confirmed = None
            self.confirming.pop(job, None)

    def follow(self, job: Job, client, deadline_ms: int) -> Waiter:
        """Park a duplicate ADDJOB (its DEDUP key names `job`, which still
        waits for its copies) until the first one's answer or its own
        deadline (then NOREPL, as its own ADDJOB would get)."""
        waiter = Waiter(client, DUPLICATE_ADD, deadline_ms)
        waiter.job = job
        extra = self.core.more(job)
        if extra.followers is None:
            extra.followers = []
        extra.followers.append(waiter)
        self.parking.start(waiter)
        return waiter

    def forget_follower(self, waiter: Waiter) -> None:
        extra = self.core.extras.get(waiter.job)
        if extra is not None and extra.followers and waiter in extra.followers:
            extra.followers.remove(waiter)

    def _release_followers(self, extra, outcome) -> None:
        followers, extra.followers = extra.followers, None
        for waiter in followers or ():
            self.parking.release(waiter, outcome)

    # ------------------------------------------------------------ holders
    # REPLJOB (on_repljob), GOTJOB (on_gotjob) and sending REPLJOB
    # (replicate) are every replicated job's cost: NodeCore runs them in C
    # (engine/node/copies.pxi).

    def on_enqueue_message(self, sender: bytes, mflags: int, job_id: bytes, delay: int) -> None:
        """ENQUEUE: the producer kept no copy and asks us to queue it first."""
        core = self.core
        job = core.jobs.get(job_id)
        if job is None or job.state >= QUEUED:
            return
        q = core.queues.get(job.queue)
        if q is not None and q.flags & PAUSED_IN:
            return
        job.flags &= ~FLAG_BCAST_QUEUED
        if delay == 0:
            core.enqueue(job)
        else:
            core.set_requeue_time(job, core.clock.now_ms() + delay * 1000)

