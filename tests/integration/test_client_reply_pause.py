"""CLIENT REPLY ON|OFF|SKIP and CLIENT PAUSE over raw sockets.

Expected bytes are what Disque 1.0-rc1 answered to the same pipelines
(checked against the original server): SKIP drops the reply of the next
command whatever it is (an unknown command's error too), OFF drops every
reply (QUIT's +OK included) until ON, which answers +OK; a command parked
while SKIP was pending (a blocking GETJOB) still gets its late reply, one
parked while replies are OFF does not. CLIENT PAUSE holds every client's
commands, the pauser's own later ones included, until the pause is over.
"""

from __future__ import annotations

import time

import pytest

from tests.support import RawClient, encode_command

END = encode_command("CLIENT", "REPLY", "ON") + encode_command("QLEN", "end-of-test")
END_REPLIES = b"+OK\r\n:0\r\n"
SYNTAX = b"-ERR syntax error\r\n"
CLIENT_SYNTAX = (b"-ERR Syntax error, try CLIENT (LIST | KILL ip:port | GETNAME | "
                 b"SETNAME connection-name)\r\n")


def _pipeline(server, *commands: str) -> bytes:
    """Everything answered to the commands (then CLIENT REPLY ON + QLEN mark the end)."""
    raw = RawClient(server.port)
    try:
        raw.send(b"".join(encode_command(*c.split()) for c in commands) + END)
        data = b""
        deadline = time.monotonic() + 10
        while not data.endswith(END_REPLIES) and time.monotonic() < deadline:
            data += raw.read_all(0.2)
        assert data.endswith(END_REPLIES), data
        return data[:-len(END_REPLIES)]
    finally:
        raw.close()


@pytest.mark.parametrize("commands, expected", [
    (["CLIENT REPLY SKIP", "PING", "PING"], b"+PONG\r\n"),
    (["CLIENT REPLY OFF", "PING", "CLIENT REPLY ON", "PING"], b"+OK\r\n+PONG\r\n"),
    (["CLIENT REPLY SKIP", "NOSUCHCMD", "PING"], b"+PONG\r\n"),
    (["CLIENT REPLY SKIP", "QLEN", "PING"], b"+PONG\r\n"),
    (["CLIENT REPLY SKIP", "CLIENT REPLY SKIP", "PING", "PING"], b"+PONG\r\n"),
    (["CLIENT REPLY OFF", "CLIENT REPLY SKIP", "PING", "CLIENT REPLY ON", "PING"],
     b"+OK\r\n+PONG\r\n"),
    (["CLIENT REPLY SKIP", "ADDJOB q x 0", "QLEN q"], b":1\r\n"),
    (["CLIENT REPLY SKIP", "GETJOB TIMEOUT 100 FROM nothing", "PING"], b"*-1\r\n+PONG\r\n"),
    (["CLIENT REPLY OFF", "GETJOB TIMEOUT 100 FROM nothing", "CLIENT REPLY ON", "PING"],
     b"+OK\r\n+PONG\r\n"),
    (["CLIENT REPLY maybe"], SYNTAX),
    (["CLIENT REPLY"], CLIENT_SYNTAX),
    (["CLIENT REPLY on extra"], CLIENT_SYNTAX),
])
def test_client_reply(server, commands, expected):
    assert _pipeline(server, *commands) == expected


def test_quit_with_replies_off_closes_silently(server):
    raw = RawClient(server.port)
    raw.send(encode_command("CLIENT", "REPLY", "OFF") + encode_command("QUIT"))
    assert raw.is_closed(5)
    assert raw.read_all(0.1) == b""


def test_replies_off_still_runs_the_commands(server):
    assert _pipeline(server, "CLIENT REPLY OFF", "ADDJOB q a 0", "ADDJOB q b 0") == b""
    assert server.client().execute_command("QLEN", "q") == 2


@pytest.mark.parametrize("argument, error", [
    ("x", b"-ERR timeout is not an integer or out of range\r\n"),
    ("1.5", b"-ERR timeout is not an integer or out of range\r\n"),
    ("99999999999999999999", b"-ERR timeout is not an integer or out of range\r\n"),
    ("-1", b"-ERR timeout is negative\r\n"),
])
def test_client_pause_refuses_bad_timeouts(server, argument, error):
    raw = RawClient(server.port)
    assert raw.call("CLIENT", "PAUSE", argument) == error
    assert raw.call("PING") == b"+PONG\r\n"


def test_client_pause_zero_pauses_nothing(server):
    raw = RawClient(server.port)
    started = time.monotonic()
    raw.send(encode_command("CLIENT", "PAUSE", "0") + encode_command("PING"))
    assert raw.read_reply() + raw.read_reply() == b"+OK\r\n+PONG\r\n"
    assert time.monotonic() - started < 1


def test_client_pause_holds_every_client_until_it_ends(server):
    pauser, other = RawClient(server.port), RawClient(server.port)
    started = time.monotonic()
    pauser.send(encode_command("CLIENT", "PAUSE", "400") + encode_command("PING"))
    assert pauser.read_reply() == b"+OK\r\n"
    other.send(encode_command("ADDJOB", "q", "during-pause", "0"))
    assert other.read_reply().startswith(b"+D-")
    assert pauser.read_reply() == b"+PONG\r\n"       # its own next command waited too
    assert time.monotonic() - started >= 0.4


def test_a_longer_pause_extends_and_a_shorter_one_does_not_shorten(server):
    pauser, other = RawClient(server.port), RawClient(server.port)
    started = time.monotonic()
    assert pauser.call("CLIENT", "PAUSE", "600") == b"+OK\r\n"
    other.send(encode_command("PING"))
    # The pauser's next commands wait as well; CLIENT PAUSE 100 comes after
    # the 600 ms and cannot end the pause sooner.
    pauser.send(encode_command("CLIENT", "PAUSE", "100"))
    assert other.read_reply() == b"+PONG\r\n"
    assert pauser.read_reply() == b"+OK\r\n"
    assert time.monotonic() - started >= 0.6


def test_a_client_that_leaves_during_a_pause_harms_no_one(server):
    pauser, leaver = RawClient(server.port), RawClient(server.port)
    assert pauser.call("CLIENT", "PAUSE", "300") == b"+OK\r\n"
    leaver.send(encode_command("ADDJOB", "q", "never-answered", "0"))
    leaver.close()
    assert RawClient(server.port).call("PING") == b"+PONG\r\n"
    # Its command was read during the pause and dropped with the connection,
    # as Disque drops a closed client's query buffer.
    assert server.client().execute_command("QLEN", "q") == 0


def test_a_monitor_with_replies_off_gets_no_feed(server):
    monitor = RawClient(server.port)
    monitor.send(encode_command("CLIENT", "REPLY", "OFF") + encode_command("MONITOR"))
    assert monitor.read_all(0.2) == b""
    assert RawClient(server.port).call("PING") == b"+PONG\r\n"
    assert monitor.read_all(0.3) == b""
    monitor.send(encode_command("CLIENT", "REPLY", "ON"))
    assert monitor.read_reply() == b"+OK\r\n"
