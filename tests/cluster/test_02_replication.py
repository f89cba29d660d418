"""Job replication across real nodes (Disque's "Job replication" and "Job
re-queueing", and its Tcl units 02-jobs-replication and 03-jobs-queueing):

  * a synchronous ADDJOB answers only once REPLICATE copies exist: one
    queued on the producer, the others active, every holder listing the
    same holders in nodes-delivered; REPLICATE defaults to min(3, size);
  * NOREPL when the level cannot be reached: refused at once when there
    are not enough reachable nodes, after the timeout when the contacted
    nodes never answer (the copies made meanwhile are deleted), or when the
    job expires first;
  * a copy counts only once its holder's AOF has it: a node whose AOF
    cannot be written confirms none (NOREPL on two nodes) until it can;
  * ASYNC answers at once and the copies follow;
  * a producer asks other nodes when the first ones do not answer, and
    sends REPLJOB again to a node that comes back;
  * a job held by N nodes survives N-1 crashes: a surviving copy is
    re-queued after RETRY (counted as an additional delivery);
  * an at-most-once job has one copy and is never queued again.

"Down" is kill -9 when the node must lose its memory, SIGSTOP when it must
stay "reachable" (linked, not yet flagged) yet never answer. Nodes run with
cluster-node-timeout 1000 ms; one five-node cluster is shared by the
module, revived and flushed (DEBUG FLUSHALL) before every test, and every
test uses its own queue name. Two tests need a cluster of their own: a
two-node one (default REPLICATE) and a three-node one with a 5 s node
timeout (a node stopped for seconds must stay linked and unflagged).
"""

from __future__ import annotations

import time
import uuid

import pytest

from tests.cluster.harness import (MARGIN_S, call, fail_deadline_s, jobs_in_queue, poll, qlen,
                                   queued_on, raw_reply, show, states)
from tests.support import encode_command

RETRY_S = 1
# How long a copy may take to be re-queued after RETRY: retry, the +-250 ms
# desynchronisation, the awake timer, and a loaded machine.
REQUEUE_DEADLINE_S = RETRY_S + 1 + 2 * MARGIN_S
REVIVE_TIMEOUT_S = 30.0

NOT_ENOUGH_NODES = b"-NOREPL Not enough reachable nodes for the requested replication level\r\n"
TIMEOUT_NOREPL = (b"-NOREPL Timeout reached before replicating to the requested "
                  b"number of nodes\r\n")
EXPIRED_NOREPL = (b"-NOREPL job removed (expired?) before the requested replication "
                  b"level was achieved\r\n")


# ------------------------------------------------------------------ helpers

def holder_indexes(cluster, node_ids) -> list[int]:
    wanted = {node_id.decode() if isinstance(node_id, bytes) else node_id
              for node_id in node_ids}
    return [i for i, node_id in enumerate(cluster.ids) if node_id in wanted]


def stays(condition, seconds: float, message: str) -> None:
    """`condition` holds at every poll for `seconds` (behaviour over time)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert condition(), message
        time.sleep(0.1)
    assert condition(), message


# ------------------------------------------------------------------ fixtures

def revive(cluster) -> None:
    """Every node running and unstopped, the mesh whole again."""
    dead = [proc for proc in cluster if not proc.alive()]
    for proc in dead:
        proc.start(wait=False)
    for proc in dead:
        proc.wait_ready()
    for proc in cluster:
        proc.resume()
    cluster.wait_full_mesh(timeout=REVIVE_TIMEOUT_S)


@pytest.fixture(scope="module")
def five(make_cluster):
    return make_cluster(5)


@pytest.fixture
def cluster(five):
    revive(five)
    for proc in five:
        assert call(proc, "DEBUG", "FLUSHALL") == b"OK"
    yield five
    for proc in five:
        if proc.alive():
            proc.resume()        # a failed test must not leave a node stopped


@pytest.fixture
def queue():
    return f"repl-{uuid.uuid4().hex[:12]}"


# ------------------------------------------------------------------ synchronous replication

def test_replicate_3_on_5_nodes_makes_3_copies_before_replying_queued_only_on_producer(
        cluster, queue):
    job_id = call(cluster[0], "ADDJOB", queue, "body", 5000, "REPLICATE", 3)
    # No wait: the reply itself means the copies exist.
    found = states(cluster, job_id)
    assert len(found) == 3, found
    assert found[0] == "queued"
    assert sorted(state for i, state in found.items() if i != 0) == ["active", "active"]
    assert qlen(cluster[0], queue) == 1
    for index in found:
        if index != 0:
            assert qlen(cluster[index], queue) == 0
    assert show(cluster[0], job_id)["repl"] == 3


def test_every_holder_lists_the_same_3_holders_in_nodes_delivered(cluster, queue):
    job_id = call(cluster[2], "ADDJOB", queue, "body", 5000, "REPLICATE", 3)
    found = states(cluster, job_id)
    holders = {cluster.ids[i] for i in found}
    assert len(holders) == 3
    for index in found:
        delivered = show(cluster[index], job_id)["nodes-delivered"]
        assert len(delivered) == 3, (index, delivered)
        assert {node_id.decode() for node_id in delivered} == holders


def test_default_replicate_is_3_on_a_5_node_cluster(cluster, queue):
    job_id = call(cluster[1], "ADDJOB", queue, "body", 5000)
    info = show(cluster[1], job_id)
    assert info["repl"] == 3
    assert len(info["nodes-delivered"]) == 3
    assert len(states(cluster, job_id)) == 3


def test_default_replicate_is_2_on_a_2_node_cluster(make_cluster, queue):
    pair = make_cluster(2)
    job_id = call(pair[0], "ADDJOB", queue, "body", 5000)
    info = show(pair[0], job_id)
    assert info["repl"] == 2
    assert info["state"] == b"queued"
    assert show(pair[1], job_id)["state"] == b"active"


def test_replicate_above_the_reachable_nodes_is_refused_at_once_with_norepl(cluster, queue):
    began = time.monotonic()
    assert raw_reply(cluster[0], "ADDJOB", queue, "body", 5000, "REPLICATE", 6) \
        == NOT_ENOUGH_NODES
    assert time.monotonic() - began < 1.0      # not after the 5 s timeout
    assert raw_reply(cluster[0], "ADDJOB", queue, "body", 5000, "REPLICATE", 100) \
        == NOT_ENOUGH_NODES
    assert jobs_in_queue(cluster[0], queue) == {}
    assert qlen(cluster[0], queue) == 0


def test_norepl_after_the_timeout_when_copies_cannot_be_made_and_made_copies_are_deleted(
        make_cluster, queue):
    # Node 2 is stopped: it stays linked and unflagged (node timeout 5 s,
    # longer than the whole test), so REPLICATE 3 passes the reachability
    # check, but it never answers. Everything node 0 sends it waits, in
    # order, on the one link, to be read on SIGCONT: REPLJOB, then DELJOB.
    trio = make_cluster(3, node_timeout_ms=5000)
    timeout_ms = 2000
    trio[2].pause()
    try:
        producer = trio[0].raw()
        began = time.monotonic()
        producer.send(encode_command("ADDJOB", queue, "body", timeout_ms, "REPLICATE", 3))

        # While the producer waits: a wait-repl job there, a copy on node 1.
        waiting = poll(lambda: jobs_in_queue(trio[0], queue), timeout_ms / 1000 - 0.5,
                       "the job in wait-repl state on the producer")
        (job_id, state), = waiting.items()
        assert state == "wait-repl"
        poll(lambda: show(trio[1], job_id), timeout_ms / 1000 - 0.5,
             "a copy on the live peer while ADDJOB waits")

        assert producer.read_reply() == TIMEOUT_NOREPL
        assert time.monotonic() - began >= timeout_ms / 1000 - 0.1
        assert show(trio[0], job_id) is None
        poll(lambda: show(trio[1], job_id) is None, 5, "the live peer's copy deleted")
    finally:
        trio[2].resume()
    poll(lambda: not states(trio, job_id), 5 + MARGIN_S,
         "no copy left on the stopped node once it runs again")


def test_a_job_expiring_before_its_copies_exist_gets_norepl_job_removed(cluster, queue):
    # Disque keeps a wait-repl job in the awake list like any other: when
    # its TTL ends the producer is answered at once (unregisterJob).
    cluster[4].pause()
    producer = cluster[0].raw()
    began = time.monotonic()
    producer.send(encode_command("ADDJOB", queue, "body", 8000, "REPLICATE", 5, "TTL", 1))
    reply = producer.read_reply()
    elapsed = time.monotonic() - began
    assert reply == EXPIRED_NOREPL, (reply, elapsed)
    assert elapsed < 8 - 1, elapsed       # the TTL ended it, not the 8 s timeout
    assert jobs_in_queue(cluster[0], queue) == {}


@pytest.mark.parametrize("policy", ["always", "everysec"])
def test_a_copy_counts_only_once_its_holders_aof_has_it(fresh_cluster, queue, policy):
    # A node whose AOF cannot be written keeps copies in memory only: a
    # kill -9 would take them, so it must not confirm them (GOTJOB), as its
    # clients get no reply claiming success. Once its disk works again the
    # copies it got meanwhile are written, then confirmed.
    # A 5 s node timeout: a loaded machine must not get node 1 flagged
    # (NOREPL at once, for too few reachable nodes, is not what is tested).
    pair = fresh_cluster(2, node_timeout_ms=5000,
                         extra_args=["--appendonly", "yes", "--appendfsync", policy])
    assert call(pair[1], "DEBUG", "AOF-FAULT", "enospc", 1000) == b"OK"
    assert raw_reply(pair[0], "ADDJOB", queue, "refused", 1500, "REPLICATE", 2) \
        == TIMEOUT_NOREPL
    producer = pair[0].raw()
    producer.send(encode_command("ADDJOB", queue, "kept", 20_000, "REPLICATE", 2))
    waiting = poll(lambda: jobs_in_queue(pair[0], queue), 5, "the second job waiting")
    (job_id, state), = waiting.items()
    assert state == "wait-repl"
    assert call(pair[1], "DEBUG", "AOF-FAULT", "none") == b"OK"
    assert producer.read_reply() == b"+" + job_id + b"\r\n"
    pair[1].kill()
    pair[1].start()
    assert show(pair[1], job_id) is not None, "the confirmed copy was not in the AOF"


# ------------------------------------------------------------------ asynchronous replication

def test_async_answers_at_once_queued_on_producer_and_copies_follow(cluster, queue):
    for proc in cluster.procs[1:]:
        proc.pause()          # nobody could confirm a copy now
    try:
        began = time.monotonic()
        job_id = call(cluster[0], "ADDJOB", queue, "body", 5000, "REPLICATE", 3, "ASYNC")
        assert time.monotonic() - began < 1.0
        info = show(cluster[0], job_id)
        assert info["state"] == b"queued"
        assert info["repl"] == 3
        assert len(info["nodes-delivered"]) == 3
        assert qlen(cluster[0], queue) == 1
    finally:
        for proc in cluster.procs[1:]:
            proc.resume()
    found = poll(lambda: (lambda f: f if len(f) == 3 else None)(states(cluster, job_id)),
                 5 + MARGIN_S, "3 copies made in the background")
    assert found[0] == "queued"
    assert sorted(found.values()) == ["active", "active", "queued"]
    assert set(found) == set(holder_indexes(cluster, info["nodes-delivered"]))


# ------------------------------------------------------------------ retries

@pytest.mark.parametrize("attempt", range(3))
def test_sync_addjob_uses_other_nodes_when_the_contacted_ones_do_not_answer(
        cluster, queue, attempt):
    # Two of the four peers stopped: REPLICATE 3 needs exactly the two
    # live ones, so every request sent to a stopped node must be made up
    # for by asking another node, within the timeout.
    stopped = [(1, 2), (3, 4), (2, 4)][attempt]
    for index in stopped:
        cluster[index].pause()
    live = [i for i in range(5) if i not in stopped]
    reply = raw_reply(cluster[0], "ADDJOB", queue, "body", 5000, "REPLICATE", 3)
    assert reply.startswith(b"+D-"), reply
    job_id = reply[1:-2]
    found = states(cluster, job_id, live)
    assert set(found) == set(live), found
    assert found[0] == "queued"


def test_repljob_is_sent_again_to_a_node_that_comes_back(cluster, queue):
    cluster[4].kill()
    producer = cluster[0].raw()
    producer.sock.settimeout(30)       # the answer comes after a restart
    producer.send(encode_command("ADDJOB", queue, "body", 30000, "REPLICATE", 5))
    waiting = poll(lambda: jobs_in_queue(cluster[0], queue), 5, "the job waiting for copies")
    (job_id, state), = waiting.items()
    assert state == "wait-repl"
    # The producer is still waiting once everybody sees node 4 as failing.
    poll(lambda: "fail?" in cluster.flags_seen(cluster[0], cluster.ids[4])
         or "fail" in cluster.flags_seen(cluster[0], cluster.ids[4]),
         fail_deadline_s(), "node 4 flagged failing")
    assert jobs_in_queue(cluster[0], queue) == {job_id: "wait-repl"}

    cluster[4].start()
    assert producer.read_reply() == b"+%b\r\n" % job_id
    found = states(cluster, job_id)
    assert len(found) == 5, found
    assert found[0] == "queued"


# ------------------------------------------------------------------ crashes and re-queueing

@pytest.mark.parametrize("producer", [0, 3])
def test_job_replicated_3_times_is_delivered_after_killing_2_of_its_holders(
        cluster, queue, producer):
    body = f"payload-{producer}"
    job_id = call(cluster[producer], "ADDJOB", queue, body, 5000, "REPLICATE", 3,
                  "RETRY", RETRY_S)
    holders = list(states(cluster, job_id))
    assert len(holders) == 3 and producer in holders
    # Kill the producer (where it is queued) and one more holder.
    survivor = next(i for i in holders if i != producer)
    for index in holders:
        if index != survivor:
            cluster[index].kill()
    assert show(cluster[survivor], job_id)["state"] == b"active"

    reply = call(cluster[survivor], "GETJOB", "TIMEOUT", int(REQUEUE_DEADLINE_S * 1000),
                 "FROM", queue)
    assert reply == [[queue.encode(), job_id, body.encode()]]


def test_killing_the_queueing_node_requeues_another_copy_and_counts_the_delivery(
        cluster, queue):
    job_id = call(cluster[1], "ADDJOB", queue, "body", 5000, "REPLICATE", 3,
                  "RETRY", RETRY_S)
    survivors = [i for i in states(cluster, job_id) if i != 1]
    assert len(survivors) == 2
    cluster[1].kill()

    queued = poll(lambda: queued_on(cluster, job_id, survivors), REQUEUE_DEADLINE_S,
                  "the job queued again on a surviving holder")
    index = queued[0]
    info = show(cluster[index], job_id)
    assert info["additional-deliveries"] >= 1
    assert info["nacks"] == 0
    assert qlen(cluster[index], queue) == 1
    # Best effort de-duplication: the survivors settle on one queued copy.
    poll(lambda: len(queued_on(cluster, job_id, survivors)) == 1, REQUEUE_DEADLINE_S,
         "exactly one queued copy among the survivors")

    index = queued_on(cluster, job_id, survivors)[0]
    # Blocking: should the copy move meanwhile, federation brings it here.
    (got,) = call(cluster[index], "GETJOB", "TIMEOUT", 5000, "WITHCOUNTERS", "FROM", queue)
    assert got[:2] == [queue.encode(), job_id]
    counters = dict(zip(got[3::2], got[4::2]))
    assert counters[b"additional-deliveries"] >= 1
    assert counters[b"nacks"] == 0


def test_an_unconsumed_job_stays_queued_on_exactly_one_node(cluster, queue):
    job_id = call(cluster[0], "ADDJOB", queue, "body", 5000, "REPLICATE", 3,
                  "RETRY", RETRY_S)
    # Three retry periods: the queued copy keeps the others from queueing.
    stays(lambda: queued_on(cluster, job_id) == [0], 3 * RETRY_S + 0.5,
          "the job queued on the producer only")
    assert show(cluster[0], job_id)["additional-deliveries"] == 0


def test_a_consumed_but_unacknowledged_job_is_requeued_after_retry(cluster, queue):
    job_id = call(cluster[0], "ADDJOB", queue, "body", 5000, "REPLICATE", 3,
                  "RETRY", RETRY_S)
    assert call(cluster[0], "GETJOB", "FROM", queue) == [[queue.encode(), job_id, b"body"]]
    assert queued_on(cluster, job_id) == []
    assert sorted(states(cluster, job_id).values()) == ["active"] * 3
    queued = poll(lambda: queued_on(cluster, job_id), REQUEUE_DEADLINE_S,
                  "the job queued again after RETRY")
    assert show(cluster[queued[0]], job_id)["additional-deliveries"] >= 1


def test_an_at_most_once_job_has_one_copy_and_is_never_queued_again(cluster, queue):
    # TTL 10: an at-least-once job would default to RETRY 1 here.
    job_id = call(cluster[2], "ADDJOB", queue, "body", 5000, "REPLICATE", 1,
                  "RETRY", 0, "TTL", 10)
    assert states(cluster, job_id) == {2: "queued"}
    info = show(cluster[2], job_id)
    assert info["retry"] == 0 and info["repl"] == 1
    assert info["nodes-delivered"] == [cluster.ids[2].encode()]

    assert call(cluster[2], "GETJOB", "FROM", queue) == [[queue.encode(), job_id, b"body"]]
    # Never acknowledged, and twice past any retry it could have had.
    stays(lambda: states(cluster, job_id) == {2: "active"}
          and all(qlen(proc, queue) == 0 for proc in cluster),
          2.5, "the at-most-once job never queued again, nowhere copied")
    info = show(cluster[2], job_id)
    assert info["next-requeue-within"] is None
    assert info["additional-deliveries"] == 0
    assert raw_reply(cluster[2], "GETJOB", "NOHANG", "FROM", queue) == b"*-1\r\n"
