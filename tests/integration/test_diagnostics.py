"""SLOWLOG and LATENCY against a real server, over sockets.

Reply bytes and error texts are Disque 1.0-rc1's, confirmed against the
original binary with the same requests (only ids, times and durations
differ). Each test sets the thresholds it needs; the `diagnostics` fixture
puts the defaults back and empties both logs afterwards, because the
server is shared by the module.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.support import Error, parse

SLOWLOG_USAGE = b"-ERR Unknown SLOWLOG subcommand or wrong # of args. Try GET, RESET, LEN.\r\n"
SYNTAX = b"-ERR syntax error\r\n"
NOT_INTEGER = b"-ERR value is not an integer or out of range\r\n"
ENTRY_HEAD = rb"\*4\r\n:\d+\r\n:\d+\r\n:\d+\r\n"       # id, unix time, microseconds
ENTRY_PAIR = re.compile(rb"\*2\r\n" + ENTRY_HEAD + rb"\*2\r\n\$4\r\nPING\r\n\$5\r\nhello\r\n"
                        + ENTRY_HEAD + rb"\*2\r\n\$7\r\nSLOWLOG\r\n\$5\r\nRESET\r\n")


@pytest.fixture
def raw(server):
    client = server.raw()
    yield client
    for name, value in ((b"slowlog-log-slower-than", b"10000"), (b"slowlog-max-len", b"128"),
                        (b"latency-monitor-threshold", b"0")):
        client.call(b"CONFIG", b"SET", name, value)
    client.call(b"SLOWLOG", b"RESET")
    client.call(b"LATENCY", b"RESET")


def _entries(raw, count: int = -1) -> list:
    return parse(raw.call(b"SLOWLOG", b"GET", b"%d" % count))


def _log_everything(raw) -> None:
    assert raw.call(b"CONFIG", b"SET", b"slowlog-log-slower-than", b"0") == b"+OK\r\n"
    assert raw.call(b"SLOWLOG", b"RESET") == b"+OK\r\n"


# ------------------------------------------------------------------ SLOWLOG

def test_slowlog_entries_have_disques_four_fields(raw):
    _log_everything(raw)
    before = int(time.time())
    raw.call(b"PING", b"hello")
    reply = raw.call(b"SLOWLOG", b"GET", b"2")
    assert ENTRY_PAIR.fullmatch(reply), reply
    (ping_id, ping_time, ping_us, ping_argv), (reset_id, _, _, _) = parse(reply)
    assert ping_id == reset_id + 1
    assert before <= ping_time <= time.time() + 1
    assert 0 <= ping_us < 10_000_000
    assert ping_argv == [b"PING", b"hello"]


def test_slowlog_logs_what_ran_but_not_what_was_refused(raw):
    _log_everything(raw)
    assert raw.call(b"NOSUCH").startswith(b"-ERR unknown command")
    assert raw.call(b"SLOWLOG").startswith(b"-ERR wrong number of arguments")
    assert raw.call(b"PING", b"a", b"b").startswith(b"-ERR wrong number")  # ping's own check
    argvs = [entry[3] for entry in _entries(raw)]
    assert argvs == [[b"PING", b"a", b"b"], [b"SLOWLOG", b"RESET"]]


def test_slowlog_cuts_long_arguments_and_long_commands(raw):
    _log_everything(raw)
    raw.call(b"PING", b"x" * 200)
    raw.call(b"PING", *[b"a%d" % n for n in range(40)])
    many, long = (entry[3] for entry in _entries(raw, 2))
    assert long == [b"PING", b"x" * 128 + b"... (72 more bytes)"]
    assert len(many) == 32
    assert many[:31] == [b"PING"] + [b"a%d" % n for n in range(30)]
    assert many[31] == b"... (10 more arguments)"


def test_slowlog_len_get_counts_and_reset(raw):
    _log_everything(raw)
    for _ in range(12):
        raw.call(b"PING")
    assert raw.call(b"SLOWLOG", b"LEN") == b":13\r\n"
    assert len(parse(raw.call(b"SLOWLOG", b"GET"))) == 10
    assert raw.call(b"SLOWLOG", b"GET", b"0") == b"*0\r\n"
    assert len(_entries(raw, -5)) == 16       # negative: all (RESET, LEN, GET, GET 0 too)
    assert raw.call(b"SLOWLOG", b"RESET") == b"+OK\r\n"
    assert raw.call(b"SLOWLOG", b"LEN") == b":1\r\n", "the RESET itself is logged after"


def test_slowlog_settings_change_at_run_time(raw):
    _log_everything(raw)
    for _ in range(5):
        raw.call(b"PING")
    assert raw.call(b"CONFIG", b"SET", b"slowlog-max-len", b"2") == b"+OK\r\n"
    assert raw.call(b"SLOWLOG", b"LEN") == b":2\r\n"
    assert raw.call(b"CONFIG", b"SET", b"slowlog-log-slower-than", b"1000000") == b"+OK\r\n"
    newest = _entries(raw)[0][0]
    raw.call(b"PING")
    assert _entries(raw)[0][0] == newest, "fast commands are not logged any more"
    assert raw.call(b"CONFIG", b"GET", b"slowlog-*") == (
        b"*4\r\n$23\r\nslowlog-log-slower-than\r\n$7\r\n1000000\r\n"
        b"$15\r\nslowlog-max-len\r\n$1\r\n2\r\n")


def test_slowlog_catches_a_slow_command_at_the_default_threshold(raw):
    raw.call(b"SLOWLOG", b"RESET")
    assert raw.call(b"DEBUG", b"SLEEP", b"0.03") == b"+OK\r\n"
    raw.call(b"PING")
    (_, _, duration_us, argv), = _entries(raw)
    assert argv == [b"DEBUG", b"SLEEP", b"0.03"]
    assert 30_000 <= duration_us < 5_000_000


@pytest.mark.parametrize("args,reply", [
    ((b"SLOWLOG",), b"-ERR wrong number of arguments for 'slowlog' command\r\n"),
    ((b"SLOWLOG", b"foo"), SLOWLOG_USAGE),
    ((b"SLOWLOG", b"GET", b"1", b"2"), SLOWLOG_USAGE),
    ((b"SLOWLOG", b"LEN", b"x"), SLOWLOG_USAGE),
    ((b"SLOWLOG", b"RESET", b"x"), SLOWLOG_USAGE),
    ((b"SLOWLOG", b"GET", b"x"), NOT_INTEGER),
    ((b"SLOWLOG", b"GET", b" 3"), NOT_INTEGER),
    ((b"SLOWLOG", b"GET", b"3.0"), NOT_INTEGER),
    ((b"SLOWLOG", b"GET", b"99999999999999999999"), NOT_INTEGER),
    ((b"LATENCY",), b"-ERR wrong number of arguments for 'latency' command\r\n"),
    ((b"LATENCY", b"foo"), SYNTAX),
    ((b"LATENCY", b"HISTORY"), SYNTAX),
    ((b"LATENCY", b"HISTORY", b"a", b"b"), SYNTAX),
    ((b"LATENCY", b"GRAPH"), SYNTAX),
    ((b"LATENCY", b"LATEST", b"x"), SYNTAX),
    ((b"LATENCY", b"DOCTOR", b"x"), SYNTAX),
    ((b"LATENCY", b"GRAPH", b"foo"), b"-ERR No samples available for event 'foo'\r\n"),
    ((b"LATENCY", b"HISTORY", b"foo"), b"*0\r\n"),
    ((b"LATENCY", b"RESET", b"foo", b"bar"), b":0\r\n"),
])
def test_bad_arguments_get_disques_replies(raw, args, reply):
    assert raw.call(*args) == reply


def test_slowlog_off_from_the_config_file(make_server):
    server = make_server(args=["--slowlog-log-slower-than", "-1"]).start()
    raw = server.raw()
    raw.call(b"DEBUG", b"SLEEP", b"0.02")
    assert raw.call(b"SLOWLOG", b"LEN") == b":0\r\n"
    assert raw.call(b"CONFIG", b"GET", b"slowlog-log-slower-than") == (
        b"*2\r\n$23\r\nslowlog-log-slower-than\r\n$2\r\n-1\r\n")


# ------------------------------------------------------------------ LATENCY

def test_latency_records_a_slow_command(raw):
    assert raw.call(b"LATENCY", b"LATEST") == b"*0\r\n"
    assert raw.call(b"CONFIG", b"SET", b"latency-monitor-threshold", b"20") == b"+OK\r\n"
    before = int(time.time())
    raw.call(b"DEBUG", b"SLEEP", b"0.05")
    raw.call(b"PING")                              # fast, and below the threshold
    (event, when, ms, high), = parse(raw.call(b"LATENCY", b"LATEST"))
    assert event == b"command" and before <= when <= time.time() + 1
    assert 50 <= ms == high < 5000
    assert parse(raw.call(b"LATENCY", b"HISTORY", b"command")) == [[when, ms]]
    assert raw.call(b"LATENCY", b"HISTORY", b"COMMAND") == b"*0\r\n"
    assert raw.call(b"LATENCY", b"GRAPH", b"COMMAND") == (
        b"-ERR No samples available for event 'COMMAND'\r\n")


def test_latency_graph_and_doctor_are_bulk_strings(raw):
    doctor = parse(raw.call(b"LATENCY", b"DOCTOR"))
    assert isinstance(doctor, bytes) and b"latency-monitor-threshold" in doctor
    raw.call(b"CONFIG", b"SET", b"latency-monitor-threshold", b"20")
    raw.call(b"DEBUG", b"SLEEP", b"0.03")
    graph = parse(raw.call(b"LATENCY", b"GRAPH", b"command"))
    assert isinstance(graph, bytes) and graph.startswith(b"command: 1 sample(s)")
    doctor = parse(raw.call(b"LATENCY", b"DOCTOR"))
    assert isinstance(doctor, bytes) and b"1. command: 1 spike(s)" in doctor


def test_latency_samples_stay_readable_after_monitoring_stops(raw):
    raw.call(b"CONFIG", b"SET", b"latency-monitor-threshold", b"20")
    raw.call(b"DEBUG", b"SLEEP", b"0.03")
    raw.call(b"CONFIG", b"SET", b"latency-monitor-threshold", b"0")
    raw.call(b"DEBUG", b"SLEEP", b"0.03")
    assert len(parse(raw.call(b"LATENCY", b"HISTORY", b"command"))) == 1
    assert raw.call(b"LATENCY", b"RESET", b"COMMAND", b"command", b"nope") == b":1\r\n"
    assert raw.call(b"LATENCY", b"LATEST") == b"*0\r\n"


def test_latency_threshold_cannot_be_negative(raw):
    reply = parse(raw.call(b"CONFIG", b"SET", b"latency-monitor-threshold", b"-1"))
    assert isinstance(reply, Error)


def test_redis_py_reads_both(server):
    client = server.client()
    client.config_set("slowlog-log-slower-than", 0)
    client.slowlog_reset()
    client.ping()
    entries = client.slowlog_get(1)
    assert entries[0]["command"] == b"PING" and isinstance(entries[0]["duration"], int)
    assert client.slowlog_len() == 3
    assert client.execute_command("LATENCY", "LATEST") == []
    client.config_set("slowlog-log-slower-than", 10000)
