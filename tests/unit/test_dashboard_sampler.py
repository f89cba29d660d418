"""The dashboard's sampler and charts, on a fake clock: no sleeps, no sockets.

The sampler reads a real node's counters (jobs made by dispatching ADDJOB,
GETJOB and ACKJOB as a client would), keeps one sample per call in a ring
buffer, and turns running totals into per-second rates.
"""

from __future__ import annotations

import pytest

from disque_py.config import Config
from disque_py.server.state import ServerState
from disque_py.web.dashboard import sampler as sampler_module
from disque_py.web.dashboard.sampler import Sampler
from disque_py.web.dashboard.svg import chart, downsample, human, sparkline

START_S = 1_700_000_000.0


class Ticker:
    """A wall clock for the sampler that moves only when told to."""

    def __init__(self) -> None:
        self.now = START_S

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def server(node):
    return ServerState(node, Config())


@pytest.fixture
def call(server):
    session = server.new_session()

    def run(*args):
        return server.commands.dispatch(server, session, [str(a).encode() for a in args])

    return run


@pytest.fixture
def ticker():
    return Ticker()


def make_sampler(server, ticker, **kwargs) -> Sampler:
    return Sampler(server, clock=ticker, rss=lambda: 4096, **kwargs)


def test_rates_are_differences_of_totals_per_second(server, call, ticker):
    sampler = make_sampler(server, ticker)
    sampler.sample()
    for i in range(6):
        call("ADDJOB", "q", f"body {i}", 0)
    ticker.now += 2                     # six jobs in two seconds
    sampler.sample()
    call("GETJOB", "COUNT", 4, "FROM", "q")
    ticker.now += 1
    sampler.sample()
    assert sampler.rates("created") == [3.0, 0.0]
    assert sampler.rates("delivered") == [0.0, 4.0]
    assert sampler.queue_lengths(b"q") == [0, 6, 2]
    # The queue is new: its rates start from the first sample that saw it.
    assert sampler.queue_rates(b"q", "jobs_in") == [0.0]
    assert sampler.queue_rates(b"q", "jobs_out") == [4.0]
    assert sampler.queue_rates(b"q", "jobs_out", last=1) == [4.0]
    assert sampler.levels("rss") == [4096] * 3
    assert sampler.span_seconds() == 3


def test_the_ring_buffer_keeps_the_newest_samples(server, call, ticker):
    sampler = make_sampler(server, ticker, history=3)
    for i in range(5):
        call("ADDJOB", "q", "x", 0)
        sampler.sample()
        ticker.now += 1
    assert len(sampler.samples) == 3
    assert [s.created for s in sampler.samples] == [3, 4, 5]
    assert sampler.samples[0].at == START_S + 2


def test_fifteen_minutes_are_kept_by_default(server, ticker):
    sampler = make_sampler(server, ticker)
    for _ in range(sampler_module.HISTORY_SAMPLES + 10):
        sampler.sample()
        ticker.now += sampler_module.SAMPLE_INTERVAL_S
    assert len(sampler.samples) == 900
    assert sampler.span_seconds() == 899


def test_a_total_that_goes_down_counts_as_no_activity(server, ticker):
    sampler = make_sampler(server, ticker)
    server.stats.commands_processed = 100
    sampler.sample()
    ticker.now += 1
    server.stats.commands_processed = 0          # CONFIG RESETSTAT
    sampler.sample()
    assert sampler.rates("commands") == [0.0]


def test_a_queue_not_sampled_for_a_while_keeps_its_last_total(server, call, ticker):
    sampler = make_sampler(server, ticker)
    call("ADDJOB", "q", "x", 0)
    sampler.sample()
    ticker.now += 1
    sampler.tracked = []                 # as if the queue had left the sampled set
    sampler._since_choice = 0
    sampler.samples.append(sampler.samples[-1]._replace(at=ticker.now, queues={}))
    call("ADDJOB", "q", "y", 0)
    ticker.now += 1
    sampler.sample()
    assert sampler.queue_rates(b"q", "jobs_in") == [0.0, 1.0]


def test_every_queue_is_sampled_up_to_the_cap(server, call, ticker):
    sampler = make_sampler(server, ticker, max_queues=3)
    for name in ("a", "b", "c"):
        call("ADDJOB", name, "x", 0)
    sampler.sample()
    assert sorted(sampler.tracked) == [b"a", b"b", b"c"]
    call("ADDJOB", "d", "x", 0)         # a new queue is seen at the next sample
    call("QLEN", "d")
    sampler.max_queues = 4
    sampler.sample()
    assert b"d" in sampler.samples[-1].queues


def test_past_the_cap_the_busiest_queues_are_sampled(server, call, ticker):
    sampler = make_sampler(server, ticker, max_queues=2)
    for name, jobs in (("quiet", 1), ("long", 5), ("busy", 2)):
        for _ in range(jobs):
            call("ADDJOB", name, "x", 0)
    sampler.sample()
    assert sorted(sampler.tracked) == [b"busy", b"long"]
    assert set(sampler.samples[-1].queues) == {b"busy", b"long"}
    # A choice serves RESELECT_SAMPLES samples, then activity since the
    # last choice ranks first: "quiet" gets busy, "busy" does not.
    for _ in range(20):
        call("ADDJOB", "quiet", "x", 0)
    for _ in range(sampler_module.RESELECT_SAMPLES - 1):
        sampler.sample()
        assert sorted(sampler.tracked) == [b"busy", b"long"]
    sampler.sample()
    assert sorted(sampler.tracked) == [b"long", b"quiet"]


def test_the_choice_is_made_a_slice_of_queues_per_sample(server, call, ticker, monkeypatch):
    monkeypatch.setattr(sampler_module, "SELECTION_SLICE", 10)
    sampler = make_sampler(server, ticker, max_queues=5)
    for i in range(50):
        for _ in range(1 + i % 7):
            call("ADDJOB", f"queue-{i}", "x", 0)
    passes = 0
    while not sampler.tracked:
        sampler.sample()
        passes += 1
        assert passes <= 50
    assert passes >= 4                       # 50 queues, about 10 a sample
    longest = sorted((len(q.jobs), q.name) for q in server.node.queues.values())[-5:]
    assert sorted(sampler.tracked) == sorted(name for _, name in longest)


def test_a_sample_past_the_cap_reads_only_the_sampled_queues(server, call, ticker):
    sampler = make_sampler(server, ticker, max_queues=5)
    for i in range(50):
        call("ADDJOB", f"queue-{i}", "x", 0)
    sampler.sample()
    assert len(sampler.samples[-1].queues) == 5


# ------------------------------------------------------------------ svg

def test_downsample_averages_runs_in_order():
    assert downsample([1, 3, 5, 7], 2) == [2, 6]
    assert downsample([1, 2], 5) == [1, 2]
    assert len(downsample(list(range(900)), 60)) == 60


def test_sparkline_and_chart_escape_their_titles():
    assert "<script>" not in sparkline([1, 2, 3], "<script>x</script>")
    markup = chart([0, 5, 10], "<b>queue</b>", 90, " ms")
    assert "&lt;b&gt;queue&lt;/b&gt;" in markup
    assert "<b>" not in markup
    assert "max 10 ms" in markup and "-1m30s" in markup


def test_a_chart_of_fewer_than_two_points_is_a_flat_line():
    assert "<polyline" not in chart([], "empty", 0)
    assert "<polyline" in chart([1, 2], "two", 1)


@pytest.mark.parametrize("value, shown", [(0, "0"), (12.0, "12"), (0.25, "0.25"),
                                          (1500, "1.5k"), (52_000_000, "52.0M")])
def test_human_numbers(value, shown):
    assert human(value) == shown
