"""Commands by direct dispatch: argv in, reply value out, no sockets.

Replies are encoded with resp.encode and compared with the bytes Disque
1.0-rc1 sends for the same request (its wording is in src/job.c,
src/queue.c, src/ack.c and src/server.c; checked against the binary).
"""

from __future__ import annotations

import pytest

from disque_py.commands.context import Park
from disque_py.commands.queues import render_outcome
from disque_py.base.effects import Unblock
from disque_py.engine import BUCKET_MS
from disque_py.node.waiters import TIMED_OUT
from disque_py.formats.resp import encode
from disque_py.server.state import ServerState
from tests.unit.conftest import NODE_ID, START_MS

SYNTAX = b"-ERR syntax error\r\n"
NOT_INTEGER = b"-ERR value is not an integer or out of range\r\n"
BADID = b"-BADID Invalid Job ID format.\r\n"
NOJOB = b"-NOJOB Job not known in the context of this node.\r\n"
NULL_ARRAY = b"*-1\r\n"
UNKNOWN_ID = b"D-abcdef01-" + b"A" * 24 + b"-0001"
# Disque only checks length, the leading "D-" and the dashes at 10 and 35.
ODD_CHARSET_ID = b"D-zzzzzzzz-" + b"!" * 24 + b"-zzzz"


def make_config():
    try:
        from disque_py.config import Config
    except ImportError:                    # the config layer is not there yet
        return {"rename-command": [], "requirepass": "", "hz": 10, "maxclients": 10000}
    return Config()


@pytest.fixture
def server(node):
    return ServerState(node, make_config())


@pytest.fixture
def session(server):
    return server.new_session()


def _argv(args):
    return [a if isinstance(a, bytes) else str(a).encode() for a in args]


@pytest.fixture
def call(server, session):
    """call(*args) -> the reply value of one command."""

    def run(*args):
        return server.commands.dispatch(server, session, _argv(args))

    return run


@pytest.fixture
def wire(call):
    """wire(*args) -> the reply bytes of one command."""

    def run(*args):
        reply = call(*args)
        assert not isinstance(reply, Park), "command parked unexpectedly"
        return encode(reply)

    return run


def ids_of(items) -> list[bytes]:
    """JSCAN's IDs arrive as status replies (+D-...\r\n), as in Disque."""
    return [job_id_of(bytes(item)) for item in items]


def job_id_of(reply_bytes: bytes) -> bytes:
    assert reply_bytes.startswith(b"+D-") and reply_bytes.endswith(b"\r\n")
    return reply_bytes[1:-2]


@pytest.fixture
def addjob(wire):
    def run(queue=b"q", body=b"body", *options):
        return job_id_of(wire("ADDJOB", queue, body, 0, *options))

    return run


def job_reply(queue: bytes, job_id: bytes, body: bytes) -> bytes:
    return b"*3\r\n$%d\r\n%b\r\n$40\r\n%b\r\n$%d\r\n%b\r\n" % (
        len(queue), queue, job_id, len(body), body)


def job_reply_with_counters(queue, job_id, body, nacks, deliveries) -> bytes:
    return (b"*7\r\n$%d\r\n%b\r\n$40\r\n%b\r\n$%d\r\n%b\r\n" % (
        len(queue), queue, job_id, len(body), body)
        + b"$5\r\nnacks\r\n:%d\r\n$21\r\nadditional-deliveries\r\n:%d\r\n" % (
            nacks, deliveries))


def err(message: str) -> bytes:
    return b"-ERR " + message.encode() + b"\r\n"


# ---------------------------------------------------------------- dispatcher


def test_unknown_command(wire):
    assert wire("foo") == b"-ERR unknown command 'foo'\r\n"


def test_unknown_command_keeps_the_name_as_sent(wire):
    assert wire("FOO", "bar") == b"-ERR unknown command 'FOO'\r\n"


def test_wrong_arity_names_the_command_in_lower_case(wire):
    assert wire("ADDJOB", "q") == b"-ERR wrong number of arguments for 'addjob' command\r\n"


@pytest.mark.parametrize("argv, name", [
    (["getjob"], b"getjob"),
    (["qlen"], b"qlen"),
    (["qlen", "a", "b"], b"qlen"),
    (["qpeek", "q"], b"qpeek"),
    (["working"], b"working"),
    (["working", "a", "b"], b"working"),
    (["show"], b"show"),
    (["qstat"], b"qstat"),
    (["pause", "q"], b"pause"),
    (["addjob", "q", "body"], b"addjob"),
])
def test_wrong_arity(wire, argv, name):
    assert wire(*argv) == b"-ERR wrong number of arguments for '%b' command\r\n" % name


def test_a_raised_error_comes_back_without_its_frames(call):
    # Replies are values: a traceback would keep the handler's frames (and
    # the error they hold) alive in a cycle only a full collection frees.
    reply = call("ACKJOB", "not-an-id")
    assert encode(reply) == BADID
    assert reply.__traceback__ is None and reply.__context__ is None


def test_command_names_are_case_insensitive(wire):
    assert wire("QlEn", "q") == b":0\r\n"


def test_noauth_when_password_required(server, wire):
    server.set_requirepass("secret")
    assert wire("ADDJOB", "q", "body", 0) == b"-NOAUTH Authentication required.\r\n"
    assert wire("QLEN", "q") == b"-NOAUTH Authentication required.\r\n"


def test_unknown_command_checked_before_auth(server, wire):
    server.set_requirepass("secret")
    assert wire("foo") == b"-ERR unknown command 'foo'\r\n"


def test_arity_checked_before_auth(server, wire):
    server.set_requirepass("secret")
    assert wire("qlen") == b"-ERR wrong number of arguments for 'qlen' command\r\n"


def test_auth_with_wrong_password(server, wire):
    server.set_requirepass("secret")
    assert wire("AUTH", "nope") == b"-ERR invalid password\r\n"
    assert wire("QLEN", "q") == b"-NOAUTH Authentication required.\r\n"


def test_auth_then_commands_run(server, wire):
    server.set_requirepass("secret")
    assert wire("AUTH", "secret") == b"+OK\r\n"
    assert wire("QLEN", "q") == b":0\r\n"


def test_auth_without_password_set(wire):
    assert wire("AUTH", "x") == b"-ERR Client sent AUTH, but no password is set\r\n"


# -------------------------------------------------------------------- ADDJOB


def test_addjob_replies_with_job_id_as_status(wire, node):
    reply = wire("ADDJOB", "q", "body", 0)
    job_id = job_id_of(reply)
    assert len(job_id) == 40
    assert job_id.startswith(b"D-" + NODE_ID[:8] + b"-")
    assert node.lookup(job_id).body == b"body"


def test_addjob_defaults(addjob, node):
    job = node.lookup(addjob())
    assert (job.repl, job.delay, job.retry) == (1, 0, 300)
    assert job.etime == START_MS // 1000 + 86400


def test_addjob_all_options(addjob, node):
    job_id = addjob(b"q", b"body", "REPLICATE", 1, "DELAY", 3, "RETRY", 5, "TTL", 100,
                    "MAXLEN", 10, "ASYNC")
    job = node.lookup(job_id)
    assert (job.repl, job.delay, job.retry) == (1, 3, 5)
    assert job.etime == START_MS // 1000 + 100
    assert node.queue_length(b"q") == 0         # delayed


def test_addjob_options_are_case_insensitive(addjob, node):
    job = node.lookup(addjob(b"q", b"b", "ttl", 100, "Retry", 7, "async"))
    assert (job.retry, job.etime) == (7, START_MS // 1000 + 100)


def test_addjob_last_option_wins(addjob, node):
    job = node.lookup(addjob(b"q", b"b", "TTL", 100, "TTL", 200))
    assert job.etime == START_MS // 1000 + 200


@pytest.mark.parametrize("value", ["+5", "005", "5", b"5\0junk"])
def test_addjob_numbers_as_strtoll_reads_them(addjob, node, value):
    job = node.lookup(addjob(b"q", b"b", "RETRY", value))
    assert job.retry == 5


REPLICATE_RANGE = err("REPLICATE must be between 1 and 65535")
TTL_POSITIVE = err("TTL must be a number > 0")
RETRY_NON_NEGATIVE = err("RETRY time must be a non negative number")
DELAY_NON_NEGATIVE = err("DELAY time must be a non negative number")
MAXLEN_POSITIVE = err("MAXLEN must be a positive number")


@pytest.mark.parametrize("options, reply", [
    (["REPLICATE", "0"], REPLICATE_RANGE),
    (["REPLICATE", "65536"], REPLICATE_RANGE),
    (["REPLICATE", "abc"], REPLICATE_RANGE),
    (["REPLICATE", "-1"], REPLICATE_RANGE),
    (["TTL", "0"], TTL_POSITIVE),
    (["TTL", "-5"], TTL_POSITIVE),
    (["TTL", "abc"], TTL_POSITIVE),
    (["TTL", " 5"], TTL_POSITIVE),
    (["TTL", "5s"], TTL_POSITIVE),
    (["TTL", ""], TTL_POSITIVE),
    (["TTL", "99999999999999999999"], TTL_POSITIVE),
    (["RETRY", "-1"], RETRY_NON_NEGATIVE),
    (["RETRY", "x"], RETRY_NON_NEGATIVE),
    (["DELAY", "-1"], DELAY_NON_NEGATIVE),
    (["DELAY", "1.5"], DELAY_NON_NEGATIVE),
    (["MAXLEN", "0"], MAXLEN_POSITIVE),
    (["MAXLEN", "-3"], MAXLEN_POSITIVE),
    (["MAXLEN", "x"], MAXLEN_POSITIVE),
    (["FOO"], SYNTAX),
    (["TTL"], SYNTAX),
    (["RETRY", "5", "DELAY"], SYNTAX),
    (["ASYNC", "ASYNC", "BAR"], SYNTAX),
])
def test_addjob_bad_option(wire, node, options, reply):
    assert wire("ADDJOB", "q", "body", 0, *options) == reply
    assert len(node.jobs) == 0


def test_addjob_timeout_not_integer(wire):
    assert wire("ADDJOB", "q", "body", "abc") == \
        err("timeout is not an integer or out of range")


def test_addjob_timeout_negative(wire):
    assert wire("ADDJOB", "q", "body", -1) == err("timeout is negative")


def test_addjob_options_checked_before_timeout(wire):
    assert wire("ADDJOB", "q", "body", "abc", "TTL", 0) == TTL_POSITIVE
    assert wire("ADDJOB", "q", "body", "abc", "FOO") == SYNTAX


def test_addjob_retry0_with_replicate2(wire):
    assert wire("ADDJOB", "q", "body", 0, "RETRY", 0, "REPLICATE", 2) == err(
        "With RETRY set to 0 please explicitly set  REPLICATE to 1 (at-most-once delivery)")


def test_addjob_timeout_checked_before_semantics(wire):
    assert wire("ADDJOB", "q", "body", -1, "RETRY", 0, "REPLICATE", 2) == \
        err("timeout is negative")


def test_addjob_delay_not_below_ttl(wire):
    assert wire("ADDJOB", "q", "body", 0, "DELAY", 10, "TTL", 10) == err(
        "The specified DELAY is greater than TTL. Job refused since would never be delivered")


def test_addjob_replicate_2_on_lone_node(wire):
    assert wire("ADDJOB", "q", "body", 0, "REPLICATE", 2) == \
        b"-NOREPL Not enough reachable nodes for the requested replication level\r\n"


def test_addjob_maxlen_reached(wire, addjob):
    addjob()
    assert wire("ADDJOB", "q", "body", 0, "MAXLEN", 1) == \
        b"-MAXLEN Queue is already longer than the specified MAXLEN count\r\n"


def test_addjob_paused_queue(wire):
    assert wire("PAUSE", "q", "in") == b"+in\r\n"
    assert wire("ADDJOB", "q", "body", 0) == b"-PAUSED Queue paused in input, try later\r\n"


# -------------------------------------------------------------------- GETJOB


def test_getjob_reply_bytes(wire, addjob):
    job_id = addjob(b"q", b"hello")
    assert wire("GETJOB", "FROM", "q") == b"*1\r\n" + job_reply(b"q", job_id, b"hello")


def test_getjob_withcounters_reply_bytes(wire, addjob):
    job_id = addjob(b"q", b"hello")
    wire("GETJOB", "FROM", "q")
    wire("NACK", job_id)
    assert wire("GETJOB", "WITHCOUNTERS", "FROM", "q") == \
        b"*1\r\n" + job_reply_with_counters(b"q", job_id, b"hello", 1, 0)


def test_getjob_count_across_queues(wire, addjob):
    a1, a2 = addjob(b"a", b"1"), addjob(b"a", b"2")
    b1 = addjob(b"b", b"3")
    assert wire("GETJOB", "COUNT", 3, "FROM", "a", "b") == b"*3\r\n" + \
        job_reply(b"a", a1, b"1") + job_reply(b"b", b1, b"3") + job_reply(b"a", a2, b"2")


def test_getjob_options_are_case_insensitive(wire, addjob):
    job_id = addjob(b"q", b"x")
    assert wire("getjob", "nohang", "count", 5, "timeout", 10, "from", "q") == \
        b"*1\r\n" + job_reply(b"q", job_id, b"x")


def test_getjob_nohang_on_empty_queue(wire):
    assert wire("GETJOB", "NOHANG", "FROM", "q") == NULL_ARRAY


def test_getjob_nohang_on_paused_out_queue(wire, addjob):
    addjob()
    wire("PAUSE", "q", "out")
    assert wire("GETJOB", "NOHANG", "FROM", "q") == NULL_ARRAY


@pytest.mark.parametrize("argv, reply", [
    (["GETJOB", "FROM"], SYNTAX),
    (["GETJOB", "NOHANG"], SYNTAX),
    (["GETJOB", "q"], SYNTAX),
    (["GETJOB", "FOO", "FROM", "q"], SYNTAX),
    (["GETJOB", "TIMEOUT"], SYNTAX),
    (["GETJOB", "COUNT"], SYNTAX),
    (["GETJOB", "NOHANG", "COUNT", 1], SYNTAX),
    (["GETJOB", "COUNT", 0, "FROM", "q"], err("COUNT must be a number greater than zero")),
    (["GETJOB", "COUNT", -1, "FROM", "q"], err("COUNT must be a number greater than zero")),
    (["GETJOB", "COUNT", "abc", "FROM", "q"], err("COUNT must be a number greater than zero")),
    (["GETJOB", "TIMEOUT", -1, "FROM", "q"], err("timeout is negative")),
    (["GETJOB", "TIMEOUT", "abc", "FROM", "q"],
     err("timeout is not an integer or out of range")),
])
def test_getjob_bad_arguments(wire, argv, reply):
    assert wire(*argv) == reply


def test_getjob_words_after_from_are_queue_names(call):
    reply = call("GETJOB", "FROM", "q", "NOHANG")
    assert isinstance(reply, Park)
    assert reply.waiter.queues == (b"q", b"NOHANG")


def test_getjob_blocks_and_is_served_by_a_later_addjob(call, node, addjob):
    parked = call("GETJOB", "FROM", "q")
    assert isinstance(parked, Park)
    job_id = addjob(b"q", b"late")
    node.consumers.serve_ready()
    [effect] = node.take_effects()
    assert effect.waiter is parked.waiter
    assert encode(render_outcome(effect.waiter, effect.outcome)) == \
        b"*1\r\n" + job_reply(b"q", job_id, b"late")


def test_getjob_blocked_withcounters_reply(call, node, addjob):
    parked = call("GETJOB", "WITHCOUNTERS", "FROM", "q")
    job_id = addjob(b"q", b"x")
    node.consumers.serve_ready()
    [effect] = node.take_effects()
    assert effect.waiter is parked.waiter
    assert encode(render_outcome(effect.waiter, effect.outcome)) == \
        b"*1\r\n" + job_reply_with_counters(b"q", job_id, b"x", 0, 0)


def test_getjob_timeout_replies_null_array(call, node, clock):
    parked = call("GETJOB", "TIMEOUT", 100, "FROM", "q")
    clock.advance(100)
    node.tick()
    assert node.take_effects() == [Unblock(parked.waiter, TIMED_OUT)]
    assert encode(render_outcome(parked.waiter, TIMED_OUT)) == NULL_ARRAY


def test_getjob_timeout_zero_blocks_forever(call, node, clock):
    parked = call("GETJOB", "TIMEOUT", 0, "FROM", "q")
    assert parked.waiter.deadline == 0
    clock.advance(10 ** 9)
    node.tick()
    assert node.take_effects() == []


def test_getjob_blocked_client_counted_by_qstat(call, wire):
    call("GETJOB", "FROM", "q")
    reply = wire("QSTAT", "q")
    assert b"$7\r\nblocked\r\n:1\r\n" in reply


def test_getjob_leaving_node_refuses_to_block(wire, node):
    node.leaving = True
    assert wire("GETJOB", "FROM", "q") == \
        b"-LEAVING This node is leaving the cluster, please connect to a different one\r\n"


# ------------------------------------------------------- ACKJOB / FASTACK / DELJOB


@pytest.mark.parametrize("command", ["ACKJOB", "FASTACK", "DELJOB", "NACK", "ENQUEUE",
                                     "DEQUEUE"])
def test_id_list_commands_without_ids_reply_zero(wire, command):
    assert wire(command) == b":0\r\n"


@pytest.mark.parametrize("command", ["ACKJOB", "FASTACK", "DELJOB", "NACK", "ENQUEUE",
                                     "DEQUEUE", "SHOW", "WORKING"])
@pytest.mark.parametrize("bad_id", [b"foo", UNKNOWN_ID[:-1], UNKNOWN_ID + b"0",
                                    b"X" + UNKNOWN_ID[1:],
                                    UNKNOWN_ID[:10] + b"_" + UNKNOWN_ID[11:]])
def test_malformed_id_is_badid(wire, command, bad_id):
    assert wire(command, bad_id) == BADID


@pytest.mark.parametrize("command", ["ACKJOB", "FASTACK", "DELJOB", "NACK", "ENQUEUE",
                                     "DEQUEUE"])
def test_one_bad_id_means_nothing_is_done(wire, addjob, node, command):
    job_id = addjob()
    if command in ("NACK", "ENQUEUE"):
        wire("GETJOB", "FROM", "q")
    before = (len(node.jobs), node.queue_length(b"q"))
    assert wire(command, job_id, b"bad") == BADID
    assert (len(node.jobs), node.queue_length(b"q")) == before


@pytest.mark.parametrize("command", ["ACKJOB", "FASTACK", "DELJOB", "NACK", "ENQUEUE",
                                     "DEQUEUE", "SHOW", "WORKING"])
def test_id_with_disque_shape_but_odd_characters_is_badid(wire, command):
    """Beyond Disque, which checks only the length, "D-" and the dashes: an ID
    whose node part is not hex, random part not base64 or TTL not hex is not
    well formed, and gets -BADID like any other malformed ID."""
    assert wire(command, ODD_CHARSET_ID) == BADID


def test_ackjob_counts_known_jobs(wire, addjob, node):
    a, b = addjob(), addjob()
    assert wire("ACKJOB", a, b, UNKNOWN_ID) == b":2\r\n"
    assert len(node.jobs) == 0
    assert wire("QLEN", "q") == b":0\r\n"


def test_ackjob_same_id_twice_counts_once(wire, addjob):
    job_id = addjob()
    assert wire("ACKJOB", job_id, job_id) == b":1\r\n"


def test_fastack_counts_known_jobs(wire, addjob, node):
    a = addjob()
    assert wire("FASTACK", a, a, UNKNOWN_ID) == b":1\r\n"
    assert len(node.jobs) == 0


def test_deljob_counts_deleted_jobs(wire, addjob, node):
    a = addjob()
    b = addjob(b"q", b"x", "DELAY", 10)
    assert wire("DELJOB", a, b, UNKNOWN_ID) == b":2\r\n"
    assert len(node.jobs) == 0


# ------------------------------------------------------- NACK / ENQUEUE / DEQUEUE


def test_nack_requeues_and_counts(wire, addjob):
    job_id = addjob()
    wire("GETJOB", "FROM", "q")
    assert wire("NACK", job_id, UNKNOWN_ID) == b":1\r\n"
    assert wire("QLEN", "q") == b":1\r\n"
    assert wire("GETJOB", "WITHCOUNTERS", "FROM", "q") == \
        b"*1\r\n" + job_reply_with_counters(b"q", job_id, b"body", 1, 0)


def test_enqueue_requeues_and_counts_delivery(wire, addjob):
    job_id = addjob()
    wire("GETJOB", "FROM", "q")
    assert wire("ENQUEUE", job_id) == b":1\r\n"
    assert wire("GETJOB", "WITHCOUNTERS", "FROM", "q") == \
        b"*1\r\n" + job_reply_with_counters(b"q", job_id, b"body", 0, 1)


def test_nack_of_queued_job_does_nothing(wire, addjob):
    job_id = addjob()
    assert wire("NACK", job_id) == b":0\r\n"


def test_dequeue(wire, addjob):
    job_id = addjob()
    assert wire("DEQUEUE", job_id, job_id) == b":1\r\n"
    assert wire("QLEN", "q") == b":0\r\n"
    assert wire("DEQUEUE", job_id) == b":0\r\n"


# ------------------------------------------------------------------- WORKING


def test_working_returns_retry(wire, addjob):
    job_id = addjob(b"q", b"b", "RETRY", 42)
    assert wire("WORKING", job_id) == b":42\r\n"
    assert wire("QLEN", "q") == b":0\r\n"          # queued job is taken out


def test_working_unknown_job(wire):
    assert wire("WORKING", UNKNOWN_ID) == NOJOB


def test_working_too_late(wire, addjob, clock):
    job_id = addjob(b"q", b"b", "TTL", 100, "RETRY", 100)
    clock.advance(50_001)
    assert wire("WORKING", job_id) == (b"-TOOLATE Half of job TTL already elapsed, you are "
                                       b"no longer allowed to postpone the next delivery.\r\n")


# ---------------------------------------------------------------------- SHOW


def test_show_unknown_job_is_null(wire):
    assert wire("SHOW", UNKNOWN_ID) == b"$-1\r\n"


def test_show_reply(call, addjob, node, clock):
    job_id = addjob(b"q", b"hello", "RETRY", 10, "TTL", 100)
    job = node.lookup(job_id)
    clock.advance(1000)
    reply = call("SHOW", job_id)
    assert reply[:24] == [
        b"id", job_id, b"queue", b"q", b"state", b"queued", b"repl", 1,
        b"ttl", 99, b"ctime", START_MS * 1_000_000, b"delay", 0, b"retry", 10,
        b"nacks", 0, b"additional-deliveries", 0,
        b"nodes-delivered", [NODE_ID], b"nodes-confirmed", []]
    assert reply[24] == b"next-requeue-within"
    assert reply[25] == job.qtime - clock.now_ms()
    assert 9000 - 250 <= reply[25] < 9000 + 250
    assert reply[26] == b"next-awake-within"
    assert 0 <= reply[27] - (reply[25] - 500) <= BUCKET_MS
    assert reply[28:] == [b"body", b"hello"]
    assert encode(reply).startswith(
        b"*30\r\n$2\r\nid\r\n$40\r\n" + job_id + b"\r\n$5\r\nqueue\r\n$1\r\nq\r\n"
        b"$5\r\nstate\r\n$6\r\nqueued\r\n$4\r\nrepl\r\n:1\r\n$3\r\nttl\r\n:99\r\n")


def test_show_delayed_job_is_active(call, addjob):
    job_id = addjob(b"q", b"x", "DELAY", 5)
    reply = call("SHOW", job_id)
    assert reply[4:6] == [b"state", b"active"]
    assert reply[12:14] == [b"delay", 5]


def test_show_queued_at_most_once_job_never_requeues(call, addjob):
    job_id = addjob(b"q", b"x", "RETRY", 0)
    reply = call("SHOW", job_id)
    assert reply[24:26] == [b"next-requeue-within", None]
    assert b"$19\r\nnext-requeue-within\r\n$-1\r\n" in encode(reply)


# --------------------------------------------------------------------- QLEN


def test_qlen(wire, addjob):
    assert wire("QLEN", "nosuch") == b":0\r\n"
    addjob()
    addjob()
    assert wire("QLEN", "q") == b":2\r\n"


# -------------------------------------------------------------------- QPEEK


def test_qpeek_oldest_first(wire, addjob):
    a, b = addjob(b"q", b"1"), addjob(b"q", b"2")
    addjob(b"q", b"3")
    assert wire("QPEEK", "q", 2) == b"*2\r\n" + job_reply(b"q", a, b"1") + job_reply(b"q", b, b"2")


def test_qpeek_negative_count_newest_first(wire, addjob):
    addjob(b"q", b"1")
    b, c = addjob(b"q", b"2"), addjob(b"q", b"3")
    assert wire("QPEEK", "q", -2) == b"*2\r\n" + job_reply(b"q", c, b"3") + job_reply(b"q", b, b"2")


def test_qpeek_more_than_available(wire, addjob):
    a = addjob(b"q", b"1")
    assert wire("QPEEK", "q", 10) == b"*1\r\n" + job_reply(b"q", a, b"1")
    assert wire("QPEEK", "q", -10) == b"*1\r\n" + job_reply(b"q", a, b"1")


def test_qpeek_zero(wire, addjob):
    addjob()
    assert wire("QPEEK", "q", 0) == b"*0\r\n"


def test_qpeek_does_not_dequeue(wire, addjob):
    addjob()
    wire("QPEEK", "q", 1)
    assert wire("QLEN", "q") == b":1\r\n"


def test_qpeek_missing_or_empty_queue(wire):
    assert wire("QPEEK", "nosuch", 3) == b"*0\r\n"


def test_qpeek_bad_count(wire):
    assert wire("QPEEK", "q", "abc") == NOT_INTEGER
    assert wire("QPEEK", "q", b"x\0") == NOT_INTEGER


def test_a_nul_ends_a_number_as_it_ends_a_c_string(wire, addjob):
    # Disque reads numbers with strtoll on the C string: "\0..." is 0.
    a = addjob(b"q", b"1")
    assert wire("QPEEK", "q", b"1\0x") == b"*1\r\n" + job_reply(b"q", a, b"1")
    assert wire("QPEEK", "q", b"\0\xff") == b"*0\r\n"
    assert wire("QSCAN", b"0\0zz") == b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\nq\r\n"
    assert wire("CONFIG", "SET", b"hz\0x", b"12\0x") == b"+OK\r\n"
    assert wire("CONFIG", "GET", "hz") == b"*2\r\n$2\r\nhz\r\n$2\r\n12\r\n"


# -------------------------------------------------------------------- QSTAT


def qstat_reply(name, length, age, idle, blocked, jobs_in, jobs_out, pause) -> bytes:
    return (b"*20\r\n$4\r\nname\r\n$%d\r\n%b\r\n" % (len(name), name)
            + b"$3\r\nlen\r\n:%d\r\n$3\r\nage\r\n:%d\r\n$4\r\nidle\r\n:%d\r\n" % (length, age, idle)
            + b"$7\r\nblocked\r\n:%d\r\n$11\r\nimport-from\r\n*0\r\n" % blocked
            + b"$11\r\nimport-rate\r\n:0\r\n$7\r\njobs-in\r\n:%d\r\n" % jobs_in
            + b"$8\r\njobs-out\r\n:%d\r\n$5\r\npause\r\n$%d\r\n%b\r\n" % (
                jobs_out, len(pause), pause))


def test_qstat_missing_queue(wire):
    assert wire("QSTAT", "nosuch") == NULL_ARRAY


def test_qstat_reply(wire, addjob, clock):
    addjob()
    addjob()
    wire("GETJOB", "FROM", "q")
    clock.advance(5000)
    assert wire("QSTAT", "q") == qstat_reply(b"q", 1, 5, 5, 0, 2, 1, b"none")


def test_qstat_pause_state(wire):
    wire("PAUSE", "q", "all")
    assert wire("QSTAT", "q") == qstat_reply(b"q", 0, 0, 0, 0, 0, 0, b"all")


# -------------------------------------------------------------------- PAUSE


@pytest.mark.parametrize("options, state", [
    (["in"], b"in"), (["out"], b"out"), (["all"], b"all"), (["in", "out"], b"all"),
    (["IN"], b"in"), (["none"], b"none"), (["all", "none"], b"none"),
    (["none", "in", "state"], b"in"), (["out", "bcast"], b"out"),
])
def test_pause_sets_state(wire, options, state):
    assert wire("PAUSE", "q", *options) == b"+%b\r\n" % state


def test_pause_state_only_reports(wire):
    wire("PAUSE", "q", "out")
    assert wire("PAUSE", "q", "state") == b"+out\r\n"
    assert wire("PAUSE", "q", "bcast") == b"+out\r\n"


def test_pause_replaces_previous_state(wire):
    wire("PAUSE", "q", "in")
    assert wire("PAUSE", "q", "out") == b"+out\r\n"


def test_pause_bad_option_changes_nothing(wire):
    wire("PAUSE", "q", "in")
    assert wire("PAUSE", "q", "out", "foo") == SYNTAX
    assert wire("PAUSE", "q", "state") == b"+in\r\n"


def test_pause_state_of_missing_queue_creates_nothing(wire, node):
    assert wire("PAUSE", "nosuch", "state") == b"+none\r\n"
    assert wire("PAUSE", "nosuch", "none") == b"+none\r\n"
    assert node.queues.get(b"nosuch") is None


def test_pause_out_then_none_serves_blocked_client(call, wire, node, addjob):
    wire("PAUSE", "q", "out")
    parked = call("GETJOB", "FROM", "q")
    job_id = addjob()
    node.consumers.serve_ready()
    assert node.take_effects() == []
    wire("PAUSE", "q", "none")
    node.consumers.serve_ready()
    [effect] = node.take_effects()
    assert effect.waiter is parked.waiter
    assert encode(render_outcome(effect.waiter, effect.outcome)) == \
        b"*1\r\n" + job_reply(b"q", job_id, b"body")


# -------------------------------------------------------------------- QSCAN


def test_qscan_busyloop_lists_every_queue(call, addjob):
    for name in (b"a", b"b", b"c"):
        addjob(name)
    cursor, names = call("QSCAN", "BUSYLOOP")
    assert cursor == b"0"
    assert sorted(names) == [b"a", b"b", b"c"]


def test_qscan_reply_bytes(wire, addjob):
    addjob(b"only")
    assert wire("QSCAN", "BUSYLOOP") == b"*2\r\n$1\r\n0\r\n*1\r\n$4\r\nonly\r\n"


def test_qscan_full_iteration_with_cursor(call, wire):
    names = {b"q%d" % i for i in range(300)}
    for name in names:
        wire("PAUSE", name, "in")
    seen, cursor = set(), b"0"
    for _ in range(10_000):
        cursor, found = call("QSCAN", cursor, "COUNT", 5)
        seen.update(found)
        if cursor == b"0":
            break
    assert seen == names


def test_qscan_minlen_maxlen(call, addjob):
    addjob(b"one")
    for _ in range(3):
        addjob(b"three")
    assert call("QSCAN", "BUSYLOOP", "MINLEN", 2)[1] == [b"three"]
    assert call("QSCAN", "BUSYLOOP", "MAXLEN", 1)[1] == [b"one"]
    assert call("QSCAN", "BUSYLOOP", "MINLEN", 1, "MAXLEN", 3, "COUNT", 10)[1] != []


def test_qscan_importrate_filter(call, addjob):
    addjob(b"q")
    assert call("QSCAN", "BUSYLOOP", "IMPORTRATE", 1)[1] == []


@pytest.mark.parametrize("argv, reply", [
    (["QSCAN", "COUNT", "abc"], NOT_INTEGER),
    (["QSCAN", "MINLEN", "abc"], NOT_INTEGER),
    (["QSCAN", "MAXLEN", "x"], NOT_INTEGER),
    (["QSCAN", "IMPORTRATE", "x"], NOT_INTEGER),
    (["QSCAN", "0", "0"], SYNTAX),
    (["QSCAN", "abc"], err("invalid cursor or option name")),
    (["QSCAN", "COUNT"], err("invalid cursor or option name")),
])
def test_qscan_bad_arguments(wire, argv, reply):
    assert wire(*argv) == reply


# -------------------------------------------------------------------- JSCAN


def test_jscan_busyloop_lists_every_job(call, addjob):
    ids = {addjob(b"a"), addjob(b"b"), addjob(b"b", b"x", "DELAY", 5)}
    cursor, found = call("JSCAN", "BUSYLOOP")
    found = ids_of(found)
    assert cursor == b"0"
    assert set(found) == ids


def test_jscan_reply_ids_are_status_strings(wire, addjob):
    job_id = addjob()
    assert wire("JSCAN", "BUSYLOOP") == b"*2\r\n$1\r\n0\r\n*1\r\n+" + job_id + b"\r\n"


def test_jscan_queue_filter(call, addjob):
    addjob(b"a")
    b = addjob(b"b")
    assert ids_of(call("JSCAN", "BUSYLOOP", "QUEUE", "b")[1]) == [b]


def test_jscan_state_filters_are_ored(call, addjob):
    queued = addjob(b"q")
    delayed = addjob(b"q", b"x", "DELAY", 5)
    assert ids_of(call("JSCAN", "BUSYLOOP", "STATE", "queued")[1]) == [queued]
    assert ids_of(call("JSCAN", "BUSYLOOP", "STATE", "ACTIVE")[1]) == [delayed]
    assert set(ids_of(call("JSCAN", "BUSYLOOP", "STATE", "queued", "STATE", "active")[1])) == \
        {queued, delayed}
    assert ids_of(call("JSCAN", "BUSYLOOP", "STATE", "acked")[1]) == []


def test_jscan_reply_all_is_show_format(call, addjob):
    job_id = addjob()
    cursor, found = call("JSCAN", "BUSYLOOP", "REPLY", "all")
    assert found == [call("SHOW", job_id)]


def test_jscan_skips_dummy_acks(call, wire, node):
    node.cluster_size = 2
    wire("ACKJOB", UNKNOWN_ID)
    assert node.lookup(UNKNOWN_ID) is not None
    assert ids_of(call("JSCAN", "BUSYLOOP")[1]) == []


def test_jscan_full_iteration_with_cursor(call, addjob):
    ids = {addjob(b"q", b"%d" % i) for i in range(500)}
    seen, cursor = set(), b"0"
    for _ in range(100_000):
        cursor, found = call("JSCAN", cursor, "COUNT", 10)
        seen.update(ids_of(found))
        if cursor == b"0":
            break
    assert seen == ids


@pytest.mark.parametrize("argv, reply", [
    (["JSCAN", "STATE", "foo"], err("Invalid job state name")),
    (["JSCAN", "REPLY", "foo"], err("Invalid REPLY type, try ID or ALL")),
    (["JSCAN", "COUNT", "abc"], NOT_INTEGER),
    (["JSCAN", "0", "1"], SYNTAX),
    (["JSCAN", "abc"], err("invalid cursor or option name")),
])
def test_jscan_bad_arguments(wire, argv, reply):
    assert wire(*argv) == reply
