"""Consumers that wait: a GETJOB that found nothing parks here, and PAUSE.

GETJOB itself (engine/node/delivery.pxi) takes jobs from the named queues
left to right, pass after pass, until COUNT jobs or a pass that finds
nothing. A client that found nothing parks as a Waiter on every queue it
named, or on its pattern (GETJOB ... PATTERN glob); when a job is queued on
one of them the engine marks the queue ready (NodeCore.ready) and
serve_ready() hands each waiter exactly one job, oldest waiter first, as
Disque does; what is left goes to nodes that asked for it (federation). A
queue paused in output neither serves nor wakes anyone until the pause is
lifted.

GETJOB ... PATTERN glob, one consumer over every queue whose name matches:
- A pattern covers the queues this node knows (made by a job, a GETJOB or
  federation); the list is cached per pattern and rebuilt when the set of
  queues changed (NodeCore.queues_version), so a busy pattern costs a dict
  lookup, not a scan of every queue.
- Fair: each call starts with the queue after the one that served the
  pattern last (names in byte order), so one busy queue cannot starve the
  others; COUNT n then takes pass after pass as FROM does.
- A parked pattern consumer is woken by a job queued on any matching queue,
  a queue made after it parked included (while pattern consumers wait,
  NodeCore.pattern_waiting makes every enqueue mark its queue ready).
- Federation asks for the matching queues while pattern consumers wait
  (queues_with_waiters covers them).
- Bounded: at most PATTERN_CACHE_MAX patterns are remembered (the least
  recently used is forgotten: it only loses its place in the rotation).
"""

from __future__ import annotations

import bisect
from collections import OrderedDict

from disque_py.base.globmatch import glob_match
from disque_py.engine import DEAD_QUEUE_SUFFIX, PAUSED_ALL, PAUSED_OUT
from disque_py.formats import bus as msg
from disque_py.node.waiters import GETJOB, TIMED_OUT, Waiter

PATTERN_CACHE_MAX = 1024



def pattern_matches(pattern: bytes, name: bytes) -> bool:
    """Whether GETJOB PATTERN `pattern` covers queue `name`: the glob
    matches it, and a default dead-letter queue (`<queue>:dead`) is covered
    only by a glob that ends in `:dead` too. A consumer of `orders:*` is
    not handed the jobs its own queues dead-lettered (it would run again
    what was given up on); `PATTERN *:dead` reads every dead queue."""
    if name.endswith(DEAD_QUEUE_SUFFIX) and not pattern.endswith(DEAD_QUEUE_SUFFIX):
        return False
    return glob_match(pattern, name)

class Consumers:
    """The parked GETJOBs of one node, FROM and PATTERN, and PAUSE."""

    def __init__(self, core, parking, federation) -> None:
        self.core = core
        self.parking = parking
        self.federation = federation
        self.waiting_queues: dict[bytes, None] = {}     # queues with parked consumers
        self.pattern_waiters: dict[Waiter, None] | None = None   # FIFO, or None
        self._patterns: OrderedDict | None = None   # pattern -> [version, names, last served]
        parking.owns(GETJOB, self.forget)

    # ------------------------------------------------------------ parking

    def block(self, client, queue_names: list[bytes], deadline_ms: int,
              withcounters: bool) -> Waiter:
        """Park `client` until a job arrives on any of the queues."""
        waiter = Waiter(client, GETJOB, deadline_ms)
        waiter.queues = tuple(dict.fromkeys(queue_names))
        waiter.withcounters = withcounters
        for name in waiter.queues:
            self.core.queue(name).add_waiter(waiter)
            self.waiting_queues[name] = None
        self.parking.start(waiter)
        return waiter

    def block_pattern(self, client, pattern: bytes, deadline_ms: int,
                      withcounters: bool) -> Waiter:
        """Park `client` until a job is queued on a queue matching `pattern`."""
        waiter = Waiter(client, GETJOB, deadline_ms)
        waiter.pattern = pattern
        waiter.withcounters = withcounters
        if self.pattern_waiters is None:
            self.pattern_waiters = {}
            self.core.pattern_waiting = True
        self.pattern_waiters[waiter] = None
        self.parking.start(waiter)
        return waiter

    def forget(self, waiter: Waiter) -> None:
        """Take a parked GETJOB off its queues (or its pattern)."""
        if waiter.pattern is not None:
            waiters = self.pattern_waiters
            if waiters is not None:
                waiters.pop(waiter, None)
                if not waiters:
                    self.pattern_waiters = None
                    self.core.pattern_waiting = False
            return
        queues = self.core.queues
        for name in waiter.queues:
            q = queues.get(name)
            if q is not None:
                q.remove_waiter(waiter)
                if q.waiters is None:
                    self.waiting_queues.pop(name, None)

    def release_all(self, outcome) -> None:
        """Answer every parked GETJOB with `outcome` (this node is leaving,
        or FLUSHALL: TIMED_OUT)."""
        release = self.parking.release
        for q in list(self.core.queues.values()):
            for waiter in list(q.waiters or ()):
                release(waiter, outcome)
        for waiter in list(self.pattern_waiters or ()):
            release(waiter, outcome)

    def flushed(self) -> None:
        """FLUSHALL: parked GETJOBs time out, and the rotations forget their
        places (every queue is gone)."""
        self.release_all(TIMED_OUT)
        self._patterns = None

    # ------------------------------------------------------------ serving

    def serve_ready(self) -> None:
        """Give one job to each waiter of the queues that received jobs;
        what is left goes to nodes that asked for it (federation)."""
        core = self.core
        ready = core.ready
        core.ready = {}
        queues = core.queues
        release = self.parking.release
        for name in ready:
            q = queues.get(name)
            if q is None or q.flags & PAUSED_OUT:
                continue
            if q.waiters is not None:
                for waiter in list(q.waiters):
                    job = core.fetch(q)
                    if job is None:
                        break
                    release(waiter, [job])
                if not q.jobs:
                    self.federation.need_jobs(q, True)
            if self.pattern_waiters is not None and q.jobs:
                self._serve_patterns(q)
            if q.interested is not None and q.jobs:
                self.federation.offer_to_interested(q)

    def _serve_patterns(self, q) -> None:
        """A job was queued on `q`: one each to the oldest pattern consumers
        whose pattern matches, while it has jobs."""
        for waiter in list(self.pattern_waiters or ()):
            if not q.jobs or q.flags & PAUSED_OUT:
                return
            if pattern_matches(waiter.pattern, q.name):
                self.pattern_served(waiter.pattern, q.name)
                self.parking.release(waiter, [self.core.fetch(q)])

    def queues_with_waiters(self):
        """Queues some parked consumer waits on: named by a GETJOB FROM, or
        matching a parked GETJOB PATTERN (each queue once)."""
        queues = self.core.queues
        names = dict.fromkeys(self.waiting_queues)
        for pattern in {waiter.pattern for waiter in self.pattern_waiters or ()}:
            names.update(dict.fromkeys(self.pattern_queues(pattern)))
        for name in names:
            q = queues.get(name)
            if q is not None:
                yield q

    # ------------------------------------------------------------ patterns

    def _pattern_entry(self, pattern: bytes) -> list:
        state = self._patterns
        if state is None:
            state = self._patterns = OrderedDict()
        entry = state.get(pattern)
        if entry is None:
            entry = state[pattern] = [-1, [], b""]
            if len(state) > PATTERN_CACHE_MAX:
                state.popitem(last=False)
        else:
            state.move_to_end(pattern)
        core = self.core
        if entry[0] != core.queues_version:
            entry[0] = core.queues_version
            entry[1] = sorted(q.name for q in core.queues.values()
                              if pattern_matches(pattern, q.name))
        return entry

    def pattern_queues(self, pattern: bytes) -> list[bytes]:
        """The matching queues' names, the next in the rotation first."""
        _, names, last = self._pattern_entry(pattern)
        start = bisect.bisect_right(names, last)
        return names[start:] + names[:start]

    def pattern_served(self, pattern: bytes, name: bytes) -> None:
        self._pattern_entry(pattern)[2] = name

    # ------------------------------------------------------------ pausing

    def pause(self, name: bytes, flags: int | None, broadcast: bool) -> int:
        """PAUSE: set (None: keep) a queue's pause flags; returns them."""
        core = self.core
        q = core.queues.get(name)
        if q is None and flags:
            q = core.queue(name)
        if q is not None and flags is not None:
            core.set_paused(q, flags)
        state = q.flags & PAUSED_ALL if q is not None else 0
        if broadcast and len(name) <= msg.MAX_QUEUE_NAME:
            core.send_to(core.known_peers, msg.PAUSE, msg.QueueOp(name, state))
        return state

    def on_pause(self, sender: bytes, name: bytes, flags: int) -> None:
        """A peer's PAUSE ... BCAST: take the same pause state."""
        core = self.core
        q = core.queues.get(name)
        if q is None:
            if not flags & PAUSED_ALL:
                return
            q = core.queue(name)
        core.set_paused(q, flags & PAUSED_ALL)
