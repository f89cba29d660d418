"""Job options across real nodes: failed-job options and priorities.

Three nodes; a REPLICATE 3 job with options has them on every holder. A
MAXDELIVERIES 3 job delivered and NACKed on three different nodes (each
GETJOB on a node without it queued pulls it there through federation) is
dead-lettered by one node: queued in `<queue>:dead` there only, dead on
every holder, and one ACKJOB removes every copy. A REPLICATE 3 job keeps
its PRIORITY on every holder, and federation moves the highest priority
first (a consumer on a node without jobs gets the urgent one a peer holds,
not the older low-priority ones queued before it).
"""

from __future__ import annotations

import uuid

import pytest

from tests.cluster.harness import MARGIN_S, call, poll, show

DEADLINE_S = 10 + MARGIN_S
OPTION_FIELDS = ["backoff", "max-deliveries", "deadletter", "dead-reason", "dead-from",
                 "priority", "dedup-key", "dedup-until"]


@pytest.fixture(scope="module")
def three(make_cluster):
    return make_cluster(3)


@pytest.fixture
def cluster(three):
    three.wait_full_mesh(timeout=30)
    for proc in three:
        assert call(proc, "DEBUG", "FLUSHALL") == b"OK"
    return three


@pytest.fixture
def queue():
    return f"options-{uuid.uuid4().hex[:12]}"


def test_options_reach_every_holder(cluster, queue):
    job_id = call(cluster[0], "ADDJOB", queue, "body", 5000, "REPLICATE", 3,
                  "BACKOFF", 100, 5000, "MAXDELIVERIES", 4, "DEADLETTER", "dlq")
    for proc in cluster:
        fields = show(proc, job_id)
        assert list(fields)[-len(OPTION_FIELDS):] == OPTION_FIELDS
        assert fields["backoff"] == [100, 5000] and fields["max-deliveries"] == 4
        assert fields["deadletter"] == b"dlq"


def deliver_on(proc, queue, job_id):
    """GETJOB on `proc`: from its own queue, or pulled from a peer's."""
    reply = call(proc, "GETJOB", "TIMEOUT", int(DEADLINE_S * 1000), "FROM", queue)
    assert reply is not None, f"no job for {queue} on port {proc.port}"
    [[_, got, _]] = reply
    assert got == job_id


def test_three_nacks_on_three_nodes_dead_letter_the_job_once(cluster, queue):
    dead_queue = f"{queue}:dead"
    job_id = call(cluster[0], "ADDJOB", queue, "body", 5000, "REPLICATE", 3,
                  "MAXDELIVERIES", 3, "RETRY", 120)
    for delivery, proc in enumerate(cluster, start=1):
        deliver_on(proc, queue, job_id)
        assert show(proc, job_id)["dead-reason"] is None, f"dead before delivery {delivery}"
        assert call(proc, "NACK", job_id) == 1
    poll(lambda: all(show(proc, job_id)["dead-reason"] == b"max-deliveries"
                     for proc in cluster), DEADLINE_S, "every holder knows the job is dead")
    assert [call(proc, "QLEN", dead_queue) for proc in cluster].count(1) == 1
    assert sum(call(proc, "QLEN", dead_queue) for proc in cluster) == 1
    assert all(call(proc, "QLEN", queue) == 0 for proc in cluster)
    for proc in cluster:
        fields = show(proc, job_id)
        assert fields["queue"] == dead_queue.encode() and fields["dead-from"] == queue.encode()
    assert call(cluster[1], "ACKJOB", job_id) == 1
    poll(lambda: all(show(proc, job_id) is None for proc in cluster), DEADLINE_S,
         "the ack removed every copy")


def test_every_holder_keeps_the_priority(cluster, queue):
    job_id = call(cluster[0], "ADDJOB", queue, "body", 5000, "REPLICATE", 3, "PRIORITY", 8)
    assert [show(proc, job_id)["priority"] for proc in cluster] == [8, 8, 8]


def test_federation_moves_the_highest_priority_first(cluster, queue):
    holder, consumer = cluster[0], cluster[1]
    for index in range(5):
        call(holder, "ADDJOB", queue, f"low-{index}", 5000, "REPLICATE", 1, "PRIORITY", 1)
    urgent = call(holder, "ADDJOB", queue, "urgent", 5000, "REPLICATE", 1, "PRIORITY", 9)
    reply = call(consumer, "GETJOB", "TIMEOUT", int(DEADLINE_S * 1000), "FROM", queue)
    assert reply is not None, "federation brought nothing"
    [[_, job_id, body]] = reply
    assert (job_id, body) == (urgent, b"urgent")
