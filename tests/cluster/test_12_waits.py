"""WAITJOB and QWAIT across real nodes.

Three nodes; a REPLICATE 3 job has a copy on each. A WAITJOB or QWAIT
blocked on one holder is answered when the job is acknowledged on another
node: the ack reaches it as SETACK (the collection of acks), and the
waiter learns `acked` (QWAIT: 1, the queue has no open job left there).
"""

from __future__ import annotations

import uuid

import pytest

from tests.cluster.harness import MARGIN_S, call, info, poll, states
from tests.support import bulk, encode_command

ACK_DEADLINE_S = 5 + MARGIN_S


def blocked_clients(proc) -> int:
    return int(info(proc, "clients")["blocked_clients"])


def parked(proc, *command):
    """A connection whose command is blocked on `proc`."""
    client = proc.raw()
    client.send(encode_command(*command))
    poll(lambda: blocked_clients(proc) == 1, ACK_DEADLINE_S, f"{command[0]} blocked")
    return client


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
    return f"waits-{uuid.uuid4().hex[:12]}"


def test_waitjob_on_a_holder_answers_acked_when_another_node_acks(cluster, queue):
    job_id = call(cluster[0], "ADDJOB", queue, "body", 5000, "REPLICATE", 3)
    assert sorted(states(cluster, job_id)) == [0, 1, 2]
    job_waiter = parked(cluster[1], "WAITJOB", job_id, "TIMEOUT", 60_000)
    assert call(cluster[2], "ACKJOB", job_id) == 1
    job_waiter.sock.settimeout(ACK_DEADLINE_S)
    assert job_waiter.read_reply() == b"*1\r\n" + bulk("acked")


def test_qwait_on_a_holder_answers_1_when_another_node_acks(cluster, queue):
    job_id = call(cluster[0], "ADDJOB", queue, "body", 5000, "REPLICATE", 3)
    assert call(cluster[1], "QLEN", queue) == 0      # a copy, not queued there
    queue_waiter = parked(cluster[1], "QWAIT", queue, "TIMEOUT", 60_000)
    [[_, got, _]] = call(cluster[0], "GETJOB", "FROM", queue)
    assert got == job_id
    assert call(cluster[0], "ACKJOB", job_id) == 1
    queue_waiter.sock.settimeout(ACK_DEADLINE_S)
    assert queue_waiter.read_reply() == b":1\r\n"
