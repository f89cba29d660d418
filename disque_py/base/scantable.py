"""A dict split by key hash into fixed partitions, so it can be scanned.

QSCAN and JSCAN promise stateless cursors: every element present for the
whole iteration is returned, duplicates allowed, whatever is added or
removed in between. A plain dict cannot resume from a cursor, so jobs and
queues live in PARTITIONS sub-dicts chosen by hash(key); a cursor is the
index of the next partition to visit, and partitions are returned whole.
Lookups pay one hash() and one index on top of a dict lookup; nothing is
paid on the hot path for scans nobody runs.

Keys are bytes; their hash is stable for the life of the process, which is
as long as a cursor has to mean something.
"""

from __future__ import annotations

from typing import Callable, Iterator

DEFAULT_PARTITIONS = 4096


class ScanTable:
    __slots__ = ("_parts", "_mask", "_len")

    def __init__(self, partitions: int = DEFAULT_PARTITIONS) -> None:
        if partitions & (partitions - 1):
            raise ValueError("partitions must be a power of two")
        self._parts: list[dict] = [{} for _ in range(partitions)]
        self._mask = partitions - 1
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def get(self, key: bytes):
        return self._parts[hash(key) & self._mask].get(key)

    def __contains__(self, key: bytes) -> bool:
        return key in self._parts[hash(key) & self._mask]

    def add(self, key: bytes, value) -> bool:
        """Insert if absent; False if the key is already there. `value` is
        a new object (one lookup tells it from one already stored)."""
        if self._parts[hash(key) & self._mask].setdefault(key, value) is not value:
            return False
        self._len += 1
        return True

    def pop(self, key: bytes):
        """Remove and return the value, or None if absent."""
        value = self._parts[hash(key) & self._mask].pop(key, None)
        if value is not None:
            self._len -= 1
        return value

    def values(self) -> Iterator:
        for part in self._parts:
            yield from list(part.values())

    def random_partition(self, index: int) -> dict:
        return self._parts[index & self._mask]

    def partitions(self) -> list[dict]:
        return self._parts

    def scan(self, cursor: int, count: int, keep: Callable | None,
             busyloop: bool) -> tuple[int, list]:
        """Values from partitions starting at `cursor`; returns (next cursor, values).

        Visits whole partitions until `count` values matched or count*10
        non-empty partitions were visited (Disque's bound on work), or to the
        end with `busyloop` (or a negative count, as in Disque). The next
        cursor is 0 when the scan is complete; a cursor past the last
        partition is a finished scan.
        """
        parts = self._parts
        total = len(parts)
        if not 0 <= cursor < total:
            return 0, []
        if count < 0:
            busyloop = True
        index = cursor
        found: list = []
        budget = max(count, 1) * 10
        while index < total:
            part = parts[index]
            index += 1
            if not part:
                continue            # empty partitions cost nothing against the budget
            if keep is None:
                found.extend(part.values())
            else:
                found.extend(value for value in part.values() if keep(value))
            if not busyloop:
                budget -= 1
                if budget <= 0 or len(found) >= count:
                    break
        return (index if index < total else 0), found
