"""The client's choice of node (disque_py/client/routing.py), without
sockets: HELLO's answer learned, nodes left aside and taken back on a fake
clock, the order nodes are tried in, calls naming jobs sent to their
producer, and a consumer moving to the node that produced most of its jobs.
"""

from __future__ import annotations

import pytest

from disque_py.client.routing import RETRY_AFTER_S, SWITCH_AFTER_JOBS, Routes
from disque_py.client.types import Hello, Job, Node

A, B, C = ("10.0.0.1", 7711), ("10.0.0.2", 7711), ("10.0.0.3", 7711)
SEED = ("node-a.example", 7711)         # A as the client was told of it
IDS = {A: "aaaaaaaa" + "1" * 32, B: "bbbbbbbb" + "2" * 32, C: "cccccccc" + "3" * 32}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def hello_from(me, priorities=None) -> Hello:
    """HELLO as `me` answers it: A, B and C, each with its priority."""
    priorities = priorities or {}
    nodes = [Node(IDS[address], address[0], address[1], priorities.get(address, 1))
             for address in (A, B, C)]
    return Hello(1, IDS[me], nodes)


def job_of(address, serial: int = 0) -> Job:
    return Job(f"D-{IDS[address][:8]}-{serial:024d}-05a1", "q", b"body")


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def routes(clock):
    """A client given A's name, that asked A for HELLO."""
    made = Routes([SEED], clock, switch_after=10)
    made.learn(hello_from(A), via=SEED)
    return made


# ------------------------------------------------------------- learning

def test_a_client_needs_an_address_and_starts_on_the_first():
    with pytest.raises(ValueError, match="at least one node"):
        Routes([], FakeClock())
    assert Routes([B, C], FakeClock()).current == B
    assert (SWITCH_AFTER_JOBS, RETRY_AFTER_S) == (128, 5.0)


def test_learn_knows_every_node_by_its_prefix_and_the_asked_one_by_its_name(routes):
    assert routes.by_prefix == {"aaaaaaaa": SEED, "bbbbbbbb": B, "cccccccc": C}
    assert routes.prefix_at[SEED] == "aaaaaaaa"
    assert routes.order == [SEED, B, C]
    assert routes.priority == {SEED: 1, B: 1, C: 1}


def test_learn_replaces_what_an_earlier_hello_said(clock):
    routes = Routes([A, ("seed-only", 1)], clock)
    routes.learn(hello_from(A), via=A)
    routes.learn(Hello(1, IDS[B], [Node(IDS[B], *B, 1)]), via=B)
    assert routes.by_prefix == {"bbbbbbbb": B}
    assert routes.order == [B, A, ("seed-only", 1)]          # seeds kept after HELLO's


# ------------------------------------------------------------- failing

def test_a_failed_current_node_is_left_for_retry_after_seconds(routes, clock):
    routes.failed(SEED)
    assert routes.current == B
    assert routes.is_down(SEED)
    clock.now += RETRY_AFTER_S - 0.001
    assert routes.is_down(SEED)
    clock.now += 0.001
    assert not routes.is_down(SEED) and SEED not in routes.down_until


def test_a_failed_other_node_leaves_the_current_one_alone(routes):
    routes.failed(C)
    assert routes.current == SEED and routes.is_down(C)
    assert routes.candidates() == [SEED, B, C]


def test_failing_the_current_node_forgets_the_producers_counted(routes):
    routes.handed_out([job_of(B)] * 4)
    routes.failed(SEED)
    assert (routes.received, sum(routes.produced.values())) == (0, 0)


def test_a_custom_retry_after_is_kept(clock):
    routes = Routes([A, B], clock, retry_after=0.5)
    routes.failed(A)
    clock.now += 0.5
    assert not routes.is_down(A)


# ------------------------------------------------------------- candidates

def test_candidates_go_by_priority_then_hellos_order(clock):
    routes = Routes([SEED], clock)
    routes.learn(hello_from(A, {A: 10, B: 100}), via=SEED)
    assert routes.candidates() == [C, SEED, B]


def test_nodes_left_aside_come_last_the_first_to_return_first(routes, clock):
    routes.failed(B)
    clock.now += 1
    routes.failed(SEED)
    assert routes.candidates() == [C, B, SEED]
    assert routes.current == C


def test_with_every_node_down_the_first_to_return_is_best(routes, clock):
    for address in (C, SEED, B):
        routes.failed(address)
        clock.now += 0.1
    assert routes.candidates() == [C, SEED, B] and routes.best() == C


def test_seeds_missing_from_hello_are_still_tried_last(clock):
    other = ("10.9.9.9", 7711)
    routes = Routes([A, other], clock)
    routes.learn(hello_from(A), via=A)
    assert routes.candidates() == [A, B, C, other]


def test_before_hello_the_seeds_are_the_candidates(clock):
    routes = Routes([B, C], clock)
    routes.failed(B)
    assert routes.candidates() == [C, B] and routes.current == C


def test_hello_is_asked_again_of_the_current_node_first_while_it_is_up(routes):
    routes.current = C
    routes.failed(B)
    assert routes.discovery_order() == [C, SEED, B]
    routes.failed(C)                                     # then the best other
    assert routes.current == SEED and routes.discovery_order() == [SEED, B, C]


# ------------------------------------------------------------- for_jobs

def test_jobs_of_one_known_producer_go_to_it(routes):
    assert routes.for_jobs([job_of(B).id, job_of(B, 1).id]) == B
    assert routes.for_jobs([job_of(A).id]) == SEED


@pytest.mark.parametrize("ids", [
    [job_of(B).id, job_of(C).id],                       # two producers
    ["D-dddddddd-" + "0" * 24 + "-05a1"],               # a node HELLO did not list
    [],
])
def test_other_jobs_go_to_the_current_node(routes, ids):
    assert routes.for_jobs(ids) == SEED


def test_jobs_of_a_producer_left_aside_go_to_the_current_node(routes, clock):
    routes.failed(B)
    assert routes.for_jobs([job_of(B).id]) == SEED
    clock.now += RETRY_AFTER_S
    assert routes.for_jobs([job_of(B).id]) == B


# ------------------------------------------------------------- handed_out

def test_a_consumer_moves_to_the_main_producer_after_switch_after_jobs(routes):
    routes.handed_out([job_of(B)] * 6 + [job_of(A)] * 3)
    assert routes.current == SEED                        # 9 jobs: not yet
    routes.handed_out([job_of(C)])
    assert routes.current == B
    assert (routes.received, sum(routes.produced.values())) == (0, 0)


def test_a_consumer_stays_when_its_node_produced_as_many(routes):
    routes.handed_out([job_of(A)] * 5 + [job_of(B)] * 5)
    assert routes.current == SEED


def test_a_consumer_stays_when_its_node_produced_most(routes):
    routes.handed_out([job_of(A)] * 6 + [job_of(B)] * 4)
    assert routes.current == SEED


def test_a_consumer_does_not_move_to_a_producer_left_aside(routes):
    routes.failed(B)
    routes.handed_out([job_of(B)] * 10)
    assert routes.current == SEED


def test_a_consumer_does_not_move_to_an_unknown_producer(routes):
    stranger = Job("D-dddddddd-" + "0" * 24 + "-05a1", "q", b"body")
    routes.handed_out([stranger] * 10)
    assert routes.current == SEED


def test_each_window_of_jobs_is_counted_afresh(routes):
    routes.handed_out([job_of(A)] * 10)                 # a window A won
    routes.handed_out([job_of(B)] * 6 + [job_of(A)] * 4)
    assert routes.current == B


def test_one_batch_larger_than_the_window_is_counted_whole(routes):
    routes.handed_out([job_of(C)] * 25 + [job_of(A)] * 5)
    assert routes.current == C and routes.received == 0


def test_empty_answers_count_for_nothing(routes):
    for _ in range(20):
        routes.handed_out([])
    assert routes.current == SEED and routes.received == 0
