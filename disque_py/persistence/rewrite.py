"""Rewriting the AOF down to the live jobs, without stopping the server.

A Rewrite walks the jobs table partition by partition, a slice per loop
turn, making a 'J' record for every active or queued job, then a 'K'
record for every DEDUP key the node remembered when the rewrite started
(a key outlives its job): the engine makes them (engine/aof/rewrite.pxi:
RewriteWalk) into a buffer, written to a temporary file next to the AOF
in blocks of REWRITE_WRITE_BLOCK bytes: each turn of the loop costs a few
milliseconds and the writes stay few and large.
A thread of its own writes the blocks, one at a time while the loop
makes the next, and fsyncs every REWRITE_SYNC_EVERY bytes and at the end
(as Redis's child does): the loop never waits for the disk, and step()
says when it has nothing to do until the thread is done (`waiting`).
Records noted meanwhile also go to its buffer (AofWriter._take, and
collect_for_rewrite for the turn it ends in), so whatever happens during
the walk is replayed after the snapshot: a job created meanwhile may
appear twice (loading keeps the first unless the second revises it), a
job deleted meanwhile is deleted again by its 'D' record. finish()
appends the buffer, fsyncs (only that is left), renames the file over
the AOF and fsyncs the directory: a crash at any point leaves either the
old file or the new one. With the AOF on, the writer appends to the new file
from then on; with it off (BGREWRITEAOF, SHUTDOWN REWRITE-AOF) the file is
only written.

While it runs, INFO persistence shows how far it got (progress_fields):
the jobs walked and written, and the share of the table walked.

A rewrite that fails removes its temporary file; one whose process died
leaves it behind, and the next start removes it (remove_leftovers).
"""

from __future__ import annotations

import glob
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for

from disque_py.base import log
from disque_py.engine import TABLE_PARTITIONS, RewriteWalk
from disque_py.monitoring.latency import AOF_RENAME, AOF_REWRITE_DIFF_WRITE
from disque_py.persistence import aof_format
from disque_py.persistence.aof import (OFF, REWRITE_SLICE_JOBS, REWRITE_SYNC_EVERY,
                                       REWRITE_WRITE_BLOCK)

TEMP_SUFFIX = ".rewrite-%d.tmp"        # after the AOF's path; %d: the server's pid


class Rewrite:
    def __init__(self, writer, jobs, dedup_keys: list) -> None:
        self.writer = writer
        self.started = time.monotonic()
        self.temp_path = writer.path + TEMP_SUFFIX % os.getpid()
        self.fd = os.open(self.temp_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self.size = 0
        self.buffer: list[bytes] = []
        # The jobs table (a FLUSHALL swaps it: this one stays), walked in C.
        self._walk = RewriteWalk(jobs)
        self.jobs_total = len(jobs)            # progress (INFO): jobs at the start
        self._dedup_keys = dedup_keys          # (queue, key, job ID, until ms), a snapshot
        self._made = False                     # every record is made
        # The blocks are written (and fsynced) by a thread of its own, one
        # at a time, while the loop makes the next.
        self._io_thread = ThreadPoolExecutor(1, thread_name_prefix="aof-rewrite")
        self._io: Future | None = None         # the block being written, if any
        self._synced = 0                       # bytes an fsync covered (the thread's)
        try:
            self._write(aof_format.HEADER)
        except OSError:
            self._discard()
            raise

    @property
    def jobs_processed(self) -> int:
        """Jobs walked so far, in any state..."""
        return self._walk.walked

    @property
    def jobs_written(self) -> int:
        """... and written as 'J' records."""
        return self._walk.written

    def _write(self, data: bytes) -> None:
        self.writer.ops.write_all(self.fd, data, self.size)
        self.size += len(data)

    def step(self) -> bool:
        """Make one slice of records, and hand a full block (or the last
        one) to the I/O thread. True once every record is written and
        fsynced; raises the OSError of a write or fsync that failed."""
        walk = self._walk
        if self._io is not None and self._io.done():
            self._io.result()
            self._io = None
        if not self._made and walk.buffered < REWRITE_WRITE_BLOCK:
            self._made = self._make()
        if self._io is not None:
            return False
        if walk.buffered >= REWRITE_WRITE_BLOCK or \
                (self._made and (walk.buffered or self.size > self._synced)):
            block = walk.take()
            self._io = self._io_thread.submit(self._write_block, block, self.size, self._made)
            self.size += len(block)
            return False
        if self._made:
            self._io_thread.shutdown(wait=False)
        return self._made

    def _make(self) -> bool:
        """A slice of records; True once the last is made."""
        keys = self._dedup_keys
        if self._walk.walk(REWRITE_SLICE_JOBS) and keys:
            self._walk.put_dedup_keys(keys, REWRITE_SLICE_JOBS)
        return self._walk.partition >= TABLE_PARTITIONS and not keys

    def _write_block(self, block: bytes, offset: int, last: bool) -> None:
        """In the I/O thread: write a block at `offset`; fsync every
        REWRITE_SYNC_EVERY bytes (the disk takes the file as it comes,
        not all at the end) and after the last."""
        self.writer.ops.write_all(self.fd, block, offset)
        end = offset + len(block)
        if last or end - self._synced >= REWRITE_SYNC_EVERY:
            self.writer.ops.fsync(self.fd)
            self._synced = end

    @property
    def waiting(self) -> bool:
        """Nothing to do until the block being written is: the next one
        is made (or there is none)."""
        return self._io is not None and not self._io.done() and \
            (self._made or self._walk.buffered >= REWRITE_WRITE_BLOCK)

    def wait(self) -> None:
        """Block until the block being written is (a rewrite run at once)."""
        if self._io is not None:
            wait_for([self._io])

    def progress_fields(self) -> list[tuple[str, object]]:
        """INFO persistence while it runs (beyond Disque; Redis 7 shows the
        like as current_save_keys_*): the share of the jobs table walked."""
        walked = self._walk.partition * 100 / TABLE_PARTITIONS
        return [
            ("aof_rewrite_jobs_total", self.jobs_total),
            ("aof_rewrite_jobs_processed", self.jobs_processed),
            ("aof_rewrite_jobs_written", self.jobs_written),
            ("aof_rewrite_perc", f"{walked:.2f}"),
        ]

    def finish(self) -> None:
        """Append what arrived meanwhile, make it durable, switch files.
        Raises OSError (then abort()) only before the rename."""
        writer = self.writer
        monitor = writer.latency
        writer.collect_for_rewrite()
        if self.buffer:
            began = monitor.begin()
            self._write(b"".join(self.buffer))
            self.buffer.clear()
            monitor.observe_since(AOF_REWRITE_DIFF_WRITE, began)
        writer.ops.fsync(self.fd)
        began = monitor.begin()
        os.replace(self.temp_path, writer.path)
        monitor.observe_since(AOF_RENAME, began)
        # From here the new file is the AOF: nothing may fail any more, or
        # the writer would go on appending to the old, unlinked one.
        if writer.state != OFF:
            writer.adopt(self.fd, self.size)
        _fsync_directory(os.path.dirname(writer.path))
        writer.report_durable(self.fd, self.size, replaces=True)
        if writer.state == OFF:
            os.close(self.fd)
        log.notice("AOF rewrite done: %d bytes", self.size)

    def abort(self, reason: str) -> None:
        log.warning("AOF rewrite aborted: %s", reason)
        self._discard()

    def _discard(self) -> None:
        if self._io is not None and not self._io.done():
            # Closed after the write or fsync of it still running: closed
            # sooner, the number could name another file by then.
            self._io_thread.submit(os.close, self.fd)
        else:
            os.close(self.fd)
        self._io_thread.shutdown(wait=False)
        try:
            os.unlink(self.temp_path)
        except OSError:
            pass


def remove_leftovers(aof_path: str) -> None:
    """Remove the temporary files of rewrites whose process died (at start)."""
    pattern = glob.escape(aof_path) + TEMP_SUFFIX.replace("%d", "[0-9]*")
    for path in glob.glob(pattern):
        try:
            os.unlink(path)
            log.notice("Removed %s, left behind by an interrupted AOF rewrite", path)
        except OSError as error:
            log.warning("Cannot remove %s, left behind by an AOF rewrite: %s",
                        path, error.strerror)


def _fsync_directory(directory: str) -> None:
    """Make the rename durable. A failure is logged, not raised: the rename
    is done and the writer already appends to the new file."""
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as error:
        log.warning("fsync of the AOF's directory failed after a rewrite (%s): a crash "
                    "now could bring the old file back", error.strerror)
