"""Pipelined replicated ADDJOBs (beyond Disque): ADDJOBs sent back to back
by one client wait for their copies together instead of one after another,
while everything a client can observe stays as in Disque:

  * replies come back in command order, successes and errors mixed;
  * a command other than ADDJOB behind a waiting ADDJOB runs only once every
    ADDJOB ahead of it has its answer (so it sees their jobs queued);
  * an ADDJOB behind a blocked GETJOB still waits for the GETJOB;
  * a client that goes away while ADDJOBs wait leaves nothing blocked.

Disque blocks the whole connection on each ADDJOB, so a pipelined producer
pays one replication round trip per job; here it pays about one per batch.
"""

from __future__ import annotations

import uuid

import pytest

from tests.cluster.harness import call, poll, show
from tests.support import encode_command

BATCH = 300


@pytest.fixture(scope="module")
def cluster(make_cluster):
    return make_cluster(2)


@pytest.fixture
def queue():
    return "pipe-" + uuid.uuid4().hex[:8]


def pipeline(proc, commands) -> list[bytes]:
    client = proc.raw()
    client.send(b"".join(encode_command(*command) for command in commands))
    return [client.read_reply() for _ in commands]


def job_id(reply: bytes) -> bytes:
    assert reply.startswith(b"+D-"), reply
    return reply[1:-2]


def body(proc, job: bytes) -> bytes:
    return show(proc, job)["body"]


def test_replies_keep_command_order(cluster, queue):
    commands = [("ADDJOB", queue, f"body-{i}", 5000, "REPLICATE", 2) for i in range(BATCH)]
    replies = pipeline(cluster[0], commands + [("PING",)])
    assert replies[-1] == b"+PONG\r\n"
    for index, reply in enumerate(replies[:-1]):
        fields = show(cluster[0], job_id(reply))
        assert fields["body"] == f"body-{index}".encode()
        assert len(fields["nodes-delivered"]) == 2       # answered after its copy exists


def test_errors_between_waiting_addjobs_stay_in_place(cluster, queue):
    replies = pipeline(cluster[0], [
        ("ADDJOB", queue, "a", 5000, "REPLICATE", 2),
        ("ADDJOB", queue, "b", 5000, "REPLICATE", 5),       # NOREPL at once
        ("ADDJOB", queue, "c", 5000, "REPLICATE", 2, "RETRY", 0),   # ERR at once
        ("ADDJOB", queue, "d", 5000, "REPLICATE", 1),       # no copy to wait for
        ("ADDJOB", queue, "e", 5000, "REPLICATE", 2),
    ])
    assert replies[1].startswith(b"-NOREPL Not enough reachable nodes")
    assert replies[2].startswith(b"-ERR With RETRY set to 0")
    assert [body(cluster[0], job_id(replies[i])) for i in (0, 3, 4)] == [b"a", b"d", b"e"]


def test_other_commands_wait_for_the_addjobs_ahead(cluster, queue):
    replies = pipeline(cluster[0], [("ADDJOB", queue, f"j{i}", 5000, "REPLICATE", 2)
                                    for i in range(50)] + [("QLEN", queue)])
    assert all(reply.startswith(b"+D-") for reply in replies[:-1])
    assert replies[-1] == b":50\r\n"


def test_addjob_behind_a_blocked_getjob_waits_for_it(cluster, queue):
    replies = pipeline(cluster[0], [
        ("GETJOB", "TIMEOUT", 300, "FROM", queue + "-empty"),
        ("ADDJOB", queue, "x", 5000, "REPLICATE", 2),
        ("QLEN", queue),
    ])
    assert replies[0] == b"*-1\r\n"
    assert replies[1].startswith(b"+D-")
    assert replies[2] == b":1\r\n"


def test_client_gone_while_addjobs_wait_leaves_nothing_blocked(cluster, queue):
    cluster[1].pause()                  # copies cannot be made: every ADDJOB waits
    try:
        client = cluster[0].raw()
        client.send(b"".join(encode_command("ADDJOB", queue, f"w{i}", 0, "REPLICATE", 2)
                             for i in range(20)))
        poll(lambda: b"blocked_clients:1" in call(cluster[0], "INFO", "clients"), 5,
             "the producer blocked")
        client.close()
        poll(lambda: b"blocked_clients:0" in call(cluster[0], "INFO", "clients"), 5,
             "nothing blocked once the producer left")
    finally:
        cluster[1].resume()
    assert call(cluster[0], "PING") == b"PONG"
