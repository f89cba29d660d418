"""Progress of long work, on a fake clock: the meter's arithmetic and
cadence (persistence/progress.py), the AOF load that reports through it
(server/persistence_service.py): its log lines, its INFO fields, its
-LOADING rule and its stop on shutdown; and a rewrite's counts
(persistence/rewrite.py). No sockets, no sleeps: the load's
turns of the loop are asyncio.sleep(0), and the fake clock moves only when
the test moves it.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from disque_py.config import Config
from disque_py.engine import ACKED
from disque_py.base.errors import LoadingError
from disque_py.formats.resp import encode
from disque_py.persistence.aof import REWRITE_SLICE_JOBS, AofWriter
from disque_py.persistence.progress import REPORT_INTERVAL_S, ProgressMeter
from disque_py.persistence.rewrite import Rewrite
from disque_py.server import persistence_service
from disque_py.server.persistence_service import LoadStopped, PersistenceService
from disque_py.server.state import ServerState
from disque_py.tools.large_aof import write_large_aof

MB = 1024 * 1024


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


# ------------------------------------------------------------------ the meter

def test_percent_rate_and_eta_follow_the_work_done(fake_clock):
    meter = ProgressMeter(1000, fake_clock)
    fake_clock.now += 10
    meter.update(250, 50)
    assert meter.percent == 25.0
    assert meter.rate() == 5.0                     # 50 items in 10 s
    assert meter.eta_seconds() == 30               # 10 s for 250 bytes, 750 to go
    fake_clock.now += 20
    meter.update(1000, 200)
    assert (meter.percent, meter.eta_seconds()) == (100.0, 0)
    assert meter.rate() == pytest.approx(200 / 30)


def test_eta_is_whole_seconds_rounded_down(fake_clock):
    meter = ProgressMeter(3, fake_clock)
    fake_clock.now += 10
    meter.update(2, 0)
    assert meter.eta_seconds() == 5                # 10 * 1 / 2


def test_eta_is_one_second_while_there_is_nothing_to_extrapolate(fake_clock):
    """Disque's figure when it cannot tell yet."""
    meter = ProgressMeter(1000, fake_clock)
    assert meter.eta_seconds() == 1                # nothing done, no time elapsed
    fake_clock.now += 0.5
    meter.update(500, 10)
    assert meter.eta_seconds() == 1                # under a second elapsed
    fake_clock.now += 30
    meter.update(0, 0)
    assert meter.eta_seconds() == 1                # time passed, nothing done


def test_rate_is_zero_before_any_time_passed(fake_clock):
    meter = ProgressMeter(1000, fake_clock)
    meter.update(10, 10)
    assert meter.rate() == 0.0


def test_percent_of_no_work_is_complete_and_never_passes_100(fake_clock):
    assert ProgressMeter(0, fake_clock).percent == 100.0
    meter = ProgressMeter(100, fake_clock)
    meter.update(150, 1)
    assert meter.percent == 100.0


def test_reports_are_due_each_interval_never_more_often(fake_clock):
    meter = ProgressMeter(1000, fake_clock)
    due = []
    for step in range(1, 121):                     # 12 s in steps of 0.1 s
        fake_clock.now = 1000.0 + step / 10
        if meter.report_due():
            due.append(round(fake_clock.now - 1000.0, 1))
    assert due == [REPORT_INTERVAL_S, 2 * REPORT_INTERVAL_S]


def test_a_late_check_owes_one_report_and_the_next_is_an_interval_later(fake_clock):
    meter = ProgressMeter(1000, fake_clock)
    fake_clock.now += 3 * REPORT_INTERVAL_S        # one step that took 15 s
    assert meter.report_due()
    assert not meter.report_due()
    fake_clock.now += REPORT_INTERVAL_S - 0.1
    assert not meter.report_due()
    fake_clock.now += 0.1
    assert meter.report_due()


def test_describe_gives_percent_sizes_items_rate_and_eta(fake_clock):
    meter = ProgressMeter(200 * MB, fake_clock)
    fake_clock.now += 10
    meter.update(50 * MB, 100_000)
    assert meter.describe("jobs") == \
        "25.00% (50.0 of 200.0 MB), 100000 jobs, 10000 jobs/s, 30 s left"


# ------------------------------------------------------------------ the load

class ShutdownQuestion:
    """What the load asks between two slices: whether a shutdown was asked.
    Each question is one turn of the loop between two slices: the test's
    hook runs there, as a client's INFO would."""

    def __init__(self, between_slices) -> None:
        self.between_slices = between_slices
        self.stop = False

    def __call__(self) -> bool:
        self.between_slices()
        return self.stop


class CapturedLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def captured_log():
    handler = CapturedLog()
    logger = logging.getLogger("disque")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


SLICE_SECONDS = 2.0            # fake time one slice of records takes


SLICE = 1000                   # records per slice here: ten slices


@pytest.fixture
def loader(tmp_path, node, fake_clock, monkeypatch):
    """A PersistenceService over a 10,000-job AOF loaded in ten slices,
    with the fake clock moving SLICE_SECONDS per slice and INFO
    persistence read between slices (into `seen`)."""
    monkeypatch.setattr(persistence_service, "LOAD_SLICE_RECORDS", SLICE)
    server = ServerState(node, Config())
    seen: list[dict] = []

    def between_slices():
        seen.append(dict(service.info()))
        fake_clock.now += SLICE_SECONDS

    service = PersistenceService(node, Config(), server, ShutdownQuestion(between_slices),
                                 clock=fake_clock)
    server.persistence = service
    server.persistence_info = service.info
    service.path = str(tmp_path / "disque.aof")
    service.size = write_large_aof(tmp_path / "disque.aof", 10_000)
    service.seen = seen
    return service


def load(service: PersistenceService) -> tuple[int, bool]:
    service.begin_loading()
    try:
        return asyncio.run(service._load(enqueue=True))
    finally:
        service.end_loading()


def test_the_load_logs_progress_each_report_interval(loader, captured_log):
    end, _ = load(loader)
    assert end == loader.size
    progress = [line for line in captured_log.lines if line.startswith("Loading the AOF: ")]
    # Ten slices, a look after each but the last; the clock reads
    # t = 2 (k - 1) s at the k-th look: reports due at 6 and 12 s.
    assert len(progress) == 2
    first = progress[0]        # after the 4th slice: 4,000 records
    assert first.startswith("Loading the AOF: 40.")
    assert " 4000 jobs, 667 jobs/s, 8 s left" in first        # 4,000 jobs in 6 s
    assert captured_log.lines[-1].startswith(
        "DB loaded from append only file: 10000 jobs in ")


def test_info_shows_the_load_while_it_runs_then_loading_0(loader):
    load(loader)
    seen = loader.seen
    assert len(seen) == 10_000 // SLICE - 1        # no look after the last slice
    for fields in seen:
        assert fields["loading"] == 1
        assert (fields["aof_enabled"], fields["aof_state"]) == (0, "off")  # as Disque's
        assert fields["loading_total_bytes"] == loader.size
        assert fields["loading_loaded_perc"] == \
            f"{fields['loading_loaded_bytes'] * 100 / loader.size:.2f}"
    loaded = [fields["loading_loaded_bytes"] for fields in seen]
    assert loaded == sorted(loaded) and len(set(loaded)) == len(loaded)
    jobs = [fields["loading_loaded_jobs"] for fields in seen]
    assert jobs == [n * SLICE for n in range(1, len(seen) + 1)]
    # The k-th look is at t = 2 (k - 1) s: elapsed x remaining / loaded.
    third = seen[2]
    remaining = loader.size - third["loading_loaded_bytes"]
    assert third["loading_eta_seconds"] == int(4 * remaining / third["loading_loaded_bytes"])
    assert seen[0]["loading_eta_seconds"] == 1               # no time elapsed yet
    assert list(seen[0])[:9] == ["loading", "aof_enabled", "aof_state",
                                 "aof_rewrite_in_progress", "aof_rewrite_scheduled",
                                 "aof_last_rewrite_time_sec",
                                 "aof_current_rewrite_time_sec",
                                 "aof_last_bgrewrite_status", "aof_last_write_status"]
    assert list(seen[0])[9:] == ["loading_start_time", "loading_total_bytes",
                                 "loading_loaded_bytes", "loading_loaded_perc",
                                 "loading_eta_seconds", "loading_loaded_jobs"]
    assert third["loading_start_time"] > 1_600_000_000                # unix time
    assert loader.load_progress is None and not loader.server.loading


def test_commands_get_loading_but_info_and_the_loader_do_not(loader):
    server = loader.server
    client = server.new_session()
    replies = {}

    def ask():
        for name in (b"PING", b"ADDJOB", b"QLEN", b"INFO"):
            argv = [name] + ([b"q", b"body", b"0"] if name == b"ADDJOB" else
                             [b"q"] if name == b"QLEN" else [])
            replies.setdefault(name, server.commands.dispatch(server, client, argv))

    loader.stopping.between_slices = ask
    load(loader)
    loading = LoadingError("Disque is loading the dataset in memory")
    assert replies[b"PING"] == replies[b"ADDJOB"] == replies[b"QLEN"] == loading
    assert loading.wire() == b"-LOADING Disque is loading the dataset in memory\r\n"
    assert b"\r\nloading:1\r\n" in encode(replies[b"INFO"])
    # Loaded: the loader's LOADJOBs went through (queued: aof-enqueue-jobs-once).
    assert server.commands.dispatch(server, client, [b"QLEN", b"queue-0"]) == b":625\r\n"
    assert server.commands.dispatch(server, client, [b"PING"]) != loading


def test_a_shutdown_during_the_load_stops_it_and_leaves_the_file(loader, tmp_path):
    before = (tmp_path / "disque.aof").read_bytes()
    slices = []

    def stop_at_third():
        slices.append(None)
        loader.stopping.stop = len(slices) >= 3

    loader.stopping.between_slices = stop_at_third
    with pytest.raises(LoadStopped):
        load(loader)
    assert len(slices) == 3
    assert (tmp_path / "disque.aof").read_bytes() == before
    assert not [s for s in loader.server.clients.values() if s.aof_loader]


# ------------------------------------------------------------------ rewrite

def test_rewrite_progress_counts_jobs_walked_and_written(loader, tmp_path):
    load(loader)
    jobs = loader.node.jobs
    next(iter(jobs.values())).state = ACKED          # walked, not written
    writer = AofWriter(str(tmp_path / "rewritten.aof"), "everysec", None, loader.node.aof)
    rewrite = Rewrite(writer, jobs, [])
    seen = [dict(rewrite.progress_fields())]
    while not rewrite.step():
        seen.append(dict(rewrite.progress_fields()))
    seen.append(dict(rewrite.progress_fields()))
    rewrite.abort("test over")
    assert seen[0] == {"aof_rewrite_jobs_total": 10_000, "aof_rewrite_jobs_processed": 0,
                       "aof_rewrite_jobs_written": 0, "aof_rewrite_perc": "0.00"}
    assert seen[-1] == {"aof_rewrite_jobs_total": 10_000,
                        "aof_rewrite_jobs_processed": 10_000,
                        "aof_rewrite_jobs_written": 9_999, "aof_rewrite_perc": "100.00"}
    written = [fields["aof_rewrite_jobs_written"] for fields in seen]
    percents = [float(fields["aof_rewrite_perc"]) for fields in seen]
    assert len(seen) >= 10_000 // REWRITE_SLICE_JOBS        # a slice per loop turn
    assert written == sorted(written) and percents == sorted(percents)
