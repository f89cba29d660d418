"""The slow log: the latest commands that ran longer than a threshold.

It owns the entries SLOWLOG GET/LEN/RESET show and the rules Disque 1.0
keeps for them:

  * slowlog-log-slower-than (microseconds): a command whose run took at
    least that long is logged; 0 logs every command; negative turns the
    log off (nothing is added, nothing is trimmed).
  * slowlog-max-len: the newest entries are kept, the oldest dropped. The
    log is trimmed when an entry is offered, and when either setting
    changes while the log is on (as the CONFIG SET that changed it would
    have been offered).
  * An entry is [id, unix time, duration in microseconds, argv], newest
    first. Ids count up from 0 and are not reused after a RESET.
  * argv keeps at most MAX_ARGC arguments: when there are more, the last
    one kept says how many were left out. An argument longer than
    MAX_ARG_BYTES keeps its first MAX_ARG_BYTES bytes and says how many
    were cut.

Only the commands a handler ran are offered (not unknown commands, arity
errors or refusals before the handler); the connection measures them.
"""

from __future__ import annotations

import time
from collections import deque
from itertools import islice

MAX_ARGC = 32
MAX_ARG_BYTES = 128
MORE_ARGUMENTS = b"... (%d more arguments)"
MORE_BYTES = b"... (%d more bytes)"


class SlowLog:
    __slots__ = ("entries", "next_id", "slower_than_us", "max_len", "_wall")

    def __init__(self, slower_than_us: int, max_len: int, wall=time.time) -> None:
        self.entries: deque[list] = deque()
        self.next_id = 0
        self.slower_than_us = slower_than_us
        self.max_len = max_len
        self._wall = wall               # unix seconds, for the entries' time

    @property
    def enabled(self) -> bool:
        return self.slower_than_us >= 0

    def offer(self, argv: list[bytes], duration_us: int) -> None:
        """A command ran for duration_us: log it if slow enough."""
        if self.slower_than_us < 0:
            return
        if duration_us >= self.slower_than_us:
            entry = [self.next_id, int(self._wall()), duration_us, _kept_arguments(argv)]
            self.next_id += 1
            self.entries.appendleft(entry)
        self.trim()

    def trim(self) -> None:
        entries = self.entries
        while len(entries) > self.max_len:
            entries.pop()

    def set_slower_than(self, microseconds: int) -> None:
        self.slower_than_us = microseconds
        if self.enabled:
            self.trim()

    def set_max_len(self, max_len: int) -> None:
        self.max_len = max_len
        if self.enabled:
            self.trim()

    def newest(self, count: int) -> list[list]:
        """Up to count entries, newest first; a negative count means all."""
        if count < 0:
            return list(self.entries)
        return list(islice(self.entries, count))

    def reset(self) -> None:
        self.entries.clear()

    def __len__(self) -> int:
        return len(self.entries)


def _kept_arguments(argv: list[bytes]) -> list[bytes]:
    argc = len(argv)
    if argc > MAX_ARGC:
        kept = [_kept_argument(arg) for arg in argv[:MAX_ARGC - 1]]
        kept.append(MORE_ARGUMENTS % (argc - MAX_ARGC + 1))
        return kept
    return [_kept_argument(arg) for arg in argv]


def _kept_argument(arg: bytes) -> bytes:
    if len(arg) <= MAX_ARG_BYTES:
        return arg
    return arg[:MAX_ARG_BYTES] + MORE_BYTES % (len(arg) - MAX_ARG_BYTES)
