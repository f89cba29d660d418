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

ACKJOB, FASTACK and DELJOB themselves, acknowledge() and the dummy ack are
the engine's (engine/node/acks.pxi): a job whose only copy is here is
deleted there at once; the collection below runs for the others (the
engine calls try_gc through NodeHooks).
"""

from __future__ import annotations

from disque_py.formats import bus as msg
from disque_py.engine import ACKED, FLAG_PROMISED, GC_RETRY_COUNT_MAX, Job


class Acks:
    """The ack collections this node runs or answers."""

    def __init__(self, core, replication) -> None:
        self.core = core
        self.replication = replication

    def try_gc(self, job: Job, from_timer: bool = False) -> None:
        """Delete an acked job once every node that may have it confirmed;
        otherwise (re)send SETACK to those that have not. The next attempt
        is scheduled by the timer path (1 s after the ack, then 4, 8, ...
        up to 3 minutes, as in Disque); a command's attempt keeps it."""
        core = self.core
        if job.state != ACKED:
            return
        if job.delivered is core._only_me:
            core.unregister(job)     # the only copy is ours: nobody else to tell
            return
        extra = core.more(job)
        if job.gc_retry < GC_RETRY_COUNT_MAX:
            job.gc_retry += 1
        if job in self.replication.confirming:
            self.replication.end_promise_round(job, extra)    # its GOTJOBs are not GOTACKs
        if extra.confirmed is None:
            extra.confirmed = {core.id}
        confirmed, delivered = extra.confirmed, job.delivered
        if (delivered and all(node in confirmed for node in delivered)) \
                or (not delivered and core.cluster_size == 1):
            core.unregister(job)
            return
        targets = delivered or core.known_peers
        for node_id in targets:
            if node_id not in confirmed and node_id != core.id:
                self.send_setack(node_id, job)
        if from_timer or job.awake_due is None:
            core.update_awake(job, core._next_gc_time(job.gc_retry))

    def send_setack(self, node_id: bytes, job: Job) -> None:
        self.core.send(node_id, msg.SETACK, (job.id, len(job.delivered)))

    # ------------------------------------------------------------ messages

    def on_setack(self, sender: bytes, mflags: int, job_id: bytes, may_have: int) -> None:
        """SETACK: mark acked; confirm unless we know more holders than the
        sender (then the collection is ours to run). The engine's rule
        (engine/node/acks.pxi), which the bus's fast path also runs."""
        self.core.on_setack(sender, mflags, job_id, may_have)

    def on_gotack(self, sender: bytes, mflags: int, job_id: bytes, known: int) -> None:
        """GOTACK: one more node has the ack; DELJOB once all have (the
        engine's rule, as on_setack)."""
        self.core.on_gotack(sender, mflags, job_id, known)

    def on_deljob(self, sender: bytes, mflags: int, job_id: bytes, aux: int) -> None:
        """DELJOB: delete the copy. Flagged MSG_ABANDONED (its ADDJOB
        failed): forget its DEDUP key too, and refuse the copies still in
        flight (replication.py); but a copy promised to a duplicate ADDJOB
        stays."""
        core = self.core
        job = core.jobs.get(job_id)
        if mflags & msg.MSG_ABANDONED:
            if job is not None and job.flags & FLAG_PROMISED and job.state != ACKED:
                self.replication.keep_promised(job)
                return
            self.replication.refuse_copies(job_id)
            if job is not None:
                core.forget_dedup(job)
        if job is not None:
            core.unregister(job)
