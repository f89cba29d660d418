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

ACKJOB, FASTACK and DELJOB themselves, acknowledge(), the dummy ack and
the collection's steps (try_gc, SETACK, GOTACK) are the engine's
(engine/node/acks.pxi): a job whose only copy is here is deleted there at
once; the collection runs for the others. Here: the messages decoded in
Python (the bus's fast path takes SETACK and GOTACK in C), DELJOB, and
SETACKs other components send.
"""

from __future__ import annotations

from disque_py.formats import bus as msg
from disque_py.engine import ACKED, FLAG_PROMISED, Job


class Acks:
    """The ack collections this node runs or answers."""

    def __init__(self, core, replication) -> None:
        self.core = core
        self.replication = replication

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
