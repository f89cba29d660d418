"""The client's sans-IO half: the words each call sends, the answers made
from replies as redis-py hands them over (RESP2 and RESP3 shapes), and
error replies turned into Disque's error classes. No server here: the
integration tests hold these to a real node."""

import pytest
from redis.exceptions import OutOfMemoryError as RedisOOM
from redis.exceptions import ResponseError

from disque_py.client import commands, errors
from disque_py.client.replies import parse_config, parse_info, parse_jobs, parse_qstat
from disque_py.client.serializers import JSON, RAW, serializer_for
from disque_py.client.types import Job, UnreadableBody

JOB_ID = "D-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-05a1"


def test_add_sends_disque_words_in_a_fixed_order():
    call = commands.add(RAW, "q", b"body", {
        "timeout": 100, "dedup": "k", "window": 60, "replicate": 2, "delay": 1, "retry": 30,
        "ttl": 3600, "maxlen": 10, "async_": True, "priority": 9, "backoff": (100, 1000),
        "max_deliveries": 5, "deadletter": "q:bad"})
    assert call.args == (
        b"ADDJOB", b"q", b"body", 100, b"REPLICATE", 2, b"DELAY", 1, b"RETRY", 30, b"TTL", 3600,
        b"MAXLEN", 10, b"PRIORITY", 9, b"MAXDELIVERIES", 5, b"ASYNC", b"BACKOFF", 100, 1000,
        b"DEADLETTER", b"q:bad", b"DEDUP", b"k", b"WINDOW", 60)
    assert call.retry_safe                     # DEDUP makes a second try safe


def test_add_without_options_waits_5_seconds_and_is_not_sent_twice():
    call = commands.add(RAW, "q", "text", {})
    assert call.args == (b"ADDJOB", b"q", b"text", commands.DEFAULT_ADD_TIMEOUT_MS)
    assert not call.retry_safe


def test_add_refuses_an_unknown_option_before_sending():
    with pytest.raises(TypeError, match="replicas"):
        commands.add(RAW, "q", b"x", {"replicas": 2})          # type: ignore[typeddict-unknown-key]


def test_get_reads_queues_or_a_pattern_never_both():
    assert commands.get(("a", "b"), count=5, timeout=10, nohang=True, with_counters=True).args \
        == (b"GETJOB", b"NOHANG", b"TIMEOUT", 10, b"COUNT", 5, b"WITHCOUNTERS", b"FROM", b"a", b"b")
    assert commands.get((), pattern="q:*").args == (b"GETJOB", b"PATTERN", b"q:*")
    for queues, pattern in ((("a",), "q:*"), ((), None)):
        with pytest.raises(ValueError):
            commands.get(queues, pattern=pattern)


def test_calls_naming_jobs_carry_them_for_routing():
    assert commands.ack([JOB_ID]).job_ids == (JOB_ID,)
    assert commands.nack([JOB_ID], delay=3).args == (b"NACK", JOB_ID, b"DELAY", 3)
    with pytest.raises(ValueError):
        commands.ack([])


def test_queue_names_that_are_not_utf8_go_back_as_their_bytes():
    [job] = parse_jobs([[b"q\xff", JOB_ID.encode(), b"x"]], RAW)
    assert commands.qlen(job.queue).args == (b"QLEN", b"q\xff")


def test_jobs_with_and_without_counters():
    reply = [[b"q", JOB_ID.encode(), b'{"a": 1}', b"nacks", 2, b"additional-deliveries", 1]]
    assert parse_jobs(reply, JSON) == [Job(JOB_ID, "q", {"a": 1}, 2, 1)]
    assert parse_jobs(reply, JSON)[0].deliveries == 4
    assert parse_jobs(None, RAW) == []                   # GETJOB's nil (NOHANG, TIMEOUT)


def test_qstat_as_a_flat_array_or_a_map():
    fields = [b"name", b"q", b"len", 1, b"age", 2, b"idle", 0, b"blocked", 0, b"import-from",
              [b"abc"], b"import-rate", 0, b"jobs-in", 3, b"jobs-out", 2, b"pause", b"none"]
    flat = parse_qstat(fields, RAW)
    as_map = parse_qstat(dict(zip(fields[::2], fields[1::2])), RAW)
    assert flat == as_map and flat is not None and flat.import_from == ["abc"]
    assert parse_qstat(None, RAW) is None


def test_config_get_and_info_read_both_protocols():
    assert parse_config([b"maxmemory", b"0"], RAW) == parse_config({b"maxmemory": b"0"}, RAW) \
        == {"maxmemory": "0"}
    text = b"# Server\r\ndisque_version:1.0-rc1\r\ntcp_port:7711\r\n"
    assert parse_info(text, RAW) == parse_info("txt:" + text.decode(), RAW) == \
        {"disque_version": "1.0-rc1", "tcp_port": "7711"}


@pytest.mark.parametrize("raised, expected, message", [
    (ResponseError("PAUSED Queue paused in input, try later"), errors.PausedError,
     "Queue paused in input, try later"),
    (ResponseError("NOREPL Timeout reached"), errors.NoReplError, "Timeout reached"),
    (ResponseError("BADID Invalid Job ID format."), errors.BadIdError, "Invalid Job ID format."),
    (ResponseError("syntax error", status_code="ERR"), errors.CommandError, "syntax error"),
    (RedisOOM("command not allowed", status_code="OOM"), errors.OOMError, "command not allowed"),
    (ResponseError("SOMETHING new"), errors.CommandError, "SOMETHING new"),
])
def test_error_replies_become_the_class_of_their_prefix(raised, expected, message):
    translated = errors.translate(raised)
    assert type(translated) is expected and translated.message == message
    assert translated.__cause__ is raised


def test_serializers_by_name_or_object():
    assert serializer_for(None) is RAW and serializer_for("json") is JSON
    assert RAW.dumps("é") == "é".encode() and JSON.loads(JSON.dumps({"a": [1]})) == {"a": [1]}
    with pytest.raises(TypeError):
        RAW.dumps({"a": 1})
    with pytest.raises(ValueError):
        serializer_for("yaml")


@pytest.mark.parametrize("options, safe", [
    ({}, False),
    ({"dedup": "order-17"}, True),
    ({"dedup": b""}, True),                   # an empty key is a key
    ({"dedup": None}, False),                 # no DEDUP sent: a resend could add twice
    ({"dedup": None, "window": None, "retry": 5}, False),
])
def test_an_add_is_sent_again_only_with_a_dedup_key(options, safe):
    call = commands.add(RAW, "q", b"body", options)
    assert call.retry_safe is safe
    assert (b"DEDUP" in call.args) is safe


@pytest.mark.parametrize("call, blocks_ms", [
    (commands.get(["q"]), 0),                           # 0: for as long as it takes
    (commands.get(["q"], timeout=250), 250),
    (commands.get(["q"], nohang=True), None),
    (commands.wait(["D-1"], timeout=1500), 1500),
    (commands.qwait("q"), 0),
    (commands.qlen("q"), None),
    (commands.add(RAW, "q", b"", {}), 5000),              # waiting for its copies
    (commands.add(RAW, "q", b"", {"timeout": 200}), 200),
    (commands.add(RAW, "q", b"", {"async_": True}), None),
])
def test_a_call_the_server_may_hold_says_for_how_long(call, blocks_ms):
    assert call.blocks_ms == blocks_ms


def test_a_body_the_serializer_cannot_read_does_not_lose_the_others():
    reply = [[b"q", JOB_ID.encode(), b"not json"], [b"q", JOB_ID.encode(), b"[1]"]]
    bad, good = parse_jobs(reply, JSON)
    assert isinstance(bad.body, UnreadableBody) and bad.body.data == b"not json"
    assert "JSONDecodeError" in bad.body.error and good.body == [1]
