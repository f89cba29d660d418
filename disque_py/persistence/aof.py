"""The append-only file, running: appends, fsync policy, rewrite, faults.

Rules kept:
  * Group commit. The node's paths note their records in the engine's
    AofLog (engine/aof/log.pxi); at the end of each event-loop turn the
    server takes them, encoded, and flush() writes them with one write(2)
    before the turn's replies leave (ServerCore.flush_replies), so a crash
    of the process (kill -9) never loses what a client was told, whatever
    the policy (as Redis writes its AOF buffer in beforeSleep). Each write
    is a batch; the log's released_gen says which batches replies may
    wait no longer for: written ones, or with appendfsync always those an
    fsync covers. fsyncs run in a thread and one covers every batch
    written before it started, so the number of fsyncs per second stays
    bounded while throughput grows with the number of clients. everysec
    fsyncs once a second (a power cut may lose that second); no never
    does. Connections' replies and the bus's confirmations wait in the
    engine (held_gen; net/frames.pxi), released by on_released and
    failed by on_failed.
  * Space is reserved ahead (fallocate), so a full disk shows up as
    "not accepting" before a job is accepted, never as half a record. A
    write that fails anyway is truncated back to the last whole record.
    While not accepting, write commands and PING get -MISCONF (Disque's
    rule); the writer retries every second and clears the state when the
    disk works again.
  * How much is reserved: RESERVE_CHUNK (16 MB) past the end while the
    disk has it, so that the common case costs one fallocate per 16 MB
    written; when it has less, RESERVE_MIN (1 MB), and writes go on. Only
    a disk that cannot give RESERVE_MIN past the end refuses writes, and
    RESERVE_MIN free is enough to accept them again. Why not more: Disque
    refuses writes only once a write has failed and takes them again as
    soon as one works, so an operator who frees a little space expects
    the node (and its PING health check) back; demanding 16 MB free would
    keep a node on a small or nearly full volume in -MISCONF with space to
    spare. Why not zero: then the next job could be the one that finds
    the disk full mid-record, and under appendfsync always its client
    would be disconnected instead of told -MISCONF. After a short reserve,
    the full chunk is tried again at most once a second (the cron).
  * The records of a failed write are kept, under every policy, and written
    first by the next attempt, ahead of newer records (as Redis keeps its
    aof_buf): a job in memory is never silently absent from the file. With
    appendfsync always the replies that waited for them cannot claim
    success and cannot wait for a disk that may never come back: their
    connections are closed (to those clients the outcome is unknown, as
    after a timeout; the jobs stay in memory and reach the file with the
    retry). Replies that come later do not wait for that failed batch, so
    reads and -MISCONF are answered at once.
  * fsyncs and closes run in order on one background thread, so a file is
    never closed while an fsync of it is still queued (its descriptor
    could meanwhile name another file).
  * Rewrite without stopping: live jobs are serialized a slice per loop
    turn (in the engine) into a temporary file, written in large blocks,
    while new records also go to a buffer; the buffer is then appended,
    the file fsynced and renamed over the old one.
  * Every file operation goes through FileOps, the seam tests use to
    inject ENOSPC and EIO (DEBUG AOF-FAULT). With DISQUE_PY_DURABLE_REPORT
    set, how much of the file is durable goes to a side file
    (durable_report.py: the chaos checker's power loss reads it).
"""

from __future__ import annotations

import errno
import os
import time
from concurrent.futures import ThreadPoolExecutor

from disque_py.base import log
from disque_py.base.disk_faults import DiskFaults
from disque_py.monitoring import latency as latency_events
from disque_py.monitoring.histogram import DurationHistogram
from disque_py.monitoring.latency import LatencyMonitor
from disque_py.persistence import aof_format
from disque_py.persistence.durable_report import DurableReport

RESERVE_CHUNK = 16 * 1024 * 1024       # reserved past the end at a time...
RESERVE_LOW_WATER = 4 * 1024 * 1024    # ...again when less than this is left
RESERVE_MIN = 1024 * 1024              # a disk short of space: writes go on with this
REWRITE_SLICE_JOBS = 5000             # jobs a rewrite walks per loop turn (a few ms, in C)
REWRITE_WRITE_BLOCK = 1024 * 1024      # ... whose records it writes in blocks of this much
REWRITE_SYNC_EVERY = 32 * 1024 * 1024  # ... and fsyncs in the background every this much
OFF, ON, WAIT_REWRITE = "off", "on", "wait-rewrite"


class FileOps(DiskFaults):
    """The file layer. Tests may make operations fail (inject)."""

    def write_all(self, fd: int, data: bytes, offset: int) -> None:
        self.check()
        view = memoryview(data)
        while view:
            written = os.pwrite(fd, view, offset)
            view = view[written:]
            offset += written

    def fsync(self, fd: int) -> None:
        """fdatasync, as Redis and Disque do on Linux: the data and what
        reading it back needs, not the timestamps (the size is reserved
        ahead, so appends change no size to flush)."""
        self.check()
        os.fdatasync(fd)

    def reserve(self, fd: int, offset: int, length: int) -> None:
        self.check()
        try:
            os.posix_fallocate(fd, offset, length)
        except OSError as error:
            if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise            # no fallocate here (some filesystems): no reserve

    def truncate(self, fd: int, length: int) -> None:
        os.ftruncate(fd, length)

    def close(self, fd: int) -> None:
        os.close(fd)


class AofWriter:
    def __init__(self, path: str, policy: str, loop, log, ops: FileOps | None = None,
                 latency: LatencyMonitor | None = None) -> None:
        """`log`: the node's AofLog, whose records flush() takes and whose
        batch numbers it advances; on_released() and on_failed(first, last,
        reason) tell the server layer that replies waiting for batches may
        leave, or must fail (set by the persistence service)."""
        self.path = os.path.abspath(path)
        self.log = log
        self.on_released = _nothing
        self.on_failed = _nothing
        self.policy = policy
        self.loop = loop
        self.ops = ops or FileOps()
        self.latency = latency or LatencyMonitor(0)     # times writes and fsyncs
        self.fsync_durations = DurationHistogram()      # every fsync that worked (/metrics)
        self.state = OFF
        self.fd = -1
        self.offset = 0               # end of the last whole record
        self.reserved = 0             # the file is allocated up to here
        self.base_size = 0            # size after the last rewrite (auto-rewrite)
        self._unwritten = b""         # records of a failed write: written first next time
        # Batches written: log.written_gen (a failed one keeps its number for
        # its retry); replies need not wait for those up to log.released_gen.
        self.synced_gen = 0           # batches covered by a finished fsync
        self._fsync_running = False
        self._background = ThreadPoolExecutor(1, thread_name_prefix="aof-fsync")
        self.last_write_ok = True
        self.last_error = ""
        self._accepting = True
        self.space_short = False      # the last RESERVE_CHUNK could not be had
        self.delayed_fsync = 0
        self.rewrite = None           # a Rewrite while one runs
        self.last_rewrite_ok = True
        self.last_rewrite_seconds = -1
        self.durable_report = DurableReport.from_environment()

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
        if self.durable_report is not None:     # the seam's starting point: fsynced now
            self.ops.fsync(self.fd)
            self.report_durable(self.fd, self.offset)

    def report_durable(self, fd: int, offset: int, replaces: bool = False) -> None:
        """Tell the durable-offset seam (durable_report.py), when it is on."""
        if self.durable_report is not None:
            self.durable_report.durable(os.fstat(fd).st_ino, offset, replaces)

    def adopt(self, fd: int, size: int) -> None:
        """Append to a rewritten, fsynced file from now on. It holds every
        record so far: the rewrite serialized the jobs from memory and its
        buffer has what came meanwhile (collect_for_rewrite took the
        turn's), so a failed write's records are dropped."""
        if self.fd >= 0:
            self._close_in_background(self.fd)
        self.fd, self.offset, self.reserved, self.base_size = fd, size, size, size
        self.state = ON
        self._unwritten = b""
        self.log.written_gen += 1     # the rewritten file counts as one batch, synced
        self._synced(self.log.written_gen)
        self._succeeded()

    def sync(self) -> None:
        """Write and fsync every record held, now (before a shutdown).
        Raises OSError, the file staying open, if that cannot be done."""
        error = self.flush()
        if self.fd < 0:
            return
        if error is not None:
            raise error
        self.ops.fsync(self.fd)
        self.report_durable(self.fd, self.offset)
        self._synced(self.log.written_gen)

    def close(self) -> None:
        """Give the reserved space back and close the file. Records that
        sync() did not make durable are dropped; their replies fail."""
        if self.fd >= 0:
            try:
                self.ops.truncate(self.fd, self.offset)
            except OSError as error:
                log.warning("Cannot give the AOF's reserved space back: %s", error.strerror)
            self._close_in_background(self.fd)
            self.fd = -1
        self.log.drop()
        self._unwritten = b""
        self._fail(1, self.log.written_gen + 1, "the AOF was closed")   # every reply waiting
        self.log.released_gen = self.log.written_gen
        self.state = OFF

    def _close_in_background(self, fd: int) -> None:
        # Queued behind any fsync of fd: closed sooner, the number could be
        # reused by another file (or socket) before that fsync runs.
        self._background.submit(self.ops.close, fd)

    # ------------------------------------------------------------ appending

    def collect_for_rewrite(self) -> None:
        """The running rewrite ends before this turn does: write the turn's
        records now, so that it has them (its buffer) and so does the file
        it may fail to replace, and the replies waiting for them see their
        batch end as at any turn's end (with the AOF off too)."""
        if self.log.has_records:
            self.flush()

    def _take(self) -> bytes:
        """The turn's records, from the log; a running rewrite gets them too."""
        records = self.log.take()
        if records and self.rewrite is not None:
            self.rewrite.buffer.append(records)
        return records

    @property
    def accepting(self) -> bool:
        return self._accepting

    @accepting.setter
    def accepting(self, accepting: bool) -> None:
        self._accepting = accepting
        self.log.refusing = not accepting     # the bus's confirmations (net/frames.pxi)

    def flush(self) -> OSError | None:
        """Write the turn's records, those of a failed write first. Returns
        the error if the write failed: the records are then kept for the
        next try. With the AOF not on (a rewrite alone takes records) the
        batch ends here: there is nothing for a reply to wait for."""
        records = self._take() if self.log.has_records else b""
        if self.state != ON or self.fd < 0:
            if records:
                self.log.written_gen += 1
                self._release(self.log.written_gen)
            return None
        if not (records or self._unwritten):
            return None
        data = self._unwritten + records if self._unwritten else records
        try:
            self._write_at_end(data)
        except OSError as error:
            self._write_failed(error, data)
            return error
        self._unwritten = b""
        self.offset += len(data)
        self.log.written_gen += 1
        self._succeeded()
        if self.policy == "always":
            self._start_fsync()
        else:
            self._release(self.log.written_gen)
        return None

    def _write_at_end(self, data: bytes) -> None:
        if self.offset + len(data) > self.reserved:
            self._reserve(len(data))
        monitor = self.latency
        began = monitor.begin()
        try:
            self.ops.write_all(self.fd, data, self.offset)
        finally:
            if began is not None:
                self._observe_write(monitor.elapsed_ms(began))

    def _observe_write(self, ms: int) -> None:
        """Disque's write events: one for what else was going on, one for all."""
        if self._fsync_running:
            during = latency_events.AOF_WRITE_PENDING_FSYNC
        elif self.rewrite is not None:
            during = latency_events.AOF_WRITE_ACTIVE_CHILD
        else:
            during = latency_events.AOF_WRITE_ALONE
        self.latency.observe(during, ms)
        self.latency.observe(latency_events.AOF_WRITE, ms)

    def _write_failed(self, error: OSError, data: bytes) -> None:
        self._unwritten = data
        self._enter_error(error, "Error writing to the AOF (%s): its records are kept and "
                                 "written again once the disk accepts them; write commands "
                                 "are refused until then")
        try:
            self.ops.truncate(self.fd, self.offset)   # no half record stays behind
            self.reserved = self.offset
        except OSError:
            pass
        failed = self.log.written_gen + 1          # the batch that was not written
        self._fail(failed, failed, self.last_error)

    def _enter_error(self, error: OSError, message: str) -> None:
        reason = error.strerror or str(error)
        if self.last_write_ok or reason != self.last_error:   # not again every retry
            log.warning(message, reason)
        self.last_write_ok = False
        self.accepting = False
        self.last_error = reason

    def _succeeded(self) -> None:
        """A write or fsync worked: the error state ends, if space allows."""
        if not self.last_write_ok:
            log.notice("AOF write error cleared: writes succeed again")
            self.last_write_ok = True
        self._reserve_headroom()

    def _synced(self, gen: int) -> None:
        """Batches up to gen are durable."""
        self.synced_gen = max(self.synced_gen, gen)
        self._release(gen)

    def _fail(self, first: int, last: int, reason: str) -> None:
        """The replies and confirmations waiting for batches first..last
        (but those released already) cannot claim success (on_failed)."""
        first = max(first, self.log.released_gen + 1)
        self.on_failed(first, last, reason)

    def _release(self, gen: int) -> None:
        """Replies waiting for batches up to gen may leave."""
        log_ = self.log
        if gen > log_.released_gen:
            log_.released_gen = gen
        self.on_released()

    def set_policy(self, policy: str) -> None:
        """CONFIG SET appendfsync: replies waiting for an fsync that the new
        policy does not ask for leave."""
        self.policy = policy
        if policy != "always":
            self._release(self.log.written_gen)

    def _reserve(self, needed: int) -> None:
        """Reserve `needed` bytes past the end and RESERVE_CHUNK more, or
        only RESERVE_MIN more when the disk is short of space. Raises
        OSError when not even that can be had."""
        if not self.space_short:
            try:
                self.ops.reserve(self.fd, self.offset, needed + RESERVE_CHUNK)
                self.reserved = max(self.reserved, self.offset + needed + RESERVE_CHUNK)
                return
            except OSError:
                self.space_short = True      # the cron tries the chunk again
        self.ops.reserve(self.fd, self.offset, needed + RESERVE_MIN)
        self.reserved = max(self.reserved, self.offset + needed + RESERVE_MIN)

    def _reserve_headroom(self) -> None:
        low_water = RESERVE_MIN if self.space_short else RESERVE_LOW_WATER
        if self.reserved - self.offset >= low_water:
            if not self.accepting and self.last_write_ok:
                self.accepting = True
            return
        try:
            self._reserve(0)
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
        if self._fsync_running or self.fd < 0 or self.synced_gen >= self.log.written_gen:
            return
        self._fsync_running = True
        target, fd, offset = self.log.written_gen, self.fd, self.offset
        # With appendfsync always replies wait for this fsync: Disque's
        # aof-fsync-always event (its fsync blocks the loop; ours, the replies).
        began = self.latency.begin() if self.policy == "always" else None
        future = self.loop.run_in_executor(self._background, self._timed_fsync, fd, offset)
        future.add_done_callback(lambda done: self._fsync_done(done, fd, target, began))

    def _timed_fsync(self, fd: int, offset: int) -> float:
        """In the background thread: fsync, and how long it took (seconds).
        `offset`: where the file ended when it began (what it makes durable)."""
        started = time.perf_counter()
        self.ops.fsync(fd)
        elapsed = time.perf_counter() - started
        self.report_durable(fd, offset)
        return elapsed

    def _fsync_done(self, done, fd: int, target: int, began: int | None = None) -> None:
        self._fsync_running = False
        if began is not None:
            self.latency.observe(latency_events.AOF_FSYNC_ALWAYS,
                                 self.latency.elapsed_ms(began))
        error = done.exception()
        if error is None:
            self.fsync_durations.observe(done.result())
        # An fsync of a file since replaced by a rewrite (fsynced whole) or
        # closed is moot: the replies waiting for it were answered then.
        if fd == self.fd:
            if error is not None:
                self._fsync_failed(error, target)
                return                # the cron retries: no busy loop on a dead disk
            self._synced(target)
            if not self.last_write_ok and not self._unwritten:
                self._succeeded()
        if self.policy == "always":
            self._start_fsync()       # what was written while this one ran

    def _fsync_failed(self, error: OSError, target: int) -> None:
        self._enter_error(error, "fsync of the AOF failed: %s")
        self._fail(1, target, self.last_error)
        if target > self.log.released_gen:
            self.log.released_gen = target              # later replies do not wait

    def every_second(self) -> None:
        """The cron: everysec fsyncs; a writer in error state retries."""
        if self.state != ON:
            return
        self.space_short = False          # worth trying a whole chunk again
        if self.policy == "everysec":
            if self._fsync_running:
                self.delayed_fsync += 1
            self._start_fsync()
        if not self.accepting:
            self._retry()

    def _retry(self) -> None:
        """Try again what made the writer refuse write commands."""
        if self._unwritten:
            self.flush()                  # a failed write
        elif not self.last_write_ok and self.synced_gen < self.log.written_gen:
            self._start_fsync()           # a failed fsync
        else:
            self._succeeded()             # space ran short: reserve it again

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
                ("aof_buffer_length", len(self._unwritten)),
                ("aof_rewrite_buffer_length",
                 sum(map(len, rewrite.buffer)) if rewrite else 0),
                ("aof_pending_bio_fsync", int(self._fsync_running)),
                ("aof_delayed_fsync", self.delayed_fsync),
                ("aof_accepting_writes", int(self.accepting)),
            ]
        if rewrite is not None:
            fields += rewrite.progress_fields()
        return fields


def _nothing(*args) -> None:
    pass
