"""GETJOB ... PATTERN glob: one consumer over every queue whose name matches.

Owns the node's view of which queues a pattern covers and where each
pattern's round-robin stands, and the consumers parked on a pattern.

Rules kept here:
- A pattern covers the queues this node knows (made by a job, a GETJOB or
  federation); the list is cached per pattern and rebuilt when the set of
  queues changed (NodeCore.queues_version), so a busy pattern costs a dict
  lookup, not a scan of every queue.
- Fair: each call starts with the queue after the one that served the
  pattern last (names in byte order), so one busy queue cannot starve the
  others; COUNT n then takes pass after pass as FROM does.
- A parked pattern consumer is woken by a job queued on any matching queue,
  a queue made after it parked included (while pattern consumers wait,
  every enqueue marks its queue ready; serve_ready then asks here).
- Federation asks for the matching queues while pattern consumers wait
  (consumer.queues_with_waiters covers them).
- Bounded: at most PATTERN_CACHE_MAX patterns are remembered (the least
  recently used is forgotten: it only loses its place in the rotation).
"""

from __future__ import annotations

import bisect
from collections import OrderedDict

from disque_py.node.waiters import GETJOB, Waiter
from disque_py.engine import PAUSED_OUT
from disque_py.base.globmatch import glob_match

PATTERN_CACHE_MAX = 1024


class PatternConsumerMixin:
    _pattern_state: OrderedDict | None = None   # pattern -> [version, names, last served]

    def _pattern_entry(self, pattern: bytes) -> list:
        state = self._pattern_state
        if state is None:
            state = self._pattern_state = OrderedDict()
        entry = state.get(pattern)
        if entry is None:
            entry = state[pattern] = [-1, [], b""]
            if len(state) > PATTERN_CACHE_MAX:
                state.popitem(last=False)
        else:
            state.move_to_end(pattern)
        if entry[0] != self.queues_version:
            entry[0] = self.queues_version
            entry[1] = sorted(q.name for q in self.queues.values() if glob_match(pattern, q.name))
        return entry

    def pattern_queues(self, pattern: bytes) -> list[bytes]:
        """The matching queues' names, the next in the rotation first."""
        _, names, last = self._pattern_entry(pattern)
        start = bisect.bisect_right(names, last)
        return names[start:] + names[:start]

    def forget_patterns(self) -> None:
        """FLUSHALL: every queue is gone, and with them each rotation's place."""
        self._pattern_state = None

    def pattern_served(self, pattern: bytes, name: bytes) -> None:
        self._pattern_entry(pattern)[2] = name

    def block_pattern(self, client, pattern: bytes, deadline_ms: int,
                      withcounters: bool) -> Waiter:
        """Park `client` until a job is queued on a queue matching `pattern`."""
        waiter = Waiter(client, GETJOB, deadline_ms)
        waiter.pattern = pattern
        waiter.withcounters = withcounters
        if self.pattern_waiters is None:
            self.pattern_waiters = {}
            self.pattern_waiting = True
        self.pattern_waiters[waiter] = None
        self.start_waiting(waiter)
        return waiter

    def forget_pattern_waiter(self, waiter: Waiter) -> None:
        waiters = self.pattern_waiters
        if waiters is not None:
            waiters.pop(waiter, None)
            if not waiters:
                self.pattern_waiters = None
                self.pattern_waiting = False

    def serve_patterns(self, q) -> None:
        """A job was queued on `q`: one each to the oldest pattern consumers
        whose pattern matches, while it has jobs."""
        for waiter in list(self.pattern_waiters or ()):
            if not q.jobs or q.flags & PAUSED_OUT:
                return
            if glob_match(waiter.pattern, q.name):
                self.pattern_served(waiter.pattern, q.name)
                self.release(waiter, [self.fetch(q)])
