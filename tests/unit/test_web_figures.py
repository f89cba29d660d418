"""What /metrics and /readyz compute, driven directly: no sockets, a fake clock.

The duration histogram's buckets; the census's cap on exported queues and
its "other" sums, and the age of a queue's head job; readiness's rules
(loading, AOF errors, reaching at least half the cluster, handshake and
leaving nodes not counted). Over real sockets: tests/integration/test_http_*.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from disque_py.cluster.membership import Membership
from disque_py.cluster.nodes import FAIL, HANDSHAKE, LEAVING, ClusterNode
from disque_py.monitoring.histogram import DurationHistogram
from disque_py.web.census import take_census
from disque_py.web.health import readiness_problems
from tests.unit.conftest import NODE_ID
from tests.engine.commands import get_jobs

PEER_IDS = [bytes([ord("a") + n]) * 40 for n in range(4)]


def test_histogram_buckets_are_cumulative_with_inf_last():
    histogram = DurationHistogram((0.01, 0.1, 1.0))
    for seconds in (0.005, 0.01, 0.05, 0.5, 5.0):
        histogram.observe(seconds)
    assert histogram.cumulative() == [("0.01", 2), ("0.1", 3), ("1.0", 4), ("+Inf", 5)]
    assert histogram.count == 5 and histogram.sum == pytest.approx(5.565)


def add(node, queue: bytes, count: int) -> None:
    for _ in range(count):
        node.add_job(queue, b"body", None, 0, None, 60, 0, False)


def test_census_exports_the_longest_queues_and_sums_the_others(node, clock):
    add(node, b"old", 2)
    clock.advance(3000)
    for length, name in ((5, b"long"), (3, b"mid"), (1, b"short"), (1, b"tiny")):
        add(node, name, length)
    get_jobs(node, [b"tiny"], 1)                 # an empty queue is still a queue
    census = asyncio.run(take_census(node, max_queues=3))
    assert [(q.name, q.jobs) for q in census.queues] == [(b"long", 5), (b"mid", 3), (b"old", 2)]
    assert (census.other_queues, census.other_jobs) == (2, 1)
    assert census.queued_jobs == 11
    assert census.jobs_by_state == [0, 1, 11, 0]
    ages = {q.name: q.head_age_s for q in census.queues}
    assert ages == {b"long": 0.0, b"mid": 0.0, b"old": 3.0}


def test_census_gives_no_age_for_an_empty_exported_queue(node):
    add(node, b"q", 1)
    get_jobs(node, [b"q"], 1)
    [figures] = asyncio.run(take_census(node)).queues
    assert (figures.jobs, figures.head_age_s) == (0, None)


def membership_of(clock, peers: list[int]) -> Membership:
    """This node and one peer per entry of `peers`, each entry its flags."""
    membership = Membership(NODE_ID, 7711, 1000, clock)
    for peer_id, flags in zip(PEER_IDS, peers):
        membership.nodes[peer_id] = ClusterNode(peer_id, "127.0.0.1", 7712, flags,
                                                clock.now_ms())
    membership.refresh_views()
    return membership


def server_with(membership=None, *, loading=False, accepting=True, error=""):
    writer = SimpleNamespace(last_error=error)
    persistence = SimpleNamespace(writer=writer, accepting=accepting, load_progress=None)
    cluster = SimpleNamespace(membership=membership) if membership is not None else None
    return SimpleNamespace(loading=loading, persistence=persistence, cluster=cluster)


def test_ready_alone_and_with_half_the_cluster(clock):
    assert readiness_problems(server_with(membership_of(clock, []))) == []
    assert readiness_problems(server_with(membership_of(clock, [0, FAIL]))) == []   # 2 of 3
    assert readiness_problems(server_with(membership_of(clock, [FAIL]))) == []      # 1 of 2
    assert readiness_problems(server_with(membership_of(clock, [FAIL, FAIL, 0]))) == []  # 2 of 4


def test_not_ready_with_less_than_half(clock):
    problems = readiness_problems(server_with(membership_of(clock, [FAIL, FAIL])))
    assert problems == ["cluster: 1 of 3 nodes reachable (at least half are needed)"]


def test_handshake_and_leaving_nodes_are_not_counted(clock):
    membership = membership_of(clock, [FAIL, HANDSHAKE, LEAVING, LEAVING])
    assert readiness_problems(server_with(membership)) == []                       # 1 of 2


def test_loading_and_aof_errors_each_give_a_line(clock):
    server = server_with(membership_of(clock, [FAIL, FAIL]), loading=True, accepting=False,
                         error="No space left on device")
    assert readiness_problems(server) == [
        "loading: the AOF is being loaded",
        "aof: write commands are refused: No space left on device",
        "cluster: 1 of 3 nodes reachable (at least half are needed)"]
