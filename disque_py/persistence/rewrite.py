"""Rewriting the AOF down to the live jobs, without stopping the server.

A Rewrite walks the jobs table partition by partition, a slice per loop
turn, making a 'J' record for every active or queued job, then a 'K'
record for every DEDUP key the node remembered when the rewrite started
(a key outlives its job): the engine makes them (engine/aof/rewrite.pxi:
RewriteWalk) into a buffer, written to a temporary file next to the AOF
in blocks of REWRITE_WRITE_BLOCK bytes, so each turn of the loop costs a
few milliseconds and the writes stay few and large.
Records appended meanwhile also go to its buffer (AofWriter.append does
that), so whatever happens during the walk is replayed after the
snapshot: a job created meanwhile may appear twice
(loading ignores the second), a job deleted meanwhile is deleted again by
its DELJOB. finish() appends the buffer, fsyncs, renames the file over the
AOF and fsyncs the directory: a crash at any point leaves either the old
file or the new one. With the AOF on, the writer appends to the new file
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

from disque_py.base import log
from disque_py.engine import TABLE_PARTITIONS, RewriteWalk
from disque_py.monitoring.latency import AOF_RENAME, AOF_REWRITE_DIFF_WRITE
from disque_py.persistence import aof_format
from disque_py.persistence.aof import OFF, REWRITE_SLICE_JOBS, REWRITE_WRITE_BLOCK

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
        """Make one slice of records; write them once a block is full or
        all are made. True when every partition and key is done."""
        walk = self._walk
        keys = self._dedup_keys
        done = walk.walk(REWRITE_SLICE_JOBS)
        if done and keys:
            walk.put_dedup_keys(keys, REWRITE_SLICE_JOBS)
        done = done and not keys
        if walk.buffered >= REWRITE_WRITE_BLOCK or (done and walk.buffered):
            self._write(walk.take())
        return done

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
        os.close(self.fd)
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
