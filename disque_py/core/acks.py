"""Acknowledgements and the garbage collection of acknowledged jobs.

An ACK is a proof of delivery. ACKJOB marks the job acked (out of its
queue, never re-queued by this node) and starts a GC attempt: once every
node that may have a copy confirms it knows about the ack, the job is
deleted everywhere. On a node with no peers that is immediate.

An ACKJOB for an unknown at-least-once ID, in a cluster, leaves a "dummy
ack": an acked job with no body and no known holders, kept so the ack can
reach a copy on the other side of a partition. Its expire time comes from
the TTL encoded in the ID. FASTACK and DELJOB skip the protocol and delete.
"""

from __future__ import annotations

from disque_py.core.job import (ACKED, GC_RETRY_COUNT_MAX, GC_RETRY_MAX_PERIOD_MS,
                                GC_RETRY_MIN_PERIOD_MS, Job, intern_spec,
                                is_at_most_once_id, ttl_minutes_from_id)

GC_JITTER_MS = 500
_DUMMY_SPEC = intern_spec(0, 0, 0)


class AcksMixin:
    def ack_jobs(self, job_ids: list[bytes]) -> int:
        """ACKJOB: returns how many known jobs moved to the acked state."""
        known = 0
        for job_id in job_ids:
            job = self.jobs.get(job_id)
            if job is None:
                if self.cluster_size > 1 and not self.leaving \
                        and not is_at_most_once_id(job_id):
                    job = self._dummy_ack(job_id)
            elif job.state != ACKED:
                self.acknowledge(job)
                known += 1
            if job is not None:
                self.try_gc(job)
        return known

    def _dummy_ack(self, job_id: bytes) -> Job:
        now_s = self.clock.now_ms() // 1000
        job = Job(job_id, None, None, ACKED, _DUMMY_SPEC, 0,
                  now_s + ttl_minutes_from_id(job_id) * 60, ())
        self.register(job)
        self.update_awake(job)
        return job

    def acknowledge(self, job: Job) -> None:
        if job.state == ACKED:
            return
        self.dequeue(job)
        job.state = ACKED
        if job.extra is not None:
            job.extra.confirmed = None

    def try_gc(self, job: Job) -> None:
        """Delete an acked job once every node that may have it confirmed."""
        if job.state != ACKED:
            return
        if job.delivered is self._only_me:
            self.unregister(job)     # the only copy is ours: nobody else to tell
            return
        extra = job.more()
        if extra.gc_retry < GC_RETRY_COUNT_MAX:
            extra.gc_retry += 1
        if extra.confirmed is None:
            extra.confirmed = {self.id}
        delivered = job.delivered
        if delivered:
            done = all(node in extra.confirmed for node in delivered)
        else:
            done = self.cluster_size == 1
        if done:
            self.unregister(job)
            return
        self.update_awake(job, self._next_gc_time(extra.gc_retry))

    def _next_gc_time(self, attempts: int) -> int:
        period = min(GC_RETRY_MIN_PERIOD_MS << attempts, GC_RETRY_MAX_PERIOD_MS)
        return self.clock.now_ms() + period + self.clock.jitter(GC_JITTER_MS)

    def fast_ack(self, job_ids: list[bytes]) -> int:
        """FASTACK: delete known jobs at once; returns how many were known."""
        return self.delete_jobs(job_ids)

    def delete_jobs(self, job_ids: list[bytes]) -> int:
        """DELJOB: forget jobs on this node only, whatever their state."""
        deleted = 0
        for job_id in job_ids:
            job = self.jobs.get(job_id)
            if job is not None:
                self.unregister(job)
                deleted += 1
        return deleted
