"""Job commands against a real server: ADDJOB, SHOW, DELJOB, ACKJOB, FASTACK,
NACK, ENQUEUE, DEQUEUE, WORKING, and the timers a job carries (DELAY, RETRY,
TTL).

Every expected reply below was first recorded from the original Disque
1.0-rc1 binary (a lone node, started fresh) and is hard-coded here as
protocol bytes. Job IDs, node IDs and times differ from run to run: tests
put the IDs they know into the expected bytes and match times with a
pattern, so everything else is compared byte for byte.

Where disque-py intentionally goes beyond Disque, the test says so:
  * job IDs are validated strictly (D- + 8 hex + - + 24 base64 + - + 4 hex);
    Disque only checks the length, the "D-" and the two dashes;
  * WORKING on a job known to be acknowledged answers -ACKED (Disque would
    postpone it); on a lone node ACKJOB forgets the job at once, so there
    WORKING answers -NOJOB exactly as Disque does.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.support import bulk, encode_command, parse, wait_for

pytestmark = pytest.mark.timeout(60)

JOB_ID_PATTERN = re.compile(rb"D-([0-9a-f]{8})-[A-Za-z0-9+/]{24}-([0-9a-f]{4})\Z")
UNKNOWN_ID = b"D-00000000-000000000000000000000000-0001"       # well formed, never made
UNKNOWN_ID_AT_MOST_ONCE = b"D-00000000-000000000000000000000000-0000"
BADID = b"-BADID Invalid Job ID format.\r\n"
NOJOB = b"-NOJOB Job not known in the context of this node.\r\n"
SYNTAX = b"-ERR syntax error\r\n"
NIL = b"$-1\r\n"
OK = b"+OK\r\n"
DEFAULT_TTL = 86400
DEFAULT_RETRY = 300


# ----------------------------------------------------------------- helpers

def new_job(raw, *args) -> bytes:
    """ADDJOB; returns the job ID (the reply must be a +ID status)."""
    reply = raw.call("ADDJOB", *args)
    assert reply.startswith(b"+D-") and reply.endswith(b"\r\n") and len(reply) == 43, reply
    return reply[1:-2]


def node_id(raw) -> bytes:
    hello = parse(raw.call("HELLO"))
    assert hello[0] == 1
    return hello[1]


def show(raw, job_id: bytes) -> dict | None:
    reply = parse(raw.call("SHOW", job_id))
    if reply is None:
        return None
    return dict(zip(reply[::2], reply[1::2]))


def qlen(raw, queue) -> int:
    return parse(raw.call("QLEN", queue))


def getjob_reply(queue: bytes, job_id: bytes, body: bytes, counters=None) -> bytes:
    """GETJOB's reply for one job, as Disque encodes it."""
    if counters is None:
        return b"*1\r\n*3\r\n" + bulk(queue) + bulk(job_id) + bulk(body)
    nacks, deliveries = counters
    return (b"*1\r\n*7\r\n" + bulk(queue) + bulk(job_id) + bulk(body)
            + b"$5\r\nnacks\r\n:%d\r\n$21\r\nadditional-deliveries\r\n:%d\r\n"
            % (nacks, deliveries))


def show_pattern(job_id, queue, state, delay, retry, nacks, deliveries, node, body,
                 requeue_null: bool, repl: int = 1) -> re.Pattern:
    """SHOW's exact reply, with the time fields left as captured numbers."""
    def field(name: bytes, value: bytes) -> bytes:
        return re.escape(bulk(name)) + value

    def integer(value: int) -> bytes:
        return re.escape(b":%d\r\n" % value)

    requeue = re.escape(NIL) if requeue_null else rb":(?P<requeue>\d+)\r\n"
    parts = [
        re.escape(b"*30\r\n"),
        field(b"id", re.escape(bulk(job_id))),
        field(b"queue", re.escape(bulk(queue))),
        field(b"state", re.escape(bulk(state))),
        field(b"repl", integer(repl)),
        field(b"ttl", rb":(?P<ttl>\d+)\r\n"),
        field(b"ctime", rb":(?P<ctime>\d+)\r\n"),
        field(b"delay", integer(delay)),
        field(b"retry", integer(retry)),
        field(b"nacks", integer(nacks)),
        field(b"additional-deliveries", integer(deliveries)),
        field(b"nodes-delivered", re.escape(b"*1\r\n" + bulk(node))),
        field(b"nodes-confirmed", re.escape(b"*0\r\n")),
        field(b"next-requeue-within", requeue),
        field(b"next-awake-within", rb":(?P<awake>\d+)\r\n"),
        field(b"body", re.escape(bulk(body))),
    ]
    return re.compile(b"".join(parts), re.S)


@pytest.fixture
def raw(server):
    return server.raw()


# ------------------------------------------------------------------ ADDJOB

def test_addjob_replies_with_the_job_id_as_a_status(raw):
    reply = raw.call("ADDJOB", "q", "body", "0")
    assert reply[:1] == b"+" and reply[-2:] == b"\r\n"
    job_id = reply[1:-2]
    assert len(job_id) == 40
    assert JOB_ID_PATTERN.match(job_id), job_id


def test_job_id_node_prefix_is_the_first_8_chars_of_the_hello_node_id(raw):
    me = node_id(raw)
    assert len(me) == 40
    for args in ((), ("RETRY", "0"), ("TTL", "100"), ("DELAY", "5")):
        job_id = new_job(raw, "q", "body", "0", *args)
        assert JOB_ID_PATTERN.match(job_id).group(1) == me[:8]


@pytest.mark.parametrize("options, ttl_field", [
    ((), b"05a1"),                               # 86400 s = 1440 min = 0x5a0, odd: retry > 0
    (("RETRY", "0"), b"05a0"),                   # even: at-most-once
    (("TTL", "7200"), b"0079"),
    (("TTL", "7200", "RETRY", "0"), b"0078"),
    (("TTL", "180"), b"0003"),
    (("TTL", "180", "RETRY", "0"), b"0002"),
    (("TTL", "120"), b"0003"),                   # 2 min, made odd
    (("TTL", "60"), b"0001"),
    (("TTL", "59"), b"0001"),                    # 0 min, made odd
    (("TTL", "59", "RETRY", "0"), b"0000"),
    (("TTL", "3600", "RETRY", "7"), b"003d"),
    (("TTL", "10000000"), b"ffff"),              # minutes capped at 0xffff
    (("TTL", "10000000", "RETRY", "0"), b"fffe"),
])
def test_job_id_encodes_ttl_minutes_even_for_retry_0_odd_otherwise(raw, options, ttl_field):
    job_id = new_job(raw, "q", "body", "0", *options)
    assert JOB_ID_PATTERN.match(job_id).group(2) == ttl_field


@pytest.mark.parametrize("options, error", [
    (("REPLICATE", "0"), b"-ERR REPLICATE must be between 1 and 65535\r\n"),
    (("REPLICATE", "65536"), b"-ERR REPLICATE must be between 1 and 65535\r\n"),
    (("REPLICATE", "-1"), b"-ERR REPLICATE must be between 1 and 65535\r\n"),
    (("REPLICATE", "abc"), b"-ERR REPLICATE must be between 1 and 65535\r\n"),
    (("REPLICATE",), SYNTAX),
    (("DELAY", "-1"), b"-ERR DELAY time must be a non negative number\r\n"),
    (("DELAY", "abc"), b"-ERR DELAY time must be a non negative number\r\n"),
    (("DELAY",), SYNTAX),
    (("RETRY", "-1"), b"-ERR RETRY time must be a non negative number\r\n"),
    (("RETRY", "abc"), b"-ERR RETRY time must be a non negative number\r\n"),
    (("RETRY", "99999999999999999999"), b"-ERR RETRY time must be a non negative number\r\n"),
    (("RETRY",), SYNTAX),
    (("TTL", "0"), b"-ERR TTL must be a number > 0\r\n"),
    (("TTL", "-1"), b"-ERR TTL must be a number > 0\r\n"),
    (("TTL", "abc"), b"-ERR TTL must be a number > 0\r\n"),
    (("TTL", "5s"), b"-ERR TTL must be a number > 0\r\n"),
    (("TTL", ""), b"-ERR TTL must be a number > 0\r\n"),
    (("TTL",), SYNTAX),
    (("MAXLEN", "0"), b"-ERR MAXLEN must be a positive number\r\n"),
    (("MAXLEN", "-1"), b"-ERR MAXLEN must be a positive number\r\n"),
    (("MAXLEN", "abc"), b"-ERR MAXLEN must be a positive number\r\n"),
    (("MAXLEN",), SYNTAX),
    (("FOO",), SYNTAX),
    (("ASYNC", "FOO"), SYNTAX),
    (("REPLICATE", "1", "REPLICATE", "0"), b"-ERR REPLICATE must be between 1 and 65535\r\n"),
])
def test_addjob_bad_option_values_are_refused_with_disques_errors(raw, options, error):
    assert raw.call("ADDJOB", "q", "body", "0", *options) == error
    assert qlen(raw, "q") == 0
    assert raw.call("JSCAN", "BUSYLOOP") == b"*2\r\n$1\r\n0\r\n*0\r\n"


@pytest.mark.parametrize("timeout, error", [
    ("abc", b"-ERR timeout is not an integer or out of range\r\n"),
    ("1.5", b"-ERR timeout is not an integer or out of range\r\n"),
    (" 5", b"-ERR timeout is not an integer or out of range\r\n"),
    ("99999999999999999999", b"-ERR timeout is not an integer or out of range\r\n"),
    ("-1", b"-ERR timeout is negative\r\n"),
])
def test_addjob_bad_timeout_argument_is_refused(raw, timeout, error):
    assert raw.call("ADDJOB", "q", "body", timeout) == error
    assert qlen(raw, "q") == 0


@pytest.mark.parametrize("timeout", ["0", "", "100", "+5", "007"])
def test_addjob_timeout_is_read_like_strtoll(raw, timeout):
    new_job(raw, "q", "body", timeout)
    assert qlen(raw, "q") == 1


def test_addjob_option_errors_come_before_the_timeout_error(raw):
    # Disque parses the options first, the timeout argument afterwards.
    assert raw.call("ADDJOB", "q", "body", "abc", "REPLICATE", "0") == \
        b"-ERR REPLICATE must be between 1 and 65535\r\n"
    assert raw.call("ADDJOB", "q", "body", "-1", "REPLICATE", "0") == \
        b"-ERR REPLICATE must be between 1 and 65535\r\n"
    assert raw.call("ADDJOB", "q", "body", "abc", "FOO") == SYNTAX


@pytest.mark.parametrize("argv", [("ADDJOB",), ("ADDJOB", "q"), ("ADDJOB", "q", "body")])
def test_addjob_with_too_few_arguments_is_an_arity_error(raw, argv):
    assert raw.call(*argv) == b"-ERR wrong number of arguments for 'addjob' command\r\n"


@pytest.mark.parametrize("options", [
    ("RETRY", "0", "REPLICATE", "2"),
    ("REPLICATE", "2", "RETRY", "0"),
    ("REPLICATE", "2", "RETRY", "0", "DELAY", "10", "TTL", "10"),   # checked before DELAY >= TTL
])
def test_addjob_retry_0_with_replicate_above_1_is_refused(raw, options):
    assert raw.call("ADDJOB", "q", "body", "0", *options) == (
        b"-ERR With RETRY set to 0 please explicitly set  REPLICATE to 1 "
        b"(at-most-once delivery)\r\n")


def test_addjob_retry_0_with_replicate_1_is_accepted(raw):
    job_id = new_job(raw, "q", "body", "0", "RETRY", "0", "REPLICATE", "1")
    assert show(raw, job_id)[b"retry"] == 0


@pytest.mark.parametrize("options", [
    ("DELAY", "10", "TTL", "10"),
    ("DELAY", "11", "TTL", "10"),
    ("DELAY", "86400"),                        # the default TTL is 86400
    ("DELAY", "10", "TTL", "10", "REPLICATE", "2"),   # checked before the NOREPL check
])
def test_addjob_delay_not_below_ttl_is_refused(raw, options):
    assert raw.call("ADDJOB", "q", "body", "0", *options) == (
        b"-ERR The specified DELAY is greater than TTL. Job refused since would "
        b"never be delivered\r\n")
    assert raw.call("JSCAN", "BUSYLOOP") == b"*2\r\n$1\r\n0\r\n*0\r\n"


def test_addjob_delay_just_below_ttl_is_accepted(raw):
    job_id = new_job(raw, "q", "body", "0", "DELAY", "9", "TTL", "10")
    assert show(raw, job_id)[b"delay"] == 9


@pytest.mark.parametrize("repl", ["2", "3", "65535"])
def test_addjob_replicate_above_1_on_a_lone_node_is_norepl(raw, repl):
    assert raw.call("ADDJOB", "q", "body", "0", "REPLICATE", repl) == \
        b"-NOREPL Not enough reachable nodes for the requested replication level\r\n"
    assert qlen(raw, "q") == 0


def test_addjob_accepts_every_option_together_in_any_case(raw):
    job_id = new_job(raw, "q", "body", "0", "replicate", "1", "delay", "1", "retry", "2",
                     "ttl", "100", "maxlen", "100", "async")
    info = show(raw, job_id)
    assert (info[b"repl"], info[b"delay"], info[b"retry"]) == (1, 1, 2)
    assert 98 <= info[b"ttl"] <= 100
    assert JOB_ID_PATTERN.match(job_id).group(2) == b"0001"


@pytest.mark.parametrize("flag", ["ASYNC", "async", "Async"])
def test_addjob_async_on_a_lone_node_queues_the_job(raw, flag):
    job_id = new_job(raw, "q", "body", "0", flag)
    assert show(raw, job_id)[b"state"] == b"queued"
    assert qlen(raw, "q") == 1


def test_addjob_defaults_repl_1_retry_300_ttl_86400_delay_0(raw):
    job_id = new_job(raw, "q", "body", "0")
    info = show(raw, job_id)
    assert (info[b"repl"], info[b"delay"], info[b"retry"]) == (1, 0, DEFAULT_RETRY)
    assert DEFAULT_TTL - 2 <= info[b"ttl"] <= DEFAULT_TTL


@pytest.mark.parametrize("ttl, retry", [("5", 1), ("100", 10), ("20000", 300), ("1", 1)])
def test_addjob_default_retry_is_ttl_over_10_between_1_and_300(raw, ttl, retry):
    job_id = new_job(raw, "q", "body", "0", "TTL", ttl)
    assert show(raw, job_id)[b"retry"] == retry


def test_addjob_accepts_retry_longer_than_ttl(raw):
    job_id = new_job(raw, "q", "body", "0", "RETRY", "5", "TTL", "1")
    assert show(raw, job_id)[b"retry"] == 5


# -------------------------------------------------------------------- SHOW

def test_show_a_queued_job_lists_every_field_in_disques_order(raw):
    me = node_id(raw)
    before_ms = int(time.time() * 1000)
    job_id = new_job(raw, "q", "payload", "0", "TTL", "100", "RETRY", "10")
    after_ms = int(time.time() * 1000)
    reply = raw.call("SHOW", job_id)
    match = show_pattern(job_id, b"q", b"queued", 0, 10, 0, 0, me, b"payload",
                         requeue_null=False).fullmatch(reply)
    assert match, reply
    assert 98 <= int(match["ttl"]) <= 100
    ctime = int(match["ctime"])
    assert before_ms - 1000 <= ctime // 1_000_000 <= after_ms + 1000
    assert 8000 <= int(match["requeue"]) <= 10300        # RETRY 10 s, +/- 250 ms jitter
    assert int(match["awake"]) <= int(match["requeue"])


def test_show_body_is_binary_safe(raw):
    me = node_id(raw)
    body = b"a\x00b\r\nc\xff\r\n$3\r\n*1\r\n" + bytes(range(256))
    job_id = new_job(raw, "q", body, "0")
    reply = raw.call("SHOW", job_id)
    assert show_pattern(job_id, b"q", b"queued", 0, DEFAULT_RETRY, 0, 0, me, body,
                        requeue_null=False).fullmatch(reply), reply


def test_show_a_large_body_intact(raw):
    body = bytes(range(256)) * 1024
    job_id = new_job(raw, "q", body, "0")
    assert show(raw, job_id)[b"body"] == body


def test_show_a_delayed_job_is_active_and_due_after_the_delay(raw):
    me = node_id(raw)
    job_id = new_job(raw, "q2", "body", "0", "DELAY", "5", "TTL", "100", "RETRY", "0")
    reply = raw.call("SHOW", job_id)
    match = show_pattern(job_id, b"q2", b"active", 5, 0, 0, 0, me, b"body",
                         requeue_null=False).fullmatch(reply)
    assert match, reply
    assert 4000 <= int(match["requeue"]) <= 5000
    assert 4000 <= int(match["awake"]) <= 5100


def test_show_an_at_most_once_job_has_a_nil_next_requeue(raw):
    me = node_id(raw)
    job_id = new_job(raw, "q2", "body2", "0", "RETRY", "0")
    reply = raw.call("SHOW", job_id)
    match = show_pattern(job_id, b"q2", b"queued", 0, 0, 0, 0, me, b"body2",
                         requeue_null=True).fullmatch(reply)
    assert match, reply
    assert (DEFAULT_TTL - 2) * 1000 <= int(match["awake"]) <= (DEFAULT_TTL + 2) * 1000
    assert raw.call("GETJOB", "FROM", "q2") == getjob_reply(b"q2", job_id, b"body2")
    reply = raw.call("SHOW", job_id)
    assert show_pattern(job_id, b"q2", b"active", 0, 0, 0, 0, me, b"body2",
                        requeue_null=True).fullmatch(reply), reply


def test_show_an_unknown_job_is_nil(raw):
    assert raw.call("SHOW", UNKNOWN_ID) == NIL
    assert raw.call("SHOW", UNKNOWN_ID_AT_MOST_ONCE) == NIL
    assert raw.call("SHOW", "D-ABCDEF00-000000000000000000000000-ABCD") == NIL


@pytest.mark.parametrize("bad_id", [
    b"foo",
    b"",
    b"D-00000000-000000000000000000000000-000",      # 39 chars
    b"D-00000000-000000000000000000000000-00000",    # 41 chars
    b"d-00000000-000000000000000000000000-0000",     # lower-case d
    b"D-00000000_000000000000000000000000-0000",     # wrong separator
])
def test_show_a_malformed_id_is_badid(raw, bad_id):
    assert raw.call("SHOW", bad_id) == BADID


@pytest.mark.parametrize("bad_id", [
    b"D-0000000g-000000000000000000000000-0000",     # not hex
    b"D-00000000-00000000000000000000000*-0000",     # not base64
    b"D-00000000-000000000000000000000000-000g",     # not hex
])
def test_show_an_id_with_bad_characters_is_badid(raw, bad_id):
    # Beyond Disque: Disque checks only length, "D-" and the dashes, and
    # answers nil for these. disque-py validates every character.
    assert raw.call("SHOW", bad_id) == BADID


@pytest.mark.parametrize("argv", [("SHOW",), ("SHOW", "a", "b")])
def test_show_arity(raw, argv):
    assert raw.call(*argv) == b"-ERR wrong number of arguments for 'show' command\r\n"


# ------------------------------------------------------------------ DELJOB

def test_deljob_counts_the_jobs_it_deleted(raw):
    a = new_job(raw, "q", "a", "0")
    b = new_job(raw, "q", "b", "0", "RETRY", "0")
    assert raw.call("DELJOB", a, a, b, UNKNOWN_ID) == b":2\r\n"
    assert raw.call("SHOW", a) == NIL
    assert raw.call("SHOW", b) == NIL
    assert raw.call("DELJOB", a) == b":0\r\n"


def test_deljob_removes_a_queued_job_from_its_queue(raw):
    a = new_job(raw, "q", "a", "0")
    new_job(raw, "q", "b", "0")
    assert raw.call("DELJOB", a) == b":1\r\n"
    assert qlen(raw, "q") == 1


def test_deljob_deletes_a_fetched_job(raw):
    a = new_job(raw, "q", "a", "0")
    raw.call("GETJOB", "FROM", "q")
    assert raw.call("DELJOB", a) == b":1\r\n"
    assert raw.call("SHOW", a) == NIL


def test_deljob_with_no_ids_is_zero(raw):
    assert raw.call("DELJOB") == b":0\r\n"


def test_deljob_with_a_bad_id_deletes_nothing(raw):
    a = new_job(raw, "q", "a", "0")
    assert raw.call("DELJOB", a, "foo") == BADID
    assert show(raw, a)[b"state"] == b"queued"


# ------------------------------------------------------------------ ACKJOB

def test_ackjob_counts_known_jobs_once(raw):
    a = new_job(raw, "q", "a", "0")
    b = new_job(raw, "q", "b", "0")
    assert raw.call("ACKJOB", a, a, b) == b":2\r\n"


def test_ackjob_on_a_lone_node_forgets_the_job(raw):
    a = new_job(raw, "q", "a", "0")
    assert raw.call("ACKJOB", a) == b":1\r\n"
    assert raw.call("SHOW", a) == NIL
    assert qlen(raw, "q") == 0
    assert raw.call("ACKJOB", a) == b":0\r\n"


def test_ackjob_of_a_fetched_job(raw):
    a = new_job(raw, "q", "a", "0")
    raw.call("GETJOB", "FROM", "q")
    assert raw.call("ACKJOB", a) == b":1\r\n"
    assert raw.call("SHOW", a) == NIL


def test_ackjob_removes_a_queued_job_from_its_queue(raw):
    a = new_job(raw, "q", "a", "0")
    b = new_job(raw, "q", "b", "0")
    assert raw.call("ACKJOB", b) == b":1\r\n"
    assert qlen(raw, "q") == 1
    assert raw.call("QPEEK", "q", "10") == b"*1\r\n*3\r\n$1\r\nq\r\n" + bulk(a) + b"$1\r\na\r\n"


@pytest.mark.parametrize("unknown", [UNKNOWN_ID, UNKNOWN_ID_AT_MOST_ONCE])
def test_ackjob_of_unknown_ids_is_zero_and_leaves_nothing_on_a_lone_node(raw, unknown):
    assert raw.call("ACKJOB", unknown) == b":0\r\n"
    assert raw.call("SHOW", unknown) == NIL
    assert raw.call("JSCAN", "BUSYLOOP", "STATE", "acked") == b"*2\r\n$1\r\n0\r\n*0\r\n"


def test_ackjob_with_no_ids_is_zero(raw):
    assert raw.call("ACKJOB") == b":0\r\n"


def test_ackjob_with_a_bad_id_acknowledges_nothing(raw):
    b = new_job(raw, "q", "b", "0")
    assert raw.call("ACKJOB", b, "foo") == BADID
    assert show(raw, b)[b"state"] == b"queued"
    assert raw.call("ACKJOB", "foo") == BADID


# ----------------------------------------------------------------- FASTACK

def test_fastack_counts_and_deletes_known_jobs(raw):
    a = new_job(raw, "q", "a", "0")
    b = new_job(raw, "q", "b", "0")
    raw.call("GETJOB", "FROM", "q")
    assert raw.call("FASTACK", a, b, b, UNKNOWN_ID) == b":2\r\n"
    assert raw.call("SHOW", a) == NIL
    assert raw.call("SHOW", b) == NIL
    assert qlen(raw, "q") == 0
    assert raw.call("FASTACK", a) == b":0\r\n"


def test_fastack_with_no_ids_is_zero(raw):
    assert raw.call("FASTACK") == b":0\r\n"


def test_fastack_with_a_bad_id_deletes_nothing(raw):
    a = new_job(raw, "q", "a", "0")
    assert raw.call("FASTACK", a, "foo") == BADID
    assert show(raw, a)[b"state"] == b"queued"


# -------------------------------------------------------------------- NACK

def test_nack_requeues_a_fetched_job_and_counts_it(raw):
    d = new_job(raw, "q", "d", "0", "RETRY", "30")
    assert raw.call("GETJOB", "WITHCOUNTERS", "FROM", "q") == \
        getjob_reply(b"q", d, b"d", (0, 0))
    assert raw.call("NACK", d) == b":1\r\n"
    assert raw.call("NACK", d) == b":0\r\n"            # already queued again
    assert show(raw, d)[b"nacks"] == 1
    assert raw.call("GETJOB", "WITHCOUNTERS", "FROM", "q") == \
        getjob_reply(b"q", d, b"d", (1, 0))
    assert raw.call("NACK", d, d) == b":1\r\n"
    assert raw.call("GETJOB", "WITHCOUNTERS", "FROM", "q") == \
        getjob_reply(b"q", d, b"d", (2, 0))
    info = show(raw, d)
    assert (info[b"nacks"], info[b"additional-deliveries"]) == (2, 0)


def test_nack_of_a_queued_job_is_zero_and_not_counted(raw):
    d = new_job(raw, "q", "d", "0")
    assert raw.call("NACK", d) == b":0\r\n"
    assert show(raw, d)[b"nacks"] == 0


def test_nack_of_a_dequeued_job_queues_it_and_counts_a_nack(raw):
    b = new_job(raw, "q", "b", "0")
    assert raw.call("DEQUEUE", b) == b":1\r\n"
    assert raw.call("NACK", b) == b":1\r\n"
    assert raw.call("GETJOB", "WITHCOUNTERS", "FROM", "q") == \
        getjob_reply(b"q", b, b"b", (1, 0))


def test_nack_of_a_delivered_at_most_once_job_does_nothing(raw):
    f = new_job(raw, "z", "f", "0", "RETRY", "0", "TTL", "100")
    raw.call("GETJOB", "FROM", "z")
    assert raw.call("NACK", f) == b":0\r\n"
    assert qlen(raw, "z") == 0
    assert show(raw, f)[b"nacks"] == 0


def test_nack_unknown_none_and_bad_ids(raw):
    assert raw.call("NACK") == b":0\r\n"
    assert raw.call("NACK", UNKNOWN_ID) == b":0\r\n"
    d = new_job(raw, "q", "d", "0")
    raw.call("GETJOB", "FROM", "q")
    assert raw.call("NACK", d, "foo") == BADID
    assert show(raw, d)[b"state"] == b"active"


# -------------------------------------------------------- ENQUEUE/DEQUEUE

def test_dequeue_counts_jobs_taken_out_of_their_queue(raw):
    d = new_job(raw, "q", "d", "0")
    e = new_job(raw, "q", "e", "0")
    assert raw.call("DEQUEUE", d, d) == b":1\r\n"
    assert raw.call("DEQUEUE", d) == b":0\r\n"
    assert show(raw, d)[b"state"] == b"active"
    assert qlen(raw, "q") == 1
    assert raw.call("DEQUEUE", d, e, UNKNOWN_ID) == b":1\r\n"
    assert qlen(raw, "q") == 0


def test_enqueue_counts_jobs_put_back_in_their_queue(raw):
    d = new_job(raw, "q", "d", "0")
    assert raw.call("ENQUEUE", d) == b":0\r\n"          # already queued
    raw.call("DEQUEUE", d)
    assert raw.call("ENQUEUE", d, d, UNKNOWN_ID) == b":1\r\n"
    assert show(raw, d)[b"state"] == b"queued"
    assert qlen(raw, "q") == 1


def test_enqueue_of_a_fetched_job_counts_an_additional_delivery(raw):
    d = new_job(raw, "q", "d", "0")
    raw.call("GETJOB", "FROM", "q")
    assert raw.call("ENQUEUE", d) == b":1\r\n"
    assert raw.call("GETJOB", "WITHCOUNTERS", "FROM", "q") == \
        getjob_reply(b"q", d, b"d", (0, 1))


def test_enqueue_of_a_dequeued_job_counts_an_additional_delivery(raw):
    a = new_job(raw, "q", "a", "0")
    raw.call("DEQUEUE", a)
    assert raw.call("ENQUEUE", a) == b":1\r\n"
    assert raw.call("GETJOB", "WITHCOUNTERS", "FROM", "q") == \
        getjob_reply(b"q", a, b"a", (0, 1))


def test_enqueue_of_a_delayed_job_queues_it_at_once(raw):
    c = new_job(raw, "q", "c", "0", "DELAY", "100")
    assert qlen(raw, "q") == 0
    assert raw.call("ENQUEUE", c) == b":1\r\n"
    assert raw.call("GETJOB", "WITHCOUNTERS", "FROM", "q") == \
        getjob_reply(b"q", c, b"c", (0, 0))


def test_an_at_most_once_job_is_never_queued_twice(raw):
    g = new_job(raw, "z", "g", "0", "RETRY", "0", "TTL", "100")
    assert raw.call("DEQUEUE", g) == b":1\r\n"
    assert raw.call("ENQUEUE", g) == b":0\r\n"
    assert raw.call("NACK", g) == b":0\r\n"
    assert qlen(raw, "z") == 0


def test_a_delayed_at_most_once_job_can_be_queued_once_by_enqueue(raw):
    e = new_job(raw, "q", "e", "0", "DELAY", "100", "RETRY", "0")
    assert raw.call("ENQUEUE", e) == b":1\r\n"
    assert raw.call("GETJOB", "WITHCOUNTERS", "FROM", "q") == \
        getjob_reply(b"q", e, b"e", (0, 0))
    assert raw.call("ENQUEUE", e) == b":0\r\n"


@pytest.mark.parametrize("command", ["ENQUEUE", "DEQUEUE"])
def test_enqueue_dequeue_with_no_ids_or_bad_ids(raw, command):
    assert raw.call(command) == b":0\r\n"
    assert raw.call(command, "foo") == BADID
    d = new_job(raw, "q", "d", "0")
    raw.call("GETJOB", "FROM", "q")
    assert raw.call(command, d, "foo") == BADID
    assert show(raw, d)[b"state"] == b"active"


# ----------------------------------------------------------------- WORKING

def test_working_returns_the_retry_time(raw):
    d = new_job(raw, "q", "d", "0", "RETRY", "30")
    raw.call("GETJOB", "FROM", "q")
    assert raw.call("WORKING", d) == b":30\r\n"
    e = new_job(raw, "q", "e", "0")
    raw.call("GETJOB", "FROM", "q")
    assert raw.call("WORKING", e) == b":300\r\n"


def test_working_on_a_queued_job_takes_it_out_of_the_queue(raw):
    a = new_job(raw, "q", "a", "0")
    new_job(raw, "q", "b", "0")
    assert raw.call("WORKING", a) == b":300\r\n"
    assert qlen(raw, "q") == 1
    assert show(raw, a)[b"state"] == b"active"


def test_working_on_an_at_most_once_job_returns_0(raw):
    e = new_job(raw, "q", "e", "0", "RETRY", "0")
    raw.call("GETJOB", "FROM", "q")
    assert raw.call("WORKING", e) == b":0\r\n"
    assert show(raw, e)[b"next-requeue-within"] is None


def test_working_resets_the_next_requeue_time(raw):
    d = new_job(raw, "q", "d", "0", "RETRY", "10")
    raw.call("GETJOB", "FROM", "q")
    wait_for(lambda: show(raw, d)[b"next-requeue-within"] < 9000, timeout=15,
             message="a second of the retry period to pass")
    assert raw.call("WORKING", d) == b":10\r\n"
    assert show(raw, d)[b"next-requeue-within"] > 9300


def test_working_postpones_the_requeue(raw):
    # Two jobs fetched together with RETRY 3; WORKING on one of them once
    # 2 s have passed. When the other is re-queued (about 3 s), the
    # postponed one must still be out of its queue (due at about 5 s).
    worked = new_job(raw, "w", "x", "0", "RETRY", "3")
    other = new_job(raw, "o", "y", "0", "RETRY", "3")
    raw.call("GETJOB", "COUNT", "2", "FROM", "w", "o")
    wait_for(lambda: show(raw, worked)[b"next-requeue-within"] < 1000, timeout=15,
             message="two thirds of the retry period to pass")
    assert raw.call("WORKING", worked) == b":3\r\n"

    def snapshot():
        # Both replies from one read of the server: no timer runs in between.
        raw.send(encode_command("QLEN", "o") + encode_command("SHOW", worked))
        return parse(raw.read_reply()), parse(raw.read_reply())
    other_len, worked_info = wait_for(lambda: (lambda s: s[0] == 1 and s)(snapshot()),
                                      timeout=15, message="the other job re-queued")
    assert dict(zip(worked_info[::2], worked_info[1::2]))[b"state"] == b"active"
    assert show(raw, other)[b"additional-deliveries"] == 1
    wait_for(lambda: qlen(raw, "w") == 1, timeout=15, message="the postponed job re-queued")


def test_working_on_an_unknown_job_is_nojob(raw):
    assert raw.call("WORKING", UNKNOWN_ID) == NOJOB


def test_working_on_a_bad_id_is_badid(raw):
    assert raw.call("WORKING", "foo") == BADID


@pytest.mark.parametrize("argv", [("WORKING",), ("WORKING", "a", "b")])
def test_working_arity(raw, argv):
    assert raw.call(*argv) == b"-ERR wrong number of arguments for 'working' command\r\n"


def test_working_after_ackjob_on_a_lone_node_is_nojob(raw):
    # Beyond Disque, disque-py answers -ACKED for a job it still knows as
    # acknowledged (in a cluster, until garbage collection). A lone node
    # forgets the job as soon as it is acknowledged, so the answer here is
    # Disque's own -NOJOB.
    f = new_job(raw, "q", "f", "0")
    raw.call("GETJOB", "FROM", "q")
    assert raw.call("ACKJOB", f) == b":1\r\n"
    assert raw.call("WORKING", f) == NOJOB


def test_working_after_half_the_ttl_is_toolate(raw):
    start = time.monotonic()
    w = new_job(raw, "w", "x", "0", "TTL", "6", "RETRY", "3")
    assert raw.call("WORKING", w) == b":3\r\n"
    toolate = (b"-TOOLATE Half of job TTL already elapsed, you are no longer allowed "
               b"to postpone the next delivery.\r\n")
    replies = []

    def refused():
        reply = raw.call("WORKING", w)
        replies.append(reply)
        return reply == toolate
    wait_for(refused, timeout=20, interval=0.1, message="WORKING to answer TOOLATE")
    # The job lives between 5 and 6 s, so at least 2.5 s must have passed.
    assert time.monotonic() - start >= 2.4
    assert set(replies[:-1]) <= {b":3\r\n"}, replies


# ------------------------------------------------------------------ timers

def test_delay_queues_the_job_after_the_delay(raw):
    start = time.monotonic()
    job = new_job(raw, "dq", "later", "0", "DELAY", "1")
    assert qlen(raw, "dq") == 0
    assert show(raw, job)[b"state"] == b"active"
    assert raw.call("GETJOB", "NOHANG", "FROM", "dq") == b"*-1\r\n"
    wait_for(lambda: qlen(raw, "dq") == 1, timeout=15, message="the delayed job queued")
    assert time.monotonic() - start >= 0.9
    # The first queueing is not a re-delivery.
    assert raw.call("GETJOB", "WITHCOUNTERS", "FROM", "dq") == \
        getjob_reply(b"dq", job, b"later", (0, 0))


def test_delay_makes_a_blocked_getjob_return_when_due(server, raw):
    consumer = server.raw()
    job = new_job(raw, "dq", "later", "0", "DELAY", "1")
    assert consumer.call("GETJOB", "TIMEOUT", "15000", "FROM", "dq") == \
        getjob_reply(b"dq", job, b"later")


def test_retry_requeues_an_unacked_fetched_job_and_counts_it(raw):
    start = time.monotonic()
    job = new_job(raw, "rq", "again", "0", "RETRY", "1")
    assert raw.call("GETJOB", "FROM", "rq") == getjob_reply(b"rq", job, b"again")
    assert qlen(raw, "rq") == 0
    wait_for(lambda: qlen(raw, "rq") == 1, timeout=15, message="the job re-queued")
    assert time.monotonic() - start >= 0.7          # RETRY 1 s, jitter at most 250 ms
    assert raw.call("GETJOB", "WITHCOUNTERS", "FROM", "rq") == \
        getjob_reply(b"rq", job, b"again", (0, 1))
    wait_for(lambda: qlen(raw, "rq") == 1, timeout=15, message="the job re-queued again")
    info = show(raw, job)
    assert (info[b"nacks"], info[b"additional-deliveries"]) == (0, 2)


def test_retry_does_not_requeue_an_acked_job(raw):
    job = new_job(raw, "rq", "x", "0", "RETRY", "1")
    control = new_job(raw, "ctl", "y", "0", "RETRY", "1")
    raw.call("GETJOB", "COUNT", "2", "FROM", "rq", "ctl")
    assert raw.call("ACKJOB", job) == b":1\r\n"
    wait_for(lambda: qlen(raw, "ctl") == 1, timeout=15, message="the control job re-queued")
    assert qlen(raw, "rq") == 0
    assert raw.call("SHOW", job) == NIL
    assert show(raw, control)[b"additional-deliveries"] == 1


def test_retry_0_never_requeues(raw):
    once = new_job(raw, "once", "x", "0", "RETRY", "0", "TTL", "60")
    control = new_job(raw, "again", "y", "0", "RETRY", "1", "TTL", "60")
    raw.call("GETJOB", "COUNT", "2", "FROM", "once", "again")
    # Let the control job be re-delivered twice: the timers certainly ran
    # past any moment the at-most-once job could have been re-queued.
    wait_for(lambda: qlen(raw, "again") == 1, timeout=15, message="control re-queued")
    raw.call("GETJOB", "FROM", "again")
    wait_for(lambda: qlen(raw, "again") == 1, timeout=15, message="control re-queued twice")
    assert qlen(raw, "once") == 0
    info = show(raw, once)
    assert info[b"state"] == b"active"
    assert info[b"next-requeue-within"] is None
    assert info[b"additional-deliveries"] == 0
    assert show(raw, control)[b"additional-deliveries"] == 2


def test_ttl_expires_jobs_in_every_state(server, raw):
    # TTL 3: each job lives more than 2 s (the setup takes milliseconds)
    # and at most 3 s, plus the server's expiry granularity.
    jobs = {}
    jobs["queued"] = new_job(raw, "t1", "a", "0", "TTL", "3")
    jobs["fetched"] = new_job(raw, "t2", "b", "0", "TTL", "3")
    raw.call("GETJOB", "FROM", "t2")
    jobs["dequeued"] = new_job(raw, "t3", "c", "0", "TTL", "3")
    raw.call("DEQUEUE", jobs["dequeued"])
    jobs["at-most-once fetched"] = new_job(raw, "t4", "d", "0", "TTL", "3", "RETRY", "0")
    raw.call("GETJOB", "FROM", "t4")
    jobs["queued in a paused queue"] = new_job(raw, "t5", "e", "0", "TTL", "3")
    raw.call("PAUSE", "t5", "all")
    jobs["nacked"] = new_job(raw, "t6", "f", "0", "TTL", "3")
    raw.call("GETJOB", "FROM", "t6")
    raw.call("NACK", jobs["nacked"])
    states = {name: show(raw, job)[b"state"] for name, job in jobs.items()}
    assert states == {"queued": b"queued", "fetched": b"active", "dequeued": b"active",
                      "at-most-once fetched": b"active", "queued in a paused queue": b"queued",
                      "nacked": b"queued"}

    def alive():
        return [name for name, job in jobs.items() if raw.call("SHOW", job) != NIL]
    try:
        wait_for(lambda: not alive(), timeout=20, interval=0.1, message="jobs to expire")
    except AssertionError:
        raise AssertionError(f"not expired: {alive()}") from None
    for queue in ("t1", "t2", "t3", "t4", "t5", "t6"):
        assert qlen(raw, queue) == 0, queue
    assert raw.call("JSCAN", "BUSYLOOP") == b"*2\r\n$1\r\n0\r\n*0\r\n"


def test_ttl_does_not_expire_a_job_early(raw):
    start = time.monotonic()
    job = new_job(raw, "t", "a", "0", "TTL", "2")
    wait_for(lambda: raw.call("SHOW", job) == NIL, timeout=20, message="the job to expire")
    assert time.monotonic() - start >= 0.9


def test_maxmemory_is_a_hard_cap_for_a_job_with_a_large_body(make_server):
    # The estimate of held memory plus the incoming job must fit: a body
    # larger than maxmemory is refused as Disque refuses it, not stored.
    node = make_server("capped", args=["--maxmemory", "2mb"]).start()
    raw = node.raw()
    assert raw.call("ADDJOB", "q", "x" * (3 * 1024 * 1024), "0") == \
        b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
    assert raw.call("QLEN", "q") == b":0\r\n"
    assert raw.call("ADDJOB", "q", "small", "0").startswith(b"+D-")
