"""Failed jobs over real sockets: NACK DELAY, ADDJOB BACKOFF and
MAXDELIVERIES/DEADLETTER, QREQUEUE, the SHOW fields they add, every error
they answer, and an AOF restart that keeps them.

A plain job's replies stay Disque's byte for byte (SHOW has its 15 fields);
time-based behaviour is checked with deadlines, and "not yet" only right
after the command, where a loaded machine cannot make it flaky.
"""

from __future__ import annotations

import pytest

from tests.support import RawClient, bulk, wait_for

pytestmark = pytest.mark.timeout(120)

SYNTAX = b"-ERR syntax error\r\n"
BADID = b"-BADID Invalid Job ID format.\r\n"
BACKOFF_RANGE = b"-ERR BACKOFF needs base-ms > 0 and max-ms >= base-ms, both below 2^32\r\n"
MAXDELIVERIES_RANGE = b"-ERR MAXDELIVERIES must be between 1 and 65535\r\n"
NEEDS_MAXDELIVERIES = b"-ERR DEADLETTER needs MAXDELIVERIES\r\n"
SAME_QUEUE = b"-ERR DEADLETTER must name another queue than the job's\r\n"
DELAY_NEGATIVE = b"-ERR DELAY time must be a non negative number\r\n"
COUNT_POSITIVE = b"-ERR COUNT must be a number greater than zero\r\n"
DISQUE_SHOW_FIELDS = 15
OPTION_FIELDS = [b"backoff", b"max-deliveries", b"deadletter", b"dead-reason", b"dead-from",
                 b"priority", b"dedup-key", b"dedup-until"]


@pytest.fixture
def raw(server) -> RawClient:
    return server.raw()


@pytest.fixture
def client(server):
    return server.client()


def add(raw, queue="q", *options) -> bytes:
    reply = raw.call("ADDJOB", queue, "body", "0", *options)
    assert reply.startswith(b"+D-"), reply
    return reply[1:-2]


def show(client, job_id) -> dict:
    reply = client.execute_command("SHOW", job_id)
    return dict(zip(reply[::2], reply[1::2]))


def show_keys(client, job_id) -> list:
    return client.execute_command("SHOW", job_id)[::2]


def deliver(client, queue="q"):
    reply = client.execute_command("GETJOB", "NOHANG", "WITHCOUNTERS", "FROM", queue)
    assert reply, f"nothing queued in {queue}"
    return reply[0]


def qlen(client, queue) -> int:
    return client.execute_command("QLEN", queue)


# ------------------------------------------------------------ errors

@pytest.mark.parametrize("options, error", [
    (("BACKOFF", "0", "100"), BACKOFF_RANGE),
    (("BACKOFF", "200", "100"), BACKOFF_RANGE),
    (("BACKOFF", "100", "4294967296"), BACKOFF_RANGE),
    (("BACKOFF", "x", "100"), BACKOFF_RANGE),
    (("BACKOFF", "100", "-1"), BACKOFF_RANGE),
    (("BACKOFF", "100"), SYNTAX),
    (("MAXDELIVERIES", "0"), MAXDELIVERIES_RANGE),
    (("MAXDELIVERIES", "65536"), MAXDELIVERIES_RANGE),
    (("MAXDELIVERIES", "two"), MAXDELIVERIES_RANGE),
    (("MAXDELIVERIES",), SYNTAX),
    (("DEADLETTER", "dlq"), NEEDS_MAXDELIVERIES),
    (("MAXDELIVERIES", "3", "DEADLETTER", "q"), SAME_QUEUE),
    (("MAXDELIVERIES", "3", "DEADLETTER"), SYNTAX),
])
def test_addjob_answers_each_bad_option_with_its_error(raw, options, error):
    assert raw.call("ADDJOB", "q", "body", "0", *options) == error
    assert raw.call("QLEN", "q") == b":0\r\n"


def test_nack_delay_errors_and_ids_first(raw):
    job_id = add(raw)
    assert raw.call("NACK", job_id, "DELAY", "-1") == DELAY_NEGATIVE
    assert raw.call("NACK", job_id, "DELAY", "soon") == DELAY_NEGATIVE
    assert raw.call("NACK", "DELAY", "5") == BADID           # no ID: Disque's answer
    assert raw.call("NACK", job_id, "DELAY") == BADID


def test_qrequeue_errors(raw):
    assert raw.call("QREQUEUE") == b"-ERR wrong number of arguments for 'qrequeue' command\r\n"
    assert raw.call("QREQUEUE", "q:dead", "COUNT", "0") == COUNT_POSITIVE
    assert raw.call("QREQUEUE", "q:dead", "COUNT", "-2") == COUNT_POSITIVE
    assert raw.call("QREQUEUE", "q:dead", "COUNT") == SYNTAX
    assert raw.call("QREQUEUE", "q:dead", "TO") == SYNTAX
    assert raw.call("QREQUEUE", "q:dead", "FOO", "1") == SYNTAX
    assert raw.call("QREQUEUE", "nothing-here") == b":0\r\n"


# ------------------------------------------------------------ SHOW

def test_a_plain_job_shows_disques_fields_only(raw, client):
    job_id = add(raw)
    keys = show_keys(client, job_id)
    assert len(keys) == DISQUE_SHOW_FIELDS and keys[-1] == b"body"


def test_a_job_with_options_shows_them_after_disques_fields(raw, client):
    job_id = add(raw, "q", "BACKOFF", "100", "5000", "MAXDELIVERIES", "4", "DEADLETTER", "dlq")
    keys = show_keys(client, job_id)
    assert keys[DISQUE_SHOW_FIELDS:] == OPTION_FIELDS
    fields = show(client, job_id)
    assert fields[b"backoff"] == [100, 5000]
    assert fields[b"max-deliveries"] == 4
    assert fields[b"deadletter"] == b"dlq"
    assert fields[b"dead-reason"] is None and fields[b"dead-from"] is None
    assert fields[b"priority"] == 5
    reply = raw.call("SHOW", job_id.decode())
    assert reply.endswith(bulk("dead-reason") + b"$-1\r\n" + bulk("dead-from") + b"$-1\r\n" +
                          bulk("priority") + b":5\r\n" + bulk("dedup-key") + b"$-1\r\n" +
                          bulk("dedup-until") + b"$-1\r\n")


def test_maxdeliveries_alone_shows_no_backoff(raw, client):
    fields = show(client, add(raw, "q", "MAXDELIVERIES", "2"))
    assert fields[b"backoff"] is None and fields[b"max-deliveries"] == 2


# ------------------------------------------------------------ dead letters

def test_the_last_nack_dead_letters_the_job_with_its_counters(raw, client):
    job_id = add(raw, "q", "MAXDELIVERIES", "2")
    deliver(client)
    assert client.execute_command("NACK", job_id) == 1            # delivery 1 of 2
    assert deliver(client)[1] == job_id
    assert client.execute_command("NACK", job_id) == 1            # delivery 2: dead
    assert qlen(client, "q") == 0 and qlen(client, "q:dead") == 1
    fields = show(client, job_id)
    assert fields[b"queue"] == b"q:dead" and fields[b"state"] == b"queued"
    assert fields[b"nacks"] == 2
    assert fields[b"dead-reason"] == b"max-deliveries" and fields[b"dead-from"] == b"q"
    queue, got, body, *counters = deliver(client, "q:dead")
    assert (queue, got, body) == (b"q:dead", job_id, b"body")
    assert counters == [b"nacks", 2, b"additional-deliveries", 0]
    stats = client.info("stats")
    assert stats["total_jobs_dead_lettered"] == 1


def test_a_named_dead_letter_queue_is_a_plain_queue(raw, client):
    job_id = add(raw, "q", "MAXDELIVERIES", "1", "DEADLETTER", "failed")
    deliver(client)
    client.execute_command("NACK", job_id)
    assert qlen(client, "failed") == 1
    assert client.execute_command("QPEEK", "failed", 1)[0][1] == job_id
    assert client.execute_command("QSTAT", "failed")[1] == b"failed"
    assert deliver(client, "failed")[1] == job_id
    assert client.execute_command("ENQUEUE", job_id) == 1         # back in "failed"
    assert qlen(client, "failed") == 1
    assert client.execute_command("ACKJOB", job_id) == 1
    assert qlen(client, "failed") == 0


def test_retry_timeouts_count_as_deliveries_and_dead_letter(raw, client):
    job_id = add(raw, "q", "RETRY", "1", "MAXDELIVERIES", "2")
    deliver(client)                                   # delivery 1; RETRY requeues it
    wait_for(lambda: qlen(client, "q") == 1, timeout=15, message="requeued after RETRY")
    deliver(client)                                   # delivery 2; the next requeue kills it
    wait_for(lambda: qlen(client, "q:dead") == 1, timeout=15, message="dead after RETRY")
    fields = show(client, job_id)
    # Both re-queues counted, the one into the dead-letter queue too.
    assert fields[b"additional-deliveries"] == 2 and fields[b"dead-reason"] == b"max-deliveries"


def test_qrequeue_moves_dead_jobs_back_with_fresh_counters(raw, client):
    ids = [add(raw, "q", "MAXDELIVERIES", "1") for _ in range(3)]
    for _ in ids:
        client.execute_command("NACK", deliver(client)[1])
    direct = add(raw, "q:dead")                       # added directly: not dead-lettered
    assert qlen(client, "q:dead") == 4
    assert client.execute_command("QREQUEUE", "q:dead", "COUNT", 2) == 2
    assert qlen(client, "q") == 2
    assert client.execute_command("QREQUEUE", "q:dead", "TO", "retry-later") == 1
    assert qlen(client, "retry-later") == 1 and qlen(client, "q:dead") == 1
    assert client.execute_command("QPEEK", "q:dead", 1)[0][1] == direct
    for job_id in ids:
        fields = show(client, job_id)
        assert fields[b"nacks"] == 0 and fields[b"additional-deliveries"] == 0
        assert fields[b"dead-reason"] is None and fields[b"state"] == b"queued"
    # A fresh try each: one more NACK kills it again.
    job_id = deliver(client)[1]
    client.execute_command("NACK", job_id)
    assert show(client, job_id)[b"queue"] == b"q:dead"


# ------------------------------------------------------------ delays

def test_nack_delay_puts_the_job_back_later_and_counts_at_once(raw, client):
    job_id = add(raw, "q")
    deliver(client)
    assert client.execute_command("NACK", job_id, "DELAY", 1) == 1
    assert qlen(client, "q") == 0                     # not yet: in a second
    assert show(client, job_id)[b"nacks"] == 1
    wait_for(lambda: qlen(client, "q") == 1, timeout=15, message="queued after the delay")
    assert deliver(client)[4] == 1                    # nacks, once


def test_backoff_delays_a_nack_without_delay(raw, client):
    job_id = add(raw, "q", "BACKOFF", "1000", "1000")
    deliver(client)
    assert client.execute_command("NACK", job_id) == 1
    assert qlen(client, "q") == 0                     # backing off about a second
    wait_for(lambda: qlen(client, "q") == 1, timeout=15, message="queued after the backoff")


def test_nack_delay_0_queues_at_once_even_with_backoff(raw, client):
    job_id = add(raw, "q", "BACKOFF", "60000", "60000")
    deliver(client)
    assert client.execute_command("NACK", job_id, "DELAY", 0) == 1
    assert qlen(client, "q") == 1


# ------------------------------------------------------------ AOF

def test_an_aof_restart_keeps_options_and_dead_state(make_server):
    node = make_server(args=["--appendonly", "yes", "--appendfsync", "always"]).start()
    client = node.client()
    live = client.execute_command("ADDJOB", "a", "body", 0, "BACKOFF", 100, 5000,
                                  "MAXDELIVERIES", 3, "DEADLETTER", "dlq")
    dead = client.execute_command("ADDJOB", "b", "body", 0, "MAXDELIVERIES", 1)
    for queue, job_id in (("a", live), ("b", dead)):
        assert client.execute_command("GETJOB", "FROM", queue)[0][1] == job_id
        client.execute_command("NACK", job_id, "DELAY", 0)
    before = {job_id: show(client, job_id) for job_id in (live, dead)}
    assert before[live][b"queue"] == b"a" and before[live][b"nacks"] == 1
    assert before[dead][b"queue"] == b"b:dead"
    assert before[dead][b"dead-reason"] == b"max-deliveries"
    node.kill()
    node.start()
    client = node.client()
    for job_id, fields in before.items():
        after = show(client, job_id)
        for key in (b"queue", b"backoff", b"max-deliveries", b"deadletter", b"dead-reason",
                    b"dead-from"):
            assert after[key] == fields[key], (job_id, key)
    # As in Disque, a NACK is not written to the AOF; a dead-lettering is.
    assert show(client, dead)[b"nacks"] == 1
