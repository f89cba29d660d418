"""Persistence, running: load the AOF at start, keep it, rewrite it.

At start-up the AOF is replayed: a file in this server's format (version
2) by the engine (engine/aof/load.pxi), LOAD_SLICE_RECORDS records per
call; one in an older format through the command table with a loader
session, the only one allowed to send LOADJOB (DELJOB is the ordinary
command), LOAD_SLICE_COMMANDS records at a time (Disque's rule). The node
already listens meanwhile, as Disque does: between begin_loading() and
end_loading() (load_and_open runs there) clients get -LOADING for every
command but the few flagged for it (INFO among them); the replay gives
the loop a turn after each slice so that they are answered; INFO persistence shows the
load's progress (Disque's loading_* fields, and the jobs loaded); the log
tells it every REPORT_INTERVAL_S seconds; a shutdown asked meanwhile ends
the load where it is (LoadStopped), the file left as it was. A torn last
record is dropped (and cut off the file) when aof-load-truncated is yes;
any other damage stops the start with its byte offset; after a dropped
record the node's start epoch is new (its copies are re-sent by its peers:
docs/healing.md). With
aof-enqueue-jobs-once the file is loaded even when the AOF is off, queued
jobs come back queued, and the option turns itself off in the config file.
An AOF written by Disque 1.0 loads too (its upgrade path: a controlled
restart into new software), as does one in the previous release's format
(version 1), and with the AOF on either is rewritten in this server's
format before anything is appended, the original kept beside it.

While running it has the writer write the node's records at the end of
each loop turn (write_turn, the server's write_aof hook), closes the
connections whose replies waited for records that could not be made
durable, drives rewrites (BGREWRITEAOF, automatic growth, turning the AOF
on, SHUTDOWN REWRITE-AOF) and follows CONFIG SET appendonly/appendfsync.

The node notes records (node.aof_enabled) whenever something takes
the records: the AOF when on, and any running rewrite, which needs the
changes made during its walk. So turning the AOF on logs everything from
the moment it is asked (WAIT_REWRITE, as Disque does), and BGREWRITEAOF
with the AOF off writes a consistent file yet leaves the AOF off.
"""

from __future__ import annotations

import asyncio
import mmap
import os
import shutil
import time
from typing import Callable

from disque_py.base import log
from disque_py.engine import LOAD_BAD_JOB, RECORD_OK, RECORD_TORN, AofLoader, deserialize_job
from disque_py.base.errors import CommandError, StartupError
from disque_py.persistence import aof_format
from disque_py.persistence.aof import OFF, ON, WAIT_REWRITE, AofWriter
from disque_py.persistence.progress import ProgressMeter
from disque_py.persistence.rewrite import Rewrite, remove_leftovers
from disque_py.server.state import AOF_OFF_INFO
from disque_py.base.replies import AOF_NOT_TURNED_ON, LOADJOB_CORRUPTED, LOADJOB_ONLY_FROM_AOF

# Where a converted AOF is kept, by the format it was in.
BACKUP_SUFFIXES = {aof_format.DISQUE: ".disque-1.0", aof_format.V1: ".v1"}
FORMAT_NAMES = {aof_format.DISQUE: "written by Disque 1.0", aof_format.V1: "in format version 1"}
_DEDUP_RECORDS = (aof_format.DEDUP, aof_format.UNDEDUP)
LOAD_SLICE_COMMANDS = 1000     # older formats' records replayed per turn of the loop, as Disque
LOAD_SLICE_RECORDS = 5000      # version 2's, replayed in C: a few ms per turn
REWRITE_POLL_S = 0.002         # a rewrite waiting for its fsync looks again after this


class LoadStopped(Exception):
    """A shutdown was asked while the AOF loaded: the start goes no further."""


class PersistenceService:
    def __init__(self, node, config, server, stopping: Callable[[], bool],
                 clock=time.monotonic) -> None:
        """`stopping()`: whether a shutdown was asked (the load stops then)."""
        self.stopping = stopping
        self.loop = None                 # the event loop, from load_and_open on
        self.node = node
        self.config = config
        self.server = server
        self.clock = clock               # times the load's progress (tests fake it)
        self.writer: AofWriter | None = None
        self.loaded_from_aof = False     # the jobs of an AOF were loaded at start
        self.dropped_torn_tail = False   # ...all but a last record cut short (see _damaged)
        self.load_progress: ProgressMeter | None = None    # from begin_loading to end_loading
        self._load_started_at = 0        # unix time: INFO loading_start_time
        self.path = os.path.abspath(config.appendfilename)
        config.on_change("appendonly", self._set_appendonly)
        config.on_change("appendfsync", self._set_policy)

    # ------------------------------------------------------------ start-up

    def begin_loading(self) -> None:
        """The node loads from here until end_loading(): clients get -LOADING
        (but for the commands flagged for it) and INFO shows the progress."""
        self._load_started_at = int(time.time())
        self.load_progress = ProgressMeter(0, self.clock)
        self.server.set_loading(True)

    def end_loading(self) -> None:
        self.server.set_loading(False)
        self.load_progress = None

    async def load_and_open(self, loop) -> None:
        """Replay the AOF if there is one to load, then start appending.
        Raises LoadStopped if a shutdown came first (nothing is appended)."""
        self.loop = loop
        config = self.config
        remove_leftovers(self.path)
        enqueue_once = config.aof_enqueue_jobs_once
        data_end, version = 0, aof_format.VERSION
        if (config.appendonly or enqueue_once) and os.path.exists(self.path):
            data_end, version = await self._load(enqueue_once)
            self.loaded_from_aof = True
            if enqueue_once:
                self._turn_off_enqueue_once()
        self.writer = AofWriter(self.path, config.appendfsync, loop, self.node.aof,
                                latency=self.server.latency)
        self.writer.on_released = self.server.release_held
        self.writer.on_failed = self._fail_replies
        if config.appendonly:
            if version != aof_format.VERSION:
                data_end = self._convert_old_file(version)
            self.writer.open(data_end)
        self._follow_writer()

    async def _load(self, enqueue: bool) -> tuple[int, int]:
        """Replay the file; returns where its last whole record ends and
        its format (aof_format.file_version)."""
        started = self.clock()
        with open(self.path, "r+b") as handle:
            if os.fstat(handle.fileno()).st_size == 0:
                return 0, aof_format.VERSION
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                written = aof_format.data_end(data)
                version = aof_format.VERSION
                if written:
                    try:
                        version = aof_format.file_version(data)
                    except aof_format.AofDamage:
                        pass                  # the replay reports it
                end, loaded = await self._replay(data, written, enqueue)
            if end < written:
                handle.truncate(end)
        old = FORMAT_NAMES.get(version)
        log.notice("DB loaded from append only file: %d jobs%s in %.3f seconds", loaded,
                   f" ({old})" if old else "", self.clock() - started)
        return end, version

    def _convert_old_file(self, version: int) -> int:
        """Rewrite a loaded AOF of an older format (Disque's, or version 1)
        in this server's before any record is appended to it; the original
        stays beside it (BACKUP_SUFFIXES). Returns the new file's size."""
        backup = self.path + BACKUP_SUFFIXES[version]
        name = FORMAT_NAMES[version]
        try:
            if not os.path.exists(backup):    # else: a conversion interrupted earlier
                _keep_copy(self.path, backup)
        except OSError as error:
            raise StartupError(f"Cannot keep the AOF {name} as {backup}: "
                               f"{error.strerror}") from None
        try:
            self.rewrite_now()
        except OSError as error:
            raise StartupError(f"Cannot rewrite the AOF {self.path} ({name}) in this "
                               f"server's format: {error.strerror}") from None
        log.notice("The AOF %s was rewritten in this server's format (version %d); "
                   "the original is kept as %s", name, aof_format.VERSION, backup)
        return os.path.getsize(self.path)

    async def _replay(self, data, size: int, enqueue: bool) -> tuple[int, int]:
        """Replay the `size` bytes of records in `data`: (where the last
        whole record ends, jobs loaded)."""
        self.load_progress.total = size
        start = aof_format.records_start(data, size)
        if start is None:
            return await self._replay_commands(data, enqueue)
        return await self._replay_records(data, start, size, enqueue)

    async def _replay_records(self, data, start: int, size: int,
                              enqueue: bool) -> tuple[int, int]:
        """Version 2, from `start`: the engine replays the records
        (AofLoader), a slice per turn of the loop."""
        progress = self.load_progress
        loader = AofLoader(self.node, enqueue, start)
        while loader.run(data, size, LOAD_SLICE_RECORDS):
            progress.update(loader.pos, loader.jobs)
            await self._between_slices(progress)
        if loader.status == LOAD_BAD_JOB:
            raise StartupError(f"Bad record in the AOF {self.path} at byte offset "
                               f"{loader.pos}: {loader.problem}")
        if loader.status != RECORD_OK:
            self._damaged(aof_format.AofDamage(loader.pos, loader.problem,
                                               torn=loader.status == RECORD_TORN))
        progress.update(loader.pos, loader.jobs)
        return loader.pos, loader.jobs

    async def _replay_commands(self, data, enqueue: bool) -> tuple[int, int]:
        """Version 1 and Disque's files: each record through the command
        table, as its loader session's command."""
        session = self.server.new_session("aof-loader")
        session.aof_loader = True
        session.enqueue_loaded = enqueue
        progress = self.load_progress
        end, loaded = 0, 0
        dispatch = self.server.commands.dispatch
        try:
            for count, record in enumerate(aof_format.records(data), 1):
                if not count % LOAD_SLICE_COMMANDS:
                    progress.update(end, loaded)
                    await self._between_slices(progress)
                end = record.end
                if record.argv[0] == aof_format.HEADER_COMMAND:
                    continue
                if record.argv[0].upper() in _DEDUP_RECORDS:   # as the reader checked it
                    self._load_dedup(record)
                    continue
                reply = dispatch(self.server, session, record.argv)
                if isinstance(reply, CommandError):
                    raise StartupError(f"Bad record in the AOF {self.path} at byte offset "
                                       f"{record.offset}: {reply.message}")
                loaded += record.argv[0].upper() == b"LOADJOB"
        except aof_format.AofDamage as damage:
            self._damaged(damage)
            end = damage.offset
        finally:
            self.server.drop_session(session)
        progress.update(end, loaded)
        return end, loaded

    async def _between_slices(self, progress: ProgressMeter) -> None:
        """Log the progress when a report is due, let the loop answer
        clients, and stop here if a shutdown was asked meanwhile."""
        if progress.report_due():
            log.notice("Loading the AOF: %s", progress.describe("jobs"))
        await asyncio.sleep(0)
        if self.stopping():
            raise LoadStopped()

    def _load_dedup(self, record: aof_format.AofRecord) -> None:
        """DEDUP queue key job-id until-ms, UNDEDUP queue key job-id: the
        reader (aof_format.records) refused any with a bad field."""
        argv = record.argv
        forget = argv[0].upper() == aof_format.UNDEDUP
        until_ms = 0 if forget else int(argv[4])
        self.node.restore_dedup(argv[1], argv[2], argv[3], until_ms, forget)

    def _damaged(self, damage: aof_format.AofDamage) -> None:
        if damage.torn and self.config.aof_load_truncated:
            log.warning("!!! Warning: short read while loading the AOF file %s !!! "
                        "The last record (at byte offset %d) was cut short by a crash "
                        "and is dropped.", self.path, damage.offset)
            # A crash during a write cuts a record no one was told about;
            # a damaged file (or a power cut) may have cut records whose
            # copies this node confirmed: the cluster service then takes a
            # new start epoch, so that peers copy its jobs back.
            self.dropped_torn_tail = True
            return
        hint = ("aof-load-truncated is no" if damage.torn
                else "run 'disque-py check-aof --fix %s' to cut it there" % self.path)
        raise StartupError(f"Bad file format reading the append only file {self.path}: "
                           f"{damage.reason} at byte offset {damage.offset} ({hint})")

    def _turn_off_enqueue_once(self) -> None:
        # The option is settable (the controlled restart sets it by CONFIG
        # SET), so the public setter turns it off the same way.
        self.config.set(b"aof-enqueue-jobs-once", b"no")
        if self.config.config_file:
            try:
                self.config.rewrite()
            except CommandError as error:
                log.warning("CONFIG REWRITE failed (executed to turn off "
                            "aof-enqueue-jobs-once): %s", error.message)

    def load_job(self, session, argv: list[bytes]) -> int:
        """LOADJOB <job> <crc>: only the loader session may send it."""
        if not session.aof_loader:
            raise CommandError(LOADJOB_ONLY_FROM_AOF)
        try:
            record = deserialize_job(argv[1])
        except ValueError as error:
            raise CommandError(LOADJOB_CORRUPTED % error) from None
        return int(self.node.load_job(record, session.enqueue_loaded))

    # ------------------------------------------------------------ running

    def write_turn(self) -> None:
        """The end of a loop turn: write the records the node noted."""
        if self.writer is None:
            self.node.aof.drop()          # not started yet: nothing takes records
        else:
            self.writer.flush()

    def _fail_replies(self, first: int, last: int, reason: str) -> None:
        """Batches first..last could not be made durable: the replies that
        waited for them must not claim success, and cannot be unsent one
        by one, so those clients' sessions end, at once (a connection
        running a command too: CONFIG SET appendonly no, SHUTDOWN)."""
        for conn in self.server.take_failed(first, last):
            session = conn.session
            log.warning("Closing client %s: its commands could not be written to the "
                        "AOF (%s)", session.addr if session else "?", reason)
            conn.drop()

    @property
    def accepting(self) -> bool:
        writer = self.writer
        return writer is None or writer.state == OFF or writer.accepting

    def every_second(self) -> None:
        writer = self.writer
        if writer is None:
            return
        writer.every_second()
        if writer.state == ON and writer.rewrite is None and self._should_auto_rewrite():
            log.notice("Starting automatic rewriting of the AOF on %d%% growth",
                       self.config.auto_aof_rewrite_percentage)
            self.start_rewrite()

    def _should_auto_rewrite(self) -> bool:
        percentage = self.config.auto_aof_rewrite_percentage
        writer = self.writer
        if not percentage or writer.offset < self.config.auto_aof_rewrite_min_size:
            return False
        base = max(writer.base_size, 1)
        return (writer.offset - base) * 100 // base >= percentage

    def start_rewrite(self) -> bool:
        """Start a rewrite in the background; False if one runs or it cannot start."""
        if self.writer is None or self.writer.rewrite is not None:
            return False
        try:
            rewrite = self._new_rewrite()
        except OSError:
            return False
        self.loop.call_soon(self._rewrite_step, rewrite)
        return True

    def _rewrite_step(self, rewrite: Rewrite) -> None:
        if self.writer.rewrite is not rewrite:
            return                    # aborted meanwhile
        try:
            if not rewrite.step():
                if rewrite.waiting:          # for the disk: no need to spin
                    self.loop.call_later(REWRITE_POLL_S, self._rewrite_step, rewrite)
                else:
                    self.loop.call_soon(self._rewrite_step, rewrite)
                return
            rewrite.finish()
        except OSError as error:
            self._rewrite_ended(rewrite, error)
            return
        self._rewrite_ended(rewrite, None)

    def rewrite_now(self) -> None:
        """A whole rewrite, at once (at shutdown): raises OSError."""
        self._abort_rewrite("superseded by a synchronous rewrite")
        rewrite = self._new_rewrite()
        try:
            while not rewrite.step():
                rewrite.wait()
            rewrite.finish()
        except OSError as error:
            self._rewrite_ended(rewrite, error)
            raise
        self._rewrite_ended(rewrite, None)

    def _new_rewrite(self) -> Rewrite:
        """A rewrite set up on the writer; OSError if it cannot start."""
        writer = self.writer
        try:
            writer.rewrite = Rewrite(writer, self.node.jobs, self.node.dedup.items())
        except OSError as error:
            log.warning("Cannot start the AOF rewrite: %s", error.strerror)
            self._rewrite_failed()
            raise
        self._follow_writer()
        return writer.rewrite

    def _rewrite_ended(self, rewrite: Rewrite, error: OSError | None) -> None:
        writer = self.writer
        writer.rewrite = None
        writer.last_rewrite_seconds = int(time.monotonic() - rewrite.started)
        if error is None:
            writer.last_rewrite_ok = True
            self._follow_writer()
        else:
            rewrite.abort(error.strerror or str(error))
            self._rewrite_failed()

    def _rewrite_failed(self) -> None:
        writer = self.writer
        writer.last_rewrite_ok = False
        if writer.state == WAIT_REWRITE:
            writer.state = OFF                # turning the AOF on failed
        self._follow_writer()

    def _abort_rewrite(self, reason: str) -> None:
        """Stop a running rewrite on purpose (not a failure)."""
        writer = self.writer
        if writer.rewrite is not None:
            writer.rewrite.abort(reason)
            writer.rewrite = None
            self._follow_writer()

    def _follow_writer(self) -> None:
        """Whether the node emits AOF records: see the module's opening."""
        writer = self.writer
        self.node.aof_enabled = writer.state != OFF or writer.rewrite is not None

    def _set_appendonly(self, enabled: bool) -> None:
        writer = self.writer
        if enabled and writer.state == OFF:
            # A rewrite already running (BGREWRITEAOF) has every change in
            # its buffer: its file becomes the AOF, as a new one's would.
            writer.state = WAIT_REWRITE
            if writer.rewrite is None and not self.start_rewrite():
                raise CommandError(AOF_NOT_TURNED_ON)
        elif not enabled and writer.state != OFF:
            self._abort_rewrite("the AOF was turned off")
            try:
                writer.sync()
            except OSError as error:
                log.warning("Turning the AOF off: its last records could not be made "
                            "durable: %s", error.strerror)
            writer.close()
            self._follow_writer()

    def _set_policy(self, policy: str) -> None:
        self.writer.set_policy(policy)

    def shutdown(self, rewrite: bool) -> None:
        """Make everything durable before exit; raises OSError on failure
        (the server then goes on, the AOF as it was)."""
        writer = self.writer
        if writer is None:
            return
        if rewrite or writer.state == WAIT_REWRITE:
            self.rewrite_now()        # WAIT_REWRITE: the first AOF is not written yet
        else:
            self._abort_rewrite("shutting down")     # leave no temporary file
        if writer.state != OFF:
            writer.sync()
            writer.close()

    def info(self) -> list[tuple[str, object]]:
        progress = self.load_progress
        if progress is None:
            return self.writer.info()
        # As Disque's while it loads: the AOF is off until loaded, then the load's figures.
        return [("loading", 1), *AOF_OFF_INFO[1:], *self._loading_fields(progress)]

    def _loading_fields(self, progress: ProgressMeter) -> list[tuple[str, object]]:
        return [
            ("loading_start_time", self._load_started_at),
            ("loading_total_bytes", progress.total),
            ("loading_loaded_bytes", progress.done),
            ("loading_loaded_perc", f"{progress.percent:.2f}"),
            ("loading_eta_seconds", progress.eta_seconds()),
            ("loading_loaded_jobs", progress.items),         # beyond Disque
        ]


def _keep_copy(path: str, backup: str) -> None:
    """A hard link costs nothing; a filesystem without them gets a copy."""
    try:
        os.link(path, backup)
    except OSError:
        shutil.copy2(path, backup)
