"""The AOF writer and the timer feed the latency monitor, on a fake clock.

File operations advance the clock by a set time instead of being slow, so
each event's sample is exact. Events are Disque's: aof-write plus what else
was going on (aof-write-alone, -pending-fsync, -active-child),
aof-fsync-always for the fsync replies wait for, aof-rewrite-diff-write and
aof-rename when a rewrite finishes, jobs-processing for a timer slice.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from disque_py.engine import JobTable
from disque_py.monitoring import latency as ev
from disque_py.monitoring.histogram import DurationHistogram
from disque_py.monitoring.latency import LatencyMonitor
from disque_py.persistence.aof import FileOps
from disque_py.persistence.rewrite import Rewrite
from disque_py.server.timers import JobTimer
from tests.persistence.helpers import RecordSource, open_writer, run_loop_until


class Clock:
    """Monotonic nanoseconds, moved by the fake file operations."""

    def __init__(self) -> None:
        self.now = 50 * 10 ** 9

    def __call__(self) -> float:
        return self.now


class SlowOps(FileOps):
    """Every write takes write_ms, every fsync fsync_ms, of the fake clock."""

    def __init__(self, clock: Clock, write_ms: int = 0, fsync_ms: int = 0) -> None:
        super().__init__()
        self.clock, self.write_ms, self.fsync_ms = clock, write_ms, fsync_ms

    def write_all(self, fd: int, data: bytes, offset: int) -> None:
        self.clock.now += self.write_ms * 1_000_000
        super().write_all(fd, data, offset)

    def fsync(self, fd: int) -> None:
        self.clock.now += self.fsync_ms * 1_000_000
        super().fsync(fd)


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def source():
    return RecordSource()


@pytest.fixture
def monitor(clock):
    return LatencyMonitor(5, wall=lambda: 1_700_000_000, clock=clock)


def test_a_slow_write_is_an_aof_write_alone(loop, tmp_path, clock, monitor, source):
    writer = open_writer(loop, tmp_path, "everysec", SlowOps(clock, write_ms=7), source, monitor)
    source.note()
    writer.flush()
    assert monitor.history(ev.AOF_WRITE) == [[1_700_000_000, 7]]
    assert monitor.history(ev.AOF_WRITE_ALONE) == [[1_700_000_000, 7]]


def test_a_fast_write_records_nothing(loop, tmp_path, clock, monitor, source):
    writer = open_writer(loop, tmp_path, "everysec", SlowOps(clock, write_ms=4), source, monitor)
    source.note()
    writer.flush()
    assert monitor.events == {}


def test_a_write_during_a_rewrite_is_an_aof_write_active_child(loop, tmp_path, clock, monitor,
                                                                source):
    writer = open_writer(loop, tmp_path, "no", SlowOps(clock), source, monitor)
    writer.rewrite = Rewrite(writer, JobTable(), [])
    writer.ops.write_ms = 6
    source.note()
    writer.flush()
    assert set(monitor.events) == {ev.AOF_WRITE, ev.AOF_WRITE_ACTIVE_CHILD}
    writer.rewrite.abort("test over")


def test_finishing_a_rewrite_times_its_last_records_and_the_rename(loop, tmp_path, clock,
                                                                   monitor, source):
    writer = open_writer(loop, tmp_path, "no", SlowOps(clock), source, monitor)
    rewrite = writer.rewrite = Rewrite(writer, JobTable(), [])
    source.note()                       # taken by the rewrite as it finishes
    writer.ops.write_ms = 9
    rewrite.finish()
    assert monitor.history(ev.AOF_REWRITE_DIFF_WRITE)[0][1] == 9
    assert ev.AOF_RENAME not in monitor.events, "the rename itself took no fake time"


def test_appendfsync_always_fsyncs_are_aof_fsync_always(loop, tmp_path, clock, monitor, source):
    writer = open_writer(loop, tmp_path, "always", SlowOps(clock, fsync_ms=12), source, monitor)
    source.note()
    writer.flush()
    run_loop_until(loop, lambda: writer.synced_gen == writer.log.written_gen)
    assert monitor.history(ev.AOF_FSYNC_ALWAYS)[0][1] == 12


def test_everysec_fsyncs_are_not_sampled(loop, tmp_path, clock, monitor, source):
    writer = open_writer(loop, tmp_path, "everysec", SlowOps(clock, fsync_ms=12), source, monitor)
    source.note()
    writer.flush()
    writer.every_second()
    run_loop_until(loop, lambda: writer.synced_gen == writer.log.written_gen)
    assert ev.AOF_FSYNC_ALWAYS not in monitor.events


def test_a_slow_timer_slice_is_jobs_processing(clock, monitor):
    def tick():
        clock.now += 8_000_000
        return True                         # more due: the next slice is soon
    scheduled = []
    timer = JobTimer(SimpleNamespace(call_soon=scheduled.append, time=lambda: 0.0),
                     SimpleNamespace(tick=tick, effects=[]),
                     SimpleNamespace(latency=monitor, timer_lateness=DurationHistogram()),
                     effects=None)
    timer._run()
    assert monitor.history(ev.JOBS_PROCESSING) == [[1_700_000_000, 8]]
    assert scheduled, "the next slice was scheduled"
