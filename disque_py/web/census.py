"""The scrape's census of jobs and queues, taken in slices between loop turns.

A node may hold millions of jobs in tens of thousands of queues. The jobs
are never walked: by state they are queued (the sum of the queues'
lengths), wait-repl (those whose producer waits: the node's `replicating`),
acked (the job table counts them) and active (the rest of the table). The
queues are walked, QUEUE_PARTITIONS_PER_SLICE partitions of the queue table
at a time, the loop given a turn between two slices so that commands are
served in between. What take_census() returns is therefore not one
instant's picture: queues may change between two slices, which a scrape,
a sample, tolerates.

Queues: the MAX_EXPORTED_QUEUES longest are exported one by one (queued
jobs, and the age of the job at the head: the one GETJOB gives next); the
others are summed into one "other" figure (how many queues, how many jobs),
so that a node with 100,000 queues does not make 100,000 series.
"""

from __future__ import annotations

import asyncio
import heapq
from dataclasses import dataclass, field

MAX_EXPORTED_QUEUES = 500
QUEUE_PARTITIONS_PER_SLICE = 32     # of 256: ~0.7 ms for 10,000 queues on a 2-core Xeon
NS_PER_MS = 1_000_000               # a job's ctime is ms * 1e6 plus a counter


@dataclass(slots=True)
class QueueFigures:
    name: bytes
    jobs: int
    head_age_s: float | None        # None for an empty queue


@dataclass(slots=True)
class Census:
    jobs_by_state: list[int] = field(default_factory=list)   # by the engine's state numbers
    queues: list[QueueFigures] = field(default_factory=list)   # the longest, longest first
    other_queues: int = 0
    other_jobs: int = 0
    queued_jobs: int = 0                                       # in every queue


async def take_census(node, max_queues: int = MAX_EXPORTED_QUEUES) -> Census:
    census = Census()
    longest = await _longest_queues(node, max_queues, census)
    now_ms = node.clock.now_ms()
    census.queues = [QueueFigures(queue.name, length, head_age(queue, now_ms))
                     for length, _, queue in sorted(longest, reverse=True)]
    census.jobs_by_state = jobs_by_state(node, census.queued_jobs)
    return census


def jobs_by_state(node, queued: int) -> list[int]:
    """[wait-repl, active, queued, acked] (the engine's state numbers)."""
    wait_repl, acked = len(node.replication.replicating), node.jobs.acked
    active = max(len(node.jobs) - queued - wait_repl - acked, 0)   # queued: slices ago
    return [wait_repl, active, queued, acked]


async def _longest_queues(node, max_queues: int, census: Census) -> list:
    """A min-heap of (length, tie-break, queue) of the longest queues; the
    rest are counted into census.other_*."""
    heap: list = []
    serial = 0
    partitions = node.queues.partitions()
    for first in range(0, len(partitions), QUEUE_PARTITIONS_PER_SLICE):
        for partition in partitions[first:first + QUEUE_PARTITIONS_PER_SLICE]:
            for queue in list(partition.values()):
                entry = (queue.jobs.count, serial, queue)
                serial += 1
                census.queued_jobs += entry[0]
                if len(heap) < max_queues:
                    heapq.heappush(heap, entry)
                    continue
                if entry[0] > heap[0][0]:
                    entry = heapq.heapreplace(heap, entry)
                census.other_queues += 1
                census.other_jobs += entry[0]
        await asyncio.sleep(0)
    return heap


def job_age(job, now_ms: int) -> float:
    """Seconds since the job was made (the dashboard shows it too)."""
    return max(now_ms - job.ctime // NS_PER_MS, 0) / 1000


def head_age(queue, now_ms: int) -> float | None:
    """The age of the job GETJOB gives next; None for an empty queue."""
    head = queue.jobs.peek(1)
    return job_age(head[0], now_ms) if head else None
