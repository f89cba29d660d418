"""Re-queueing across nodes: the messages that keep copies from being
queued twice, best effort.

Every holder re-queues an unacknowledged job when its retry time comes.
To avoid delivering it twice, 500 ms before that a holder sends WILLQUEUE
to the others; a node that has the job queued answers QUEUED, and one that
has it acked answers SETACK. A node that queues a job again sends QUEUED;
holders that receive it push their own re-queue time forward, and one that
has it queued too drops it if the sender wins the job-specific comparison
of node IDs. WORKING (a consumer is still on it) moves re-queue times
forward everywhere and takes the job out of every queue.

Beyond Disque (the flags and aux older nodes ignore): QUEUED with MSG_DEAD
says the job went to its dead-letter queue, so every copy moves there and
no other holder dead-letters it again; QUEUED with aux > 0 is a NACK with
a delay (DELAY or BACKOFF): queued at the sender that many ms from now, so
the others take their copies out of their queues and wait that much more.
"""

from __future__ import annotations

from disque_py.formats import bus as msg
from disque_py.engine import ACKED, ACTIVE, FLAG_BCAST_WILLQUEUE, QUEUED


class Requeue:
    """Re-queue messages: what this node tells the other holders, and how
    it answers theirs."""

    def __init__(self, core, acks) -> None:
        self.core = core
        self.acks = acks

    def requeue_dead(self, dead_queue: bytes, to_queue: bytes | None, count: int) -> int:
        """QREQUEUE: dead jobs back to work here; their other holders get
        the revised job (REPLJOB with MSG_REVISED) and follow."""
        core = self.core
        moved = core.revive_dead(dead_queue, to_queue, count)
        now_s = core.clock.now_ms() // 1000
        for job in moved:
            for node_id in job.delivered:
                if node_id != core.id:
                    core.send(node_id, msg.REPLJOB, core.job_bytes(job, now_s, node_id),
                              msg.MSG_NOREPLY | msg.MSG_REVISED)
        return len(moved)

    def announce_willqueue(self, job) -> None:
        self.core.send_to(job.delivered, msg.WILLQUEUE, (job.id, 0))

    def on_queued(self, sender: bytes, mflags: int, job_id: bytes, aux: int) -> None:
        self._postpone(sender, mflags, job_id, working=False, delay_ms=aux)

    def on_working(self, sender: bytes, mflags: int, job_id: bytes, aux: int) -> None:
        self._postpone(sender, mflags, job_id, working=True, delay_ms=0)

    def _postpone(self, sender: bytes, mflags: int, job_id: bytes, working: bool,
                  delay_ms: int) -> None:
        core = self.core
        job = core.jobs.get(job_id)
        if job is None:
            return
        if job.state == ACKED:
            self.acks.send_setack(sender, job)     # they re-queued what was delivered
            return
        if job.state == QUEUED and (working or delay_ms or mflags & msg.MSG_DEAD or
                                    compare_node_ids_by_job(sender, core.id, job.id) > 0):
            core.dequeue(job)
        if mflags & msg.MSG_DEAD:
            core.mark_dead(job)
        if job.retry:
            job.flags |= FLAG_BCAST_WILLQUEUE
            core.set_requeue_time(job, core.retry_time(job, core.clock.now_ms()) + delay_ms)
        if not working and mflags & (msg.MSG_INCR_NACKS | msg.MSG_INCR_DELIV):
            if mflags & msg.MSG_INCR_NACKS:
                job.nacks += 1
            if mflags & msg.MSG_INCR_DELIV:
                job.deliveries += 1

    def on_willqueue(self, sender: bytes, mflags: int, job_id: bytes, aux: int) -> None:
        core = self.core
        job = core.jobs.get(job_id)
        if job is None:
            return
        if job.state in (ACTIVE, QUEUED):
            if sender not in job.delivered and job.delivered:
                job.delivered = job.delivered + (sender,)
            if job.state == QUEUED:
                core.send_to(job.delivered, msg.QUEUED, (job.id, 0))
        elif job.state == ACKED:
            self.acks.send_setack(sender, job)


def compare_node_ids_by_job(node_a: bytes, node_b: bytes, job_id: bytes) -> int:
    """Which of two nodes wins a re-queue race for this job (>0: node_a).

    Node IDs are mixed with the job's random part first, so the same node
    does not always win: the comparison depends on the job."""
    mix = job_id[11:35]
    a = bytes(x ^ mix[i % 24] for i, x in enumerate(node_a))
    b = bytes(x ^ mix[i % 24] for i, x in enumerate(node_b))
    return (a > b) - (a < b)
