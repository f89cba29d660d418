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
from disque_py.persistence.aof import RESERVE_CHUNK, RESERVE_MIN, AofWriter, FileOps
from tests.persistence.helpers import open_writer, parse_records, run_loop_until

A = aof_format.del_job_record(b"A" * 40)
B = aof_format.del_job_record(b"B" * 40)
TIMEOUT_S = 5.0


class ScriptedOps(FileOps):
    """Records fsyncs and closes in order; fails the next `fsync_errors`
    fsyncs; holds every fsync while `fsync_gate` is clear."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, int]] = []
        self.fsync_errors = 0
        self.fsync_gate = threading.Event()
        self.fsync_gate.set()
        self.fsync_entered = threading.Event()

    def fsync(self, fd: int) -> None:
        self.fsync_entered.set()
        assert self.fsync_gate.wait(TIMEOUT_S), "the test never released the fsync"
        self.events.append(("fsync", fd))
        if self.fsync_errors:
            self.fsync_errors -= 1
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


def _writer(loop, tmp_path, policy: str, ops: FileOps | None = None) -> AofWriter:
    return open_writer(loop, tmp_path, policy, ops or ScriptedOps())


def _records(writer: AofWriter) -> list[bytes]:
    data = open(writer.path, "rb").read()
    return [data[r.offset:r.end] for r in parse_records(data)[1:]]


def _not_held(ok: bool, reason: str) -> None:
    raise AssertionError("this reply should not have been held")


@pytest.mark.parametrize("policy", ["always", "everysec", "no"])
def test_records_of_a_failed_write_go_first_in_the_next_write(loop, tmp_path, policy):
    writer = _writer(loop, tmp_path, policy)
    writer.ops.inject(errno.ENOSPC, 1)
    writer.append(A)
    assert isinstance(writer.flush(), OSError)
    assert not writer.accepting and not writer.last_write_ok
    assert _records(writer) == [], "no half record stays in the file"
    writer.append(B)
    assert writer.flush() is None
    assert _records(writer) == [A, B]
    assert writer.accepting and writer.last_write_ok


def test_the_cron_writes_the_records_of_a_failed_write(loop, tmp_path):
    writer = _writer(loop, tmp_path, "everysec")
    writer.ops.inject(errno.EIO, 1)
    writer.append(A)
    writer.flush()
    assert not writer.accepting
    writer.every_second()
    assert _records(writer) == [A]
    assert writer.accepting


def test_after_a_failed_write_only_replies_with_new_records_wait(loop, tmp_path):
    writer = _writer(loop, tmp_path, "always")
    outcomes = []
    writer.ops.inject(errno.EIO, 1)
    writer.append(A)
    assert writer.hold_reply(lambda ok, reason: outcomes.append(("failed batch", ok)))
    writer.flush()
    assert outcomes == [("failed batch", False)]
    assert not writer.hold_reply(_not_held), "a PING would wait for the failed batch"
    writer.append(B)
    assert writer.hold_reply(lambda ok, reason: outcomes.append(("next batch", ok)))
    writer.flush()
    run_loop_until(loop, lambda: len(outcomes) == 2)
    assert outcomes[1] == ("next batch", True)
    assert _records(writer) == [A, B]


def test_a_failed_fsync_fails_its_replies_and_the_cron_retries_it(loop, tmp_path):
    writer = _writer(loop, tmp_path, "always")
    writer.ops.fsync_errors = 1
    outcomes = []
    writer.append(A)
    writer.hold_reply(lambda ok, reason: outcomes.append((ok, reason)))
    writer.flush()
    run_loop_until(loop, lambda: outcomes)
    assert outcomes == [(False, "Input/output error")]
    assert not writer.accepting
    assert not writer.hold_reply(_not_held), "a PING would wait for the failed fsync"
    writer.every_second()
    run_loop_until(loop, lambda: writer.accepting)
    assert writer.ops.events.count(("fsync", writer.fd)) == 2


def test_a_replaced_file_is_closed_only_after_the_fsync_queued_on_it(loop, tmp_path):
    writer = _writer(loop, tmp_path, "always")
    ops = writer.ops
    old_fd = writer.fd
    ops.fsync_gate.clear()
    writer.append(A)
    writer.flush()                              # an fsync of the old file, held
    assert ops.fsync_entered.wait(TIMEOUT_S)
    new_fd = os.open(tmp_path / "rewritten.aof", os.O_RDWR | os.O_CREAT, 0o644)
    os.write(new_fd, aof_format.HEADER)
    writer.adopt(new_fd, len(aof_format.HEADER))
    outcomes = []
    writer.append(B)
    assert writer.hold_reply(lambda ok, reason: outcomes.append(ok))
    writer.flush()
    assert ("close", old_fd) not in ops.events
    ops.fsync_gate.set()
    run_loop_until(loop, lambda: outcomes)
    assert outcomes == [True], "the new file's records were fsynced after the old fsync"
    assert ops.events[:2] == [("fsync", old_fd), ("close", old_fd)]
    assert ("fsync", new_fd) in ops.events
    writer.close()


def test_sync_raises_on_a_failed_write_or_fsync_and_keeps_the_file_open(loop, tmp_path):
    writer = _writer(loop, tmp_path, "everysec")
    writer.append(A)
    writer.ops.inject(errno.EIO, 1)
    with pytest.raises(OSError):
        writer.sync()                           # the write fails
    writer.ops.fsync_errors = 1
    with pytest.raises(OSError):
        writer.sync()                           # the write works, the fsync fails
    assert writer.fd >= 0 and writer.state == "on"
    writer.sync()
    writer.close()
    assert _records(writer) == [A]


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


def test_a_disk_short_of_a_whole_chunk_takes_writes_again_with_a_small_reserve(loop, tmp_path):
    """After a full disk, -MISCONF ends once RESERVE_MIN past the end can be
    reserved, not RESERVE_CHUNK (as Disque ends it once a write works);
    with less than RESERVE_MIN free the writer keeps refusing; with room
    again the cron reserves whole chunks."""
    ops = SmallDisk()
    writer = _writer(loop, tmp_path, "everysec", ops)
    ops.inject(errno.ENOSPC, 1)
    writer.append(A)
    assert isinstance(writer.flush(), OSError)            # the disk filled up
    assert not writer.accepting
    ops.capacity = writer.offset + len(A) + RESERVE_MIN // 2    # freed: not even 1 MB
    writer.every_second()
    assert not writer.accepting and _records(writer) == []
    ops.capacity = writer.offset + len(A) + RESERVE_MIN + 4096  # freed: 1 MB, not 16
    writer.every_second()
    assert writer.accepting and writer.last_write_ok
    assert _records(writer) == [A]
    writer.append(B)
    assert writer.flush() is None and writer.accepting
    assert _records(writer) == [A, B]
    ops.capacity = None                                   # plenty of room again
    writer.every_second()                                 # the cron: try a chunk again
    writer.append(A)
    writer.flush()
    assert writer.reserved - writer.offset >= RESERVE_CHUNK - len(A)
    assert writer.accepting
    writer.close()


@pytest.fixture
def durable_report(tmp_path, monkeypatch):
    """The durable-offset seam on: its side file's path."""
    path = tmp_path / "durable"
    monkeypatch.setenv(durable_report_module.ENVIRONMENT_VARIABLE, str(path))
    return path


def test_the_durable_report_follows_fsyncs_and_precedes_their_replies(loop, tmp_path,
                                                                      durable_report):
    writer = _writer(loop, tmp_path, "always")
    inode = os.stat(writer.path).st_ino
    assert durable_report_module.read(durable_report) == (inode, len(aof_format.HEADER))
    seen_at_reply = []
    writer.append(A)
    writer.hold_reply(lambda ok, reason: seen_at_reply.append(
        durable_report_module.read(durable_report)))
    writer.flush()
    run_loop_until(loop, lambda: seen_at_reply)
    assert seen_at_reply == [(inode, len(aof_format.HEADER) + len(A))]


def test_the_durable_report_stays_behind_what_everysec_has_not_fsynced(loop, tmp_path,
                                                                       durable_report):
    writer = _writer(loop, tmp_path, "everysec")
    writer.append(A)
    writer.flush()
    inode, offset = durable_report_module.read(durable_report)
    assert offset == len(aof_format.HEADER), "written, not fsynced: not durable yet"
    writer.every_second()
    run_loop_until(loop, lambda: durable_report_module.read(durable_report)[1] > offset)
    assert durable_report_module.read(durable_report) == (inode, offset + len(A))


def test_a_late_fsync_of_a_replaced_file_does_not_overwrite_the_new_files_report(
        loop, tmp_path, durable_report):
    writer = _writer(loop, tmp_path, "always")
    old_inode = os.stat(writer.path).st_ino
    writer.report_durable(writer.fd, 100)
    replacement = tmp_path / "rewritten"
    replacement.write_bytes(aof_format.HEADER)
    new_inode = replacement.stat().st_ino
    writer.durable_report.durable(new_inode, len(aof_format.HEADER), replaces=True)
    writer.durable_report.durable(old_inode, 200)
    assert durable_report_module.read(durable_report) == (new_inode, len(aof_format.HEADER))


def test_without_the_variable_nothing_is_reported(loop, tmp_path, monkeypatch):
    monkeypatch.delenv(durable_report_module.ENVIRONMENT_VARIABLE, raising=False)
    writer = _writer(loop, tmp_path, "always")
    assert writer.durable_report is None
