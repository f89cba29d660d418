"""The node's job event counters and state census, which /metrics reads.

stats_delivered, stats_acked, stats_nacked, stats_requeued and
stats_expired count events where they happen (one C increment each);
JobTable.count_states counts jobs by state over a range of partitions.
Driven on a fake clock, no sockets.
"""

from __future__ import annotations

from disque_py.core.job import ACKED, ACTIVE, QUEUED, WAIT_REPL
from tests.unit.simnet import SimNet
TTL_S = 60
UNKNOWN_ID = b"D-abcdef01-" + b"A" * 24 + b"-0001"


def add(node, queue=b"q", *, retry=None, ttl=TTL_S, repl=None):
    return node.add_job(queue, b"body", repl, 0, retry, ttl, 0, False)


def census(node) -> list[int]:
    return node.jobs.count_states(0, node.jobs.partition_count)


def test_counters_start_at_zero(node):
    assert (node.stats_delivered, node.stats_acked, node.stats_nacked,
            node.stats_requeued, node.stats_expired) == (0, 0, 0, 0, 0)


def test_getjob_counts_each_job_delivered(node):
    for _ in range(3):
        add(node)
    node.get_jobs([b"q"], 2)
    assert node.stats_delivered == 2


def test_a_job_moved_to_another_node_is_not_a_delivery(node):
    add(node)
    node.fetch(node.queues.get(b"q"), False)        # as federation's YOURJOBS takes it
    assert node.stats_delivered == 0


def test_ackjob_and_fastack_count_jobs_newly_acknowledged(node):
    first, second, third = add(node), add(node), add(node)
    assert node.ack_jobs([first.id, first.id]) == 1
    node.fast_ack([second.id])
    node.ack_jobs([UNKNOWN_ID])                # unknown here: nothing acked
    assert node.stats_acked == 2
    assert third.state == QUEUED


def test_nack_counts_immediate_and_delayed_nacks(node):
    add(node), add(node)
    taken = node.get_jobs([b"q"], 2)
    node.nack_jobs([taken[0].id])
    node.nack_jobs([taken[1].id], 5000)        # counted when asked, queued later
    assert node.stats_nacked == 2
    assert node.stats_requeued == 0


def test_retry_timer_requeue_is_counted(node, drive):
    add(node, retry=1)
    node.get_jobs([b"q"], 1)
    drive(2000)
    assert node.stats_requeued == 1
    assert node.stats_nacked == 0


def test_ttl_end_counts_an_expired_job(node, drive):
    add(node, ttl=2, retry=1)
    drive(4000)
    assert node.stats_expired == 1
    assert len(node.jobs) == 0


def test_count_states_counts_jobs_by_state(node):
    for _ in range(5):
        add(node)
    node.get_jobs([b"q"], 2)
    node.cluster_size = 2                      # an unknown job's ACK leaves a dummy ack
    node.ack_jobs([UNKNOWN_ID])
    counts = census(node)
    assert (counts[WAIT_REPL], counts[ACTIVE], counts[QUEUED], counts[ACKED]) == (0, 2, 3, 1)


def test_count_states_slices_add_up_to_the_whole_table(node):
    for index in range(200):
        add(node, queue=b"q%d" % (index % 7))
    parts = node.jobs.partition_count
    sliced = [node.jobs.count_states(start, start + 100) for start in range(0, parts, 100)]
    assert [sum(column) for column in zip(*sliced)] == census(node) == [0, 0, 200, 0]


def test_count_states_ignores_partitions_out_of_range(node):
    add(node)
    parts = node.jobs.partition_count
    assert node.jobs.count_states(-10, 0) == [0, 0, 0, 0]
    assert node.jobs.count_states(parts, parts + 10) == [0, 0, 0, 0]


def test_each_peers_gotjob_round_trip_is_kept_apart():
    net = SimNet(3, seed=1)
    job = net.add_job(0, repl=3, client="p")
    assert net.run_until(lambda: "p" in net.unblocked, 100)
    producer = net.nodes[0]
    holders = {node_id for node_id in job.delivered if node_id != producer.id}
    assert set(producer.repl_rtt_by_peer) == holders
    assert all(rtt >= 0 for rtt in producer.repl_rtt_by_peer.values())
    assert not net.nodes[1].repl_rtt_by_peer       # it made no job
