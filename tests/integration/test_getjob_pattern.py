"""GETJOB ... PATTERN glob over real sockets: the exact replies, the
errors, the round-robin across matching queues, a consumer parked on a
pattern woken by a queue created after it parked, its timeout, a client
that leaves while parked, PAUSE, and redis-py with each of its parsers.

GETJOB with FROM is Disque's and unchanged: after FROM every word is a
queue name, PATTERN included.
"""

from __future__ import annotations

import threading

import pytest

from tests.integration.test_resp3 import PARSERS, _client
from tests.integration.test_waits import blocked_clients, park
from tests.support import bulk, encode_command, wait_for

pytestmark = pytest.mark.timeout(120)

SYNTAX = b"-ERR syntax error\r\n"
NULL_ARRAY = b"*-1\r\n"
NULL_RESP3 = b"_\r\n"


@pytest.fixture
def raw(server):
    return server.raw()


def add(raw, queue, body="body") -> bytes:
    reply = raw.call("ADDJOB", queue, body, "0")
    assert reply.startswith(b"+D-"), reply
    return reply[1:-2]


def jobs_reply(*jobs) -> bytes:
    """GETJOB's reply for (queue, id, body) triples."""
    return b"*%d\r\n" % len(jobs) + b"".join(
        b"*3\r\n" + bulk(queue) + bulk(job_id) + bulk(body) for queue, job_id, body in jobs)


def test_one_job_from_a_matching_queue_in_disque_s_reply_format(raw):
    add(raw, "mail")
    job = add(raw, "orders:eu", "order-1")
    assert raw.call("GETJOB", "PATTERN", "orders:*") == jobs_reply(("orders:eu", job, b"order-1"))


def test_withcounters_and_count_across_queues(raw):
    first, second, third = add(raw, "q:a"), add(raw, "q:b"), add(raw, "q:a")
    reply = raw.call("GETJOB", "COUNT", "3", "WITHCOUNTERS", "PATTERN", "q:*")
    counters = b"$5\r\nnacks\r\n:0\r\n$21\r\nadditional-deliveries\r\n:0\r\n"
    assert reply == b"*3\r\n" + b"".join(
        b"*7\r\n" + bulk(queue) + bulk(job) + bulk("body") + counters
        for queue, job in (("q:a", first), ("q:b", second), ("q:a", third)))


def test_matching_queues_are_served_in_turn(raw):
    for queue in ("q:a", "q:b", "q:c"):
        for _ in range(2):
            add(raw, queue)
    served = []
    for _ in range(6):
        reply = raw.call("GETJOB", "NOHANG", "PATTERN", "q:*")
        served.append(reply.split(b"\r\n")[3])
    assert served == [b"q:a", b"q:b", b"q:c"] * 2


def test_nohang_with_nothing_matching_is_a_null_array_and_null_under_resp3(server, raw):
    add(raw, "other")
    assert raw.call("GETJOB", "NOHANG", "PATTERN", "q:*") == NULL_ARRAY
    resp3 = server.raw()
    assert resp3.call("HELLO", "3").startswith(b"%7\r\n")
    assert resp3.call("GETJOB", "NOHANG", "PATTERN", "q:*") == NULL_RESP3


@pytest.mark.parametrize("args", [("PATTERN",), ("PATTERN", "a", "b"), ("NOHANG", "PATTERN"),
                                  ("PATTERN", "a", "FROM", "b")])
def test_pattern_takes_exactly_one_glob_as_the_last_word(raw, args):
    assert raw.call("GETJOB", *args) == SYNTAX


def test_from_takes_pattern_as_a_queue_name_as_disque_does(raw):
    job = add(raw, "PATTERN")
    assert raw.call("GETJOB", "NOHANG", "FROM", "PATTERN", "x") == \
        jobs_reply(("PATTERN", job, b"body"))


def test_a_parked_consumer_is_woken_by_a_queue_created_after_it_parked(server, raw):
    waiting = park(server, raw, "GETJOB", "PATTERN", "jobs:*")
    add(raw, "unrelated")
    job = add(raw, "jobs:created-later", "hello")
    assert waiting.read_reply() == jobs_reply(("jobs:created-later", job, b"hello"))
    assert blocked_clients(raw) == 0
    assert raw.call("QLEN", "unrelated") == b":1\r\n"


def test_the_timeout_answers_a_null_array(raw):
    assert raw.call("GETJOB", "TIMEOUT", "50", "PATTERN", "q:*") == NULL_ARRAY
    assert blocked_clients(raw) == 0


def test_a_client_that_leaves_while_parked_takes_no_job(server, raw):
    waiting = park(server, raw, "GETJOB", "PATTERN", "q:*")
    waiting.close()
    wait_for(lambda: blocked_clients(raw) == 0, message="the blocked count back to 0")
    add(raw, "q:a")
    assert raw.call("QLEN", "q:a") == b":1\r\n"


def test_a_queue_paused_in_output_serves_the_pattern_once_resumed(server, raw):
    assert raw.call("PAUSE", "q:a", "out") == b"+out\r\n"
    job = add(raw, "q:a")
    assert raw.call("GETJOB", "NOHANG", "PATTERN", "q:*") == NULL_ARRAY
    waiting = park(server, raw, "GETJOB", "PATTERN", "q:*")
    assert raw.call("PAUSE", "q:a", "none") == b"+none\r\n"
    assert waiting.read_reply() == jobs_reply(("q:a", job, b"body"))


def test_commands_after_a_parked_getjob_wait_for_its_reply(server, raw):
    waiting = park(server, raw, "GETJOB", "PATTERN", "q:*")
    waiting.send(encode_command("PING"))
    job = add(raw, "q:z")
    assert waiting.read_reply() == jobs_reply(("q:z", job, b"body"))
    assert waiting.read_reply() == b"+PONG\r\n"


@pytest.fixture(params=sorted(PARSERS))
def client(server, request):
    client = _client(server.port, request.param)
    yield client
    client.close()


def test_redis_py_reads_pattern_replies(server, raw, client):
    job = client.execute_command("ADDJOB", "q:one", "payload", 0)
    assert client.execute_command("GETJOB", "PATTERN", "q:*") == [[b"q:one", job, b"payload"]]
    assert client.execute_command("GETJOB", "NOHANG", "PATTERN", "q:*") is None

    def add_once_parked():
        wait_for(lambda: blocked_clients(raw) == 1, message="GETJOB parked")
        add(raw, "q:two", "later")

    adder = threading.Thread(target=add_once_parked)
    adder.start()
    try:
        reply = client.execute_command("GETJOB", "TIMEOUT", 5000, "PATTERN", "q:*")
    finally:
        adder.join()
    assert reply[0][0] == b"q:two" and reply[0][2] == b"later"
