"""Clients parked inside the node, and the deadlines that release them.

A Waiter is a client that asked for something the node cannot give yet:
GETJOB on empty queues (consumers.py), (with the cluster) ADDJOB waiting
for its copies (or a duplicate ADDJOB, same DEDUP key, waiting for the
first one's outcome: replication.py), or WAITJOB and QWAIT waiting for
jobs to finish (waits.py). The node owns waiters because their presence is
domain state: a queue with waiters is never evicted, QSTAT counts them,
federation asks peers for jobs on their behalf. The `client` field is
opaque to the node; the server layer uses it to find the connection to
answer.

Parking keeps what every waiter shares (the count INFO shows, the
deadlines, the Unblock effect that answers it); each kind of waiter belongs
to the component named above, which tells Parking how to take one of its
waiters off its own structures (and, for a waiting ADDJOB, what to do when
its client goes away).

Outcomes handed back in an Unblock effect:
  * a list of jobs (GETJOB served),
  * TIMED_OUT (the deadline passed),
  * a DisqueError (for example LEAVING, or NOREPL for replication waits),
  * a job ID (bytes) for a completed replication wait,
  * DONE (what a WAITJOB or QWAIT waited for has happened).
"""

from __future__ import annotations

import heapq
from typing import Callable

from disque_py.base.effects import Unblock

GETJOB = 0
JOB_REPLICATION = 1
WAITJOB = 2
QWAIT = 3
DUPLICATE_ADD = 4                         # replication.py's followers
COMPLETION_WAITS = (WAITJOB, QWAIT)       # kept by waits.py

TIMED_OUT = "timed-out"
DONE = "done"


class Waiter:
    __slots__ = ("client", "kind", "queues", "pattern", "withcounters", "deadline", "job",
                 "active", "seq", "copies")

    def __init__(self, client, kind: int, deadline_ms: int) -> None:
        self.client = client
        self.kind = kind
        self.queues: tuple = ()
        self.pattern: bytes | None = None   # GETJOB PATTERN (consumers.py)
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


# Unblock(...) runs namedtuple's __new__, a Python function; release builds
# the tuple directly (the same object).
_new_tuple = tuple.__new__


class Parking:
    """Every parked client's shared bookkeeping, on one node."""

    def __init__(self, core) -> None:
        self.core = core
        self.deadlines = Deadlines()
        self.blocked_clients = 0
        self._forgetters: dict[int, Callable] = {}    # kind -> its owner's forget(waiter)
        self._cancellers: dict[int, Callable] = {}    # kind -> its owner's cancel(waiter)

    def owns(self, kind: int, forget: Callable, cancel: Callable | None = None) -> None:
        """A component owns the waiters of `kind`: forget(waiter) takes one
        off its structures; cancel(waiter), if given, replaces forgetting
        when the client goes away."""
        self._forgetters[kind] = forget
        if cancel is not None:
            self._cancellers[kind] = cancel

    def start(self, waiter: Waiter) -> None:
        """Count a parked client and arm its deadline; forget undoes both."""
        self.deadlines.add(waiter)
        self.blocked_clients += 1

    def forget(self, waiter: Waiter) -> None:
        """Take a waiter off every structure that knows it (idempotent)."""
        if not waiter.active:
            return
        waiter.active = False
        self.blocked_clients -= 1
        self.deadlines.discard(waiter)
        self._forgetters[waiter.kind](waiter)

    def release(self, waiter: Waiter, outcome) -> None:
        """Unpark a client with an outcome (see the module docstring)."""
        if not waiter.active:
            return
        self.forget(waiter)
        self.core.effects.append(_new_tuple(Unblock, (waiter, outcome)))

    def cancel(self, waiter: Waiter) -> None:
        """The parked client went away: drop its wait without answering."""
        cancel = self._cancellers.get(waiter.kind)
        if cancel is not None and waiter.active:
            cancel(waiter)
        else:
            self.forget(waiter)

