"""The dashboard's memory of the last minutes: one sample a second, 15 minutes kept.

A Sample holds the node's running totals (jobs created, delivered, acked;
commands processed) and levels (job memory, process RSS, clients, blocked
clients), and for each sampled queue its length and QSTAT's jobs-in and
jobs-out totals. Rates are differences between consecutive samples, so the
command path counts nothing for the dashboard: every figure is one the node
already keeps.

A node may hold any number of queues; at most MAX_SAMPLED_QUEUES are
sampled. Up to that many, all of them, seen afresh at every sample; past
it, the busiest ones: most jobs in and out since the last choice, then the
longest. The choice is made by a pass over every queue in slices of
SELECTION_SLICE queues, one slice per sample (QSCAN's walk of the queue
table), and a pass starts at most every RESELECT_SAMPLES samples: a
sample costs O(MAX_SAMPLED_QUEUES + SELECTION_SLICE) however many queues
the node has, and the sampled set holds for at least that many samples.

The Sampler is driven from outside (sample() once per SAMPLE_INTERVAL_S,
by run() in the node's loop) and reads time from an injected clock, so
tests drive it without sleeping.
"""

from __future__ import annotations

import asyncio
import heapq
import time
import traceback
from collections import deque
from itertools import islice
from typing import NamedTuple

from disque_py.base import log
from disque_py.commands.info import process_rss

SAMPLE_INTERVAL_S = 1.0
HISTORY_SAMPLES = 900              # 15 minutes at one sample a second
MAX_SAMPLED_QUEUES = 100
SELECTION_SLICE = 1000
RESELECT_SAMPLES = 10


class QueuePoint(NamedTuple):
    length: int
    jobs_in: int
    jobs_out: int


class Sample(NamedTuple):
    at: float                      # unix seconds
    created: int                   # running totals
    delivered: int
    acked: int
    commands: int
    memory: int                    # levels: job memory (maxmemory's measure)
    rss: int                       # ... the process's resident memory
    clients: int
    blocked: int
    queues: dict                   # queue name -> QueuePoint


class Sampler:
    def __init__(self, server, clock=time.time, rss=process_rss,
                 history: int = HISTORY_SAMPLES,
                 max_queues: int = MAX_SAMPLED_QUEUES) -> None:
        self.server = server
        self.clock = clock
        self.rss = rss
        self.max_queues = max_queues
        self.samples: deque[Sample] = deque(maxlen=history)
        self.tracked: list[bytes] = []          # the queues sampled, by name
        self._activity: dict[bytes, int] = {}   # jobs in + out at the last choice
        self._since_choice = 0
        # The pass in progress (past the cap): its cursor, the best
        # candidates so far (a heap of MAX_SAMPLED_QUEUES), activity seen.
        self._selecting = False
        self._cursor = 0
        self._candidates: list = []
        self._seen: dict[bytes, int] = {}

    # ------------------------------------------------------------ sampling

    def sample(self) -> Sample:
        """Take one sample now and keep it (the oldest goes when full)."""
        server = self.server
        node = server.node
        self._choose_queues(node.queues)
        queues = {}
        for name in self.tracked:
            q = node.queues.get(name)
            if q is not None:
                queues[name] = QueuePoint(len(q.jobs), q.jobs_in, q.jobs_out)
        sample = Sample(self.clock(), node.stats_jobs_created, node.stats_delivered,
                        node.stats_acked, server.stats.commands_processed,
                        node.used_memory, self.rss(), len(server.clients),
                        node.parking.blocked_clients, queues)
        self.samples.append(sample)
        return sample

    def _choose_queues(self, queues) -> None:
        if len(queues) <= self.max_queues:
            self.tracked = [q.name for q in queues.values()]
            self._activity.clear()
            self._selecting = False
            return
        self._since_choice += 1
        if not self._selecting:
            if self.tracked and self._since_choice < RESELECT_SAMPLES:
                return
            self._selecting, self._cursor = True, 0
            self._candidates, self._seen = [], {}
        self._rank_slice(queues)

    def _rank_slice(self, queues) -> None:
        """One slice of the pass; at its end, the best candidates are sampled."""
        self._cursor, found = queues.scan(self._cursor, SELECTION_SLICE, None, False)
        before, seen, candidates = self._activity, self._seen, self._candidates
        for q in found:
            name = q.name
            activity = seen[name] = q.jobs_in + q.jobs_out
            entry = (activity - before.get(name, 0), len(q.jobs), name)
            if len(candidates) < self.max_queues:
                heapq.heappush(candidates, entry)
            elif entry > candidates[0]:
                heapq.heapreplace(candidates, entry)
        if self._cursor == 0:
            self.tracked = [name for _, _, name in candidates]
            self._activity = seen
            self._selecting = False
            self._since_choice = 0

    async def run(self) -> None:
        """Sample every SAMPLE_INTERVAL_S until cancelled (the app's
        cleanup). A sample that fails is logged, not fatal: the charts
        miss a point, the node is not concerned."""
        while True:
            try:
                self.sample()
            except Exception:           # noqa: BLE001 (a bug here must not stop the node)
                log.warning("dashboard sampler: %s", traceback.format_exc().rstrip())
            await asyncio.sleep(SAMPLE_INTERVAL_S)

    # ------------------------------------------------------------- reading

    def levels(self, field: str) -> list[float]:
        """A level (memory, clients...) at every sample, oldest first."""
        return [getattr(sample, field) for sample in self.samples]

    def rates(self, field: str) -> list[float]:
        """Per-second rate of a running total between consecutive samples."""
        return _rates([(s.at, getattr(s, field)) for s in self.samples])

    def queue_lengths(self, name: bytes) -> list[int]:
        return [s.queues[name].length if name in s.queues else 0 for s in self.samples]

    def queue_rates(self, name: bytes, field: str, last: int | None = None) -> list[float]:
        """Per-second jobs in (field "jobs_in") or out of a queue, over the
        last `last` intervals (None: all kept); a gap where the queue was
        not sampled counts as no change."""
        samples = self.samples
        first = 0 if last is None else max(len(samples) - last - 1, 0)
        points = []
        for sample in islice(samples, first, None):
            point = sample.queues.get(name)
            if point is not None:
                points.append((sample.at, getattr(point, field)))
            elif points:
                points.append((sample.at, points[-1][1]))
        return _rates(points)

    def span_seconds(self) -> float:
        """Seconds from the oldest sample kept to the newest."""
        if len(self.samples) < 2:
            return 0.0
        return self.samples[-1].at - self.samples[0].at


def _rates(points: list[tuple[float, int]]) -> list[float]:
    """Differences of (time, total) pairs per second; a total that went
    down (CONFIG RESETSTAT, a queue forgotten and made again) counts 0."""
    rates = []
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        elapsed = t1 - t0
        rates.append(max(v1 - v0, 0) / elapsed if elapsed > 0 else 0.0)
    return rates
