"""The awake schedule: every job, ordered by when it next needs attention.

One structure drives every timer a job has: first queueing after DELAY,
re-queueing after RETRY, the WILLQUEUE notice ahead of it, expiry at TTL and
the garbage collection of acknowledged jobs. Jobs sit in time buckets of
BUCKET_MS; a bucket is a dict used as an ordered set (job -> None) and a
heap orders the buckets. That gives O(1) insertion and removal of any job
(job.awake points at its bucket) and makes "100,000 jobs due at once" one
bucket handed out in slices, never a scan of all jobs.

A job is due at or after its exact time and at most BUCKET_MS later.
"""

from __future__ import annotations

import heapq

BUCKET_MS = 10


class Bucket(dict):
    """Jobs due in one BUCKET_MS slot; `due` is the slot's time in ms."""

    __slots__ = ("due",)


class AwakeSchedule:
    __slots__ = ("_buckets", "_heap")

    def __init__(self) -> None:
        self._buckets: dict[int, Bucket] = {}
        self._heap: list[int] = []

    def __len__(self) -> int:
        return sum(len(bucket) for bucket in self._buckets.values())

    def schedule(self, job, at_ms: int) -> None:
        """(Re)place `job` so it is due at `at_ms` (0 takes it off)."""
        current = job.awake
        if current is not None:
            if at_ms and current.due - BUCKET_MS < at_ms <= current.due:
                return
            del current[job]
            job.awake = None
        if not at_ms:
            return
        slot = -(-at_ms // BUCKET_MS) * BUCKET_MS
        bucket = self._buckets.get(slot)
        if bucket is None:
            bucket = self._buckets[slot] = Bucket()
            bucket.due = slot
            heapq.heappush(self._heap, slot)
        bucket[job] = None
        job.awake = bucket

    def unschedule(self, job) -> None:
        bucket = job.awake
        if bucket is not None:
            del bucket[job]
            job.awake = None

    def next_due(self) -> int | None:
        """When the earliest non-empty bucket is due, or None."""
        heap, buckets = self._heap, self._buckets
        while heap:
            slot = heap[0]
            if buckets[slot]:
                return slot
            heapq.heappop(heap)
            del buckets[slot]
        return None

    def pop_due(self, now_ms: int, limit: int) -> list:
        """Take up to `limit` due jobs off the schedule, earliest first."""
        taken: list = []
        heap, buckets = self._heap, self._buckets
        while heap and heap[0] <= now_ms and len(taken) < limit:
            slot = heap[0]
            bucket = buckets[slot]
            room = limit - len(taken)
            if len(bucket) <= room:
                heapq.heappop(heap)
                del buckets[slot]
                jobs = list(bucket)
            else:
                jobs = []
                for job in bucket:
                    jobs.append(job)
                    if len(jobs) == room:
                        break
                for job in jobs:
                    del bucket[job]
            for job in jobs:
                job.awake = None
            taken.extend(jobs)
        return taken

    def clear(self) -> tuple[dict, list]:
        """Empty the schedule at once; returns the old contents to free later."""
        old = (self._buckets, self._heap)
        self._buckets, self._heap = {}, []
        return old
