"""Clients parked inside the core, and the deadlines that release them.

A Waiter is a client that asked for something the node cannot give yet:
GETJOB on empty queues, (with the cluster) ADDJOB waiting for its copies
(or a duplicate ADDJOB, same DEDUP key, waiting for the first one's outcome),
or WAITJOB and QWAIT waiting for jobs to finish (core/waits.py).
The core owns waiters because their presence is domain state: a queue with
waiters is never evicted, QSTAT counts them, federation asks peers for jobs
on their behalf. The `client` field is opaque to the core; the runtime uses
it to find the connection to answer.

Outcomes handed back in an Unblock effect:
  * a list of jobs (GETJOB served),
  * TIMED_OUT (the deadline passed),
  * a DisqueError (for example LEAVING, or NOREPL for replication waits),
  * a job ID (bytes) for a completed replication wait,
  * DONE (what a WAITJOB or QWAIT waited for has happened).
"""

from __future__ import annotations

import heapq

GETJOB = 0
JOB_REPLICATION = 1
WAITJOB = 2
QWAIT = 3
DUPLICATE_ADD = 4                         # core/replication.py's followers
COMPLETION_WAITS = (WAITJOB, QWAIT)       # kept by core/waits.py

TIMED_OUT = "timed-out"
DONE = "done"


class Waiter:
    __slots__ = ("client", "kind", "queues", "pattern", "withcounters", "deadline", "job",
                 "active", "seq", "copies")

    def __init__(self, client, kind: int, deadline_ms: int) -> None:
        self.client = client
        self.kind = kind
        self.queues: tuple = ()
        self.pattern: bytes | None = None   # GETJOB PATTERN (core/patterns.py)
        self.withcounters = False
        self.deadline = deadline_ms       # 0: no deadline
        self.job = None
        self.active = True
        self.seq = 0
        self.copies = 0                   # DUPLICATE_ADD: the confirmed copies it waits for


class Deadlines:
    """Deadlines of parked clients, earliest first.

    Entries of released waiters are skipped lazily; the heap is rebuilt when
    they outnumber the live ones, so long timeouts served early cannot pile up.
    """

    __slots__ = ("_heap", "_live", "_seq")

    def __init__(self) -> None:
        self._heap: list = []
        self._live = 0
        self._seq = 0

    def add(self, waiter: Waiter) -> None:
        if not waiter.deadline:
            return
        self._seq += 1
        waiter.seq = self._seq
        heapq.heappush(self._heap, (waiter.deadline, waiter.seq, waiter))
        self._live += 1

    def discard(self, waiter: Waiter) -> None:
        if waiter.deadline and waiter.seq:
            waiter.seq = 0
            self._live -= 1
            if len(self._heap) > 2 * self._live + 64:
                self._heap = [entry for entry in self._heap if entry[2].seq == entry[1]]
                heapq.heapify(self._heap)

    def next_due(self) -> int | None:
        heap = self._heap
        while heap and heap[0][2].seq != heap[0][1]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def pop_expired(self, now_ms: int) -> list[Waiter]:
        expired = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            _, seq, waiter = heapq.heappop(heap)
            if waiter.seq == seq:
                waiter.seq = 0
                self._live -= 1
                expired.append(waiter)
        return expired
