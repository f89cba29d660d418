"""Rewriting the AOF down to the live jobs, without stopping the server.

A Rewrite walks the jobs table partition by partition, a slice per loop
turn, writing a LOADJOB record for every active or queued job into a
temporary file next to the AOF. Records appended meanwhile also go to its
buffer (AofWriter.append does that), so whatever happens during the walk is
replayed after the snapshot: a job created meanwhile may appear twice
(loading ignores the second), a job deleted meanwhile is deleted again by
its DELJOB. finish() appends the buffer, fsyncs, renames the file over the
AOF and fsyncs the directory: a crash at any point leaves either the old
file or the new one.
"""

from __future__ import annotations

import os
import time

from disque_py import log
from disque_py.core.job import ACTIVE, QUEUED, serialize_job
from disque_py.persistence import aof_format
from disque_py.persistence.aof import ON, REWRITE_SLICE_JOBS


class Rewrite:
    def __init__(self, writer, partitions: list[dict]) -> None:
        self.writer = writer
        self.started = time.monotonic()
        self.temp_path = "%s.rewrite-%d.tmp" % (writer.path, os.getpid())
        self.fd = os.open(self.temp_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self.size = 0
        self.buffer: list[bytes] = []
        self._partitions = partitions          # the jobs table's partitions, by reference
        self._next_partition = 0
        self._write(aof_format.HEADER)

    def _write(self, data: bytes) -> None:
        self.writer.ops.write_all(self.fd, data, self.size)
        self.size += len(data)

    def step(self) -> bool:
        """Write one slice of live jobs; True when every partition is done."""
        records: list[bytes] = []
        partitions = self._partitions
        while self._next_partition < len(partitions) and len(records) < REWRITE_SLICE_JOBS:
            for job in list(partitions[self._next_partition].values()):
                if job.state == ACTIVE or job.state == QUEUED:
                    records.append(aof_format.load_job_record(serialize_job(job)))
            self._next_partition += 1
        if records:
            self._write(b"".join(records))
        return self._next_partition >= len(partitions)

    def finish(self) -> None:
        """Append what arrived meanwhile, make it durable, switch files."""
        writer = self.writer
        writer.flush()
        if self.buffer:
            self._write(b"".join(self.buffer))
            self.buffer.clear()
        writer.ops.fsync(self.fd)
        os.replace(self.temp_path, writer.path)
        _fsync_directory(os.path.dirname(writer.path))
        old_fd = writer.fd
        writer.fd, writer.offset, writer.reserved = self.fd, self.size, self.size
        writer.base_size = self.size
        writer.synced_gen = writer.written_gen      # everything is in the new, synced file
        writer.state = ON
        if old_fd >= 0:
            os.close(old_fd)
        writer.release_synced()
        log.notice("AOF rewrite done: %d bytes", self.size)

    def abort(self, reason: str) -> None:
        log.warning("AOF rewrite aborted: %s", reason)
        os.close(self.fd)
        try:
            os.unlink(self.temp_path)
        except OSError:
            pass


def _fsync_directory(directory: str) -> None:
    fd = os.open(directory or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
