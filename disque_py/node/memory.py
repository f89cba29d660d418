"""The memory policy: what a node frees near maxmemory, and how full it is.

NodeCore (engine/node.pxi) derives two thresholds from maxmemory:
memory_warn_at (75%: ADDJOB keeps no local copy above it, REPLJOB takes
none) and memory_evict_at (95%: every command first tries to free memory,
and those that grow it are refused if that fails).
"""

from __future__ import annotations

import time

from disque_py.engine import ACKED, FLAG_DELIVERED

FREE_MEMORY_BUDGET_S = 0.002  # eviction work per refused command, at most
FREE_MEMORY_MISSES = 10       # give up after this many samples with nothing to evict


class MemoryPolicyMixin:
    def free_memory(self) -> bool:
        """Above 95% of maxmemory, evict what is safe to lose: acknowledged
        jobs and at-most-once jobs already delivered (idle empty queues when
        there is no job), as Disque does before every command. Works for at
        most FREE_MEMORY_BUDGET_S and gives up after FREE_MEMORY_MISSES
        samples in a row with nothing to evict. True when memory is back
        under 95% (the caller refuses commands that grow it otherwise)."""
        if self.used_memory <= self.memory_evict_at:
            return True
        if not self.evict_jobs:                 # maxmemory-policy noeviction
            return False
        if not len(self.jobs):
            self.evict_idle_queues()
            return self.used_memory <= self.memory_evict_at
        deadline = time.perf_counter() + FREE_MEMORY_BUDGET_S
        jobs = self.jobs
        partitions = jobs.partition_count
        index = self.rng.randrange(partitions)
        misses = visited = 0
        # A walk from a random partition samples jobs the way Disque's random
        # key does, without landing on empty partitions when jobs are few.
        while self.used_memory > self.memory_evict_at and misses <= FREE_MEMORY_MISSES \
                and visited < partitions and time.perf_counter() < deadline:
            part = jobs.partition(index)
            index = (index + 1) % partitions
            visited += 1
            if not part:
                continue
            evicted = False
            for job in part:
                if job.state == ACKED or (job.retry == 0 and job.flags & FLAG_DELIVERED):
                    self.unregister(job)
                    evicted = True
            misses = 0 if evicted else misses + 1
        return self.used_memory <= self.memory_evict_at

    def memory_warning_level(self) -> int:
        """0 below 75% of maxmemory, 1 above, 2 above 95%."""
        used = self.used_memory
        if used <= self.memory_warn_at:
            return 0
        return 2 if used > self.memory_evict_at else 1
