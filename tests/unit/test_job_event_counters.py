"""The node's job event counters and the census of jobs by state, which /metrics reads.

stats_delivered, stats_acked, stats_nacked, stats_requeued and
stats_expired count events where they happen (one C increment each); the
job table counts its acked jobs, from which (with the queues' lengths and
the producers waiting for copies) web/census.py tells jobs by state without
walking them: here checked against a walk, through acks with and without
copies elsewhere, dummy acks, GC, replication, NACKs, expiry and FLUSHALL.
Driven on a fake clock (SimNet's for a cluster), no sockets.
"""

from __future__ import annotations

import random
from collections import Counter

from disque_py.engine import ACKED, ACTIVE, QUEUED, WAIT_REPL
from disque_py.web.census import jobs_by_state
from tests.unit.simnet import SimNet
from tests.engine.commands import ack_jobs, get_jobs, nack_jobs
TTL_S = 60
UNKNOWN_ID = b"D-abcdef01-" + b"A" * 24 + b"-0001"


def add(node, queue=b"q", *, retry=None, ttl=TTL_S, repl=None):
    return node.add_job(queue, b"body", repl, 0, retry, ttl, 0, False)


def walked(node) -> list[int]:
    """Jobs by state, counted the slow way: one look at every job."""
    counts = Counter(job.state for job in node.jobs.values())
    return [counts[state] for state in (WAIT_REPL, ACTIVE, QUEUED, ACKED)]


def census(node) -> list[int]:
    return jobs_by_state(node, sum(len(q.jobs) for q in node.queues.values()))


def test_counters_start_at_zero(node):
    assert (node.stats_delivered, node.stats_acked, node.stats_nacked,
            node.stats_requeued, node.stats_expired) == (0, 0, 0, 0, 0)


def test_getjob_counts_each_job_delivered(node):
    for _ in range(3):
        add(node)
    get_jobs(node, [b"q"], 2)
    assert node.stats_delivered == 2


def test_a_job_moved_to_another_node_is_not_a_delivery(node):
    add(node)
    node.fetch(node.queues.get(b"q"), False)        # as federation's YOURJOBS takes it
    assert node.stats_delivered == 0


def test_ackjob_and_fastack_count_jobs_newly_acknowledged(node):
    first, second, third = add(node), add(node), add(node)
    assert ack_jobs(node, [first.id, first.id]) == 1
    node.fast_ack([second.id])
    ack_jobs(node, [UNKNOWN_ID])                # unknown here: nothing acked
    assert node.stats_acked == 2
    assert third.state == QUEUED


def test_nack_counts_immediate_and_delayed_nacks(node):
    add(node), add(node)
    taken = get_jobs(node, [b"q"], 2)
    nack_jobs(node, [taken[0].id])
    nack_jobs(node, [taken[1].id], 5000)        # counted when asked, queued later
    assert node.stats_nacked == 2
    assert node.stats_requeued == 0


def test_retry_timer_requeue_is_counted(node, drive):
    add(node, retry=1)
    get_jobs(node, [b"q"], 1)
    drive(2000)
    assert node.stats_requeued == 1
    assert node.stats_nacked == 0


def test_ttl_end_counts_an_expired_job(node, drive):
    add(node, ttl=2, retry=1)
    drive(4000)
    assert node.stats_expired == 1
    assert len(node.jobs) == 0


def test_census_counts_jobs_by_state(node):
    for _ in range(5):
        add(node)
    get_jobs(node, [b"q"], 2)
    node.cluster_size = 2                      # an unknown job's ACK leaves a dummy ack
    ack_jobs(node, [UNKNOWN_ID])
    assert node.jobs.acked == 1
    assert census(node) == walked(node) == [0, 2, 3, 1]


def test_the_acked_count_follows_gc_and_flushall(node, drive):
    node.cluster_size = 2
    ack_jobs(node, [UNKNOWN_ID])
    ack_jobs(node, [UNKNOWN_ID[:-1] + b"3"])
    assert node.jobs.acked == 2
    node.flush_all()
    assert node.jobs.acked == 0 and census(node) == walked(node) == [0, 0, 0, 0]


def test_census_matches_a_walk_through_a_random_cluster_workload():
    net = SimNet(3, seed=7)
    rng = random.Random(7)
    seen = set()
    for step in range(400):
        i = rng.randrange(3)
        action = rng.random()
        if action < 0.4:
            net.add_job(i, b"q%d" % rng.randrange(3), repl=rng.choice([1, 2, 3]),
                        client=("p", step), retry=rng.choice([1, 5]), ttl=rng.choice([3, 60]))
        elif action < 0.6:
            net.get_jobs(i, b"q0", b"q1", b"q2", count=2)
        else:
            held = [job.id for job in net.nodes[i].jobs.values()]
            if held:
                method = rng.choice([ack_jobs, "fast_ack", nack_jobs])
                net.call(i, method, [rng.choice(held)])
        net.run_for(rng.choice([0, 10, 300]))
        for node in net.nodes:
            counts = walked(node)
            assert census(node) == counts, f"step {step}"
            seen.update(state for state, count in enumerate(counts) if count)
    assert seen == {WAIT_REPL, ACTIVE, QUEUED, ACKED}, "the workload missed a state"


def test_each_peers_gotjob_round_trip_is_kept_apart():
    net = SimNet(3, seed=1)
    job = net.add_job(0, repl=3, client="p")
    assert net.run_until(lambda: "p" in net.unblocked, 100)
    producer = net.nodes[0]
    holders = {node_id for node_id in job.delivered if node_id != producer.id}
    assert set(producer.repl_rtt_by_peer) == holders
    assert all(rtt >= 0 for rtt in producer.repl_rtt_by_peer.values())
    assert not net.nodes[1].repl_rtt_by_peer       # it made no job
