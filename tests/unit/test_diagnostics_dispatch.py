"""SLOWLOG and LATENCY by direct dispatch, and how commands get timed.

Replies are compared with the bytes Disque 1.0-rc1 sends (checked against
the binary with the same requests). The connection's loop is driven with a
fake transport and a fake clock that moves a set amount per command, so
every duration is exact and nothing sleeps.
"""

from __future__ import annotations

import pytest

from disque_py.monitoring import latency as ev
from disque_py.formats.resp import encode
from disque_py.server.protocol import ClientConnection
from tests.unit import test_commands_dispatch as dispatch_tests

SLOWLOG_USAGE = b"-ERR Unknown SLOWLOG subcommand or wrong # of args. Try GET, RESET, LEN.\r\n"
SYNTAX = b"-ERR syntax error\r\n"
NOT_INTEGER = b"-ERR value is not an integer or out of range\r\n"


# The fixtures of the other dispatch tests: a ServerState on the unit node.
server = dispatch_tests.server
session = dispatch_tests.session


@pytest.fixture
def call(server, session):
    def run(*args) -> bytes:
        argv = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        return encode(server.commands.dispatch(server, session, argv))
    return run


# ------------------------------------------------------------------ SLOWLOG

@pytest.mark.parametrize("args", [
    ("slowlog", "foo"), ("slowlog", "get", "1", "2"), ("slowlog", "len", "x"),
    ("slowlog", "reset", "x"),
])
def test_slowlog_bad_forms_get_one_usage_error(call, args):
    assert call(*args) == SLOWLOG_USAGE


@pytest.mark.parametrize("count", [b"x", b" 3", b"3.0", b"99999999999999999999"])
def test_slowlog_get_count_must_be_an_integer(call, count):
    assert call("slowlog", "get", count) == NOT_INTEGER


def test_slowlog_needs_a_subcommand(call):
    assert call("slowlog") == b"-ERR wrong number of arguments for 'slowlog' command\r\n"


def test_slowlog_get_len_reset_replies(server, session, call):
    assert call("slowlog", "get") == b"*0\r\n"
    server.slowlog._wall = lambda: 1_700_000_000
    server.slowlog.slower_than_us = 0
    server.slowlog.offer([b"PING", b"x"], 12)
    assert call("SLOWLOG", "GET") == (b"*1\r\n*4\r\n:0\r\n:1700000000\r\n:12\r\n"
                                      b"*2\r\n$4\r\nPING\r\n$1\r\nx\r\n")
    assert call("slowlog", "get", "+0") == b"*0\r\n"
    assert call("slowlog", "len") == b":1\r\n"
    assert call("slowlog", "reset") == b"+OK\r\n"
    assert call("slowlog", "len") == b":0\r\n"


def test_config_set_reaches_the_slow_log(server, call):
    assert server.slow_after == 0.01
    call("config", "set", "slowlog-log-slower-than", "0")
    assert server.slowlog.slower_than_us == 0 and server.slow_after == 0
    call("config", "set", "slowlog-max-len", "3")
    assert server.slowlog.max_len == 3


# ------------------------------------------------------------------ LATENCY

@pytest.mark.parametrize("args", [
    ("latency", "foo"), ("latency", "history"), ("latency", "history", "a", "b"),
    ("latency", "graph"), ("latency", "latest", "x"), ("latency", "doctor", "x"),
])
def test_latency_bad_forms_are_syntax_errors(call, args):
    assert call(*args) == SYNTAX


def test_latency_graph_of_an_unknown_event(call):
    assert call("latency", "graph", "foo") == b"-ERR No samples available for event 'foo'\r\n"


def test_latency_replies_with_and_without_samples(server, call):
    assert call("latency", "latest") == b"*0\r\n"
    assert call("latency", "history", "command") == b"*0\r\n"
    assert call("latency", "reset") == b":0\r\n"
    server.latency._wall = lambda: 1_700_000_000
    server.latency.add(ev.COMMAND, 50)
    assert call("latency", "latest") == b"*1\r\n*4\r\n$7\r\ncommand\r\n:1700000000\r\n:50\r\n:50\r\n"
    assert call("latency", "history", "command") == b"*1\r\n*2\r\n:1700000000\r\n:50\r\n"
    assert call("latency", "history", "COMMAND") == b"*0\r\n"
    assert call("latency", "graph", "command").startswith(b"$")
    assert call("latency", "doctor").startswith(b"$")
    assert call("latency", "reset", "COMMAND", "command", "nope") == b":1\r\n"
    assert call("latency", "latest") == b"*0\r\n"


def test_config_set_reaches_the_latency_monitor(server, call):
    call("config", "set", "latency-monitor-threshold", "3")
    assert server.latency.threshold_ms == 3 and server.slow_after == 0.003
    call("config", "set", "latency-monitor-threshold", "0")
    assert server.slow_after == 0.01


def test_command_table_shows_both(call):
    assert call("command", "info", "slowlog", "latency") == (
        b"*2\r\n*6\r\n$7\r\nslowlog\r\n:-2\r\n*1\r\n+readonly\r\n:0\r\n:0\r\n:0\r\n"
        b"*6\r\n$7\r\nlatency\r\n:-2\r\n*3\r\n+readonly\r\n+admin\r\n+loading\r\n"
        b":0\r\n:0\r\n:0\r\n")


# ---------------------------------------------------- the connection's timing

class StepClock:
    """Moves `step` seconds each time it is read: each command takes that."""

    def __init__(self, step: float) -> None:
        self.now = 1000.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


class FakeTransport:
    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data

    def close(self) -> None:
        pass



class DroppedEffects:
    """The effects of the commands, dropped: these tests read replies only."""

    def __init__(self, node) -> None:
        self.node = node

    def after_commands(self) -> None:
        self.node.take_effects()


@pytest.fixture
def step_clock(server):
    clock = StepClock(0.002)        # every command takes 2 ms
    server.timing_clock = clock
    return clock


@pytest.fixture
def conn(server):
    server.call_soon = lambda callback: callback()      # replies written at once
    conn = ClientConnection(server, DroppedEffects(server.node))
    conn.transport = FakeTransport()
    conn.session = server.new_session("127.0.0.1:1", "127.0.0.1:7711", -1, conn)
    return conn


def _feed(conn, *commands) -> None:
    data = b""
    for args in commands:
        data += b"*%d\r\n" % len(args) + b"".join(
            b"$%d\r\n%b\r\n" % (len(arg), arg) for arg in args)
    conn.data_received(data)


def _logged(server) -> list[list[bytes]]:
    return [entry[3] for entry in server.slowlog.newest(-1)][::-1]


def test_each_command_is_timed_from_the_end_of_the_one_before(server, conn, step_clock):
    server.config.set(b"slowlog-log-slower-than", b"1999")
    _feed(conn, [b"PING"], [b"QLEN", b"q"])
    assert [entry[2] for entry in server.slowlog.newest(-1)] == [2000, 2000]
    server.config.set(b"slowlog-log-slower-than", b"2001")
    _feed(conn, [b"PING"])
    assert len(server.slowlog) == 2


def test_refused_and_quit_commands_are_not_logged(server, conn, step_clock):
    server.config.set(b"slowlog-log-slower-than", b"0")
    _feed(conn, [b"NOSUCH"], [b"QLEN"], [b"PING", b"a", b"b"], [b"QUIT"])
    assert _logged(server) == [[b"PING", b"a", b"b"]], "ping's own error is the handler's"


def test_a_config_set_that_lowers_the_threshold_logs_itself(server, conn, step_clock):
    set_zero = [b"CONFIG", b"SET", b"slowlog-log-slower-than", b"0"]
    _feed(conn, [b"PING"], set_zero, [b"PING"])
    assert _logged(server) == [set_zero, [b"PING"]]


def test_nothing_is_logged_below_the_threshold(server, conn, step_clock):
    _feed(conn, *[[b"PING"]] * 10)         # 2 ms each, default threshold 10 ms
    assert len(server.slowlog) == 0 and server.latency.events == {}


def test_commands_feed_the_latency_monitor_by_their_fast_flag(server, conn, step_clock):
    server.config.set(b"latency-monitor-threshold", b"1")
    _feed(conn, [b"PING"], [b"QPEEK", b"q", b"1"])
    assert set(server.latency.events) == {ev.FAST_COMMAND, ev.COMMAND}
    assert server.latency.history(ev.COMMAND)[0][1] == 2
