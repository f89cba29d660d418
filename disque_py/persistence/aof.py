"""The append-only file, running: appends, fsync policy, rewrite, faults.

Rules kept:
  * Group commit. Records of one event-loop turn are written with one
    write(2). With appendfsync always, replies that depend on them wait
    (wait_for_sync) until an fsync covering them returns; fsyncs run in a
    thread and one covers every turn written before it started, so the
    number of fsyncs per second stays bounded while throughput grows with
    the number of clients. everysec fsyncs once a second; no never does.
  * Space is reserved ahead (fallocate), so a full disk shows up as
    "not accepting" before a job is accepted, never as half a record. A
    write that fails anyway is truncated back to the last whole record.
    While not accepting, write commands get -MISCONF; the writer retries
    every second and clears the state when space is back.
  * Rewrite without stopping: live jobs are serialized a slice per loop
    turn into a temporary file while new records also go to a buffer; the
    buffer is then appended, the file fsynced and renamed over the old one.
  * Every file operation goes through FileOps, the seam tests use to
    inject ENOSPC and EIO (DEBUG AOF-FAULT).
"""

from __future__ import annotations

import errno
import os
import time

from disque_py import log
from disque_py.persistence import aof_format

RESERVE_CHUNK = 16 * 1024 * 1024
RESERVE_LOW_WATER = 4 * 1024 * 1024
REWRITE_SLICE_JOBS = 2000
OFF, ON, WAIT_REWRITE = "off", "on", "wait-rewrite"


class FileOps:
    """The file layer. Tests may make operations fail (inject)."""

    def __init__(self) -> None:
        self.faults: list[int] = []          # errno of the next failing operations

    def inject(self, error_number: int, count: int) -> None:
        self.faults = [error_number] * count

    def _fault(self) -> None:
        if self.faults:
            code = self.faults.pop()
            raise OSError(code, os.strerror(code))

    def write_all(self, fd: int, data: bytes, offset: int) -> None:
        self._fault()
        view = memoryview(data)
        while view:
            written = os.pwrite(fd, view, offset)
            view = view[written:]
            offset += written

    def fsync(self, fd: int) -> None:
        self._fault()
        os.fsync(fd)

    def reserve(self, fd: int, offset: int, length: int) -> None:
        self._fault()
        try:
            os.posix_fallocate(fd, offset, length)
        except OSError as error:
            if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise            # no fallocate here (some filesystems): no reserve

    def truncate(self, fd: int, length: int) -> None:
        os.ftruncate(fd, length)


class AofWriter:
    def __init__(self, path: str, policy: str, loop, ops: FileOps | None = None) -> None:
        self.path = os.path.abspath(path)
        self.policy = policy
        self.loop = loop
        self.ops = ops or FileOps()
        self.state = OFF
        self.fd = -1
        self.offset = 0               # end of the last whole record
        self.reserved = 0             # the file is allocated up to here
        self.base_size = 0            # size after the last rewrite (auto-rewrite)
        self._buffer: list[bytes] = []
        self._flush_scheduled = False
        self.written_gen = 0          # batches written
        self.synced_gen = 0           # batches covered by a finished fsync
        self._fsync_running = False
        self._waiting: dict[int, list] = {}
        self.last_write_ok = True
        self.last_error = ""
        self.accepting = True
        self.delayed_fsync = 0
        self.rewrite = None           # a Rewrite while one runs
        self.last_rewrite_ok = True
        self.last_rewrite_seconds = -1

    # ------------------------------------------------------------ lifecycle

    def open(self, data_end: int) -> None:
        """Start appending to the file at `data_end` (after loading it)."""
        existed = os.path.exists(self.path)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self.offset = data_end
        self.reserved = os.fstat(self.fd).st_size
        if not existed or data_end == 0:
            self.ops.write_all(self.fd, aof_format.HEADER, 0)
            self.offset = len(aof_format.HEADER)
        self.base_size = self.offset
        self.state = ON
        self._reserve_headroom()

    def close(self) -> None:
        """Flush what is buffered, fsync, and close (clean shutdown)."""
        self.flush()
        if self.fd >= 0:
            try:
                self.ops.fsync(self.fd)
                self.ops.truncate(self.fd, self.offset)   # give reserved space back
            except OSError as error:
                log.warning("Closing the AOF: %s", error.strerror)
            os.close(self.fd)
            self.fd = -1
        self.state = OFF

    # ------------------------------------------------------------ appending

    def append(self, record: bytes) -> None:
        if self.rewrite is not None:
            self.rewrite.buffer.append(record)
        if self.state == ON:
            self._buffer.append(record)
            if not self._flush_scheduled:
                self._flush_scheduled = True
                self.loop.call_soon(self.flush)

    def wait_for_sync(self, callback) -> bool:
        """With appendfsync always, run callback(ok, reason) once this turn's
        records are on disk; False (call nothing) if nothing needs waiting."""
        if self.policy != "always" or self.state != ON:
            return False
        gen = self.written_gen + 1 if self._buffer else self.written_gen
        if gen <= self.synced_gen:
            return False
        self._waiting.setdefault(gen, []).append(callback)
        return True

    def flush(self) -> None:
        self._flush_scheduled = False
        if not self._buffer or self.fd < 0:
            return
        data = b"".join(self._buffer)
        self._buffer.clear()
        gen = self.written_gen + 1
        try:
            if self.offset + len(data) > self.reserved:
                self.ops.reserve(self.fd, self.offset, len(data) + RESERVE_CHUNK)
                self.reserved = self.offset + len(data) + RESERVE_CHUNK
            self.ops.write_all(self.fd, data, self.offset)
        except OSError as error:
            self._write_failed(error, gen)
            return
        self.offset += len(data)
        self.written_gen = gen
        if not self.last_write_ok:
            log.notice("AOF write error cleared: writes succeed again")
        self.last_write_ok = True
        self._reserve_headroom()
        if self.policy == "always":
            self._start_fsync()

    def _write_failed(self, error: OSError, gen: int) -> None:
        self.last_write_ok = False
        self.accepting = False
        self.last_error = error.strerror or str(error)
        log.warning("Error writing to the AOF (%s): the records of this turn are dropped, "
                    "write commands are refused until the disk is writable again",
                    self.last_error)
        try:
            self.ops.truncate(self.fd, self.offset)   # no half record stays behind
            self.reserved = self.offset
        except OSError:
            pass
        self.written_gen = gen            # this generation is settled: as failed
        for callback in self._waiting.pop(gen, []):
            callback(False, self.last_error)

    def _reserve_headroom(self) -> None:
        if self.reserved - self.offset >= RESERVE_LOW_WATER:
            if not self.accepting and self.last_write_ok:
                self.accepting = True
            return
        try:
            self.ops.reserve(self.fd, self.offset, RESERVE_CHUNK)
            self.reserved = self.offset + RESERVE_CHUNK
            if not self.accepting and self.last_write_ok:
                log.notice("AOF space is available again")
            self.accepting = self.last_write_ok
        except OSError as error:
            if self.accepting:
                log.warning("Cannot reserve AOF space (%s): refusing write commands",
                            error.strerror)
            self.accepting = False
            self.last_error = error.strerror or str(error)

    # ------------------------------------------------------------ fsync

    def _start_fsync(self) -> None:
        if self._fsync_running or self.fd < 0 or self.synced_gen >= self.written_gen:
            return
        self._fsync_running = True
        target, fd = self.written_gen, self.fd
        future = self.loop.run_in_executor(None, self.ops.fsync, fd)
        future.add_done_callback(lambda done: self._fsync_done(done, target))

    def _fsync_done(self, done, target: int) -> None:
        self._fsync_running = False
        error = done.exception()
        if error is not None:
            self.last_write_ok = False
            self.accepting = False
            self.last_error = getattr(error, "strerror", None) or str(error)
            log.warning("fsync of the AOF failed: %s", self.last_error)
        else:
            self.synced_gen = max(self.synced_gen, target)
        for gen in sorted(g for g in self._waiting if g <= target):
            for callback in self._waiting.pop(gen):
                callback(error is None, self.last_error)
        if self.policy == "always":
            self._start_fsync()

    def release_synced(self) -> None:
        """Answer every waiter covered by the last sync (after a rewrite)."""
        for gen in sorted(g for g in self._waiting if g <= self.synced_gen):
            for callback in self._waiting.pop(gen):
                callback(True, "")

    def every_second(self) -> None:
        """The cron: everysec fsyncs; a writer in error state retries."""
        if self.state != ON:
            return
        if not self.last_write_ok or not self.accepting:
            self.last_write_ok = True
            self._reserve_headroom()
        if self.policy == "everysec":
            if self._fsync_running:
                self.delayed_fsync += 1
            self._start_fsync()

    # ------------------------------------------------------------ views

    @property
    def rewrite_in_progress(self) -> bool:
        return self.rewrite is not None

    def info(self) -> list[tuple[str, object]]:
        rewrite = self.rewrite
        fields = [
            ("loading", 0),
            ("aof_enabled", int(self.state != OFF)),
            ("aof_state", self.state),
            ("aof_rewrite_in_progress", int(rewrite is not None)),
            ("aof_rewrite_scheduled", 0),
            ("aof_last_rewrite_time_sec", self.last_rewrite_seconds),
            ("aof_current_rewrite_time_sec",
             int(time.monotonic() - rewrite.started) if rewrite else -1),
            ("aof_last_bgrewrite_status", "ok" if self.last_rewrite_ok else "err"),
            ("aof_last_write_status", "ok" if self.last_write_ok else "err"),
        ]
        if self.state != OFF:
            fields += [
                ("aof_current_size", self.offset),
                ("aof_base_size", self.base_size),
                ("aof_pending_rewrite", 0),
                ("aof_buffer_length", sum(map(len, self._buffer))),
                ("aof_rewrite_buffer_length",
                 sum(map(len, rewrite.buffer)) if rewrite else 0),
                ("aof_pending_bio_fsync", int(self._fsync_running)),
                ("aof_delayed_fsync", self.delayed_fsync),
                ("aof_accepting_writes", int(self.accepting)),
            ]
        return fields
