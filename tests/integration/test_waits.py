"""WAITJOB and QWAIT over real sockets: exact replies, every error, blocking
and waking from another connection, timeouts, a client that leaves while
blocked, CLIENT PAUSE, DEBUG FLUSHALL, the command table, and redis-py with
each of its parsers (pure Python and hiredis, RESP2 and RESP3).

Replies are arrays of bulk strings and integers, the same bytes under RESP2
and RESP3. Blocked clients are seen through INFO's blocked_clients; nothing
sleeps blindly.
"""

from __future__ import annotations

import threading
import time

import pytest
import redis

from tests.integration.test_resp3 import PARSERS, _client
from tests.support import RawClient, bulk, encode_command, wait_for

pytestmark = pytest.mark.timeout(120)

UNKNOWN_ID = "D-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-05a1"
SYNTAX = b"-ERR syntax error\r\n"
BADID = b"-BADID Invalid Job ID format.\r\n"
TIMEOUT_NOT_INTEGER = b"-ERR timeout is not an integer or out of range\r\n"
TIMEOUT_NEGATIVE = b"-ERR timeout is negative\r\n"
QUEUE_EMPTIED = b":1\r\n"
QUEUE_STILL_BUSY = b":0\r\n"
EMPTY_SCAN = b"*2\r\n$1\r\n0\r\n*0\r\n"


def statuses(*names: str) -> bytes:
    return b"*%d\r\n" % len(names) + b"".join(bulk(name) for name in names)


def wrong_arity(name: str) -> bytes:
    return b"-ERR wrong number of arguments for '%b' command\r\n" % name.encode()


def new_job(raw, queue="q", *options) -> bytes:
    reply = raw.call("ADDJOB", queue, "body", "0", *options)
    assert reply.startswith(b"+D-"), reply
    return reply[1:-2]


def blocked_clients(raw) -> int:
    for line in raw.call("INFO", "clients").split(b"\r\n"):
        if line.startswith(b"blocked_clients:"):
            return int(line.split(b":")[1])
    raise AssertionError("INFO clients has no blocked_clients")


def park(server, raw, *command) -> RawClient:
    """Send `command` on a new connection and wait until it is blocked."""
    waiting = server.raw()
    before = blocked_clients(raw)
    waiting.send(encode_command(*command))
    wait_for(lambda: blocked_clients(raw) == before + 1, message=f"{command[0]} blocked")
    return waiting


@pytest.fixture
def raw(server):
    return server.raw()


# ------------------------------------------------------------ at once

def test_unknown_ids_answer_unknown_at_once_one_per_position(raw):
    assert raw.call("WAITJOB", UNKNOWN_ID) == statuses("unknown")
    assert raw.call("WAITJOB", UNKNOWN_ID, UNKNOWN_ID, "TIMEOUT", "0") == \
        statuses("unknown", "unknown")
    assert blocked_clients(raw) == 0


def test_qwait_on_an_unknown_queue_answers_1_at_once_and_makes_no_queue(raw):
    assert raw.call("QWAIT", "nosuch") == QUEUE_EMPTIED
    assert raw.call("QWAIT", "nosuch", "TIMEOUT", "100") == QUEUE_EMPTIED
    assert raw.call("QSTAT", "nosuch") == b"*-1\r\n"
    assert raw.call("QSCAN", "BUSYLOOP") == EMPTY_SCAN


def test_the_command_table_lists_both_as_blocking_readers(raw):
    assert raw.call("COMMAND", "INFO", "waitjob", "qwait") == (
        b"*2\r\n"
        b"*6\r\n$7\r\nwaitjob\r\n:-2\r\n*2\r\n+readonly\r\n+fast\r\n:0\r\n:0\r\n:0\r\n"
        b"*6\r\n$5\r\nqwait\r\n:-2\r\n*1\r\n+readonly\r\n:0\r\n:0\r\n:0\r\n")


# ------------------------------------------------------------ errors

@pytest.mark.parametrize("args, error", [
    (("WAITJOB",), wrong_arity("waitjob")),
    (("WAITJOB", "TIMEOUT", "100"), SYNTAX),
    (("WAITJOB", UNKNOWN_ID, "TIMEOUT"), SYNTAX),
    (("WAITJOB", UNKNOWN_ID, "timeout", "10", "20"), SYNTAX),
    (("WAITJOB", UNKNOWN_ID, "TIMEOUT", "10", UNKNOWN_ID), SYNTAX),
    (("WAITJOB", UNKNOWN_ID, "TIMEOUT", "soon"), TIMEOUT_NOT_INTEGER),
    (("WAITJOB", UNKNOWN_ID, "TIMEOUT", "1.5"), TIMEOUT_NOT_INTEGER),
    (("WAITJOB", UNKNOWN_ID, "TIMEOUT", "-1"), TIMEOUT_NEGATIVE),
    (("WAITJOB", "not-an-id"), BADID),
    (("WAITJOB", UNKNOWN_ID, "not-an-id", "TIMEOUT", "10"), BADID),
    (("QWAIT",), wrong_arity("qwait")),
    (("QWAIT", "q", "TIMEOUT"), SYNTAX),
    (("QWAIT", "q", "NOHANG", "10"), SYNTAX),
    (("QWAIT", "q", "TIMEOUT", "10", "20"), SYNTAX),
    (("QWAIT", "q", "TIMEOUT", "soon"), TIMEOUT_NOT_INTEGER),
    (("QWAIT", "q", "TIMEOUT", "-5"), TIMEOUT_NEGATIVE),
])
def test_every_bad_argument_is_an_error(raw, args, error):
    assert raw.call(*args) == error
    assert blocked_clients(raw) == 0


# ------------------------------------------------------------ blocking and waking

def test_waitjob_blocks_until_another_connection_acks_the_job(server, raw):
    job = new_job(raw)
    waiting = park(server, raw, "WAITJOB", job, UNKNOWN_ID)
    assert raw.call("FASTACK", job) == b":1\r\n"
    assert waiting.read_reply() == statuses("acked", "unknown")
    wait_for(lambda: blocked_clients(raw) == 0, message="nothing blocked")


def test_ackjob_on_a_lone_node_answers_acked(server, raw):
    job = new_job(raw)
    waiting = park(server, raw, "WAITJOB", job)
    assert raw.call("ACKJOB", job) == b":1\r\n"
    assert waiting.read_reply() == statuses("acked")


def test_deljob_answers_deleted_and_each_duplicated_position(server, raw):
    first, second = new_job(raw), new_job(raw)
    waiting = park(server, raw, "WAITJOB", first, second, first)
    assert raw.call("DELJOB", first) == b":1\r\n"
    assert raw.call("FASTACK", second) == b":1\r\n"
    assert waiting.read_reply() == statuses("deleted", "acked", "deleted")


def test_a_job_reaching_its_ttl_answers_expired(server, raw):
    job = new_job(raw, "q", "TTL", "1")
    assert raw.call("WAITJOB", job, "TIMEOUT", "20000") == statuses("expired")


def test_the_timeout_answers_pending_for_the_jobs_still_open(raw):
    done, still_open = new_job(raw), new_job(raw)
    raw.call("FASTACK", done)
    started = time.monotonic()
    assert raw.call("WAITJOB", done, still_open, "TIMEOUT", "200") == \
        statuses("unknown", "pending")
    assert time.monotonic() - started >= 0.19
    assert blocked_clients(raw) == 0


def test_qwait_answers_1_once_every_job_of_the_queue_is_done(server, raw):
    first, second = new_job(raw, "batch"), new_job(raw, "batch")
    new_job(raw, "other")
    waiting = park(server, raw, "QWAIT", "batch", "TIMEOUT", "30000")
    assert raw.call("GETJOB", "FROM", "batch").count(first) == 1
    assert raw.call("FASTACK", first) == b":1\r\n"
    raw.call("DELJOB", second)
    assert waiting.read_reply() == QUEUE_EMPTIED


def test_qwait_times_out_with_0(raw):
    new_job(raw, "batch")
    started = time.monotonic()
    assert raw.call("QWAIT", "batch", "TIMEOUT", "200") == QUEUE_STILL_BUSY
    assert time.monotonic() - started >= 0.19


def test_several_qwaits_on_one_queue_are_all_answered(server, raw):
    job = new_job(raw, "batch")
    waiters = [park(server, raw, "QWAIT", "batch") for _ in range(3)]
    raw.call("FASTACK", job)
    for waiting in waiters:
        assert waiting.read_reply() == QUEUE_EMPTIED


def test_a_client_that_leaves_while_blocked_leaves_nothing_parked(server, raw):
    job = new_job(raw, "batch")
    gone = [park(server, raw, "WAITJOB", job), park(server, raw, "QWAIT", "batch")]
    assert blocked_clients(raw) == 2
    for client in gone:
        client.close()
    wait_for(lambda: blocked_clients(raw) == 0, message="the blocked count back to 0")
    assert raw.call("FASTACK", job) == b":1\r\n"
    assert raw.call("WAITJOB", job) == statuses("unknown")
    assert raw.call("PING") == b"+PONG\r\n"


def test_commands_after_a_blocked_waitjob_wait_for_its_reply(server, raw):
    job = new_job(raw)
    waiting = park(server, raw, "WAITJOB", job)
    waiting.send(encode_command("PING"))
    raw.call("FASTACK", job)
    assert waiting.read_reply() == statuses("acked")
    assert waiting.read_reply() == b"+PONG\r\n"


def test_client_pause_holds_waitjob_and_qwait_until_it_ends(server, raw):
    pauser, other = server.raw(), server.raw()
    started = time.monotonic()
    assert pauser.call("CLIENT", "PAUSE", "400") == b"+OK\r\n"
    other.send(encode_command("WAITJOB", UNKNOWN_ID) + encode_command("QWAIT", "nosuch"))
    assert other.read_reply() == statuses("unknown")
    assert other.read_reply() == QUEUE_EMPTIED
    assert time.monotonic() - started >= 0.4


def test_debug_flushall_answers_every_waiter(server, raw):
    job = new_job(raw, "batch")
    waiting_job = park(server, raw, "WAITJOB", job)
    waiting_queue = park(server, raw, "QWAIT", "batch", "TIMEOUT", "60000")
    assert raw.call("DEBUG", "FLUSHALL") == b"+OK\r\n"
    assert waiting_job.read_reply() == statuses("deleted")
    assert waiting_queue.read_reply() == QUEUE_EMPTIED


def test_replies_are_the_same_bytes_under_resp3(server, raw):
    resp3 = server.raw()
    assert resp3.call("HELLO", "3").startswith(b"%7\r\n")
    job = new_job(raw)
    assert resp3.call("WAITJOB", UNKNOWN_ID, job, "TIMEOUT", "50") == \
        statuses("unknown", "pending")
    assert resp3.call("QWAIT", "q", "TIMEOUT", "50") == QUEUE_STILL_BUSY
    raw.call("FASTACK", job)
    assert resp3.call("QWAIT", "q") == QUEUE_EMPTIED


# ------------------------------------------------------------ redis-py

@pytest.fixture(params=sorted(PARSERS))
def client(server, request):
    client = _client(server.port, request.param)
    yield client
    client.close()


def _later(action) -> threading.Thread:
    thread = threading.Thread(target=action)
    thread.start()
    return thread


def test_redis_py_waits_and_reads_every_reply(server, raw, client):
    job = client.execute_command("ADDJOB", "q", "payload", 0)
    assert client.execute_command("WAITJOB", job, UNKNOWN_ID, "TIMEOUT", 50) == \
        [b"pending", b"unknown"]
    assert client.execute_command("QWAIT", "q", "TIMEOUT", 50) == 0

    def ack_once_blocked():
        wait_for(lambda: blocked_clients(raw) == 1, message="WAITJOB blocked")
        raw.call("FASTACK", job)

    acker = _later(ack_once_blocked)
    try:
        assert client.execute_command("WAITJOB", job, "TIMEOUT", 5000) == [b"acked"]
    finally:
        acker.join()
    assert client.execute_command("QWAIT", "q") == 1


def test_redis_py_plain_client_as_users_write_it(server, raw):
    plain = redis.Redis(port=server.port)
    try:
        job = plain.execute_command("ADDJOB", "q", "payload", 0)
        assert plain.execute_command("WAITJOB", job, "TIMEOUT", 20) == [b"pending"]
        plain.execute_command("DELJOB", job)
        assert plain.execute_command("WAITJOB", job, "TIMEOUT", 5000) == [b"unknown"]
        with pytest.raises(redis.ResponseError, match="timeout is negative"):
            plain.execute_command("QWAIT", "q", "TIMEOUT", -1)
    finally:
        plain.close()
