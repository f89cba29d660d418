"""Acknowledgements and the garbage collection of acknowledged jobs.

An ACK is a proof of delivery. ACKJOB marks the job acked here (out of its
queue, never re-queued by this node) and starts a collection: SETACK goes
to every node that may have a copy and has not confirmed; each answers
GOTACK; once all have, DELJOB deletes every copy. Unanswered SETACKs are
sent again with exponential backoff (1 s doubling to 3 minutes, with
jitter), until the job's TTL ends everything.

An ACKJOB for an unknown at-least-once ID, in a cluster, leaves a "dummy
ack": an acked job with no body and no known holders, kept so the ack can
reach a copy on the other side of a partition. Its SETACK goes to every
node; a node that knows the job takes over the collection; a dummy ack
nobody knows is dropped once every node said so. Its expire time comes
from the TTL encoded in the ID. FASTACK and DELJOB skip the protocol.

ACKJOB, FASTACK and DELJOB themselves, and acknowledge(), are NodeCore's
(engine/node.pxi): a job whose only copy is here is deleted there at once;
the collection below runs for the others.
"""

from __future__ import annotations

from disque_py.formats import bus as msg
from disque_py.engine import ACKED, FLAG_PROMISED, GC_RETRY_COUNT_MAX, Job


class AcksMixin:
    def try_gc(self, job: Job, from_timer: bool = False) -> None:
        """Delete an acked job once every node that may have it confirmed;
        otherwise (re)send SETACK to those that have not. The next attempt
        is scheduled by the timer path (1 s after the ack, then 4, 8, ...
        up to 3 minutes, as in Disque); a command's attempt keeps it."""
        if job.state != ACKED:
            return
        if job.delivered is self._only_me:
            self.unregister(job)     # the only copy is ours: nobody else to tell
            return
        extra = self.more(job)
        if job.gc_retry < GC_RETRY_COUNT_MAX:
            job.gc_retry += 1
        if job in self.confirming:
            self.end_promise_round(job, extra)    # its GOTJOBs are not GOTACKs
        if extra.confirmed is None:
            extra.confirmed = {self.id}
        confirmed, delivered = extra.confirmed, job.delivered
        if (delivered and all(node in confirmed for node in delivered)) \
                or (not delivered and self.cluster_size == 1):
            self.unregister(job)
            return
        targets = delivered or self.known_peers
        for node_id in targets:
            if node_id not in confirmed and node_id != self.id:
                self.send_setack(node_id, job)
        if from_timer or job.awake_due is None:
            self.update_awake(job, self._next_gc_time(job.gc_retry))

    def send_setack(self, node_id: bytes, job: Job) -> None:
        self.send(node_id, msg.SETACK, (job.id, len(job.delivered)))

    # ------------------------------------------------------------ messages

    def on_setack(self, sender: bytes, mflags: int, job_id: bytes, may_have: int) -> None:
        """SETACK: mark acked; confirm unless we know more holders than the
        sender (then the collection is ours to run)."""
        job = self.jobs.get(job_id)
        if job is not None:
            self.acknowledge(job)
            if self.jobs.get(job_id) is not job:
                job = None       # it was external: gone from this node
        if job is None or len(job.delivered) <= may_have:
            self.send(sender, msg.GOTACK, (job_id, 1 if job is not None else 0))
            return
        if may_have == 0:
            self.send(sender, msg.GOTACK, (job_id, 1))
        self.try_gc(job)

    def on_gotack(self, sender: bytes, mflags: int, job_id: bytes, known: int) -> None:
        job = self.jobs.get(job_id)
        if job is None or job.state != ACKED:
            return
        dummy = not job.delivered
        if dummy and known:
            self.unregister(job)     # a node that has the job runs the collection
            return
        extra = self.more(job)
        if known or sender in job.delivered:
            if sender not in job.delivered:
                job.delivered = job.delivered + (sender,)
            if extra.confirmed is not None:
                extra.confirmed.add(sender)
        if dummy:
            if extra.confirmed is None:
                extra.confirmed = {self.id}
            extra.confirmed.add(sender)
            if len(extra.confirmed) >= self.cluster_size:
                self.unregister(job)  # nobody knows this job: drop the ack
            return
        if extra.confirmed is not None and \
                all(node in extra.confirmed for node in job.delivered):
            self.send_to(job.delivered, msg.DELJOB, (job.id, 0))
            self.unregister(job)

    def on_deljob(self, sender: bytes, mflags: int, job_id: bytes, aux: int) -> None:
        job = self.jobs.get(job_id)
        if job is not None:
            if mflags & msg.MSG_ABANDONED:
                if job.flags & FLAG_PROMISED and job.state != ACKED:
                    self.keep_promised(job)
                    return
                self.forget_dedup(job)
            self.unregister(job)
