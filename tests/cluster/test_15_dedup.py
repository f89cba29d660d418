"""Idempotent producers across real nodes: ADDJOB ... DEDUP key.

Three nodes with an AOF each (appendonly yes), flushed before every test
and their AOFs rewritten empty, so that a node restarted from its AOF
loads only what the test made. cluster-node-timeout is 10 s: a node
SIGSTOPped for a second or two, or killed and restarted at once, is never
flagged, and its links are not dropped (an ADDJOB refused at once for too
few reachable nodes, or messages lost with a link, is not what is tested
here).

A REPLICATE 3 job added with DEDUP k has the key on every holder, and each
of them answers a retry with the first job's ID without making a job (a
holder once the others confirm their copies); the producer killed with
kill -9, a retry on a holder gets NOREPL with REPLICATE 3 (two nodes left)
and the same ID with REPLICATE 2, and the producer restarted from its AOF
answers it too; after the job is acked
and collected everywhere, every former holder still answers its ID (a key
outlives its job); an ADDJOB that failed (NOREPL, one node stopped) leaves
its key on no node, so the retry makes a new job; a duplicate sent to the
producer while the first ADDJOB still waits for its copies gets the first
one's answer, the ID or NOREPL; one sent to a holder meanwhile gets the ID
once every copy is confirmed, and the job stays though the first ADDJOB
then fails.
"""

from __future__ import annotations

import uuid

import pytest

from tests.cluster.harness import (MARGIN_S, ReplyError, call, info, jobs_in_queue, poll,
                                   qlen, registered_jobs, show)
from tests.support import encode_command

NODE_TIMEOUT_MS = 10_000
DEADLINE_S = 10 + MARGIN_S
ADD_TIMEOUT_MS = 5000
WAIT_MS = 2000      # an ADDJOB waiting on a stopped node: long enough to be seen
#                     waiting, far below the 5 s before a silent link is dropped


# ------------------------------------------------------------------ helpers

def add(proc, queue: str, key: str, body: str = "body", timeout_ms: int = ADD_TIMEOUT_MS,
        replicate: int = 3):
    """The producer's ADDJOB (and every retry of it: the same command)."""
    return call(proc, "ADDJOB", queue, body, timeout_ms, "REPLICATE", replicate, "DEDUP", key)


def stat(proc, name: str) -> int:
    return int(info(proc)[name])


def dedup_keys(proc) -> int:
    return stat(proc, "dedup_keys")


def snapshot(cluster, queue: str, indexes=None) -> dict[int, tuple[int, int, int]]:
    """{node: (registered jobs, jobs created, QLEN of the queue)}."""
    return {i: (registered_jobs(cluster[i]), stat(cluster[i], "total_jobs_created"),
                qlen(cluster[i], queue))
            for i in (range(len(cluster)) if indexes is None else indexes)}


def send_add(proc, queue: str, key: str, timeout_ms: int):
    """The producer's ADDJOB sent on a connection of its own, not yet read."""
    client = proc.raw()
    client.sock.settimeout(timeout_ms / 1000 + DEADLINE_S)
    client.send(encode_command("ADDJOB", queue, "body", timeout_ms, "REPLICATE", 3,
                               "DEDUP", key))
    return client


def waiting_job(proc, queue: str) -> bytes:
    """The ID of the one job of `queue` waiting on `proc` for its copies."""
    found = poll(lambda: jobs_in_queue(proc, queue), WAIT_MS / 1000,
                 "the ADDJOB waiting for its copies")
    [(job_id, state)] = found.items()
    assert state == "wait-repl"
    return job_id


def rewrite_done(proc) -> bool:
    fields = info(proc, "persistence")
    return fields["aof_rewrite_in_progress"] == "0" and fields["aof_rewrite_scheduled"] == "0"


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def three(make_cluster):
    return make_cluster(3, node_timeout_ms=NODE_TIMEOUT_MS, extra_args=["--appendonly", "yes"])


@pytest.fixture
def cluster(three):
    for proc in three:
        if not proc.alive():
            proc.start()
    three.wait_full_mesh(timeout=30)
    for proc in three:
        assert call(proc, "DEBUG", "FLUSHALL") == b"OK"
    for proc in three:                  # an AOF of nothing: a restart loads this test only
        poll(lambda: rewrite_done(proc), DEADLINE_S, "no AOF rewrite under way")
        call(proc, "BGREWRITEAOF")
    for proc in three:
        poll(lambda: rewrite_done(proc), DEADLINE_S, "the AOF rewritten empty")
        assert dedup_keys(proc) == 0
    yield three
    for proc in three:
        if not proc.alive():
            proc.start()


@pytest.fixture
def queue():
    return f"dedup-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def key():
    return f"order-{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------ tests

def test_every_holder_answers_the_first_id_and_makes_no_job(cluster, queue, key):
    job_id = add(cluster[0], queue, key, "first")
    shown = [show(proc, job_id) for proc in cluster]
    assert [fields["dedup-key"] for fields in shown] == [key.encode()] * 3
    assert len({fields["dedup-until"] for fields in shown}) == 1     # one window end
    before = snapshot(cluster, queue)
    assert {i: (jobs, length) for i, (jobs, _, length) in before.items()} \
        == {0: (1, 1), 1: (1, 0), 2: (1, 0)}          # queued on the producer
    hits = [stat(proc, "total_dedup_hits") for proc in cluster]
    for proc in cluster:
        assert add(proc, queue, key, "retry") == job_id
    assert snapshot(cluster, queue) == before
    assert [stat(proc, "total_dedup_hits") for proc in cluster] == [hit + 1 for hit in hits]
    assert [show(proc, job_id)["body"] for proc in cluster] == [b"first"] * 3


def test_retry_on_a_holder_after_the_producer_is_killed_gets_the_same_id(
        cluster, queue, key):
    producer, holders = cluster[0], (1, 2)
    job_id = add(producer, queue, key)
    before = snapshot(cluster, queue, holders)
    producer.kill()
    # A holder answers once as many copies as the retry asks for are
    # confirmed: with one node of three down, REPLICATE 3 cannot be.
    with pytest.raises(ReplyError, match="^NOREPL "):
        add(cluster[1], queue, key, timeout_ms=1000)
    assert add(cluster[1], queue, key, replicate=2) == job_id
    assert add(cluster[2], queue, key, replicate=2) == job_id
    assert snapshot(cluster, queue, holders) == before
    # Back from its AOF: the job and its key.
    producer.start()
    cluster.wait_full_mesh(timeout=30)
    assert show(producer, job_id)["dedup-key"] == key.encode()
    assert add(producer, queue, key) == job_id
    assert add(cluster[2], queue, key) == job_id      # confirmed at REPLICATE 2 only: again
    assert snapshot(cluster, queue, holders) == before
    assert list(jobs_in_queue(producer, queue)) == [job_id]
    assert registered_jobs(producer) == 1                 # the AOF's job, none since


def test_the_key_outlives_its_acked_job_on_every_former_holder(cluster, queue, key):
    job_id = add(cluster[0], queue, key)
    [[_, got, _]] = call(cluster[0], "GETJOB", "NOHANG", "FROM", queue)
    assert got == job_id
    assert call(cluster[0], "ACKJOB", job_id) == 1
    poll(lambda: all(show(proc, job_id) is None for proc in cluster), DEADLINE_S,
         "the ack collected on every node")
    before = snapshot(cluster, queue)
    assert all(jobs == 0 and length == 0 for jobs, _, length in before.values()), before
    for proc in cluster:
        assert add(proc, queue, key) == job_id
    assert snapshot(cluster, queue) == before
    assert [dedup_keys(proc) for proc in cluster] == [1, 1, 1]


def test_a_failed_addjob_leaves_its_key_free_for_the_retry(cluster, queue, key):
    producer, stopped = cluster[0], cluster[2]
    stopped.pause()               # gets its copy, cannot confirm it
    try:
        client = send_add(producer, queue, key, WAIT_MS)
        failed_id = waiting_job(producer, queue)
        reply = client.read_reply()
    finally:
        stopped.resume()
    assert reply.startswith(b"-NOREPL "), reply
    # node1 confirmed its copy, node2 gets it once resumed: both are told
    # the ADDJOB failed, and forget the job and its key.
    poll(lambda: all(show(proc, failed_id) is None for proc in cluster)
         and [dedup_keys(proc) for proc in cluster] == [0, 0, 0],
         DEADLINE_S, "the failed job and its key gone from every node")
    cluster.wait_full_mesh(timeout=30)
    retried = add(producer, queue, key)
    assert retried != failed_id
    assert [show(proc, retried)["dedup-key"] for proc in cluster] == [key.encode()] * 3
    for index in (1, 2):          # the nodes that may have had the failed copy
        assert add(cluster[index], queue, key) == retried
    assert [registered_jobs(proc) for proc in cluster] == [1, 1, 1]


@pytest.mark.parametrize("copies_made", [True, False], ids=["copies-made", "timed-out"])
def test_a_duplicate_while_the_first_addjob_waits_gets_its_answer(
        cluster, queue, key, copies_made):
    producer, stopped = cluster[0], cluster[2]
    hits = stat(producer, "total_dedup_hits")
    stopped.pause()
    try:
        first = send_add(producer, queue, key, ADD_TIMEOUT_MS if copies_made else WAIT_MS)
        job_id = waiting_job(producer, queue)
        duplicate = send_add(producer, queue, key, ADD_TIMEOUT_MS)
        poll(lambda: stat(producer, "total_dedup_hits") == hits + 1, WAIT_MS / 1000,
             "the duplicate following the first")
        if copies_made:
            stopped.resume()
        replies = first.read_reply(), duplicate.read_reply()
    finally:
        stopped.resume()
    if copies_made:
        assert replies == (b"+" + job_id + b"\r\n",) * 2
        assert [registered_jobs(proc) for proc in cluster] == [1, 1, 1]
    else:
        assert all(reply.startswith(b"-NOREPL ") for reply in replies), replies
        poll(lambda: all(show(proc, job_id) is None for proc in cluster), DEADLINE_S,
             "the failed job gone from every node")


def test_a_retry_at_a_holder_during_the_first_wait_gets_the_id_and_the_job_stays(
        cluster, queue, key):
    """The retry reached a holder while the first ADDJOB still waited at the
    producer, which then timed out: the holder asked the holders to confirm
    (and keep) their copies, so the job stays, and the retry gets its ID
    once the stopped node confirms its copy too."""
    producer, holder, stopped = cluster
    stopped.pause()
    try:
        first = send_add(producer, queue, key, WAIT_MS)
        job_id = waiting_job(producer, queue)
        poll(lambda: show(holder, job_id) is not None, WAIT_MS / 1000, "the holder's copy")
        retry = send_add(holder, queue, key, ADD_TIMEOUT_MS)       # the retry, on a holder
        assert first.read_reply().startswith(b"-NOREPL ")
    finally:
        stopped.resume()
    assert retry.read_reply() == b"+" + job_id + b"\r\n"
    poll(lambda: all(show(proc, job_id) is not None for proc in cluster), DEADLINE_S,
         "every copy kept")
    assert add(holder, queue, key) == job_id and add(producer, queue, key) == job_id
    job = call(producer, "GETJOB", "TIMEOUT", 5000, "FROM", queue)
    assert job[0][1] == job_id
