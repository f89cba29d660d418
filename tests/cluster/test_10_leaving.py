"""A node leaving the cluster (CLUSTER LEAVING yes), with real processes
(Disque's "Leaving nodes" section and its Tcl unit 10-leaving):

  * the state is reported and spread to the other nodes, and HELLO on every
    node gives the leaving node priority 100;
  * ADDJOB on it replicates externally: it keeps no copy (registered_jobs
    stays 0) and REPLICATE copies are made elsewhere, one of them queued;
    the other nodes never give it a copy either;
  * a GETJOB that would block gets -LEAVING, clients already blocked there
    are released with that error, and jobs already queued are still served;
  * its queued jobs drain to consumers blocked on other nodes (federation)
    until, once acknowledged, it holds nothing;
  * it creates no dummy acks.

One four-node cluster (cluster-node-timeout 1000 ms) is shared by the
module; before every test every node stops leaving, the others see it, and
every node is flushed. Every test uses its own queue.
"""

from __future__ import annotations

import uuid

import pytest

from tests.cluster.harness import (MARGIN_S, call, hello, info, nodes_by_id, poll, raw_reply,
                                   registered_jobs, show, states)
from tests.support import encode_command

LEAVING_ERROR = b"-LEAVING This node is leaving the cluster, please connect to a different one\r\n"
LEAVING_NOREPL = (b"-NOREPL Not enough reachable nodes for the requested replication level, "
                  b"since I'm unable to hold a copy of the message for the following "
                  b"reason: I'm leaving the cluster\r\n")
NOT_ENOUGH_NODES = b"-NOREPL Not enough reachable nodes for the requested replication level\r\n"
GOSSIP_DEADLINE_S = 5 + MARGIN_S
DRAIN_DEADLINE_S = 15 + MARGIN_S
PEERS = (1, 2, 3)


# ------------------------------------------------------------------ helpers

def seen_leaving(cluster, observer: int, index: int) -> bool:
    return "leaving" in nodes_by_id(cluster[observer])[cluster.ids[index]].flags


def set_leaving(cluster, index: int, leaving: bool) -> None:
    assert call(cluster[index], "CLUSTER", "LEAVING", "yes" if leaving else "no") == b"OK"
    poll(lambda: all(seen_leaving(cluster, other, index) == leaving
                     for other in range(len(cluster)) if other != index),
         GOSSIP_DEADLINE_S, f"node {index} leaving={leaving} seen by every node")


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def four(make_cluster):
    return make_cluster(4)


@pytest.fixture
def cluster(four):
    for index, proc in enumerate(four):
        call(proc, "CLUSTER", "LEAVING", "no")
    poll(lambda: not any("leaving" in line.flags
                         for proc in four for line in nodes_by_id(proc).values()),
         GOSSIP_DEADLINE_S, "no node seen leaving")
    four.wait_full_mesh()
    for proc in four:
        assert call(proc, "DEBUG", "FLUSHALL") == b"OK"
    return four


@pytest.fixture
def queue():
    return f"leave-{uuid.uuid4().hex[:12]}"


# ------------------------------------------------------------------ the state

def test_leaving_can_be_queried_set_and_spreads_to_every_node(cluster):
    assert call(cluster[0], "CLUSTER", "LEAVING") == b"no"
    assert not any(seen_leaving(cluster, other, 0) for other in PEERS)
    set_leaving(cluster, 0, True)
    assert call(cluster[0], "CLUSTER", "LEAVING") == b"yes"
    assert "leaving" in nodes_by_id(cluster[0])[cluster.ids[0]].flags


def test_hello_gives_the_leaving_node_priority_100_on_every_node(cluster):
    set_leaving(cluster, 0, True)
    leaving_id = cluster.ids[0]

    def priorities_ok() -> bool:
        for proc in cluster:
            _, _, nodes = hello(proc)
            if nodes[leaving_id][2] != 100:
                return False
            if any(nodes[cluster.ids[i]][2] >= 100 for i in PEERS):
                return False
        return True

    poll(priorities_ok, GOSSIP_DEADLINE_S, "HELLO priority 100 for node 0 everywhere")


# ------------------------------------------------------------------ producing on a leaving node

@pytest.mark.parametrize("mode", ["sync", "async"])
def test_addjob_on_a_leaving_node_replicates_externally(cluster, queue, mode):
    set_leaving(cluster, 0, True)
    assert registered_jobs(cluster[0]) == 0
    extra = ["ASYNC"] if mode == "async" else []
    job_id = call(cluster[0], "ADDJOB", queue, "body", 5000, "REPLICATE", 3, *extra)
    assert registered_jobs(cluster[0]) == 0
    assert show(cluster[0], job_id) is None
    # Three copies elsewhere; one of the holders is asked to queue it.
    found = poll(lambda: (lambda f: f if sorted(f.values()) == ["active", "active", "queued"]
                          else None)(states(cluster, job_id)),
                 GOSSIP_DEADLINE_S, "3 external copies, one queued")
    assert 0 not in found and len(found) == 3
    holders = {cluster.ids[i].encode() for i in found}
    for index in found:
        assert set(show(cluster[index], job_id)["nodes-delivered"]) == holders
    assert registered_jobs(cluster[0]) == 0


def test_a_leaving_node_refuses_a_replication_it_could_only_reach_with_its_own_copy(cluster,
                                                                                     queue):
    set_leaving(cluster, 0, True)
    assert raw_reply(cluster[0], "ADDJOB", queue, "body", 5000, "REPLICATE", 4) == LEAVING_NOREPL
    assert raw_reply(cluster[0], "ADDJOB", queue, "body", 5000, "REPLICATE", 5) \
        == NOT_ENOUGH_NODES
    assert registered_jobs(cluster[0]) == 0


def test_other_nodes_give_a_leaving_node_no_copies(cluster, queue):
    set_leaving(cluster, 0, True)
    for _ in range(5):
        job_id = call(cluster[1], "ADDJOB", queue, "body", 5000, "REPLICATE", 3)
        assert set(states(cluster, job_id)) == {1, 2, 3}
    # Only three nodes can hold copies now.
    assert raw_reply(cluster[1], "ADDJOB", queue, "body", 5000, "REPLICATE", 4) \
        == NOT_ENOUGH_NODES
    assert registered_jobs(cluster[0]) == 0


# ------------------------------------------------------------------ consuming on a leaving node

def test_getjob_that_would_block_gets_leaving(cluster, queue):
    set_leaving(cluster, 0, True)
    assert raw_reply(cluster[0], "GETJOB", "FROM", queue) == LEAVING_ERROR
    assert raw_reply(cluster[0], "GETJOB", "TIMEOUT", 5000, "FROM", queue, "other") \
        == LEAVING_ERROR
    # NOHANG never blocks: it still gets the empty reply, as in Disque.
    assert raw_reply(cluster[0], "GETJOB", "NOHANG", "FROM", queue) == b"*-1\r\n"
    assert int(info(cluster[0], "clients")["blocked_clients"]) == 0


def test_clients_blocked_on_getjob_are_released_with_leaving(cluster, queue):
    consumers = [cluster[0].raw() for _ in range(2)]
    consumers[0].send(encode_command("GETJOB", "FROM", queue))
    consumers[1].send(encode_command("GETJOB", "TIMEOUT", 30000, "FROM", queue, "another"))
    poll(lambda: int(info(cluster[0], "clients")["blocked_clients"]) == 2, 5,
         "two consumers blocked on node 0")
    assert call(cluster[0], "CLUSTER", "LEAVING", "yes") == b"OK"
    for consumer in consumers:
        assert consumer.read_reply() == LEAVING_ERROR
    assert int(info(cluster[0], "clients")["blocked_clients"]) == 0


def test_jobs_queued_before_leaving_are_still_served(cluster, queue):
    job_id = call(cluster[0], "ADDJOB", queue, "body", 5000, "REPLICATE", 1, "RETRY", 0)
    set_leaving(cluster, 0, True)
    assert call(cluster[0], "GETJOB", "FROM", queue) == [[queue.encode(), job_id, b"body"]]
    assert raw_reply(cluster[0], "GETJOB", "FROM", queue) == LEAVING_ERROR


# ------------------------------------------------------------------ draining

def test_a_leaving_node_drains_its_queued_jobs_to_consumers_on_other_nodes(cluster, queue):
    count = 5
    job_ids = {call(cluster[0], "ADDJOB", queue, f"job-{n}", 5000, "REPLICATE", 2,
                    "RETRY", 60)
               for n in range(count)}
    assert call(cluster[0], "QLEN", queue) == count
    set_leaving(cluster, 0, True)

    served = {}
    consumers = (1, 2)
    while len(served) < count:
        index = consumers[len(served) % 2]
        reply = call(cluster[index], "GETJOB", "TIMEOUT", int(DRAIN_DEADLINE_S * 1000),
                     "FROM", queue)
        assert reply, "a consumer on another node waited in vain"
        (entry,) = reply
        assert entry[1] in job_ids and entry[1] not in served
        served[entry[1]] = index
    assert call(cluster[0], "QLEN", queue) == 0

    for job_id, index in served.items():
        assert call(cluster[index], "ACKJOB", job_id) == 1
    poll(lambda: registered_jobs(cluster[0]) == 0, DRAIN_DEADLINE_S,
         "node 0 empty once its jobs were acknowledged elsewhere")
    for job_id in job_ids:
        poll(lambda: not states(cluster, job_id), DRAIN_DEADLINE_S,
             "every copy collected after the acks")


def test_a_leaving_node_creates_no_dummy_acks(cluster, queue):
    set_leaving(cluster, 0, True)
    job_id = call(cluster[1], "ADDJOB", queue, "body", 5000, "REPLICATE", 3)
    assert call(cluster[0], "ACKJOB", job_id) == 0
    assert registered_jobs(cluster[0]) == 0
    assert show(cluster[0], job_id) is None
    # Nothing was acknowledged: the copies elsewhere are untouched.
    assert sorted(states(cluster, job_id).values()) == ["active", "active", "queued"]
