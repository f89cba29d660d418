"""The memory policy: what a node frees near maxmemory, how full it is,
and the idle queues it forgets.

NodeCore (engine/node/core.pxi) derives two thresholds from maxmemory:
memory_warn_at (75%: ADDJOB keeps no local copy above it, REPLJOB takes
none) and memory_evict_at (95%: every command first tries to free memory,
and those that grow it are refused if that fails; the engine asks through
NodeHooks.free_memory).
"""

from __future__ import annotations

import time

from disque_py.engine import ACKED, FLAG_DELIVERED, QUEUE_MEMORY_OVERHEAD

FREE_MEMORY_BUDGET_S = 0.002  # eviction work per refused command, at most
FREE_MEMORY_MISSES = 10       # give up after this many samples with nothing to evict
QUEUE_MAX_IDLE_S = 5 * 60


class MemoryPolicy:
    """One node's memory policy."""

    def __init__(self, core) -> None:
        self.core = core
        self._evict_cursor = 0

    def free(self) -> bool:
        """Above 95% of maxmemory, evict what is safe to lose: acknowledged
        jobs and at-most-once jobs already delivered (idle empty queues when
        there is no job), as Disque does before every command. Works for at
        most FREE_MEMORY_BUDGET_S and gives up after FREE_MEMORY_MISSES
        samples in a row with nothing to evict. True when memory is back
        under 95% (the caller refuses commands that grow it otherwise)."""
        core = self.core
        if core.used_memory <= core.memory_evict_at:
            return True
        if not core.evict_jobs:                 # maxmemory-policy noeviction
            return False
        if not len(core.jobs):
            self.evict_idle_queues()
            return core.used_memory <= core.memory_evict_at
        deadline = time.perf_counter() + FREE_MEMORY_BUDGET_S
        jobs = core.jobs
        partitions = jobs.partition_count
        index = core.rng.randrange(partitions)
        misses = visited = 0
        # A walk from a random partition samples jobs the way Disque's random
        # key does, without landing on empty partitions when jobs are few.
        while core.used_memory > core.memory_evict_at and misses <= FREE_MEMORY_MISSES \
                and visited < partitions and time.perf_counter() < deadline:
            part = jobs.partition(index)
            index = (index + 1) % partitions
            visited += 1
            if not part:
                continue
            evicted = False
            for job in part:
                if job.state == ACKED or (job.retry == 0 and job.flags & FLAG_DELIVERED):
                    core.unregister(job)
                    evicted = True
            misses = 0 if evicted else misses + 1
        return core.used_memory <= core.memory_evict_at

    def warning_level(self) -> int:
        """0 below 75% of maxmemory, 1 above, 2 above 95%."""
        core = self.core
        used = core.used_memory
        if used <= core.memory_warn_at:
            return 0
        return 2 if used > core.memory_evict_at else 1

    def evict_idle_queues(self, budget: int = 64) -> int:
        """Forget empty, idle, unpaused queues nobody waits on (a slice per call).

        Idle means 5 minutes, 10 s above 75% of maxmemory, 2 s above 95%."""
        core = self.core
        now_s = core.clock.now_ms() // 1000
        max_idle = (QUEUE_MAX_IDLE_S, QUEUE_MAX_IDLE_S // 30, 2)[self.warning_level()]
        parts = core.queues.partitions()
        evicted = 0
        for _ in range(budget):
            part = parts[self._evict_cursor]
            self._evict_cursor = (self._evict_cursor + 1) % len(parts)
            for name, q in list(part.items()):
                if q.is_evictable(now_s, max_idle):
                    core.queues.pop(name)
                    core.queues_version += 1
                    q.live = False
                    core.used_memory -= QUEUE_MEMORY_OVERHEAD
                    evicted += 1
        return evicted
