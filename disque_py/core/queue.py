"""A named queue: jobs ordered by creation time, and who is waiting on it.

Jobs are kept in a SortedKeyList keyed by ctime, so the oldest job is served
first, any job can be removed in O(log n) (DEQUEUE, ACKJOB, expiry), and a
job re-queued after a failed delivery goes back near the head. The key is
the job's own ctime int, shared, so a queued job costs two pointers here.
Two jobs with the same ctime (born in the same millisecond tick on two
different nodes) keep their arrival order; Disque breaks that tie by ID.

A queue also keeps its blocked consumers (FIFO), its pause flags, its
statistics for QSTAT and the federation state later issues use. It owns no
policy: node.py decides when jobs enter and leave.
"""

from __future__ import annotations

import math
from operator import attrgetter

from sortedcontainers import SortedKeyList

PAUSED_IN = 1
PAUSED_OUT = 2
PAUSED_ALL = PAUSED_IN | PAUSED_OUT
PAUSE_STATE_NAMES = {0: b"none", PAUSED_IN: b"in", PAUSED_OUT: b"out", PAUSED_ALL: b"all"}

IMPORT_RATE_WINDOW_MS = 5000
IMPORT_RATE_MIN_ELAPSED_MS = 50

_by_ctime = attrgetter("ctime")


class Queue:
    __slots__ = ("name", "jobs", "ctime", "atime", "flags", "waiters",
                 "jobs_in", "jobs_out", "responders", "interested",
                 "needjobs_bcast_time", "needjobs_bcast_attempt",
                 "needjobs_adhoc_time", "needjobs_adhoc_attempt",
                 "import_current_time", "import_current_count",
                 "import_prev_time", "import_prev_count")

    def __init__(self, name: bytes, now_ms: int) -> None:
        self.name = name
        self.jobs = SortedKeyList(key=_by_ctime)
        self.ctime = now_ms // 1000
        self.atime = self.ctime
        self.flags = 0
        self.waiters: dict | None = None       # waiter -> None, in arrival order
        self.jobs_in = 0
        self.jobs_out = 0
        self.responders: dict[bytes, int] | None = None  # node id -> last import (s)
        # peers that asked for jobs we did not have: node id -> (until ms, count)
        self.interested: dict[bytes, tuple[int, int]] | None = None
        self.needjobs_bcast_time = 0
        self.needjobs_bcast_attempt = 0
        self.needjobs_adhoc_time = 0
        self.needjobs_adhoc_attempt = 0
        self.import_current_time = now_ms
        self.import_current_count = 0
        self.import_prev_time = now_ms
        self.import_prev_count = 0

    def __len__(self) -> int:
        return len(self.jobs)

    @property
    def blocked(self) -> int:
        return len(self.waiters) if self.waiters else 0

    @property
    def pause_state(self) -> bytes:
        return PAUSE_STATE_NAMES[self.flags & PAUSED_ALL]

    def add_waiter(self, waiter) -> None:
        if self.waiters is None:
            self.waiters = {}
        self.waiters[waiter] = None

    def remove_waiter(self, waiter) -> None:
        waiters = self.waiters
        if waiters is not None:
            waiters.pop(waiter, None)
            if not waiters:
                self.waiters = None

    def import_rate(self, now_ms: int) -> int:
        """Jobs per second imported from other nodes, roughly."""
        if now_ms - self.import_current_time > IMPORT_RATE_WINDOW_MS:
            return 0
        elapsed = max(now_ms - self.import_prev_time, IMPORT_RATE_MIN_ELAPSED_MS)
        jobs = self.import_prev_count + self.import_current_count
        return math.ceil(jobs * 1000 / elapsed)

    def count_import(self, now_ms: int) -> None:
        if now_ms - self.import_current_time > 1000:
            self.import_prev_time = self.import_current_time
            self.import_prev_count = self.import_current_count
            self.import_current_time = now_ms
            self.import_current_count = 0
        self.import_current_count += 1

    def is_evictable(self, now_s: int, max_idle_s: int) -> bool:
        """Empty, idle, nobody waiting, not paused: safe to forget."""
        return (not self.jobs and not self.waiters and not self.flags & PAUSED_ALL
                and now_s - self.atime >= max_idle_s)
