"""The AOF writer on its own, no server: what becomes of records and held
replies when a write or an fsync fails, and that a file is never closed
while an fsync of it is still queued.

A server can only fail "the next file operation" (DEBUG AOF-FAULT); here
FileOps is scripted to fail or hold exactly the operation a rule is about.
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading

import pytest

from disque_py.persistence import aof_format
from disque_py.persistence import durable_report as durable_report_module
from disque_py.persistence.aof import ON, RESERVE_CHUNK, RESERVE_MIN, AofWriter, FileOps
from disque_py.persistence.rewrite import Rewrite
from tests.persistence.helpers import RecordSource, open_writer, parse_records, run_loop_until

TIMEOUT_S = 5.0


class ScriptedOps(FileOps):
    """Records fsyncs and closes in order; fails the next `fsync_errors`
    fsyncs, and every fsync of the files in `failing_fds`; holds every
    fsync while `fsync_gate` is clear."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, int]] = []
        self.fsync_errors = 0
        self.failing_fds: set[int] = set()
        self.fsync_gate = threading.Event()
        self.fsync_gate.set()
        self.fsync_entered = threading.Event()

    def fsync(self, fd: int) -> None:
        self.fsync_entered.set()
        assert self.fsync_gate.wait(TIMEOUT_S), "the test never released the fsync"
        self.events.append(("fsync", fd))
        if self.fsync_errors or fd in self.failing_fds:
            self.fsync_errors -= fd not in self.failing_fds
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        super().fsync(fd)

    def close(self, fd: int) -> None:
        self.events.append(("close", fd))
        super().close(fd)


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture
def source():
    return RecordSource()


@pytest.fixture
def writer_for(loop, tmp_path, source):
    """writer_for(policy, ops=None): an open writer of source's records."""
    def make(policy: str, ops: FileOps | None = None) -> AofWriter:
        return open_writer(loop, tmp_path, policy, ops or ScriptedOps(), source)
    return make


def _records(writer: AofWriter) -> list[bytes]:
    data = open(writer.path, "rb").read()
    return [data[r.offset:r.end] for r in parse_records(data)[1:]]


def _not_held(ok: bool, reason: str) -> None:
    raise AssertionError("this reply should not have been held")


class Replies:
    """Replies that wait for the AOF as the engine's connections and bus
    confirmations do (AofLog.reply_gen, released_gen; the writer's
    on_released and on_failed): hold(callback) runs callback(ok, reason)
    once the records a reply made now depends on are durable (True) or
    cannot be (False); it returns False, calling nothing, if nothing needs
    waiting. Made after the test sets its own on_failed (it chains it)."""

    def __init__(self, writer: AofWriter) -> None:
        self.writer = writer
        self.waiting: list = []                # (gen, callback)
        released, failed = writer.on_released, writer.on_failed

        def on_released() -> None:
            released()
            self._answer(0, writer.log.released_gen, True, "")

        def on_failed(first: int, last: int, reason: str) -> None:
            self._answer(first, last, False, reason)
            failed(first, last, reason)

        writer.on_released, writer.on_failed = on_released, on_failed

    def hold(self, callback) -> bool:
        gen = self.writer.log.reply_gen() if self.writer.state == ON else 0
        if gen:
            self.waiting.append((gen, callback))
        return bool(gen)

    def _answer(self, first: int, last: int, ok: bool, reason: str) -> None:
        due = [item for item in self.waiting if first <= item[0] <= last]
        for item in due:
            self.waiting.remove(item)
            item[1](ok, reason)


@pytest.mark.parametrize("policy", ["always", "everysec", "no"])
def test_records_of_a_failed_write_go_first_in_the_next_write(writer_for, source, policy):
    writer = writer_for(policy)
    writer.ops.inject(errno.ENOSPC, 1)
    a = source.note()
    assert isinstance(writer.flush(), OSError)
    assert not writer.accepting and not writer.last_write_ok
    assert _records(writer) == [], "no half record stays in the file"
    b = source.note()
    assert writer.flush() is None
    assert _records(writer) == [a, b]
    assert writer.accepting and writer.last_write_ok


def test_the_cron_writes_the_records_of_a_failed_write(writer_for, source):
    writer = writer_for("everysec")
    writer.ops.inject(errno.EIO, 1)
    a = source.note()
    writer.flush()
    assert not writer.accepting
    writer.every_second()
    assert _records(writer) == [a]
    assert writer.accepting


def test_after_a_failed_write_only_replies_with_new_records_wait(loop, writer_for, source):
    writer = writer_for("always")
    outcomes, failed = [], []
    writer.on_failed = lambda first, last, reason: failed.append((first, last))
    replies = Replies(writer)
    writer.ops.inject(errno.EIO, 1)
    a = source.note()
    assert replies.hold(lambda ok, reason: outcomes.append(("failed batch", ok)))
    writer.flush()
    assert outcomes == [("failed batch", False)]
    assert failed == [(1, 1)], "the connections waiting for batch 1 are failed too"
    assert not replies.hold(_not_held), "a PING would wait for the failed batch"
    b = source.note()
    assert replies.hold(lambda ok, reason: outcomes.append(("next batch", ok)))
    writer.flush()
    run_loop_until(loop, lambda: len(outcomes) == 2)
    assert outcomes[1] == ("next batch", True)
    assert _records(writer) == [a, b]


def test_a_failed_fsync_fails_its_replies_and_the_cron_retries_it(loop, writer_for, source):
    writer = writer_for("always")
    writer.ops.fsync_errors = 1
    outcomes = []
    replies = Replies(writer)
    source.note()
    replies.hold(lambda ok, reason: outcomes.append((ok, reason)))
    writer.flush()
    run_loop_until(loop, lambda: outcomes)
    assert outcomes == [(False, "Input/output error")]
    assert not writer.accepting
    assert not replies.hold(_not_held), "a PING would wait for the failed fsync"
    writer.every_second()
    run_loop_until(loop, lambda: writer.accepting)
    assert writer.ops.events.count(("fsync", writer.fd)) == 2


def test_a_replaced_file_is_closed_only_after_the_fsync_queued_on_it(loop, tmp_path, writer_for,
                                                                      source):
    writer = writer_for("always")
    ops = writer.ops
    old_fd = writer.fd
    ops.fsync_gate.clear()
    source.note()
    writer.flush()                              # an fsync of the old file, held
    assert ops.fsync_entered.wait(TIMEOUT_S)
    new_fd = os.open(tmp_path / "rewritten.aof", os.O_RDWR | os.O_CREAT, 0o644)
    os.write(new_fd, aof_format.HEADER)
    writer.adopt(new_fd, len(aof_format.HEADER))
    outcomes = []
    replies = Replies(writer)
    source.note()
    assert replies.hold(lambda ok, reason: outcomes.append(ok))
    writer.flush()
    assert ("close", old_fd) not in ops.events
    ops.fsync_gate.set()
    run_loop_until(loop, lambda: outcomes)
    assert outcomes == [True], "the new file's records were fsynced after the old fsync"
    assert ops.events[:2] == [("fsync", old_fd), ("close", old_fd)]
    assert ("fsync", new_fd) in ops.events
    writer.close()


def test_sync_raises_on_a_failed_write_or_fsync_and_keeps_the_file_open(writer_for, source):
    writer = writer_for("everysec")
    a = source.note()
    writer.ops.inject(errno.EIO, 1)
    with pytest.raises(OSError):
        writer.sync()                           # the write fails
    writer.ops.fsync_errors = 1
    with pytest.raises(OSError):
        writer.sync()                           # the write works, the fsync fails
    assert writer.fd >= 0 and writer.state == "on"
    writer.sync()
    writer.close()
    assert _records(writer) == [a]


class SmallDisk(ScriptedOps):
    """A disk that can hold the AOF up to `capacity` bytes (None: no
    limit): reserving past that fails with ENOSPC, as fallocate would."""

    def __init__(self) -> None:
        super().__init__()
        self.capacity: int | None = None
        self.reserves: list[int] = []

    def reserve(self, fd: int, offset: int, length: int) -> None:
        self.reserves.append(length)
        if self.capacity is not None and offset + length > self.capacity:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        super().reserve(fd, offset, length)


def test_a_disk_short_of_a_whole_chunk_takes_writes_again_with_a_small_reserve(writer_for,
                                                                              source):
    """After a full disk, -MISCONF ends once RESERVE_MIN past the end can be
    reserved, not RESERVE_CHUNK (as Disque ends it once a write works);
    with less than RESERVE_MIN free the writer keeps refusing; with room
    again the cron reserves whole chunks."""
    ops = SmallDisk()
    writer = writer_for("everysec", ops)
    ops.inject(errno.ENOSPC, 1)
    a = source.note()
    assert isinstance(writer.flush(), OSError)            # the disk filled up
    assert not writer.accepting
    ops.capacity = writer.offset + len(a) + RESERVE_MIN // 2    # freed: not even 1 MB
    writer.every_second()
    assert not writer.accepting and _records(writer) == []
    ops.capacity = writer.offset + len(a) + RESERVE_MIN + 4096  # freed: 1 MB, not 16
    writer.every_second()
    assert writer.accepting and writer.last_write_ok
    assert _records(writer) == [a]
    b = source.note()
    assert writer.flush() is None and writer.accepting
    assert _records(writer) == [a, b]
    ops.capacity = None                                   # plenty of room again
    writer.every_second()                                 # the cron: try a chunk again
    c = source.note()
    writer.flush()
    assert writer.reserved - writer.offset >= RESERVE_CHUNK - len(c)
    assert writer.accepting
    writer.close()


@pytest.fixture
def durable_report(tmp_path, monkeypatch):
    """The durable-offset seam on: its side file's path."""
    path = tmp_path / "durable"
    monkeypatch.setenv(durable_report_module.ENVIRONMENT_VARIABLE, str(path))
    return path


def test_the_durable_report_follows_fsyncs_and_precedes_their_replies(loop, writer_for, source,
                                                                      durable_report):
    writer = writer_for("always")
    inode = os.stat(writer.path).st_ino
    assert durable_report_module.read(durable_report) == (inode, len(aof_format.HEADER))
    seen_at_reply = []
    replies = Replies(writer)
    a = source.note()
    replies.hold(lambda ok, reason: seen_at_reply.append(
        durable_report_module.read(durable_report)))
    writer.flush()
    run_loop_until(loop, lambda: seen_at_reply)
    assert seen_at_reply == [(inode, len(aof_format.HEADER) + len(a))]


def test_the_durable_report_stays_behind_what_everysec_has_not_fsynced(loop, writer_for, source,
                                                                       durable_report):
    writer = writer_for("everysec")
    a = source.note()
    writer.flush()
    inode, offset = durable_report_module.read(durable_report)
    assert offset == len(aof_format.HEADER), "written, not fsynced: not durable yet"
    writer.every_second()
    run_loop_until(loop, lambda: durable_report_module.read(durable_report)[1] > offset)
    assert durable_report_module.read(durable_report) == (inode, offset + len(a))


def test_a_late_fsync_of_a_replaced_file_does_not_overwrite_the_new_files_report(
        tmp_path, writer_for, durable_report):
    writer = writer_for("always")
    old_inode = os.stat(writer.path).st_ino
    writer.report_durable(writer.fd, 100)
    replacement = tmp_path / "rewritten"
    replacement.write_bytes(aof_format.HEADER)
    new_inode = replacement.stat().st_ino
    writer.durable_report.durable(new_inode, len(aof_format.HEADER), replaces=True)
    writer.durable_report.durable(old_inode, 200)
    assert durable_report_module.read(durable_report) == (new_inode, len(aof_format.HEADER))


def test_without_the_variable_nothing_is_reported(writer_for, monkeypatch):
    monkeypatch.delenv(durable_report_module.ENVIRONMENT_VARIABLE, raising=False)
    writer = writer_for("always")
    assert writer.durable_report is None


# ------------------------------------------------------------------ with a rewrite

def _rewrite_failing_at_its_fsync(writer: AofWriter, source: RecordSource) -> None:
    """A rewrite that takes this turn's records as it finishes, then fails
    before its rename (the fsync of its file), and is aborted."""
    rewrite = writer.rewrite = Rewrite(writer, source.node.jobs, [])
    while not rewrite.step():
        pass
    writer.ops.failing_fds.add(rewrite.fd)
    with pytest.raises(OSError):
        rewrite.finish()
    writer.rewrite = None
    rewrite.abort("test")


@pytest.mark.parametrize("policy", ["always", "everysec"])
def test_a_rewrite_that_fails_as_it_finishes_loses_no_record_of_the_turn(loop, writer_for,
                                                                         source, policy):
    writer = writer_for(policy)
    a = source.note()                     # this turn's record, not written yet
    waits_for = writer.log.reply_gen()
    _rewrite_failing_at_its_fsync(writer, source)
    writer.flush()                        # the turn's end
    assert _records(writer) == [a], "the AOF still has every job in memory"
    if policy == "always":
        run_loop_until(loop, lambda: writer.log.released_gen >= waits_for)
    assert writer.log.released_gen >= waits_for, "the reply made before it leaves"


def test_a_rewrite_with_the_aof_off_releases_the_replies_of_the_turn_it_ends_in(loop, tmp_path,
                                                                                source):
    # BGREWRITEAOF with appendonly no: the node notes records for the
    # rewrite, and replies made meanwhile wait for them like any others.
    writer = AofWriter(str(tmp_path / "rewritten.aof"), "everysec", loop, source.log)
    rewrite = writer.rewrite = Rewrite(writer, source.node.jobs, [])
    source.note()
    waits_for = writer.log.reply_gen()
    while not rewrite.step():
        pass
    rewrite.finish()
    writer.rewrite = None
    writer.flush()                        # the turn's end
    assert writer.log.released_gen >= waits_for, "that reply would wait forever"
    assert [r.argv[0] for r in parse_records((tmp_path / "rewritten.aof").read_bytes())] == \
        [b"DQPAOF", b"LOADJOB", b"LOADJOB"]        # the walk's copy, then the turn's record


def test_closing_after_a_sync_fails_no_reply_the_sync_made_durable(writer_for, source):
    # CONFIG SET appendonly no: sync(), then close(). A reply made this
    # turn (still in the engine, waiting for the turn's end) is durable.
    writer = writer_for("everysec")
    failed = []
    writer.on_failed = lambda first, last, reason: failed.append((first, last))
    source.note()
    waits_for = writer.log.reply_gen()
    writer.sync()
    writer.close()
    assert not [(first, last) for first, last in failed if first <= waits_for <= last]
