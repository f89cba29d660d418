"""ADDJOB ... PRIORITY over real sockets: GETJOB and QPEEK serve higher
priorities first and FIFO within one, the error for every bad value, the
fields SHOW appends (a plain job's SHOW unchanged), a rewrite and a
restart from the AOF keeping the order."""

from __future__ import annotations

import pytest

from tests.persistence.helpers import wait_rewrite_done
from tests.support import bulk, wait_for

pytestmark = pytest.mark.timeout(120)

PRIORITY_RANGE = b"-ERR PRIORITY must be between 0 and 9\r\n"
SYNTAX = b"-ERR syntax error\r\n"
DISQUE_SHOW_FIELDS = 15


@pytest.fixture
def raw(server):
    return server.raw()


def add(raw, body, *options, queue="q") -> bytes:
    reply = raw.call("ADDJOB", queue, body, "0", *options)
    assert reply.startswith(b"+D-"), reply
    return reply[1:-2]


def add_mixed(raw, *options):
    for body, priority in (("a", None), ("b", "9"), ("c", "0"), ("d", None), ("e", "9"),
                           ("f", "6")):
        add(raw, body, *options, *(("PRIORITY", priority) if priority else ()))


def bodies(client, *command) -> list[bytes]:
    return [job[2] for job in client.execute_command(*command)]


def test_getjob_and_qpeek_serve_higher_priorities_first_fifo_within_one(server, raw):
    add_mixed(raw)
    client = server.client()
    order = [b"b", b"e", b"f", b"a", b"d", b"c"]
    assert bodies(client, "QPEEK", "q", 10) == order
    assert bodies(client, "QPEEK", "q", -10) == order[::-1]
    assert bodies(client, "GETJOB", "COUNT", 10, "FROM", "q") == order


@pytest.mark.parametrize("value", ["10", "-1", "x", "5.5", "99999999999999999999"])
def test_every_bad_priority_gets_the_range_error(raw, value):
    assert raw.call("ADDJOB", "q", "body", "0", "PRIORITY", value) == PRIORITY_RANGE
    assert raw.call("QLEN", "q") == b":0\r\n"


def test_priority_without_a_value_is_a_syntax_error(raw):
    assert raw.call("ADDJOB", "q", "body", "0", "PRIORITY") == SYNTAX


def test_show_appends_the_priority_and_a_default_job_shows_disque_s_fields(server, raw):
    client = server.client()
    urgent = add(raw, "body", "PRIORITY", "8")
    reply = raw.call("SHOW", urgent.decode())
    assert reply.endswith(bulk("priority") + b":8\r\n" + bulk("dedup-key") + b"$-1\r\n" +
                          bulk("dedup-until") + b"$-1\r\n")
    for job_id in (add(raw, "body"), add(raw, "body", "PRIORITY", "5")):
        assert len(client.execute_command("SHOW", job_id)) == 2 * DISQUE_SHOW_FIELDS


def test_the_order_survives_an_aof_rewrite_and_a_restart(make_server):
    node = make_server(args=["--appendonly", "yes", "--appendfsync", "always"]).start()
    raw = node.raw()
    add_mixed(raw, "RETRY", "1")
    assert raw.call("BGREWRITEAOF").startswith(b"+")
    wait_rewrite_done(node)
    add(raw, "g", "RETRY", "1", "PRIORITY", "7")
    node.kill()
    node.start()
    # Back as active jobs, as in Disque after a crash: queued by their retry.
    raw = node.raw()
    wait_for(lambda: raw.call("QLEN", "q") == b":7\r\n", timeout=15, message="7 jobs queued")
    assert bodies(node.client(), "QPEEK", "q", 10) == [b"b", b"e", b"g", b"f", b"a", b"d", b"c"]
