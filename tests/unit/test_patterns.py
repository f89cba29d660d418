"""GETJOB ... PATTERN glob in the core, on the fake clock: which queues a
pattern covers, the round-robin that keeps one queue from starving the
others, and parked pattern consumers (woken by new queues too, cancelled,
timed out, released when the node leaves). GETJOB's own parsing is driven
through run_hot, as the command table runs it."""

from __future__ import annotations

import pytest

from disque_py.base.effects import Unblock
from disque_py.node.consumers import PATTERN_CACHE_MAX
from disque_py.node.waiters import TIMED_OUT
from disque_py.engine import HOT_COMMANDS, PAUSED_OUT, render_jobs, run_hot
from disque_py.base.errors import CommandError, LeavingError

GETJOB = HOT_COMMANDS["getjob"]


def add(node, queue, body=b"body"):
    return node.add_job(queue, body, None, 0, None, 3600, 0, False)


def getjob(node, *words):
    """Run GETJOB as a client would: the encoded reply, or the waiter."""
    reply = run_hot(GETJOB, node, None, [b"GETJOB", *words])
    return reply[0] if isinstance(reply, tuple) else reply


def served_queues(node, rounds, *words):
    taken = []
    for _ in range(rounds):
        reply = getjob(node, b"NOHANG", *words)
        taken.append(reply.split(b"\r\n")[3] if reply.startswith(b"*1") else None)
    return taken


def test_only_matching_queues_are_covered(node):
    for name in (b"orders:eu", b"orders:us", b"ordersx", b"mail"):
        add(node, name)
    assert sorted(node.consumers.pattern_queues(b"orders:*")) == [b"orders:eu", b"orders:us"]
    assert node.consumers.pattern_queues(b"orders:[e]?") == [b"orders:eu"]
    assert node.consumers.pattern_queues(b"nothing*") == []


def test_dead_letter_queues_are_covered_only_by_a_glob_that_names_them(node):
    for name in (b"orders:eu", b"orders:eu:dead", b"orders:us:dead", b"dead"):
        add(node, name)
    assert node.consumers.pattern_queues(b"orders:*") == [b"orders:eu"]
    assert node.consumers.pattern_queues(b"*") == [b"dead", b"orders:eu"]
    assert sorted(node.consumers.pattern_queues(b"*:dead")) == [b"orders:eu:dead",
                                                               b"orders:us:dead"]
    assert node.consumers.pattern_queues(b"orders:eu:dead") == [b"orders:eu:dead"]


def test_a_parked_consumer_is_not_woken_by_a_dead_letter_queue(node):
    waiter = getjob(node, b"PATTERN", b"jobs:*")
    add(node, b"jobs:a:dead")
    node.consumers.serve_ready()
    assert node.take_effects() == []
    job = add(node, b"jobs:a")
    node.consumers.serve_ready()
    assert node.take_effects() == [Unblock(waiter, [job])]


def test_every_queue_with_jobs_is_served_in_turn(node):
    for name in (b"q:a", b"q:b", b"q:c"):
        for _ in range(3):
            add(node, name)
    assert served_queues(node, 6, b"PATTERN", b"q:*") == [b"q:a", b"q:b", b"q:c"] * 2


def test_a_busy_queue_does_not_starve_a_quiet_one(node):
    for _ in range(100):
        add(node, b"q:busy")
    add(node, b"q:quiet")
    taken = served_queues(node, 4, b"PATTERN", b"q:*")
    assert b"q:quiet" in taken[:2] and taken.count(b"q:busy") == 3


def test_count_takes_pass_after_pass_over_the_matching_queues(node):
    jobs = [add(node, b"q:a"), add(node, b"q:a"), add(node, b"q:b")]
    reply = getjob(node, b"COUNT", b"3", b"PATTERN", b"q:*")
    assert reply == render_jobs([jobs[0], jobs[2], jobs[1]], False)


def test_no_match_with_nohang_is_a_null_array(node):
    assert getjob(node, b"NOHANG", b"PATTERN", b"none:*") == b"*-1\r\n"


def test_a_paused_queue_is_skipped(node):
    add(node, b"q:a")
    job = add(node, b"q:b")
    node.set_paused(node.queues.get(b"q:a"), PAUSED_OUT)
    assert served_queues(node, 2, b"PATTERN", b"q:*") == [b"q:b", None]
    assert job.state != 2          # taken: no longer queued


@pytest.mark.parametrize("words", [(b"PATTERN",), (b"PATTERN", b"a", b"b"),
                                   (b"NOHANG", b"PATTERN")])
def test_pattern_takes_exactly_one_last_word(node, words):
    with pytest.raises(CommandError, match="syntax error"):
        getjob(node, *words)


def test_from_reads_pattern_as_a_queue_name(node):
    job = add(node, b"PATTERN")
    assert getjob(node, b"NOHANG", b"FROM", b"PATTERN", b"x") == render_jobs([job], False)


def test_a_parked_consumer_is_woken_by_a_queue_made_after_it_parked(node):
    waiter = getjob(node, b"PATTERN", b"jobs:*")
    assert node.parking.blocked_clients == 1
    add(node, b"other")
    node.consumers.serve_ready()
    assert node.take_effects() == []
    job = add(node, b"jobs:new")
    node.consumers.serve_ready()
    assert node.take_effects() == [Unblock(waiter, [job])]
    assert node.consumers.pattern_waiters is None and node.parking.blocked_clients == 0


def test_parked_consumers_get_one_job_each_oldest_first(node):
    first = node.consumers.block_pattern("c1", b"q:*", 0, False)
    second = node.consumers.block_pattern("c2", b"q:*", 0, False)
    third = node.consumers.block_pattern("c3", b"other:*", 0, False)
    jobs = [add(node, b"q:a"), add(node, b"q:b"), add(node, b"q:b")]
    node.consumers.serve_ready()
    effects = node.take_effects()
    assert effects == [Unblock(first, [jobs[0]]), Unblock(second, [jobs[1]])]
    assert list(node.consumers.pattern_waiters) == [third]
    assert node.queue_length(b"q:b") == 1


def test_a_cancelled_consumer_is_forgotten(node):
    waiter = node.consumers.block_pattern("c1", b"q:*", 0, False)
    node.parking.cancel(waiter)
    assert node.consumers.pattern_waiters is None and node.parking.blocked_clients == 0
    add(node, b"q:a")
    node.consumers.serve_ready()
    assert node.take_effects() == [] and node.queue_length(b"q:a") == 1


def test_a_parked_consumer_times_out(node, clock):
    waiter = getjob(node, b"TIMEOUT", b"100", b"PATTERN", b"q:*")
    clock.advance(100)
    node.tick()
    assert node.take_effects() == [Unblock(waiter, TIMED_OUT)]
    assert node.consumers.pattern_waiters is None


def test_leaving_releases_parked_pattern_consumers(node):
    waiter = node.consumers.block_pattern("c1", b"q:*", 0, False)
    node.set_cluster_view(1, set(), 0, [], leaving=True)     # this node starts leaving
    [effect] = node.take_effects()
    assert effect.waiter is waiter and isinstance(effect.outcome, LeavingError)


def test_an_evicted_queue_leaves_the_pattern(node, clock):
    add(node, b"q:a")
    getjob(node, b"NOHANG", b"PATTERN", b"q:*")
    assert node.consumers.pattern_queues(b"q:*") == [b"q:a"]
    clock.advance(3600 * 1000)
    node.memory.evict_idle_queues(budget=len(node.queues.partitions()))
    assert node.consumers.pattern_queues(b"q:*") == []
    assert node.queues.get(b"q:a") is None


def test_remembered_patterns_are_bounded(node):
    for index in range(PATTERN_CACHE_MAX + 10):
        node.consumers.pattern_queues(b"p%d:*" % index)
    assert len(node.consumers._patterns) == PATTERN_CACHE_MAX


def test_plain_queues_pay_no_ready_mark_without_pattern_consumers(node):
    add(node, b"q:a")
    assert node.ready == {}
    node.consumers.block_pattern("c1", b"z:*", 0, False)
    add(node, b"q:a")
    assert list(node.ready) == [b"q:a"]


def test_flushall_times_out_parked_pattern_consumers_and_forgets_rotations(node):
    add(node, b"q:a")
    add(node, b"q:b")
    getjob(node, b"NOHANG", b"PATTERN", b"q:*")
    waiter = node.consumers.block_pattern("c1", b"z:*", 0, False)
    node.flush_all()
    assert node.take_effects() == [Unblock(waiter, TIMED_OUT)]
    assert node.consumers.pattern_waiters is None
    add(node, b"q:b")
    add(node, b"q:a")
    assert served_queues(node, 2, b"PATTERN", b"q:*") == [b"q:a", b"q:b"]
