"""The slow log, the latency monitor and their reports, on fake clocks.

No sleeps: durations are handed in, and the clocks are callables the tests
move. The rules checked are Disque 1.0-rc1's (src/slowlog.c, latency.c),
the reply shapes those SLOWLOG and LATENCY send.
"""

from __future__ import annotations

import pytest

from disque_py.monitoring import latency as ev
from disque_py.monitoring.latency import HISTORY_LEN, LatencyMonitor
from disque_py.monitoring.latency_report import GRAPH_ROWS, doctor, graph
from disque_py.monitoring.slowlog import MAX_ARG_BYTES, MAX_ARGC, SlowLog

T0 = 1_700_000_000


class FakeClock:
    """Callable clock; `reads` counts how often it was read."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now


@pytest.fixture
def wall():
    return FakeClock(T0)


@pytest.fixture
def clock():
    return FakeClock(100 * 10 ** 9)      # monotonic nanoseconds


# ------------------------------------------------------------------ slow log

def test_slowlog_logs_commands_at_least_as_slow_as_the_threshold(wall):
    log = SlowLog(100, 128, wall)
    log.offer([b"PING"], 99)
    log.offer([b"QLEN", b"q"], 100)
    wall.now += 1
    log.offer([b"QPEEK", b"q", b"10"], 5000)
    assert log.newest(10) == [[1, T0 + 1, 5000, [b"QPEEK", b"q", b"10"]],
                              [0, T0, 100, [b"QLEN", b"q"]]]
    assert len(log) == 2


def test_slowlog_zero_logs_everything_and_negative_nothing(wall):
    everything = SlowLog(0, 128, wall)
    everything.offer([b"PING"], 0)
    assert len(everything) == 1
    nothing = SlowLog(-1, 128, wall)
    nothing.offer([b"PING"], 10 ** 9)
    assert len(nothing) == 0 and not nothing.enabled


def test_slowlog_keeps_the_newest_max_len_entries_and_ids_go_on_after_reset(wall):
    log = SlowLog(0, 3, wall)
    for n in range(5):
        log.offer([b"%d" % n], n)
    assert [entry[0] for entry in log.newest(10)] == [4, 3, 2]
    log.reset()
    assert len(log) == 0
    log.offer([b"PING"], 1)
    assert log.newest(1)[0][0] == 5


def test_slowlog_get_count_zero_some_and_negative_means_all(wall):
    log = SlowLog(0, 128, wall)
    for n in range(12):
        log.offer([b"%d" % n], n)
    assert log.newest(0) == []
    assert [e[3] for e in log.newest(2)] == [[b"11"], [b"10"]]
    assert len(log.newest(-1)) == len(log.newest(-5)) == 12


def test_slowlog_settings_trim_only_while_the_log_is_on(wall):
    log = SlowLog(0, 10, wall)
    for n in range(5):
        log.offer([b"PING"], n)
    log.set_slower_than(-1)
    log.set_max_len(2)
    assert len(log) == 5, "a disabled log is not trimmed (Disque returns first)"
    log.set_slower_than(1_000_000)
    assert len(log) == 2
    log.set_max_len(1)
    assert len(log) == 1


def test_slowlog_keeps_at_most_32_arguments_the_last_counting_the_rest(wall):
    log = SlowLog(0, 128, wall)
    exact = [b"a%d" % n for n in range(MAX_ARGC)]
    log.offer(exact, 1)
    assert log.newest(1)[0][3] == exact
    many = [b"PING"] + [b"a%d" % n for n in range(40)]
    log.offer(many, 1)
    kept = log.newest(1)[0][3]
    assert len(kept) == MAX_ARGC
    assert kept[:MAX_ARGC - 1] == many[:MAX_ARGC - 1]
    assert kept[-1] == b"... (10 more arguments)"


def test_slowlog_cuts_arguments_longer_than_128_bytes(wall):
    log = SlowLog(0, 128, wall)
    log.offer([b"PING", b"x" * MAX_ARG_BYTES, b"y" * 200, b"z" * 129], 1)
    _, exact, cut, one_more = log.newest(1)[0][3]
    assert exact == b"x" * MAX_ARG_BYTES
    assert cut == b"y" * MAX_ARG_BYTES + b"... (72 more bytes)"
    assert one_more == b"z" * MAX_ARG_BYTES + b"... (1 more bytes)"


# ------------------------------------------------------------ latency monitor

def test_latency_off_records_nothing_and_reads_no_clock(wall, clock):
    monitor = LatencyMonitor(0, wall, clock)
    assert monitor.begin() is None
    monitor.observe_since(ev.JOBS_PROCESSING, None)
    monitor.observe(ev.COMMAND, 10 ** 6)
    assert clock.reads == 0 and monitor.events == {}


def test_latency_records_spikes_at_or_above_the_threshold(wall, clock):
    monitor = LatencyMonitor(10, wall, clock)
    monitor.observe(ev.COMMAND, 9)
    assert monitor.latest() == []
    monitor.observe(ev.COMMAND, 10)
    assert monitor.latest() == [[b"command", T0, 10, 10]]


def test_latency_measures_whole_milliseconds_between_begin_and_observe(wall, clock):
    monitor = LatencyMonitor(5, wall, clock)
    began = monitor.begin()
    clock.now += 7_900_000
    monitor.observe_since(ev.AOF_WRITE, began)
    assert monitor.history(ev.AOF_WRITE) == [[T0, 7]]


def test_latency_keeps_one_sample_per_second_the_highest(wall, clock):
    monitor = LatencyMonitor(1, wall, clock)
    for ms in (5, 9, 3):
        monitor.observe(ev.COMMAND, ms)
    wall.now += 1
    monitor.observe(ev.COMMAND, 2)
    assert monitor.history(ev.COMMAND) == [[T0, 9], [T0 + 1, 2]]
    assert monitor.latest() == [[b"command", T0 + 1, 2, 9]]


def test_latency_all_time_high_counts_same_second_spikes(wall, clock):
    monitor = LatencyMonitor(1, wall, clock)
    monitor.observe(ev.COMMAND, 5)
    monitor.observe(ev.COMMAND, 50)
    assert monitor.latest()[0][3] == 50


def test_latency_keeps_the_last_160_seconds_of_samples(wall, clock):
    monitor = _one_spike_a_second(wall, clock, range(1, HISTORY_LEN + 6))
    history = monitor.history(ev.COMMAND)
    assert len(history) == HISTORY_LEN
    assert history[0] == [T0 + 5, 6] and history[-1] == [T0 + HISTORY_LEN + 4, HISTORY_LEN + 5]


def test_latency_reset_matches_names_ignoring_case_and_counts(wall, clock):
    monitor = LatencyMonitor(1, wall, clock)
    for event in (ev.COMMAND, ev.FAST_COMMAND, ev.AOF_WRITE):
        monitor.observe(event, 5)
    assert monitor.reset(["COMMAND", "command", "nope"]) == 1
    assert monitor.history("command") == []
    assert monitor.reset() == 2
    assert monitor.latest() == [] and monitor.reset() == 0


def test_latency_history_is_exact_about_the_name(wall, clock):
    monitor = LatencyMonitor(1, wall, clock)
    monitor.observe(ev.COMMAND, 5)
    assert monitor.history("COMMAND") == []


def _one_spike_a_second(wall, clock, spikes_ms) -> LatencyMonitor:
    monitor = LatencyMonitor(1, wall, clock)
    for n, ms in enumerate(spikes_ms):
        wall.now = T0 + n
        monitor.observe(ev.COMMAND, ms)
    return monitor


def test_latency_stats_as_doctor_reads_them(wall, clock):
    monitor = _one_spike_a_second(wall, clock, (10, 20, 60))
    wall.now = T0 + 6
    stats = monitor.stats(ev.COMMAND)
    assert stats == (3, 30, 20, 10, 60, 60, 6)


# ------------------------------------------------------------------- reports

def test_doctor_says_when_the_monitor_is_off_or_saw_nothing(wall, clock):
    off = doctor(LatencyMonitor(0, wall, clock), 10000)
    assert b"latency-monitor-threshold" in off and off.endswith(b"\n")
    quiet = doctor(LatencyMonitor(25, wall, clock), 10000)
    assert b"25 ms" in quiet


def test_doctor_lists_each_event_with_advice_once(wall, clock):
    monitor = LatencyMonitor(5, wall, clock)
    for event in (ev.COMMAND, ev.AOF_WRITE, ev.AOF_WRITE_ALONE, ev.JOBS_PROCESSING):
        monitor.observe(event, 8)
    report = doctor(monitor, -1).decode()
    assert "1. command: 1 spike(s) (average 8 ms" in report
    assert "4. jobs-processing:" in report
    assert "CONFIG SET slowlog-log-slower-than 5000" in report
    assert report.count("local disk") == 1, "advice shared by events is given once"


def test_doctor_suggests_a_lower_slowlog_threshold_only_when_above(wall, clock):
    monitor = LatencyMonitor(5, wall, clock)
    monitor.observe(ev.COMMAND, 8)
    assert b"slowlog-log-slower-than 5000" in doctor(monitor, 10000)
    assert b"slowlog-log-slower-than 5000" not in doctor(monitor, 5000)


def test_doctor_without_advice_for_an_unknown_event(wall, clock):
    monitor = LatencyMonitor(5, wall, clock)
    monitor.observe("something-else", 8)
    assert b"LATENCY HISTORY" in doctor(monitor, 10000)


def test_graph_draws_a_column_per_sample_labelled_with_its_age(wall, clock):
    monitor = _one_spike_a_second(wall, clock, (10, 40, 25))
    wall.now = T0 + 75
    lines = graph(monitor, ev.COMMAND).decode().split("\n")
    assert lines[0] == ("command: 3 sample(s), lowest 10 ms, highest 40 ms, "
                        "all-time high 40 ms")
    bars = lines[2:2 + GRAPH_ROWS]
    assert bars == [" #", " #", " ##", "###"]
    assert lines[1] == lines[2 + GRAPH_ROWS] == "---"
    assert lines[3 + GRAPH_ROWS:-1] == ["111", "mmm"]


def test_graph_wraps_after_80_columns(wall, clock):
    monitor = _one_spike_a_second(wall, clock, [5] * 100)
    text = graph(monitor, ev.COMMAND).decode()
    rules = [line for line in text.split("\n") if line and set(line) == {"-"}]
    assert [len(rule) for rule in rules] == [80, 80, 20, 20]
