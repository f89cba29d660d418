"""ADDJOB ... DEDUP key [WINDOW seconds] over real sockets: a duplicate gets
the first job's ID byte for byte and makes no job (before the checks a new
job must pass), the error for every bad argument, the key outliving its
acknowledged job, the window's end, SHOW's fields, the bounded table (-OOM,
INFO, CONFIG SET), and keys surviving an AOF rewrite and a kill -9 (those
whose job is gone included)."""

from __future__ import annotations

import time

import pytest

from tests.persistence.helpers import check_aof, wait_rewrite_done
from tests.support import bulk, wait_for

pytestmark = pytest.mark.timeout(120)

SYNTAX = b"-ERR syntax error\r\n"
KEY_SIZE = b"-ERR DEDUP key must be 1 to 1024 bytes\r\n"
WINDOW_RANGE = b"-ERR WINDOW must be a number > 0\r\n"


@pytest.fixture
def raw(server):
    return server.raw()


def add(raw, *options, queue="q", body="body") -> bytes:
    reply = raw.call("ADDJOB", queue, body, "0", *options)
    assert reply.startswith(b"+D-"), reply
    return reply


def info(raw, section: str) -> dict[str, str]:
    text = raw.call("INFO", section).split(b"\r\n", 1)[1].decode()
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def test_a_duplicate_gets_the_first_reply_byte_for_byte_and_no_job(raw):
    first = add(raw, "DEDUP", "order-17")
    assert raw.call("ADDJOB", "q", "other body", "0", "DEDUP", "order-17", "TTL", "60") == first
    assert raw.call("QLEN", "q") == b":1\r\n"
    assert info(raw, "stats")["total_dedup_hits"] == "1"
    assert info(raw, "jobs")["registered_jobs"] == "1"


def test_the_same_key_in_another_queue_is_another_job(raw):
    assert add(raw, "DEDUP", "k", queue="a") != add(raw, "DEDUP", "k", queue="b")


def test_redis_py_gets_the_same_id_with_resp2_and_resp3(server):
    for protocol in (2, 3):
        client = server.client(protocol=protocol)
        first = client.execute_command("ADDJOB", "q", "b", 0, "DEDUP", f"p{protocol}")
        assert client.execute_command("ADDJOB", "q", "b", 0, "DEDUP", f"p{protocol}") == first


def test_every_bad_argument_gets_its_error(raw):
    assert raw.call("ADDJOB", "q", "b", "0", "WINDOW", "10") == b"-ERR WINDOW needs DEDUP\r\n"
    assert raw.call("ADDJOB", "q", "b", "0", "DEDUP", "") == KEY_SIZE
    assert raw.call("ADDJOB", "q", "b", "0", "DEDUP", "x" * 1025) == KEY_SIZE
    for window in ("0", "-1", "ten", "4294967296"):
        assert raw.call("ADDJOB", "q", "b", "0", "DEDUP", "k", "WINDOW", window) == WINDOW_RANGE
    assert raw.call("ADDJOB", "q", "b", "0", "DEDUP") == SYNTAX
    assert raw.call("ADDJOB", "q", "b", "0", "DEDUP", "k", "WINDOW") == SYNTAX
    assert raw.call("QLEN", "q") == b":0\r\n"
    assert add(raw, "DEDUP", "x" * 1024)          # the longest key


def test_a_duplicate_is_answered_before_the_checks_a_new_job_must_pass(raw):
    first = add(raw, "DEDUP", "k")
    assert raw.call("PAUSE", "q", "in") == b"+in\r\n"
    assert raw.call("ADDJOB", "q", "b", "0", "DEDUP", "k") == first
    assert raw.call("ADDJOB", "q", "b", "0", "DEDUP", "k", "MAXLEN", "1") == first
    assert raw.call("ADDJOB", "q", "b", "0", "DEDUP", "k", "DELAY", "9", "TTL", "5") == first
    assert raw.call("ADDJOB", "q", "b", "0", "DEDUP", "new").startswith(b"-PAUSED")
    assert raw.call("PAUSE", "q", "none") == b"+none\r\n"
    assert add(raw, "DEDUP", "new") != first      # the refused ADDJOB left no key
    assert raw.call("QLEN", "q") == b":2\r\n"
    assert info(raw, "jobs")["registered_jobs"] == "2"


def test_the_key_outlives_its_acknowledged_job(raw):
    first = add(raw, "DEDUP", "once")
    job_id = first[1:-2].decode()
    assert raw.call("GETJOB", "FROM", "q").startswith(b"*1")
    assert raw.call("ACKJOB", job_id) == b":1\r\n"
    wait_for(lambda: raw.call("SHOW", job_id) == b"$-1\r\n", message="the acked job is gone")
    assert add(raw, "DEDUP", "once") == first
    assert raw.call("QLEN", "q") == b":0\r\n"


def test_when_the_window_ends_the_key_makes_a_new_job(raw):
    first = add(raw, "DEDUP", "short", "WINDOW", "1")
    wait_for(lambda: info(raw, "memory")["dedup_keys"] == "0", timeout=10,
             message="the key's window ended")
    assert add(raw, "DEDUP", "short") != first
    assert raw.call("QLEN", "q") == b":2\r\n"


def test_show_appends_the_key_and_its_window_end(server, raw):
    before_ms = int(time.time() * 1000)
    job_id = add(raw, "DEDUP", "shown", "WINDOW", "600", "TTL", "60")[1:-2].decode()
    fields = server.client().execute_command("SHOW", job_id)
    shown = dict(zip(fields[::2], fields[1::2]))
    assert shown[b"dedup-key"] == b"shown" and shown[b"priority"] == 5
    assert before_ms + 600_000 <= shown[b"dedup-until"] <= int(time.time() * 1000) + 600_000
    assert raw.call("SHOW", job_id).endswith(bulk("dedup-key") + bulk("shown") +
                                             bulk("dedup-until") + b":%d\r\n"
                                             % shown[b"dedup-until"])


def test_a_full_table_answers_oom_and_info_counts_the_keys(raw):
    assert raw.call("CONFIG", "SET", "dedup-max-keys", "2") == b"+OK\r\n"
    assert raw.call("CONFIG", "GET", "dedup-max-keys") == \
        b"*2\r\n" + bulk("dedup-max-keys") + bulk("2")
    dataset = int(info(raw, "memory")["used_memory_dataset"])
    first = add(raw, "DEDUP", "a")
    add(raw, "DEDUP", "b")
    assert raw.call("ADDJOB", "q", "b", "0", "DEDUP", "c") == \
        b"-OOM DEDUP key table is full (dedup-max-keys 2)\r\n"
    assert add(raw, "DEDUP", "a") == first          # known keys still answer
    add(raw)                                        # jobs without a key are not refused
    memory = info(raw, "memory")
    assert memory["dedup_keys"] == "2" and memory["dedup_max_keys"] == "2"
    assert int(memory["dedup_memory"]) > 0
    assert int(memory["used_memory_dataset"]) > dataset + int(memory["dedup_memory"])
    assert info(raw, "stats")["total_dedup_refused"] == "1"
    assert raw.call("CONFIG", "SET", "dedup-max-keys", "0").startswith(b"-ERR")


def test_keys_survive_a_rewrite_and_a_kill_9_their_jobs_gone_or_not(make_server):
    node = make_server(args=["--appendonly", "yes", "--appendfsync", "always"]).start()
    raw = node.raw()
    kept = add(raw, "DEDUP", "kept", "RETRY", "1")
    acked = add(raw, "DEDUP", "acked")
    assert raw.call("ACKJOB", acked[1:-2].decode()) == b":1\r\n"
    assert raw.call("BGREWRITEAOF").startswith(b"+")
    wait_rewrite_done(node)
    later = add(raw, "DEDUP", "after-rewrite", "RETRY", "1")
    later_acked = add(raw, "DEDUP", "acked-after-rewrite")
    assert raw.call("ACKJOB", later_acked[1:-2].decode()) == b":1\r\n"
    node.kill()
    node.start()
    raw = node.raw()
    assert info(raw, "memory")["dedup_keys"] == "4"
    for key, first in (("kept", kept), ("acked", acked), ("after-rewrite", later),
                       ("acked-after-rewrite", later_acked)):
        assert add(raw, "DEDUP", key) == first
    assert info(raw, "jobs")["registered_jobs"] == "2"
    check = check_aof(node.dir / "disque.aof")
    assert check.returncode == 0, check.stdout + check.stderr
