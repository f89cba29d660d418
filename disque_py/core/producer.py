"""Adding jobs: ADDJOB's semantics once its arguments are parsed.

The checks run in Disque's order, so a request that breaks several rules
gets the same error it would get from Disque: at-most-once with copies,
DELAY >= TTL, not enough reachable nodes, MAXLEN, queue paused in input.

Replication policy: the node keeps a copy and asks repl-1 peers for the
rest, or, when it is leaving the cluster or short of memory, keeps no copy
and asks repl peers ("external replication"). On a node that has met no
peer, REPLICATE defaults to 1 and asking for more is refused with NOREPL.
"""

from __future__ import annotations

import time

from disque_py.core.job import (ACKED, ACTIVE, DEFAULT_RETRY_MAX_S, FLAG_DELIVERED, WAIT_REPL,
                                Job, new_job)
from disque_py.cluster import messages as msg
from disque_py.core.queue import PAUSED_IN

JOB_MEMORY_OVERHEAD = 420     # estimated bytes per job beyond its body
QUEUE_MEMORY_OVERHEAD = 500   # estimated bytes per queue (object, sorted list, stats)
FREE_MEMORY_BUDGET_S = 0.002  # eviction work per refused command, at most
FREE_MEMORY_MISSES = 10       # give up after this many samples with nothing to evict
from disque_py.errors import CommandError, MaxlenError, NoReplError, PausedError

MAX_DEFAULT_REPLICATION = 3

RETRY0_NEEDS_REPL1 = ("With RETRY set to 0 please explicitly set  REPLICATE to 1 "
                      "(at-most-once delivery)")
DELAY_NOT_BELOW_TTL = ("The specified DELAY is greater than TTL. Job refused since "
                       "would never be delivered")
NOT_ENOUGH_NODES = "Not enough reachable nodes for the requested replication level"
CANNOT_HOLD_COPY = (NOT_ENOUGH_NODES + ", since I'm unable to hold a copy of the "
                    "message for the following reason: %s")
REASON_LEAVING = "I'm leaving the cluster"
REASON_MEMORY = "I'm out of memory"
MAXLEN_REACHED = "Queue is already longer than the specified MAXLEN count"
PAUSED_INPUT = "Queue paused in input, try later"
ID_COLLISION = "Internal error creating the job, check server logs"


class ProducerMixin:
    _etime_cache: tuple = (0, 0, 0)

    def add_job(self, queue: bytes, body: bytes, repl: int | None, delay: int,
                retry: int | None, ttl: int, maxlen: int, async_: bool,
                client=None, timeout_ms: int = 0) -> Job:
        """Create a job. It comes back queued (or active, when delayed), or
        in wait-repl state with self.more(job).waiter parked for `client` when
        the producer must wait for its copies (timeout 0: no deadline)."""
        if repl is None:
            repl = self.cluster_size if self.cluster_size < MAX_DEFAULT_REPLICATION \
                else MAX_DEFAULT_REPLICATION
        if retry is None:
            retry = ttl // 10 if ttl < 10 * DEFAULT_RETRY_MAX_S else DEFAULT_RETRY_MAX_S
            if retry == 0:
                retry = 1
        elif retry == 0 and repl > 1:
            raise CommandError(RETRY0_NEEDS_REPL1)
        if delay >= ttl:
            raise CommandError(DELAY_NOT_BELOW_TTL)
        external = self.leaving or self.used_memory > self.memory_warn_at
        extra_copies = repl if external else repl - 1
        if extra_copies > self.reachable_peers:
            self._refuse_replication(repl, external)
        q = self.queues.get(queue)
        if q is not None:
            if maxlen and len(q.jobs) >= maxlen:
                raise MaxlenError(MAXLEN_REACHED)
            if q.flags & PAUSED_IN:
                raise PausedError(PAUSED_INPUT)

        now = self._now_ms()
        cached_s, cached_ttl, etime = self._etime_cache
        if cached_s != now // 1000 or cached_ttl != ttl:
            # Jobs added in the same second with the same TTL share one int.
            etime = now // 1000 + ttl
            self._etime_cache = (now // 1000, ttl, etime)
        ctime = now * 1_000_000          # as next_ctime(), inlined: the hot path
        if ctime <= self._last_ctime:
            ctime = self._last_ctime + 1
        self._last_ctime = ctime
        # A producer that waits for copies waits in wait-repl; otherwise the
        # job is active at once and enqueue() (or the awake timer) takes it.
        wait = extra_copies and not async_
        job = new_job(self.ids.next_id(ttl, retry), queue, body, WAIT_REPL if wait else ACTIVE,
                      repl, delay, retry, ctime, etime, () if external else self._only_me)
        job.qtime = now + (delay or retry) * 1000
        keep_copy = not (async_ and external)
        if keep_copy:
            if not self.jobs.add(job):
                raise CommandError(ID_COLLISION)
            self.used_memory += JOB_MEMORY_OVERHEAD + len(body)
        self.stats_jobs_created += 1
        if wait:
            self.wait_for_copies(job, client, now + timeout_ms if timeout_ms else 0,
                                 extra_copies, external, now)
            return job
        if delay == 0 and not external:
            self.enqueue(job, False, now, q)
        elif keep_copy:         # delayed, or external: a holder will queue it
            self.update_awake(job)
        if self.aof_enabled and not external:
            self.persist_job(job)
        if extra_copies:
            self.replicate(job, extra_copies, noreply=True)
        if not keep_copy and job.delivered:
            # No copy here: ask one holder to queue it first.
            self.send(self._rng.choice(job.delivered), msg.ENQUEUE, (job.id, delay))
        return job

    def _refuse_replication(self, repl: int, external: bool) -> None:
        extra_copies = repl if external else repl - 1
        if external and extra_copies - 1 == self.reachable_peers:
            reason = REASON_LEAVING if self.leaving else REASON_MEMORY
            raise NoReplError(CANNOT_HOLD_COPY % reason)
        raise NoReplError(NOT_ENOUGH_NODES)

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
        index = self._rng.randrange(partitions)
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
