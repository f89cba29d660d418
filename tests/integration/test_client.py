"""The client's job and queue methods against a real node, each answer
checked against what the server says (SHOW, QLEN... through plain
redis-py), in every cell of the matrix: Client and AsyncClient, RESP2 and
RESP3, redis-py's Python parser and hiredis (tests/client_support.py).

One server for the module; every test uses its own queue names. Time is
waited for only where it is the point (blocking calls outlasting a short
socket timeout); a delay or a NACK DELAY is seen in SHOW's figures, other
timeouts are a few milliseconds.
"""

from __future__ import annotations

import threading
import time

import pytest
from redis.asyncio.connection import Connection as AsyncConnection
from redis.connection import Connection

from disque_py.client import BadIdError, Job, MaxlenError, PausedError
from tests.client_support import KINDS, connection_in_use, unique
from tests.support import HOST, RawClient, wait_for

pytestmark = pytest.mark.timeout(60)

UNKNOWN_ID = "D-00000000-K7vXjg68Hp5/31rEoNGo2pYA-05a1"   # well formed, made by no node
DISQUE_SHOW_FIELDS = 15


def shown(view, job_id) -> dict:
    """SHOW through plain redis-py: field name (str) -> value."""
    reply = view.execute_command("SHOW", job_id)
    return {key.decode(): value for key, value in zip(reply[::2], reply[1::2])}


# ------------------------------------------------------------------ ADDJOB

def test_add_answers_the_id_of_the_job_the_server_holds(dq, view, queue):
    job_id = dq.add(queue, b"body")
    fields = shown(view, job_id)
    assert (fields["id"].decode(), fields["queue"].decode(), fields["body"]) \
        == (job_id, queue, b"body")
    assert view.execute_command("QLEN", queue) == 1


def _now_ms() -> int:
    return int(time.time() * 1000)


# keyword options -> what SHOW must say of the job they made
ADD_OPTIONS = {
    "replicate": ({"replicate": 1}, lambda info: info.replicate == 1),
    "delay": ({"delay": 60}, lambda info: (info.delay, info.state) == (60, "active")),
    "retry": ({"retry": 42}, lambda info: info.retry == 42),
    "ttl": ({"ttl": 3600}, lambda info: 3598 <= info.ttl <= 3600),      # what is left
    "priority": ({"priority": 8}, lambda info: info.priority == 8),
    "backoff": ({"backoff": (250, 4000)}, lambda info: info.backoff == (250, 4000)),
    "max_deliveries": ({"max_deliveries": 3}, lambda info: info.max_deliveries == 3),
    "deadletter": ({"max_deliveries": 2, "deadletter": "failed-jobs"},
                   lambda info: (info.deadletter, info.max_deliveries) == ("failed-jobs", 2)),
    "dedup": ({"dedup": "order-17"}, lambda info: info.dedup_key == b"order-17"),
    "window": ({"dedup": "order-18", "window": 600},
               lambda info: _now_ms() + 590_000 < info.dedup_until <= _now_ms() + 600_000),
}


@pytest.mark.parametrize("name", ADD_OPTIONS)
def test_each_add_option_is_in_what_show_says_of_the_job(dq, view, queue, name):
    options, holds = ADD_OPTIONS[name]
    job_id = dq.add(queue, b"body", **options)
    info = dq.show(job_id)
    assert holds(info), info
    fields = shown(view, job_id)                 # the client read SHOW as it is
    assert (info.state, info.delay, info.retry, info.priority) == \
        (fields["state"].decode(), fields["delay"], fields["retry"], fields.get("priority", 5))
    assert 0 <= info.ttl - fields["ttl"] <= 1    # seconds left: a second may have turned


def test_delay_keeps_the_job_out_of_its_queue(dq, queue):
    dq.add(queue, b"later", delay=60)
    assert dq.qlen(queue) == 0


def test_dedup_answers_the_first_id_again(dq, view, queue):
    first = dq.add(queue, b"one", dedup="same")
    assert dq.add(queue, b"two", dedup="same") == first
    assert view.execute_command("QLEN", queue) == 1


def test_maxlen_refuses_a_job_once_the_queue_is_that_long(dq, queue):
    dq.add(queue, b"1", maxlen=2)
    dq.add(queue, b"2", maxlen=2)
    with pytest.raises(MaxlenError):
        dq.add(queue, b"3", maxlen=2)
    assert dq.qlen(queue) == 2


def _monitored_addjob(module_server, queue, add) -> str:
    """The ADDJOB line MONITOR shows for the call `add` makes on `queue`."""
    monitor = RawClient(module_server.port)
    try:
        assert monitor.call("MONITOR") == b"+OK\r\n"
        add()
        while True:
            line = monitor.read_reply().decode()
            if '"ADDJOB"' in line and f'"{queue}"' in line:
                return line
    finally:
        monitor.close()


def test_timeout_and_async_are_sent_as_the_server_reads_them(dq, module_server, queue):
    line = _monitored_addjob(module_server, queue,
                             lambda: dq.add(queue, b"body", timeout=1234, async_=True))
    assert f'"ADDJOB" "{queue}" "body" "1234"' in line and '"ASYNC"' in line
    line = _monitored_addjob(module_server, queue, lambda: dq.add(queue, b"body"))
    assert line.endswith(f'"ADDJOB" "{queue}" "body" "5000"\r\n')      # the default


def test_an_unknown_add_option_is_refused_before_sending(dq, queue):
    with pytest.raises(TypeError, match="colour"):
        dq.add(queue, b"body", colour="red")
    assert dq.qlen(queue) == 0


# ------------------------------------------------------------------ GETJOB

def test_get_count_answers_the_jobs_in_order_without_counters(dq, queue):
    ids = [dq.add(queue, b"job %d" % n) for n in range(3)]
    jobs = dq.get(queue, count=3)
    assert jobs == [Job(job_id, queue, b"job %d" % n) for n, job_id in enumerate(ids)]
    assert jobs[0].nacks is None and jobs[0].deliveries is None


def test_get_with_counters_reads_nacks_and_additional_deliveries(dq, view, queue):
    job_id = dq.add(queue, b"body")
    dq.get(queue)
    dq.nack(job_id)
    [job] = dq.get(queue, with_counters=True)
    assert (job.id, job.nacks, job.additional_deliveries, job.deliveries) == (job_id, 1, 0, 2)
    assert (job.nacks, job.additional_deliveries) == \
        (shown(view, job_id)["nacks"], shown(view, job_id)["additional-deliveries"])


@pytest.mark.parametrize("wait", [{"nohang": True}, {"timeout": 20}])
def test_get_with_nothing_queued_answers_an_empty_list(dq, queue, wait):
    assert dq.get(queue, **wait) == []


def test_get_pattern_takes_from_every_matching_queue(dq, queue):
    first = dq.add(f"{queue}:a", b"a")
    second = dq.add(f"{queue}:b", b"b")
    dq.add(unique("other"), b"not matched")
    jobs = dq.get(pattern=f"{queue}:*", count=5, nohang=True)
    assert sorted(job.id for job in jobs) == sorted([first, second])


@pytest.mark.parametrize("queues, pattern", [(("a",), "a*"), ((), None)])
def test_get_takes_queue_names_or_a_pattern_never_both_nor_neither(dq, queues, pattern):
    with pytest.raises(ValueError, match="one of the two"):
        dq.get(*queues, pattern=pattern)


# A socket timeout, and a longer wait: the server's late answer is in time.
SHORT_SOCKET_TIMEOUT_S, LONGER_WAIT_MS = 0.5, 600


def test_a_getjob_waits_past_the_socket_timeout_for_its_own(make_client, module_server,
                                                              queue):
    """A GETJOB blocking longer than the connection's socket timeout
    (redis-py's default is 5 s) is answered at its own timeout, not cut
    as a lost connection."""
    client = make_client(f"disque://{HOST}:{module_server.port}",
                         socket_timeout=SHORT_SOCKET_TIMEOUT_S)
    assert client.get(queue, timeout=LONGER_WAIT_MS) == []


@pytest.mark.parametrize("flavour", KINDS, ids=lambda flavour: flavour.id)
def test_waitjob_and_qwait_wait_past_the_socket_timeout_for_their_own(make_client,
                                                                        module_server, queue):
    client = make_client(f"disque://{HOST}:{module_server.port}",
                         socket_timeout=SHORT_SOCKET_TIMEOUT_S)
    job_id = client.add(queue, b"body")
    assert client.wait([job_id], timeout=LONGER_WAIT_MS) == ["pending"]
    assert client.qwait(queue, timeout=LONGER_WAIT_MS) is False


@pytest.mark.parametrize("flavour", KINDS, ids=lambda flavour: flavour.id)
def test_without_a_socket_timeout_given_a_wait_adds_to_redis_pys_default(
        make_client, module_server, queue, flavour, monkeypatch):
    """redis-py 8 times reads out after 5 s unless told otherwise: a client
    given no socket_timeout reads a blocking call's reply for its wait
    plus those 5 s (seen in the timeout each read is given: waiting past
    5 s would cost a test 5 s)."""
    given = []
    connection_class = Connection if flavour.kind == "sync" else AsyncConnection
    read_response = connection_class.read_response

    def recorded(self, *args, **kwargs):
        given.append(kwargs.get("timeout"))
        return read_response(self, *args, **kwargs)
    monkeypatch.setattr(connection_class, "read_response", recorded)
    client = make_client(f"disque://{HOST}:{module_server.port}")
    assert client.get(queue, timeout=100) == []
    default = connection_in_use(client).socket_timeout
    assert default and given[-1] == pytest.approx(default + 0.1)


@pytest.mark.parametrize("flavour", KINDS, ids=lambda flavour: flavour.id)
def test_get_without_a_timeout_waits_until_a_job_comes(make_client, module_server, view,
                                                       queue):
    client = make_client(f"disque://{HOST}:{module_server.port}",
                         socket_timeout=SHORT_SOCKET_TIMEOUT_S)
    client.ping()

    failures = []

    def add_once_the_getter_waited():
        try:
            wait_for(lambda: view.execute_command("QSTAT", queue)[9] == 1,   # blocked: 1
                     message="a blocked getter")
            waited_until = time.monotonic() + 2 * SHORT_SOCKET_TIMEOUT_S
            wait_for(lambda: time.monotonic() > waited_until)
        except AssertionError as failure:
            failures.append(failure)
        finally:                                   # the getter is answered either way
            view.execute_command("ADDJOB", queue, b"late", 0)
    producer = threading.Thread(target=add_once_the_getter_waited, daemon=True)
    producer.start()
    [job] = client.get(queue)
    producer.join()
    assert failures == [] and job.body == b"late"


# ------------------------------------------------------------ job commands

def test_ack_and_fastack_count_the_jobs_and_forget_them(dq, view, queue):
    ids = [dq.add(queue, b"body") for _ in range(4)]
    assert dq.ack(ids[0], ids[1]) == 2
    assert dq.fastack(ids[2]) == 1
    assert dq.ack(UNKNOWN_ID) == 0
    assert [view.execute_command("SHOW", job_id) for job_id in ids[:3]] == [None] * 3
    assert dq.qlen(queue) == 1


@pytest.mark.parametrize("method", ["ack", "fastack", "nack", "enqueue", "dequeue", "delete"])
def test_job_commands_need_at_least_one_id(dq, method):
    with pytest.raises(ValueError, match="at least one job ID"):
        getattr(dq, method)()


def test_nack_queues_the_job_again_and_counts_it(dq, queue):
    job_id = dq.add(queue, b"body")
    dq.get(queue)
    assert dq.nack(job_id) == 1
    assert dq.qlen(queue) == 1 and dq.show(job_id).nacks == 1


def test_nack_delay_keeps_the_job_out_for_that_long(dq, view, queue):
    job_id = dq.add(queue, b"body", retry=300)
    dq.get(queue)
    assert dq.nack(job_id, delay=120) == 1
    info = dq.show(job_id)
    assert (info.state, info.nacks, dq.qlen(queue)) == ("active", 1, 0)
    assert 100_000 < info.next_requeue_within <= 120_000
    assert info.next_requeue_within >= shown(view, job_id)["next-requeue-within"] - 1000


def test_working_answers_the_retry_it_postponed_by(dq, queue):
    job_id = dq.add(queue, b"body", retry=42)
    dq.get(queue)
    assert dq.working(job_id) == 42


def test_dequeue_and_enqueue_move_the_job_out_and_back(dq, queue):
    job_id = dq.add(queue, b"body")
    assert dq.dequeue(job_id) == 1 and dq.qlen(queue) == 0
    assert dq.dequeue(job_id) == 0
    assert dq.enqueue(job_id) == 1 and dq.qlen(queue) == 1
    assert dq.enqueue(job_id) == 0


def test_delete_forgets_the_job(dq, view, queue):
    job_id = dq.add(queue, b"body")
    assert dq.delete(job_id) == 1
    assert dq.show(job_id) is None and view.execute_command("SHOW", job_id) is None
    assert dq.qlen(queue) == 0


# -------------------------------------------------------------------- SHOW

def test_show_of_a_plain_job_reads_disques_fields_and_defaults_the_rest(dq, view, queue):
    job_id = dq.add(queue, b"plain", retry=30, ttl=600)
    info = dq.show(job_id)
    fields = shown(view, job_id)
    assert len(fields) == DISQUE_SHOW_FIELDS
    assert (info.id, info.queue, info.state, info.replicate, info.ttl, info.ctime,
            info.delay, info.retry, info.nacks, info.additional_deliveries, info.body) == \
        (job_id, queue, "queued", fields["repl"], info.ttl, fields["ctime"], 0, 30, 0, 0,
         b"plain")
    assert 598 <= info.ttl <= 600 and 0 <= info.ttl - fields["ttl"] <= 1
    assert info.nodes_delivered == [node.decode() for node in fields["nodes-delivered"]]
    assert info.nodes_confirmed == []
    assert (info.backoff, info.max_deliveries, info.deadletter, info.dead_reason,
            info.dead_from, info.priority, info.dedup_key, info.dedup_until, info.extra) == \
        (None, None, None, None, None, 5, None, None, {})


def test_show_of_a_job_with_options_reads_each_of_them(dq, view, queue):
    job_id = dq.add(queue, b"body", backoff=(100, 5000), max_deliveries=4,
                    deadletter="dead-ones", priority=2, dedup="key-1", window=60)
    info = dq.show(job_id)
    fields = shown(view, job_id)
    assert (info.backoff, info.max_deliveries, info.deadletter, info.priority,
            info.dedup_key, info.dedup_until) == \
        (tuple(fields["backoff"]), fields["max-deliveries"], "dead-ones", 2, b"key-1",
         fields["dedup-until"])
    assert (info.dead_reason, info.dead_from, info.extra) == (None, None, {})


def test_show_of_an_unknown_job_is_none(dq):
    assert dq.show(UNKNOWN_ID) is None


def test_a_bad_job_id_is_a_bad_id_error(dq, view):
    with pytest.raises(BadIdError, match="Invalid Job ID format"):
        dq.show("not-a-job")
    with pytest.raises(BadIdError):
        dq.ack("not-a-job")


# ----------------------------------------------------------------- WAITJOB

def test_wait_answers_one_status_per_id_in_order(dq, view, queue):
    pending = dq.add(queue, b"body")
    gone = dq.add(queue, b"body")
    dq.delete(gone)
    ids = [pending, UNKNOWN_ID, gone, pending]
    statuses = dq.wait(ids, timeout=5)
    assert statuses == ["pending", "unknown", "unknown", "pending"]
    assert statuses == [status.decode() for status in
                        view.execute_command("WAITJOB", *ids, "TIMEOUT", 5)]


# ------------------------------------------------------------ queue commands

def test_qlen_and_qpeek_from_the_head_and_the_tail(dq, queue):
    ids = [dq.add(queue, b"job %d" % n) for n in range(3)]
    assert dq.qlen(queue) == 3
    assert [job.id for job in dq.qpeek(queue, 2)] == ids[:2]
    assert dq.qpeek(queue, -1) == [Job(ids[2], queue, b"job 2")]
    assert dq.qlen(queue) == 3                      # peeking takes nothing


def test_qstat_reads_every_field_the_server_answers(dq, view, queue):
    dq.add(queue, b"1")
    dq.add(queue, b"2")
    dq.get(queue)
    stat = dq.qstat(queue)
    reply = view.execute_command("QSTAT", queue)
    fields = {key.decode(): value for key, value in zip(reply[::2], reply[1::2])}
    assert (stat.name, stat.len, stat.jobs_in, stat.jobs_out, stat.blocked, stat.pause,
            stat.import_from, stat.import_rate) == \
        (queue, 1, 2, 1, 0, "none", [], fields["import-rate"])
    assert 0 <= fields["age"] - stat.age <= 1 and 0 <= fields["idle"] - stat.idle <= 1
    assert dq.qstat(unique("never")) is None


def test_qwait_is_true_when_nothing_is_left_and_false_on_its_timeout(dq, queue):
    assert dq.qwait(queue) is True
    job_id = dq.add(queue, b"body")
    assert dq.qwait(queue, timeout=10) is False
    dq.ack(job_id)
    assert dq.qwait(queue, timeout=10) is True


def test_qrequeue_moves_dead_letters_back_with_fresh_counters(dq, queue):
    ids = [dq.add(queue, b"body", max_deliveries=1) for _ in range(3)]
    for job in dq.get(queue, count=3):
        dq.nack(job.id)
    dead = dq.show(ids[0])
    assert (dead.queue, dead.dead_reason, dead.dead_from) == \
        (f"{queue}:dead", "max-deliveries", queue)
    assert dq.qrequeue(f"{queue}:dead", count=1) == 1
    assert dq.qlen(queue) == 1
    elsewhere = unique("retry")
    assert dq.qrequeue(f"{queue}:dead", to=elsewhere) == 2
    assert (dq.qlen(elsewhere), dq.qlen(f"{queue}:dead")) == (2, 0)
    assert dq.show(ids[0]).nacks == 0 and dq.show(ids[0]).dead_reason is None


def test_pause_sets_and_reads_the_state_and_in_refuses_jobs(dq, queue):
    assert dq.pause(queue) == "none"
    assert dq.pause(queue, "in") == "in"
    assert dq.pause(queue) == "in" and dq.qstat(queue).pause == "in"
    with pytest.raises(PausedError, match="paused"):
        dq.add(queue, b"body")
    assert dq.pause(queue, "none") == "none"
    dq.add(queue, b"body")
    assert dq.pause(queue, "out", bcast=True) == "out"      # every node: this one here
    assert dq.get(queue, nohang=True) == [] and dq.qlen(queue) == 1
    assert dq.pause(queue, "none") == "none"
