"""Rewriting the AOF down to the live jobs, without stopping the server.

A Rewrite walks the jobs table partition by partition, a slice per loop
turn, writing a job record ('J', in this server's format: aof_format)
for every active or queued job into a temporary file next to the AOF,
then a DEDUP record ('K') for every DEDUP key the node remembered when
the rewrite started (a key outlives its job). Records noted meanwhile
also go to its buffer (AofWriter._take, and collect_for_rewrite for the
turn it ends in), so whatever happens during the walk is replayed after
the snapshot: a job created meanwhile may appear twice (loading keeps
the last), a job deleted meanwhile is deleted again by its 'D' record.
finish() appends the buffer, fsyncs, renames the file over the AOF and
fsyncs the directory: a crash at any point leaves either the old
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
from disque_py.engine import ACTIVE, AOF_DEDUP, QUEUED, aof_dedup_record, aof_job_record
from disque_py.monitoring.latency import AOF_RENAME, AOF_REWRITE_DIFF_WRITE
from disque_py.persistence import aof_format
from disque_py.persistence.aof import OFF, REWRITE_SLICE_JOBS

TEMP_SUFFIX = ".rewrite-%d.tmp"        # after the AOF's path; %d: the server's pid


class Rewrite:
    def __init__(self, writer, jobs, dedup_keys: list) -> None:
        self.writer = writer
        self.started = time.monotonic()
        self.temp_path = writer.path + TEMP_SUFFIX % os.getpid()
        self.fd = os.open(self.temp_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self.size = 0
        self.buffer: list[bytes] = []
        self._jobs = jobs                      # the jobs table (a FLUSHALL swaps it: this one stays)
        self._next_partition = 0
        self.jobs_total = len(jobs)            # progress (INFO): jobs at the start,
        self.jobs_processed = 0                # ... walked so far (acked ones are skipped),
        self.jobs_written = 0                  # ... and written as job records
        self._dedup_keys = dedup_keys          # (queue, key, job ID, until ms), a snapshot
        try:
            self._write(aof_format.HEADER)
        except OSError:
            self._discard()
            raise

    def _write(self, data: bytes) -> None:
        self.writer.ops.write_all(self.fd, data, self.size)
        self.size += len(data)

    def step(self) -> bool:
        """Write one slice of live jobs; True when every partition is done."""
        records: list[bytes] = []
        jobs = self._jobs
        partitions = jobs.partition_count
        while self._next_partition < partitions and len(records) < REWRITE_SLICE_JOBS:
            walked = jobs.partition(self._next_partition)
            self.jobs_processed += len(walked)
            for job in walked:
                if job.state == ACTIVE or job.state == QUEUED:
                    records.append(aof_job_record(job))
            self._next_partition += 1
        self.jobs_written += len(records)
        keys = self._dedup_keys
        if self._next_partition >= partitions and keys and len(records) < REWRITE_SLICE_JOBS:
            taken = keys[-REWRITE_SLICE_JOBS:]
            del keys[-REWRITE_SLICE_JOBS:]
            records.extend(aof_dedup_record(AOF_DEDUP, *entry) for entry in taken)
        if records:
            self._write(b"".join(records))
        return self._next_partition >= partitions and not keys

    def progress_fields(self) -> list[tuple[str, object]]:
        """INFO persistence while it runs (beyond Disque; Redis 7 shows the
        like as current_save_keys_*): the share of the jobs table walked."""
        walked = self._next_partition * 100 / self._jobs.partition_count
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
