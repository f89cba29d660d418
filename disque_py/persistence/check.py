"""Is an AOF readable, and where not (`disque-py check-aof`: tools/check_aof.py).

Reads the file with the loader's own reader (persistence/aof_format.py) and
finds the first record that cannot be read, with its byte offset and
whether it looks like a torn tail (the file ends inside it: a crash during
a write) or corruption with more data after it. cut() truncates the file at
that offset, keeping every whole record before it; nothing is rewritten in
place.
"""

from __future__ import annotations

import contextlib
import mmap
import os

from disque_py.persistence import aof_format

PROGRESS_EVERY_RECORDS = 10_000      # records read between two reports


def check_file(path: str, progress=None) -> tuple[int, int, aof_format.AofDamage | None]:
    """(records read, byte offset where they end, the damage found or None).
    `progress(total)`, if given, is a context manager entered around the
    reading of the `total` bytes of data; it gives report(done, records),
    called every PROGRESS_EVERY_RECORDS records and once at the end."""
    size = os.path.getsize(path)
    if size == 0:
        return 0, 0, aof_format.AofDamage(0, "empty file: no header", torn=True)
    with open(path, "rb") as handle, \
            mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        with (progress or _no_progress)(aof_format.data_end(data)) as report:
            return _read_records(data, report)


def _read_records(data, report) -> tuple[int, int, aof_format.AofDamage | None]:
    count, end, damage = 0, 0, None
    try:
        for record in aof_format.records(data):
            count += 1
            end = record.end
            if report is not None and not count % PROGRESS_EVERY_RECORDS:
                report(end, count)
    except aof_format.AofDamage as found:
        damage = found
    if report is not None:
        report(end, count)
    return count, end, damage


@contextlib.contextmanager
def _no_progress(total: int):
    yield None


def cut(path: str, offset: int) -> None:
    """Truncate the file to its first `offset` bytes, durably."""
    with open(path, "r+b") as handle:
        handle.truncate(offset)
        handle.flush()
        os.fsync(handle.fileno())
