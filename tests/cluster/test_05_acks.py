"""Acknowledgements across real nodes (Disque's "Acknowledged jobs garbage
collection", and its Tcl units 05-acks, 11-waiting-nack, 12-nack-and-counters
and the de-duplication test of 03-jobs-queueing):

  * ACKJOB on any node, holder or not (a "dummy ack"), removes every copy;
    while a holder cannot answer the others keep the job acked (never
    queued again) and the collection completes once it runs again; a
    holder whose AOF cannot be written does not confirm the ack either;
  * FASTACK on an owner or a non-owner deletes every copy;
  * NACK re-queues at once and every holder counts it; a re-queue after
    RETRY counts as an additional delivery (GETJOB WITHCOUNTERS);
  * WORKING postpones the re-queue on every holder;
  * after a retry storm the holders settle on a single queued copy.

A holder that "cannot answer" is SIGSTOPped: it stays in the cluster and
reads what was sent to it once SIGCONT arrives. One five-node cluster
(cluster-node-timeout 1000 ms) is shared by the module, flushed with DEBUG
FLUSHALL before every test; every test uses its own queue.
"""

from __future__ import annotations

import time
import uuid

import pytest

from tests.cluster.harness import (MARGIN_S, call, fail_deadline_s, poll, qlen, queued_on, show,
                                   states)

RETRY_S = 1
REQUEUE_DEADLINE_S = RETRY_S + 1 + 2 * MARGIN_S
# Acks are collected by SETACK/GOTACK/DELJOB rounds retried 1 s, 2 s, 4 s...
# apart; a node that comes back after a short stop is reached within a few.
GC_DEADLINE_S = 15 + MARGIN_S


# ------------------------------------------------------------------ helpers

def counters(entry) -> dict[bytes, int]:
    """GETJOB WITHCOUNTERS entry: [queue, id, body, name, value, name, value]."""
    return dict(zip(entry[3::2], entry[4::2]))


def wait_gone_everywhere(cluster, job_id, timeout: float = GC_DEADLINE_S) -> None:
    poll(lambda: not states(cluster, job_id), timeout,
         f"every copy of {job_id!r} (and every ack) gone from every node")


def stays(condition, seconds: float, message: str, interval: float = 0.1) -> None:
    """`condition` holds at every poll for `seconds` (behaviour over time)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert condition(), message
        time.sleep(interval)
    assert condition(), message


def add_job(cluster, index, queue, repl, *options):
    """ADDJOB on node `index`; returns (job ID, holder indexes)."""
    job_id = call(cluster[index], "ADDJOB", queue, "body", 5000, "REPLICATE", repl, *options)
    holders = sorted(states(cluster, job_id))
    assert len(holders) == repl, holders
    return job_id, holders


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def five(make_cluster):
    return make_cluster(5)


@pytest.fixture
def cluster(five):
    for proc in five:
        proc.resume()
    five.wait_full_mesh(timeout=30)
    for proc in five:
        assert call(proc, "DEBUG", "FLUSHALL") == b"OK"
    yield five
    for proc in five:
        proc.resume()           # a failed test must not leave a node stopped


@pytest.fixture
def queue():
    return f"acks-{uuid.uuid4().hex[:12]}"


# ------------------------------------------------------------------ ACKJOB

@pytest.mark.parametrize("repl", [3, 5])
def test_ackjob_on_the_queueing_node_removes_every_copy_on_every_node(cluster, queue, repl):
    job_id, holders = add_job(cluster, 0, queue, repl)
    assert call(cluster[0], "ACKJOB", job_id) == 1
    info = show(cluster[0], job_id)
    assert info is None or info["state"] == b"acked"
    assert qlen(cluster[0], queue) == 0
    wait_gone_everywhere(cluster, job_id)
    for proc in cluster:
        assert qlen(proc, queue) == 0


def test_ackjob_to_a_node_without_a_copy_dummy_ack_removes_every_copy(cluster, queue):
    job_id, holders = add_job(cluster, 0, queue, 3)
    stranger = next(i for i in range(5) if i not in holders)
    assert show(cluster[stranger], job_id) is None
    # Unknown here: nothing moved to acked (0), but the ack is not lost.
    assert call(cluster[stranger], "ACKJOB", job_id) == 0
    wait_gone_everywhere(cluster, job_id)


def test_ack_while_a_holder_is_stopped_keeps_the_job_acked_then_reaches_the_holder(
        cluster, queue):
    job_id, holders = add_job(cluster, 0, queue, 3)
    stopped = holders[-1]
    running = [i for i in holders if i != stopped]
    cluster[stopped].pause()
    assert call(cluster[0], "ACKJOB", job_id) == 1
    # The running holders drop the job from delivery (acked) but keep the
    # ack: it cannot be collected before the stopped holder confirms.
    poll(lambda: states(cluster, job_id, running) == {i: "acked" for i in running},
         5, "the job acked on the running holders")
    # Until the others see the stopped holder as failing, and after.
    poll(lambda: "fail?" in cluster.flags_seen(cluster[0], cluster.ids[stopped])
         or "fail" in cluster.flags_seen(cluster[0], cluster.ids[stopped]),
         fail_deadline_s(), "the stopped holder flagged failing")
    stays(lambda: states(cluster, job_id, running) == {i: "acked" for i in running}
          and all(qlen(cluster[i], queue) == 0 for i in running),
          1.0, "the ack kept while a holder cannot confirm it")

    cluster[stopped].resume()
    wait_gone_everywhere(cluster, job_id)


def test_an_ack_is_collected_only_once_every_holders_aof_has_it(fresh_cluster, queue):
    # A holder whose AOF cannot be written acks in memory only: killed and
    # restarted, it would load the job again. So it confirms the ack to
    # nobody (GOTACK, nor DELJOB when it runs the collection itself), and
    # the other node keeps the ack, to reach it again.
    pair = fresh_cluster(2, node_timeout_ms=5000,     # no flagging on a loaded machine
                         extra_args=["--appendonly", "yes", "--appendfsync", "always"])
    job_id, holders = add_job(pair, 0, queue, 2, "RETRY", 60)
    assert call(pair[1], "DEBUG", "AOF-FAULT", "enospc", 1000) == b"OK"
    assert call(pair[0], "ACKJOB", job_id) == 1
    poll(lambda: states(pair, job_id, [1]) == {1: "acked"}, 5, "acked on the holder")
    stays(lambda: states(pair, job_id, [0]) == {0: "acked"}, 3.0,
          "the ack kept while the holder cannot write it")
    pair[1].kill()
    pair[1].start()
    # Its AOF still has the job: the collecting node's next SETACK reaches it.
    wait_gone_everywhere(pair, job_id)


def test_ack_to_a_non_owner_while_an_owner_is_stopped_is_collected_when_it_returns(
        cluster, queue):
    job_id, holders = add_job(cluster, 0, queue, 3)
    stranger = next(i for i in range(5) if i not in holders)
    owner = holders[1]
    cluster[owner].pause()
    assert call(cluster[stranger], "ACKJOB", job_id) == 0
    others = [i for i in holders if i != owner]
    poll(lambda: states(cluster, job_id, others) == {i: "acked" for i in others},
         5, "the running owners learnt the ack")
    cluster[owner].resume()
    wait_gone_everywhere(cluster, job_id)


def test_ack_to_a_non_owner_while_every_owner_is_stopped_is_collected_when_they_return(
        cluster, queue):
    job_id, holders = add_job(cluster, 0, queue, 3)
    stranger = next(i for i in range(5) if i not in holders)
    for index in holders:
        cluster[index].pause()
    try:
        assert call(cluster[stranger], "ACKJOB", job_id) == 0
        # The dummy ack waits on the acking node for somebody who knows the job.
        assert show(cluster[stranger], job_id)["state"] == b"acked"
    finally:
        for index in holders:
            cluster[index].resume()
    wait_gone_everywhere(cluster, job_id)


def test_an_ack_for_a_job_nobody_has_leaves_no_dummy_ack_behind(cluster, queue):
    job_id, holders = add_job(cluster, 0, queue, 1)
    assert call(cluster[0], "DELJOB", job_id) == 1     # gone, without an ack
    assert call(cluster[3], "ACKJOB", job_id) == 0
    wait_gone_everywhere(cluster, job_id)


# ------------------------------------------------------------------ FASTACK

def test_fastack_on_the_owner_removes_every_copy(cluster, queue):
    job_id, holders = add_job(cluster, 0, queue, 5)
    assert call(cluster[0], "FASTACK", job_id) == 1
    assert show(cluster[0], job_id) is None
    wait_gone_everywhere(cluster, job_id, 5 + MARGIN_S)


def test_fastack_on_a_non_owner_removes_every_copy(cluster, queue):
    job_id, holders = add_job(cluster, 0, queue, 3)
    stranger = next(i for i in range(5) if i not in holders)
    assert call(cluster[stranger], "FASTACK", job_id) == 0
    wait_gone_everywhere(cluster, job_id, 5 + MARGIN_S)


# ------------------------------------------------------------------ NACK and counters

def test_nack_requeues_at_once_and_every_holder_counts_it(cluster, queue):
    job_id, holders = add_job(cluster, 0, queue, 3, "RETRY", 30)
    assert call(cluster[0], "GETJOB", "FROM", queue) == [[queue.encode(), job_id, b"body"]]
    assert queued_on(cluster, job_id) == []

    assert call(cluster[0], "NACK", job_id) == 1
    assert qlen(cluster[0], queue) == 1
    info = show(cluster[0], job_id)
    assert info["state"] == b"queued"
    assert (info["nacks"], info["additional-deliveries"]) == (1, 0)
    others = [i for i in holders if i != 0]
    poll(lambda: all(show(cluster[i], job_id)["nacks"] == 1 for i in others), 5,
         "the other holders counted the NACK")
    assert queued_on(cluster, job_id) == [0]

    (entry,) = call(cluster[0], "GETJOB", "WITHCOUNTERS", "FROM", queue)
    assert entry[:3] == [queue.encode(), job_id, b"body"]
    assert counters(entry) == {b"nacks": 1, b"additional-deliveries": 0}

    assert call(cluster[0], "NACK", job_id) == 1
    (entry,) = call(cluster[0], "GETJOB", "WITHCOUNTERS", "FROM", queue)
    assert counters(entry)[b"nacks"] == 2


def test_a_requeue_after_retry_counts_an_additional_delivery(cluster, queue):
    job_id, holders = add_job(cluster, 0, queue, 3, "RETRY", RETRY_S)
    (entry,) = call(cluster[0], "GETJOB", "WITHCOUNTERS", "FROM", queue)
    assert counters(entry) == {b"nacks": 0, b"additional-deliveries": 0}
    queued = poll(lambda: queued_on(cluster, job_id), REQUEUE_DEADLINE_S,
                  "the unacknowledged job queued again")
    (entry,) = call(cluster[queued[0]], "GETJOB", "TIMEOUT", 5000, "WITHCOUNTERS",
                    "FROM", queue)
    assert entry[1] == job_id
    assert counters(entry)[b"additional-deliveries"] >= 1
    assert counters(entry)[b"nacks"] == 0


# ------------------------------------------------------------------ WORKING

def test_working_returns_the_retry_time(cluster, queue):
    job_id, holders = add_job(cluster, 0, queue, 3, "RETRY", 123)
    assert call(cluster[0], "WORKING", job_id) == 123
    assert call(cluster[0], "ACKJOB", job_id) == 1


def test_working_keeps_every_holder_from_requeueing_the_job(cluster, queue):
    retry = 3
    job_id, holders = add_job(cluster, 0, queue, 3, "RETRY", retry)
    assert call(cluster[0], "GETJOB", "FROM", queue) == [[queue.encode(), job_id, b"body"]]
    # More than twice the retry time, WORKING sent well within each period
    # (a holder re-queues 2.75 s after the last WORKING it heard, at best).
    deadline = time.monotonic() + 2.2 * retry
    while time.monotonic() < deadline:
        assert queued_on(cluster, job_id) == [], "re-queued despite WORKING"
        assert call(cluster[0], "WORKING", job_id) == retry
        time.sleep(0.4)
    assert sorted(states(cluster, job_id).values()) == ["active"] * 3
    for index in holders:        # each holder moved its own re-queue time forward
        assert show(cluster[index], job_id)["next-requeue-within"] > 0
    # Once the consumer falls silent the job comes back.
    poll(lambda: queued_on(cluster, job_id), retry + 1 + 2 * MARGIN_S,
         "the job re-queued once WORKING stopped")


# ------------------------------------------------------------------ de-duplication

def test_after_a_retry_storm_the_holders_settle_on_one_queued_copy(cluster, queue):
    job_id, holders = add_job(cluster, 0, queue, 5, "RETRY", RETRY_S)
    assert call(cluster[0], "GETJOB", "FROM", queue) == [[queue.encode(), job_id, b"body"]]
    # Five active copies, each due to re-queue about a second from now.
    assert sorted(states(cluster, job_id).values()) == ["active"] * 5
    poll(lambda: queued_on(cluster, job_id), REQUEUE_DEADLINE_S, "the job re-queued")

    samples = []
    deadline = time.monotonic() + 3 * RETRY_S
    while time.monotonic() < deadline:
        samples.append(len(queued_on(cluster, job_id)))
        time.sleep(0.05)
    assert samples.count(1) >= 0.8 * len(samples), samples
    poll(lambda: len(queued_on(cluster, job_id)) == 1, 5 + MARGIN_S,
         "exactly one queued copy")
    assert sum(qlen(proc, queue) for proc in cluster) == 1
