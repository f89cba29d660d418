"""Queue commands against a real server: GETJOB (and blocking), QLEN, QPEEK,
QSTAT, QSCAN, JSCAN, PAUSE, ADDJOB's MAXLEN, and DEBUG FLUSHALL's effect on
queues and blocked clients.

Every expected reply was first recorded from the original Disque 1.0-rc1
binary (a lone node) and is hard-coded here as protocol bytes; job IDs and
times are filled in or matched by pattern. SCAN cursors are opaque, but
Disque's observable rules are kept: the final cursor is "0", a small
collection is returned in one call, a negative COUNT scans to the end.

Queue eviction (an idle empty queue is forgotten after minutes) is not
observable quickly and is not tested here.
"""

from __future__ import annotations

import re
import socket
import time

import pytest

from tests.support import NULL_ARRAY as NULL
from tests.support import RawClient, Status, bulk, encode_command, parse, wait_for

pytestmark = pytest.mark.timeout(90)

NULL_ARRAY = b"*-1\r\n"
EMPTY_ARRAY = b"*0\r\n"
SYNTAX = b"-ERR syntax error\r\n"
NOT_INTEGER = b"-ERR value is not an integer or out of range\r\n"
INVALID_CURSOR = b"-ERR invalid cursor or option name\r\n"
EMPTY_SCAN = b"*2\r\n$1\r\n0\r\n*0\r\n"


# ----------------------------------------------------------------- helpers

def job_entry(queue, job_id: bytes, body) -> bytes:
    return b"*3\r\n" + bulk(queue) + bulk(job_id) + bulk(body)


def job_entry_counters(queue, job_id: bytes, body, nacks: int, deliveries: int) -> bytes:
    return (b"*7\r\n" + bulk(queue) + bulk(job_id) + bulk(body)
            + b"$5\r\nnacks\r\n:%d\r\n$21\r\nadditional-deliveries\r\n:%d\r\n"
            % (nacks, deliveries))


def jobs_reply(*entries: bytes) -> bytes:
    return b"*%d\r\n" % len(entries) + b"".join(entries)


def new_job(raw, *args) -> bytes:
    reply = raw.call("ADDJOB", *args)
    assert reply.startswith(b"+D-") and reply.endswith(b"\r\n") and len(reply) == 43, reply
    return reply[1:-2]


def pipeline(raw, commands) -> list[bytes]:
    """Send many commands at once; the raw reply of each."""
    raw.send(b"".join(encode_command(*command) for command in commands))
    return [raw.read_reply() for _ in commands]


def qstat(raw, queue) -> dict | None:
    reply = parse(raw.call("QSTAT", queue))
    if reply is NULL:
        return None
    return dict(zip(reply[::2], reply[1::2]))


def blocked_on(raw, queue) -> int:
    stat = qstat(raw, queue)
    return 0 if stat is None else stat[b"blocked"]


def qlen(raw, queue) -> int:
    return parse(raw.call("QLEN", queue))


def scan_reply(reply: bytes) -> tuple[bytes, list]:
    """(cursor, items) of a QSCAN/JSCAN reply; the cursor must be a bulk string."""
    value = parse(reply)
    assert isinstance(value, list) and len(value) == 2, reply
    cursor, items = value
    assert type(cursor) is bytes and cursor.isdigit(), reply
    assert isinstance(items, list), reply
    return cursor, items


def qstat_pattern(name, length, blocked, jobs_in, jobs_out, pause) -> re.Pattern:
    def field(key: bytes, value: bytes) -> bytes:
        return re.escape(bulk(key)) + value

    def integer(value: int) -> bytes:
        return re.escape(b":%d\r\n" % value)

    return re.compile(b"".join([
        re.escape(b"*20\r\n"),
        field(b"name", re.escape(bulk(name))),
        field(b"len", integer(length)),
        field(b"age", rb":(?P<age>\d+)\r\n"),
        field(b"idle", rb":(?P<idle>\d+)\r\n"),
        field(b"blocked", integer(blocked)),
        field(b"import-from", re.escape(b"*0\r\n")),
        field(b"import-rate", integer(0)),
        field(b"jobs-in", integer(jobs_in)),
        field(b"jobs-out", integer(jobs_out)),
        field(b"pause", re.escape(bulk(pause))),
    ]), re.S)


def is_blocked(client: RawClient, quiet_s: float = 0.3) -> bool:
    """True if the client got no reply within `quiet_s`."""
    client.sock.settimeout(quiet_s)
    try:
        data = client.sock.recv(1, socket.MSG_PEEK)   # leave any reply in place
    except TimeoutError:
        return True
    finally:
        client.sock.settimeout(10)
    return not data


@pytest.fixture
def raw(server):
    return server.raw()


@pytest.fixture
def consumer(server):
    return server.raw()


# ------------------------------------------------------------------ GETJOB

def test_getjob_nohang_on_empty_queues_is_a_null_array(raw):
    assert raw.call("GETJOB", "NOHANG", "FROM", "q") == NULL_ARRAY
    assert raw.call("GETJOB", "NOHANG", "FROM", "q1", "q2", "q3") == NULL_ARRAY


@pytest.mark.parametrize("argv", [
    ("GETJOB", "NOHANG", "WITHCOUNTERS", "COUNT", "5", "TIMEOUT", "10", "FROM", "q", "nohang"),
    ("GETJOB", "nohang", "withcounters", "from", "q"),
    ("GETJOB", "NOHANG", "NOHANG", "FROM", "q"),
    ("GETJOB", "TIMEOUT", "1", "TIMEOUT", "2", "NOHANG", "FROM", "q"),
    ("GETJOB", "NOHANG", "TIMEOUT", "0", "FROM", "q"),
])
def test_getjob_nohang_with_other_options_is_a_null_array(raw, argv):
    assert raw.call(*argv) == NULL_ARRAY


def test_getjob_timeout_expires_with_a_null_array_after_about_the_timeout(raw):
    start = time.monotonic()
    assert raw.call("GETJOB", "TIMEOUT", "300", "FROM", "q") == NULL_ARRAY
    elapsed = time.monotonic() - start
    assert 0.28 <= elapsed < 5, elapsed
    assert blocked_on(raw, "q") == 0


def test_getjob_timeout_on_several_queues_expires(raw):
    start = time.monotonic()
    assert raw.call("GETJOB", "TIMEOUT", "200", "FROM", "a", "b", "c") == NULL_ARRAY
    assert time.monotonic() - start >= 0.18


def test_getjob_returns_the_oldest_job_and_count_defaults_to_1(raw):
    first = new_job(raw, "q", "one", "0")
    second = new_job(raw, "q", "two", "0")
    assert raw.call("GETJOB", "FROM", "q") == jobs_reply(job_entry("q", first, "one"))
    assert raw.call("GETJOB", "FROM", "q") == jobs_reply(job_entry("q", second, "two"))
    assert raw.call("GETJOB", "NOHANG", "FROM", "q") == NULL_ARRAY


def test_getjob_count_serves_the_queues_left_to_right_pass_after_pass(raw):
    ids = {}
    for queue, body in (("a", "a1"), ("a", "a2"), ("b", "b1"), ("c", "c1"), ("c", "c2"),
                        ("c", "c3")):
        ids[body] = new_job(raw, queue, body, "0")
    assert raw.call("GETJOB", "COUNT", "10", "FROM", "a", "b", "c") == jobs_reply(
        job_entry("a", ids["a1"], "a1"), job_entry("b", ids["b1"], "b1"),
        job_entry("c", ids["c1"], "c1"), job_entry("a", ids["a2"], "a2"),
        job_entry("c", ids["c2"], "c2"), job_entry("c", ids["c3"], "c3"))
    assert raw.call("GETJOB", "NOHANG", "FROM", "a", "b", "c") == NULL_ARRAY


def test_getjob_count_stops_at_count(raw):
    ids = {}
    for queue, body in (("a", "a1"), ("a", "a2"), ("b", "b1"), ("c", "c1"), ("c", "c2")):
        ids[body] = new_job(raw, queue, body, "0")
    assert raw.call("GETJOB", "COUNT", "3", "FROM", "a", "b", "c") == jobs_reply(
        job_entry("a", ids["a1"], "a1"), job_entry("b", ids["b1"], "b1"),
        job_entry("c", ids["c1"], "c1"))
    assert raw.call("GETJOB", "COUNT", "3", "FROM", "a", "b", "c") == jobs_reply(
        job_entry("a", ids["a2"], "a2"), job_entry("c", ids["c2"], "c2"))


def test_getjob_withcounters_reply_shape(raw):
    job = new_job(raw, "q", "body", "0")
    assert raw.call("GETJOB", "WITHCOUNTERS", "FROM", "q") == (
        b"*1\r\n*7\r\n$1\r\nq\r\n$40\r\n" + job + b"\r\n$4\r\nbody\r\n"
        b"$5\r\nnacks\r\n:0\r\n$21\r\nadditional-deliveries\r\n:0\r\n")
    raw.call("NACK", job)
    raw.call("GETJOB", "FROM", "q")
    raw.call("ENQUEUE", job)
    assert raw.call("GETJOB", "COUNT", "5", "WITHCOUNTERS", "FROM", "q") == \
        jobs_reply(job_entry_counters("q", job, "body", 1, 1))


def test_getjob_body_and_queue_name_are_binary_safe(raw):
    queue, body = b"q\x00\r\n\xff", b"\x00\r\n*1\r\n$-1\r\n"
    job = new_job(raw, queue, body, "0")
    assert raw.call("GETJOB", "FROM", queue) == jobs_reply(job_entry(queue, job, body))


def test_getjob_from_takes_everything_after_it_as_queue_names(raw):
    from_job = new_job(raw, "from", "f1", "0")
    nohang_job = new_job(raw, "nohang", "n1", "0")
    count_job = new_job(raw, "count", "c1", "0")
    assert raw.call("GETJOB", "NOHANG", "FROM", "nohang", "from") == \
        jobs_reply(job_entry("nohang", nohang_job, "n1"))
    assert raw.call("GETJOB", "NOHANG", "FROM", "timeout", "5", "from") == \
        jobs_reply(job_entry("from", from_job, "f1"))
    assert raw.call("GETJOB", "NOHANG", "FROM", "FROM") == NULL_ARRAY   # not "from"
    assert raw.call("GETJOB", "NOHANG", "COUNT", "5", "FROM", "count", "5") == \
        jobs_reply(job_entry("count", count_job, "c1"))
    assert raw.call("GETJOB", "NOHANG", "FROM", "withcounters", "nohang") == NULL_ARRAY


@pytest.mark.parametrize("argv", [
    ("GETJOB", "FROM"),
    ("GETJOB", "NOHANG"),
    ("GETJOB", "NOHANG", "FROM"),
    ("GETJOB", "TIMEOUT", "10"),
    ("GETJOB", "WITHCOUNTERS", "q"),
    ("GETJOB", "FOO", "FROM", "q"),
    ("GETJOB", "q"),
])
def test_getjob_without_queues_after_from_is_a_syntax_error(raw, argv):
    assert raw.call(*argv) == SYNTAX


@pytest.mark.parametrize("options, error", [
    (("TIMEOUT", "-1"), b"-ERR timeout is negative\r\n"),
    (("TIMEOUT", "abc"), b"-ERR timeout is not an integer or out of range\r\n"),
    (("TIMEOUT", "99999999999999999999"), b"-ERR timeout is not an integer or out of range\r\n"),
    (("TIMEOUT",), b"-ERR timeout is not an integer or out of range\r\n"),   # FROM read as value
    (("COUNT", "0"), b"-ERR COUNT must be a number greater than zero\r\n"),
    (("COUNT", "-1"), b"-ERR COUNT must be a number greater than zero\r\n"),
    (("COUNT", "abc"), b"-ERR COUNT must be a number greater than zero\r\n"),
    (("COUNT", "99999999999999999999"), b"-ERR COUNT must be a number greater than zero\r\n"),
    (("COUNT",), b"-ERR COUNT must be a number greater than zero\r\n"),
])
def test_getjob_bad_option_values(raw, options, error):
    new_job(raw, "q", "body", "0")
    assert raw.call("GETJOB", *options, "FROM", "q") == error
    assert qlen(raw, "q") == 1


def test_getjob_arity(raw):
    assert raw.call("GETJOB") == b"-ERR wrong number of arguments for 'getjob' command\r\n"


@pytest.mark.parametrize("target", ["q1", "q2", "q3"])
def test_getjob_blocked_on_several_queues_is_unblocked_by_an_addjob_to_any(raw, consumer,
                                                                            target):
    consumer.send(encode_command("GETJOB", "FROM", "q1", "q2", "q3"))
    wait_for(lambda: all(blocked_on(raw, q) == 1 for q in ("q1", "q2", "q3")),
             message="the consumer blocked on three queues")
    job = new_job(raw, target, "x", "0")
    assert consumer.read_reply() == jobs_reply(job_entry(target, job, "x"))
    for queue in ("q1", "q2", "q3"):
        assert blocked_on(raw, queue) == 0, queue
    assert qlen(raw, target) == 0


def test_a_blocked_getjob_gets_one_job_whatever_its_count(raw, consumer):
    consumer.send(encode_command("GETJOB", "COUNT", "5", "FROM", "q"))
    wait_for(lambda: blocked_on(raw, "q") == 1, message="the consumer blocked")
    replies = pipeline(raw, [("ADDJOB", "q", "k1", "0"), ("ADDJOB", "q", "k2", "0")])
    first = replies[0][1:-2]
    assert consumer.read_reply() == jobs_reply(job_entry("q", first, "k1"))
    assert qlen(raw, "q") == 1


def test_a_blocked_getjob_withcounters_gets_counters(raw, consumer):
    consumer.send(encode_command("GETJOB", "WITHCOUNTERS", "FROM", "wc"))
    wait_for(lambda: blocked_on(raw, "wc") == 1, message="the consumer blocked")
    job = new_job(raw, "wc", "x", "0")
    assert consumer.read_reply() == jobs_reply(job_entry_counters("wc", job, "x", 0, 0))


def test_blocked_getjob_clients_are_served_in_arrival_order(server, raw):
    first, second = server.raw(), server.raw()
    first.send(encode_command("GETJOB", "FROM", "q"))
    wait_for(lambda: blocked_on(raw, "q") == 1, message="first consumer blocked")
    second.send(encode_command("GETJOB", "FROM", "q"))
    wait_for(lambda: blocked_on(raw, "q") == 2, message="second consumer blocked")
    j1 = new_job(raw, "q", "j1", "0")
    assert first.read_reply() == jobs_reply(job_entry("q", j1, "j1"))
    assert is_blocked(second)
    j2 = new_job(raw, "q", "j2", "0")
    assert second.read_reply() == jobs_reply(job_entry("q", j2, "j2"))


def test_getjob_with_timeout_is_served_before_the_deadline(raw, consumer):
    consumer.send(encode_command("GETJOB", "TIMEOUT", "10000", "FROM", "x", "y"))
    wait_for(lambda: blocked_on(raw, "y") == 1, message="the consumer blocked")
    job = new_job(raw, "y", "v", "0")
    assert consumer.read_reply() == jobs_reply(job_entry("y", job, "v"))


def test_getjob_without_timeout_stays_blocked(raw, consumer):
    consumer.send(encode_command("GETJOB", "FROM", "q"))
    wait_for(lambda: blocked_on(raw, "q") == 1, message="the consumer blocked")
    assert is_blocked(consumer, 0.5)
    assert blocked_on(raw, "q") == 1


def test_a_blocked_client_that_disconnects_is_cleaned_up(server, raw):
    gone = server.raw()
    gone.send(encode_command("GETJOB", "FROM", "yy", "zz"))
    wait_for(lambda: blocked_on(raw, "yy") == 1 and blocked_on(raw, "zz") == 1,
             message="the consumer blocked")
    gone.close()
    wait_for(lambda: blocked_on(raw, "yy") == 0 and blocked_on(raw, "zz") == 0,
             message="the blocked count back to 0")
    # Nobody takes the next job: it stays queued.
    job = new_job(raw, "yy", "kept", "0")
    assert qlen(raw, "yy") == 1
    assert raw.call("GETJOB", "NOHANG", "FROM", "yy") == jobs_reply(job_entry("yy", job, "kept"))


def test_getjob_on_a_queue_paused_in_output_blocks_even_with_jobs(raw, consumer):
    job = new_job(raw, "p", "x", "0")
    assert raw.call("PAUSE", "p", "out") == b"+out\r\n"
    assert raw.call("GETJOB", "NOHANG", "FROM", "p") == NULL_ARRAY
    consumer.send(encode_command("GETJOB", "FROM", "p"))
    wait_for(lambda: blocked_on(raw, "p") == 1, message="the consumer blocked")
    assert is_blocked(consumer)
    assert qstat_pattern("p", 1, 1, 1, 0, "out").fullmatch(raw.call("QSTAT", "p"))
    assert raw.call("PAUSE", "p", "none") == b"+none\r\n"
    assert consumer.read_reply() == jobs_reply(job_entry("p", job, "x"))


def test_getjob_paused_in_output_is_unblocked_when_only_input_stays_paused(raw, consumer):
    assert raw.call("PAUSE", "p", "out") == b"+out\r\n"
    job = new_job(raw, "p", "v", "0")
    consumer.send(encode_command("GETJOB", "FROM", "p"))
    wait_for(lambda: blocked_on(raw, "p") == 1, message="the consumer blocked")
    assert raw.call("PAUSE", "p", "in") == b"+in\r\n"
    assert consumer.read_reply() == jobs_reply(job_entry("p", job, "v"))


def test_getjob_timeout_on_a_paused_queue_expires(raw):
    raw.call("PAUSE", "p", "out")
    new_job(raw, "p", "v", "0")
    start = time.monotonic()
    assert raw.call("GETJOB", "TIMEOUT", "300", "FROM", "p") == NULL_ARRAY
    assert time.monotonic() - start >= 0.28
    assert qlen(raw, "p") == 1


def test_getjob_on_several_queues_skips_the_paused_one(raw):
    raw.call("PAUSE", "a", "out")
    new_job(raw, "a", "a1", "0")
    b1 = new_job(raw, "b", "b1", "0")
    assert raw.call("GETJOB", "COUNT", "5", "FROM", "a", "b") == \
        jobs_reply(job_entry("b", b1, "b1"))


def test_debug_flushall_answers_blocked_getjob_with_a_null_array(server, raw):
    first, second = server.raw(), server.raw()
    first.send(encode_command("GETJOB", "FROM", "zz"))
    second.send(encode_command("GETJOB", "TIMEOUT", "60000", "FROM", "zz", "yy"))
    wait_for(lambda: blocked_on(raw, "zz") == 2, message="two consumers blocked")
    assert raw.call("DEBUG", "FLUSHALL") == b"+OK\r\n"
    assert first.read_reply() == NULL_ARRAY
    assert second.read_reply() == NULL_ARRAY


def test_debug_flushall_removes_queues_and_jobs(raw):
    new_job(raw, "q1", "x", "0")
    raw.call("PAUSE", "q2", "in")
    assert raw.call("DEBUG", "FLUSHALL") == b"+OK\r\n"
    assert raw.call("QSTAT", "q1") == NULL_ARRAY
    assert raw.call("QSTAT", "q2") == NULL_ARRAY
    assert raw.call("QLEN", "q1") == b":0\r\n"
    assert raw.call("QSCAN", "BUSYLOOP") == EMPTY_SCAN
    assert raw.call("JSCAN", "BUSYLOOP") == EMPTY_SCAN
    assert raw.call("PAUSE", "q2", "state") == b"+none\r\n"


# -------------------------------------------------------------------- QLEN

def test_qlen_counts_queued_jobs_only(raw):
    assert raw.call("QLEN", "nosuch") == b":0\r\n"
    a = new_job(raw, "q", "a", "0")
    new_job(raw, "q", "b", "0")
    new_job(raw, "q", "c", "0", "DELAY", "100")
    assert raw.call("QLEN", "q") == b":2\r\n"
    raw.call("DEQUEUE", a)
    assert raw.call("QLEN", "q") == b":1\r\n"
    raw.call("GETJOB", "FROM", "q")
    assert raw.call("QLEN", "q") == b":0\r\n"


@pytest.mark.parametrize("argv", [("QLEN",), ("QLEN", "a", "b")])
def test_qlen_arity(raw, argv):
    assert raw.call(*argv) == b"-ERR wrong number of arguments for 'qlen' command\r\n"


# ------------------------------------------------------------------- QPEEK

@pytest.fixture
def three_jobs(raw):
    return [new_job(raw, "p", body, "0") for body in ("p1", "p2", "p3")]


def test_qpeek_positive_count_oldest_first(raw, three_jobs):
    p1, p2, p3 = three_jobs
    assert raw.call("QPEEK", "p", "2") == jobs_reply(job_entry("p", p1, "p1"),
                                                     job_entry("p", p2, "p2"))
    assert raw.call("QPEEK", "p", "10") == jobs_reply(
        job_entry("p", p1, "p1"), job_entry("p", p2, "p2"), job_entry("p", p3, "p3"))


def test_qpeek_negative_count_newest_first(raw, three_jobs):
    p1, p2, p3 = three_jobs
    assert raw.call("QPEEK", "p", "-2") == jobs_reply(job_entry("p", p3, "p3"),
                                                      job_entry("p", p2, "p2"))
    assert raw.call("QPEEK", "p", "-10") == jobs_reply(
        job_entry("p", p3, "p3"), job_entry("p", p2, "p2"), job_entry("p", p1, "p1"))


@pytest.mark.parametrize("count", ["0", ""])
def test_qpeek_zero_count_is_empty(raw, three_jobs, count):
    assert raw.call("QPEEK", "p", count) == EMPTY_ARRAY


def test_qpeek_does_not_consume(raw, three_jobs):
    raw.call("QPEEK", "p", "3")
    assert qlen(raw, "p") == 3
    assert qstat(raw, "p")[b"jobs-out"] == 0


@pytest.mark.parametrize("count", ["1", "0", "-1"])
def test_qpeek_missing_queue_is_an_empty_array(raw, count):
    assert raw.call("QPEEK", "nosuch", count) == EMPTY_ARRAY


@pytest.mark.parametrize("count", ["abc", "1.5", "99999999999999999999", "-99999999999999999999"])
def test_qpeek_bad_count(raw, three_jobs, count):
    assert raw.call("QPEEK", "p", count) == NOT_INTEGER
    assert raw.call("QPEEK", "nosuch", count) == NOT_INTEGER


@pytest.mark.parametrize("argv", [("QPEEK",), ("QPEEK", "p"), ("QPEEK", "p", "1", "2")])
def test_qpeek_arity(raw, argv):
    assert raw.call(*argv) == b"-ERR wrong number of arguments for 'qpeek' command\r\n"


# ------------------------------------------------------------------- QSTAT

def test_qstat_missing_queue_is_a_null_array(raw):
    assert raw.call("QSTAT", "nosuch") == NULL_ARRAY


def test_qstat_lists_every_field_in_disques_order(raw, three_jobs):
    reply = raw.call("QSTAT", "p")
    match = qstat_pattern("p", 3, 0, 3, 0, "none").fullmatch(reply)
    assert match, reply
    assert int(match["age"]) <= 2 and int(match["idle"]) <= 2


def test_qstat_counts_jobs_in_and_out_and_blocked_clients(raw, consumer, three_jobs):
    raw.call("GETJOB", "COUNT", "3", "FROM", "p")
    raw.call("NACK", three_jobs[0])
    assert qstat_pattern("p", 1, 0, 4, 3, "none").fullmatch(raw.call("QSTAT", "p"))
    raw.call("GETJOB", "FROM", "p")
    consumer.send(encode_command("GETJOB", "FROM", "p"))
    wait_for(lambda: blocked_on(raw, "p") == 1, message="the consumer blocked")
    assert qstat_pattern("p", 0, 1, 4, 4, "none").fullmatch(raw.call("QSTAT", "p"))


def test_qstat_of_a_queue_only_paused(raw):
    assert raw.call("PAUSE", "q", "in") == b"+in\r\n"
    assert qstat_pattern("q", 0, 0, 0, 0, "in").fullmatch(raw.call("QSTAT", "q"))


def test_qstat_idle_grows_while_unused(raw):
    new_job(raw, "q", "x", "0")
    wait_for(lambda: qstat(raw, "q")[b"idle"] >= 1, timeout=10, interval=0.1,
             message="idle to reach 1 s")
    assert qstat(raw, "q")[b"age"] >= 1


@pytest.mark.parametrize("argv", [("QSTAT",), ("QSTAT", "a", "b")])
def test_qstat_arity(raw, argv):
    assert raw.call(*argv) == b"-ERR wrong number of arguments for 'qstat' command\r\n"


# ------------------------------------------------------------------- QSCAN

def test_qscan_on_a_fresh_node_returns_a_small_set_in_one_call(fresh_server):
    # Disque finishes a scan of a few queues in one call (cursor 0) on a
    # node whose tables never held many entries. (After a flush of many
    # entries Disque's table stays large and this no longer holds, so the
    # test starts its own server.)
    raw = fresh_server.raw()
    assert raw.call("QSCAN") == EMPTY_SCAN
    assert raw.call("QSCAN", "0") == EMPTY_SCAN
    new_job(raw, "q1", "a", "0")
    new_job(raw, "q2", "a", "0")
    for args in ((), ("0",), ("",), ("BUSYLOOP",), ("COUNT", "10"), ("COUNT", "10", "0"),
                 ("0", "COUNT", "10")):
        reply = raw.call("QSCAN", *args)
        cursor, names = scan_reply(reply)
        assert cursor == b"0", (args, reply)
        assert sorted(names) == [b"q1", b"q2"]
        assert all(type(name) is bytes for name in names)       # bulk strings


@pytest.mark.parametrize("count", ["-1", "-100"])
def test_qscan_negative_count_scans_to_the_end(raw, count):
    # In Disque a negative COUNT lifts the bound on work: one call returns all.
    names = {b"neg%d" % i for i in range(50)}
    pipeline(raw, [("ADDJOB", name, "x", "0") for name in names])
    cursor, found = scan_reply(raw.call("QSCAN", "COUNT", count))
    assert cursor == b"0"
    assert set(found) == names


def test_qscan_busyloop_returns_every_queue_in_one_call(raw):
    names = {b"queue-%d" % i for i in range(700)}
    pipeline(raw, [("ADDJOB", name, "x", "0") for name in names])
    for args in (("BUSYLOOP",), ("BUSYLOOP", "COUNT", "1"), ("COUNT", "1", "BUSYLOOP", "0")):
        cursor, found = scan_reply(raw.call("QSCAN", *args))
        assert cursor == b"0"
        assert set(found) == names and len(found) == len(names)


@pytest.fixture
def queues_of_length(raw):
    """empty (paused, 0 jobs), one (1 job), three (3 jobs)."""
    raw.call("PAUSE", "empty", "in")
    new_job(raw, "one", "x", "0")
    for _ in range(3):
        new_job(raw, "three", "x", "0")


@pytest.mark.parametrize("args, expected", [
    (("MINLEN", "1"), {b"one", b"three"}),
    (("MINLEN", "2"), {b"three"}),
    (("MINLEN", "4"), set()),
    (("MAXLEN", "0"), {b"empty"}),
    (("MAXLEN", "1"), {b"empty", b"one"}),
    (("MAXLEN", "-5"), set()),
    (("MINLEN", "-5"), {b"empty", b"one", b"three"}),
    (("MINLEN", "1", "MAXLEN", "1"), {b"one"}),
    (("IMPORTRATE", "1"), set()),
    (("IMPORTRATE", "0"), {b"empty", b"one", b"three"}),
    (("IMPORTRATE", "-1"), {b"empty", b"one", b"three"}),
    (("MINLEN", "-1"), {b"empty", b"one", b"three"}),
])
def test_qscan_filters(raw, queues_of_length, args, expected):
    cursor, found = scan_reply(raw.call("QSCAN", "BUSYLOOP", *args))
    assert cursor == b"0"
    assert set(found) == expected


def test_qscan_maxlen_minus_1_means_no_filter(raw, queues_of_length):
    # Disque keeps -1 as "not given" for MINLEN, MAXLEN and IMPORTRATE.
    cursor, found = scan_reply(raw.call("QSCAN", "BUSYLOOP", "MAXLEN", "-1"))
    assert cursor == b"0"
    assert set(found) == {b"empty", b"one", b"three"}


@pytest.mark.parametrize("args, error", [
    (("COUNT", "abc"), NOT_INTEGER),
    (("MINLEN", "abc"), NOT_INTEGER),
    (("MAXLEN", "abc"), NOT_INTEGER),
    (("IMPORTRATE", "abc"), NOT_INTEGER),
    (("IMPORTRATE", "1.5"), NOT_INTEGER),
    (("abc",), INVALID_CURSOR),
    (("FOO",), INVALID_CURSOR),
    (("COUNT",), INVALID_CURSOR),           # an option without its value is a cursor
    (("MINLEN",), INVALID_CURSOR),
    (("99999999999999999999",), INVALID_CURSOR),
    (("1", "2"), SYNTAX),
    (("0", "COUNT", "10", "0"), SYNTAX),
])
def test_qscan_errors(raw, args, error):
    assert raw.call("QSCAN", *args) == error


def test_qscan_full_iteration_returns_every_queue_while_queues_are_added(raw):
    original = {b"orig-%d" % i for i in range(600)}
    pipeline(raw, [("ADDJOB", name, "x", "0") for name in original])
    seen: set = set()
    cursor, calls, added = b"0", 0, 0
    while True:
        cursor, found = scan_reply(raw.call("QSCAN", cursor, "COUNT", "5"))
        seen.update(found)
        calls += 1
        assert calls < 20000, "the scan does not end"
        if cursor == b"0":
            break
        # Between calls: new queues, and old ones emptied (emptied queues
        # are still queues until evicted, minutes later).
        pipeline(raw, [("ADDJOB", b"new-%d" % (added + i), "x", "0") for i in range(3)])
        added += 3
        raw.call("GETJOB", "NOHANG", "FROM", b"orig-%d" % (calls % 600))
    assert original <= seen, sorted(original - seen)[:10]
    assert seen <= original | {b"new-%d" % i for i in range(added)}
    assert calls > 1


# ------------------------------------------------------------------- JSCAN

def test_jscan_on_a_fresh_node_returns_a_small_set_in_one_call(fresh_server):
    # As for QSCAN: a handful of jobs on a node that never held many is
    # scanned in one call by Disque, default COUNT or not.
    raw = fresh_server.raw()
    assert raw.call("JSCAN") == EMPTY_SCAN
    assert raw.call("JSCAN", "0") == EMPTY_SCAN
    ids = {new_job(raw, "q1", "a", "0"), new_job(raw, "q2", "a", "0"),
           new_job(raw, "q2", "b", "0", "RETRY", "0")}
    for args in ((), ("0",), ("COUNT", "10"), ("BUSYLOOP",)):
        reply = raw.call("JSCAN", *args)
        cursor, found = scan_reply(reply)
        assert cursor == b"0", (args, reply)
        assert set(found) == ids


def test_jscan_reply_id_lists_ids_as_status_replies(raw):
    job = new_job(raw, "q1", "a", "0")
    new_job(raw, "q2", "b", "0")
    assert raw.call("JSCAN", "BUSYLOOP", "QUEUE", "q1") == \
        b"*2\r\n$1\r\n0\r\n*1\r\n+" + job + b"\r\n"
    assert raw.call("JSCAN", "BUSYLOOP", "REPLY", "id", "QUEUE", "q1") == \
        b"*2\r\n$1\r\n0\r\n*1\r\n+" + job + b"\r\n"
    cursor, found = scan_reply(raw.call("JSCAN", "BUSYLOOP", "REPLY", "Id"))
    assert all(isinstance(item, Status) for item in found), found


def test_jscan_reply_all_gives_show_for_each_job(raw):
    job = new_job(raw, "q1", "a\x00b", "0", "TTL", "100", "RETRY", "10")
    new_job(raw, "q2", "b", "0")
    for kind in ("all", "ALL"):
        reply = raw.call("JSCAN", "BUSYLOOP", "REPLY", kind, "QUEUE", "q1")
        assert reply.startswith(b"*2\r\n$1\r\n0\r\n*1\r\n*30\r\n"), reply
        show = raw.call("SHOW", job)
        # Same fields and values as SHOW, times aside.
        strip = re.compile(rb"(ttl\r\n|ctime\r\n|within\r\n):\d+")
        assert strip.sub(rb"\1:T", reply[len(b"*2\r\n$1\r\n0\r\n*1\r\n"):]) == \
            strip.sub(rb"\1:T", show)


@pytest.fixture
def jobs_in_states(raw):
    """Two queued jobs in q1/q2, one active (fetched) in q2, one delayed in q1."""
    queued1 = new_job(raw, "q1", "a", "0")
    fetched = new_job(raw, "q2", "b", "0")
    raw.call("GETJOB", "FROM", "q2")
    queued2 = new_job(raw, "q2", "c", "0", "RETRY", "0")
    delayed = new_job(raw, "q1", "d", "0", "DELAY", "100")
    return {"queued1": queued1, "fetched": fetched, "queued2": queued2, "delayed": delayed}


@pytest.mark.parametrize("args, expected", [
    (("QUEUE", "q1"), {"queued1", "delayed"}),
    (("QUEUE", "q2", "STATE", "queued"), {"queued2"}),
    (("STATE", "queued"), {"queued1", "queued2"}),
    (("STATE", "QUEUED"), {"queued1", "queued2"}),
    (("STATE", "active"), {"fetched", "delayed"}),
    (("STATE", "active", "STATE", "queued"), {"queued1", "queued2", "fetched", "delayed"}),
    (("STATE", "active", "STATE", "queued", "QUEUE", "q1"), {"queued1", "delayed"}),
    (("STATE", "acked"), set()),
    (("STATE", "wait-repl"), set()),
    (("QUEUE", "nosuch"), set()),
    (("COUNT", "10", "0", "STATE", "queued", "STATE", "active", "REPLY", "id", "QUEUE", "q2"),
     {"fetched", "queued2"}),
])
def test_jscan_filters(raw, jobs_in_states, args, expected):
    cursor, found = scan_reply(raw.call("JSCAN", "BUSYLOOP", *args))
    assert cursor == b"0"
    assert set(found) == {jobs_in_states[name] for name in expected}


@pytest.mark.parametrize("count", ["-1", "-100"])
def test_jscan_negative_count_scans_to_the_end(raw, count):
    replies = pipeline(raw, [("ADDJOB", b"q%d" % (i % 7), "x", "0") for i in range(200)])
    ids = {reply[1:-2] for reply in replies}
    cursor, found = scan_reply(raw.call("JSCAN", "COUNT", count))
    assert cursor == b"0"
    assert set(found) == ids


def test_jscan_busyloop_returns_every_job_in_one_call(raw):
    replies = pipeline(raw, [("ADDJOB", b"q%d" % (i % 13), "x", "0") for i in range(3000)])
    ids = {reply[1:-2] for reply in replies}
    cursor, found = scan_reply(raw.call("JSCAN", "BUSYLOOP", "COUNT", "1"))
    assert cursor == b"0"
    assert set(found) == ids and len(found) == len(ids)


@pytest.mark.parametrize("args, error", [
    (("STATE", "foo"), b"-ERR Invalid job state name\r\n"),
    (("STATE", "queued", "STATE", "foo"), b"-ERR Invalid job state name\r\n"),
    (("REPLY", "foo"), b"-ERR Invalid REPLY type, try ID or ALL\r\n"),
    (("COUNT", "abc"), NOT_INTEGER),
    (("abc",), INVALID_CURSOR),
    (("FOO",), INVALID_CURSOR),
    (("QUEUE",), INVALID_CURSOR),
    (("STATE",), INVALID_CURSOR),
    (("REPLY",), INVALID_CURSOR),
    (("COUNT",), INVALID_CURSOR),
    (("1", "2"), SYNTAX),
    (("0", "0"), SYNTAX),
])
def test_jscan_errors(raw, args, error):
    assert raw.call("JSCAN", *args) == error


def test_jscan_full_iteration_returns_every_job_while_jobs_come_and_go(raw):
    replies = pipeline(raw, [("ADDJOB", b"q%d" % (i % 17), b"body-%d" % i, "0")
                             for i in range(2500)])
    original = [reply[1:-2] for reply in replies]
    deleted: set = set()
    added: set = set()
    seen: set = set()
    cursor, calls = b"0", 0
    while True:
        cursor, found = scan_reply(raw.call("JSCAN", cursor, "COUNT", "10"))
        seen.update(found)
        calls += 1
        assert calls < 50000, "the scan does not end"
        if cursor == b"0":
            break
        # Between calls: new jobs, deleted jobs, and jobs changing state.
        new = pipeline(raw, [("ADDJOB", "fresh", "x", "0") for _ in range(3)])
        added.update(reply[1:-2] for reply in new)
        victim = original[(calls * 7) % len(original)]
        if victim not in deleted:
            raw.call("DELJOB", victim)
            deleted.add(victim)
        raw.call("GETJOB", "NOHANG", "FROM", b"q%d" % (calls % 17))
    must_see = set(original) - deleted
    assert must_see <= seen, f"{len(must_see - seen)} jobs never returned"
    assert seen <= set(original) | added
    assert calls > 1


# ------------------------------------------------------------------- PAUSE

@pytest.mark.parametrize("options, state", [
    (("in",), b"+in\r\n"),
    (("IN",), b"+in\r\n"),
    (("out",), b"+out\r\n"),
    (("all",), b"+all\r\n"),
    (("in", "out"), b"+all\r\n"),
    (("none",), b"+none\r\n"),
    (("none", "in"), b"+in\r\n"),
    (("in", "none"), b"+none\r\n"),
    (("out", "bcast"), b"+out\r\n"),
    (("state",), b"+none\r\n"),
    (("in", "state"), b"+in\r\n"),
])
def test_pause_replies_with_the_new_state_as_a_status(raw, options, state):
    assert raw.call("PAUSE", "q", *options) == state
    assert raw.call("PAUSE", "q", "state") == state


def test_pause_options_replace_the_previous_state(raw):
    assert raw.call("PAUSE", "q", "in") == b"+in\r\n"
    assert raw.call("PAUSE", "q", "out") == b"+out\r\n"      # not all: replaced
    assert raw.call("PAUSE", "q", "state") == b"+out\r\n"
    assert raw.call("PAUSE", "q", "all") == b"+all\r\n"
    assert raw.call("PAUSE", "q", "state") == b"+all\r\n"
    assert raw.call("PAUSE", "q", "none") == b"+none\r\n"
    assert raw.call("PAUSE", "q", "state") == b"+none\r\n"


def test_pause_state_or_none_on_a_missing_queue_does_not_create_it(raw):
    assert raw.call("PAUSE", "q3", "none") == b"+none\r\n"
    assert raw.call("QSTAT", "q3") == NULL_ARRAY
    assert raw.call("PAUSE", "q4", "state") == b"+none\r\n"
    assert raw.call("QSTAT", "q4") == NULL_ARRAY


def test_pause_on_a_missing_queue_creates_it_paused(raw):
    assert raw.call("PAUSE", "q2", "in", "bcast") == b"+in\r\n"
    assert qstat_pattern("q2", 0, 0, 0, 0, "in").fullmatch(raw.call("QSTAT", "q2"))


@pytest.mark.parametrize("options", [("foo",), ("in", "foo"), ("foo", "in")])
def test_pause_bad_option_is_a_syntax_error_and_changes_nothing(raw, options):
    raw.call("PAUSE", "q", "out")
    assert raw.call("PAUSE", "q", *options) == SYNTAX
    assert raw.call("PAUSE", "q", "state") == b"+out\r\n"


def test_pause_arity(raw):
    assert raw.call("PAUSE", "q") == b"-ERR wrong number of arguments for 'pause' command\r\n"


@pytest.mark.parametrize("pause", ["in", "all"])
def test_addjob_to_a_queue_paused_in_input_is_refused(raw, pause):
    raw.call("PAUSE", "q", pause)
    assert raw.call("ADDJOB", "q", "a", "0") == b"-PAUSED Queue paused in input, try later\r\n"
    assert raw.call("ADDJOB", "q", "a", "0", "DELAY", "5") == \
        b"-PAUSED Queue paused in input, try later\r\n"
    assert raw.call("JSCAN", "BUSYLOOP") == EMPTY_SCAN


def test_addjob_to_a_queue_paused_in_output_is_accepted(raw):
    raw.call("PAUSE", "q", "out")
    new_job(raw, "q", "a", "0")
    assert qlen(raw, "q") == 1


def test_replication_is_checked_before_the_pause(raw):
    raw.call("PAUSE", "q", "in")
    assert raw.call("ADDJOB", "q", "a", "0", "REPLICATE", "2") == \
        b"-NOREPL Not enough reachable nodes for the requested replication level\r\n"


def test_a_queue_paused_in_input_still_serves_its_jobs(raw):
    job = new_job(raw, "q", "a", "0")
    raw.call("PAUSE", "q", "in")
    assert raw.call("GETJOB", "NOHANG", "FROM", "q") == jobs_reply(job_entry("q", job, "a"))


# ------------------------------------------------------------------ MAXLEN

def test_addjob_maxlen_refuses_a_job_once_the_queue_is_that_long(raw):
    new_job(raw, "q", "a", "0", "MAXLEN", "1")
    assert raw.call("ADDJOB", "q", "a", "0", "MAXLEN", "1") == \
        b"-MAXLEN Queue is already longer than the specified MAXLEN count\r\n"
    new_job(raw, "q", "a", "0", "MAXLEN", "2")
    assert raw.call("ADDJOB", "q", "a", "0", "MAXLEN", "2") == \
        b"-MAXLEN Queue is already longer than the specified MAXLEN count\r\n"
    assert qlen(raw, "q") == 2


def test_addjob_maxlen_counts_only_queued_jobs(raw):
    new_job(raw, "q", "a", "0")
    new_job(raw, "q", "b", "0", "DELAY", "100")
    raw.call("GETJOB", "FROM", "q")
    new_job(raw, "q", "c", "0", "MAXLEN", "1")
    assert qlen(raw, "q") == 1


def test_maxlen_is_checked_before_the_pause(raw):
    new_job(raw, "q", "a", "0")
    raw.call("PAUSE", "q", "in")
    assert raw.call("ADDJOB", "q", "a", "0", "MAXLEN", "1") == \
        b"-MAXLEN Queue is already longer than the specified MAXLEN count\r\n"
    assert raw.call("ADDJOB", "q", "a", "0", "MAXLEN", "2") == \
        b"-PAUSED Queue paused in input, try later\r\n"


def test_getjob_makes_the_queues_it_reaches_and_no_others(server):
    # Disque makes a queue when GETJOB's loop reaches it: one job found in
    # the first queue ends the loop before the second is looked at.
    client = server.client()
    client.execute_command("ADDJOB", "first", "x", 0)
    client.execute_command("GETJOB", "FROM", "first", "second")
    cursor, queues = client.execute_command("QSCAN", "BUSYLOOP")
    assert sorted(queues) == [b"first"]
    assert client.execute_command("GETJOB", "NOHANG", "FROM", "first", "second") is None
    cursor, queues = client.execute_command("QSCAN", "BUSYLOOP")
    assert sorted(queues) == [b"first", b"second"]
