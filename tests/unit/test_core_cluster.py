"""Cluster behaviour of the job core, on the in-memory network (simnet.py).

Two to five Node cores exchange real bus frames over a seeded, simulated
network on one fake clock: replication (REPLJOB/GOTJOB, retries, timeout,
ASYNC, external copies), acknowledgements and their garbage collection
(SETACK/GOTACK/DELJOB, dummy acks, FASTACK), re-queue coordination
(WILLQUEUE/QUEUED/WORKING), tolerance of duplicated, reordered and stray
messages, and federation (NEEDJOBS/YOURJOBS and the interest extension).
Expected behaviour is Disque 1.0-rc1's (README.md state machine, queue.c,
job.c, ack.c, cluster.c). Every run is deterministic: same seed, same frames.
"""

from __future__ import annotations

import itertools

import pytest

from disque_py.formats import bus as msg
from disque_py.node.federation import BCAST_MAX_DELAY_MS, INTEREST_TTL_MS
from disque_py.engine import (ACKED, ACTIVE, PAUSED_OUT, QUEUED, WAIT_REPL, serialize_job)
from disque_py.base.replies import (REMOVED_BEFORE_COPIES)
from disque_py.node.requeue import compare_node_ids_by_job
from disque_py.node.replication import TIMEOUT_BEFORE_COPIES
from disque_py.node.waiters import TIMED_OUT
from disque_py.base.errors import NoReplError
from tests.unit.simnet import SimNet
from tests.engine.commands import ack_jobs, enqueue_jobs, get_jobs

RETRY_ERROR_MS = 250                   # randomTimeError(500): [-250, +250)
AT_LEAST_ONCE_ID = b"D-abcdef01-" + b"A" * 24 + b"-0001"   # odd TTL field
AT_MOST_ONCE_ID = b"D-abcdef01-" + b"B" * 24 + b"-0000"    # even TTL field


def replicated(net: SimNet, node: int = 0, *, repl: int, queue: bytes = b"q",
               body: bytes = b"body", **options):
    """ADDJOB with synchronous replication, run until the producer has its ID."""
    client = ("producer", next(_clients))
    job = net.add_job(node, queue, body, repl=repl, client=client, **options)
    if repl == 1:
        return job                      # nothing to wait for
    assert net.run_until(lambda: client in net.unblocked, 1000)
    assert net.unblocked[client] == [job.id]
    return job


_clients = itertools.count()


def holders_seen_by(net: SimNet, i: int, job_id: bytes) -> set[int]:
    return {net.index[node_id] for node_id in net.nodes[i].lookup(job_id).delivered}


def gone_everywhere(net: SimNet, job_id: bytes):
    return lambda: not net.copies(job_id)


def kinds(messages) -> list[str]:
    return [m.name for m in messages]


def check_structure(net: SimNet) -> None:
    """Each live node's bookkeeping agrees with itself."""
    for i in net.live():
        node = net.nodes[i]
        for job in node.jobs.values():
            assert job.awake_due is not None, f"node {i}: {job} is not scheduled"
            in_queue = [j for j in node.queues.get(job.queue).jobs if j is job] \
                if job.queue is not None and node.queues.get(job.queue) is not None else []
            if job.state == QUEUED:
                assert len(in_queue) == 1, f"node {i}: queued {job} is in its queue " \
                                           f"{len(in_queue)} times"
            else:
                assert not in_queue, f"node {i}: {job} is in a queue but not queued"
        for q in node.queues.values():
            for job in q.jobs:
                assert node.lookup(job.id) is job, f"node {i}: stray {job} in {q.name!r}"


# ------------------------------------------------------------------ replication

def test_replicate_3_of_5_waits_for_gotjobs_then_queues_on_the_producer_only():
    net = SimNet(5, seed=1)
    job = net.add_job(0, repl=3, client="p")
    assert job.state == WAIT_REPL and "p" not in net.unblocked
    repljobs = [m for m in net.sent if m.kind == msg.REPLJOB]
    assert len(repljobs) == 2 and all(m.mflags == 0 for m in repljobs)
    targets = {m.dst for m in repljobs}
    assert net.run_until(lambda: "p" in net.unblocked, 100)
    assert net.unblocked["p"] == [job.id]
    gotjobs = [m for m in net.delivered if m.kind == msg.GOTJOB]
    assert {m.src for m in gotjobs} == targets and all(m.dst == 0 for m in gotjobs)
    assert net.copies(job.id) == {0: "queued", **{i: "active" for i in targets}}
    for i in {0} | targets:
        assert holders_seen_by(net, i, job.id) == {0} | targets
    assert net.nodes[0].queue_length(b"q") == 1
    assert all(net.nodes[i].queue_length(b"q") == 0 for i in range(1, 5))
    assert not net.nodes[0].replication.replicating and net.nodes[0].parking.blocked_clients == 0


def test_replication_asks_one_more_node_every_50ms_and_resends_to_silent_ones():
    net = SimNet(5, seed=5)                  # this seed asks nodes 1 and 2 first
    net.drop_rule = lambda m: m.dst in (1, 2)       # nodes 1 and 2 never hear anything
    job = net.add_job(0, repl=3, client="p")
    assert net.run_until(lambda: "p" in net.unblocked, 1000)
    assert net.unblocked["p"] == [job.id]
    assert net.copies(job.id) == {0: "queued", 3: "active", 4: "active"}
    start = net.sent[0].at
    repljobs = [(m.at - start, m.dst) for m in net.sent if m.kind == msg.REPLJOB]
    first_asked = {}
    for at, dst in repljobs:
        first_asked.setdefault(dst, at)
    assert sorted(first_asked.values())[:2] == [0, 0] and {1, 2} == {
        dst for dst, at in first_asked.items() if at == 0}
    later = sorted(at for dst, at in first_asked.items() if at)
    assert len(later) == 2 and 50 <= later[0] < 60 and 100 <= later[1] < 115
    for silent in (1, 2):                    # asked again on every retry
        assert [at for at, dst in repljobs if dst == silent] == [0] + later
    assert net.unblocks[0][0] - start <= later[1] + 5
    assert holders_seen_by(net, 3, job.id) == holders_seen_by(net, 0, job.id) == {0, 1, 2, 3, 4}


def test_replication_waits_a_few_recent_round_trips_before_asking_more_nodes():
    # A loaded cluster answers late for everyone: asking more nodes then
    # would only double its work. The wait is 4 recent round trips (>= 50 ms).
    net = SimNet(5, seed=5)                  # asks nodes 1 and 2 first
    net.nodes[0].repl_rtt_ms = 100.0         # as if copies recently took 100 ms
    net.drop_rule = lambda m: m.dst in (1, 2)
    job = net.add_job(0, repl=3, client="p")
    assert net.run_until(lambda: "p" in net.unblocked, 2000)
    assert net.unblocked["p"] == [job.id]
    start = net.sent[0].at
    first_asked: dict = {}
    for m in net.sent:
        if m.kind == msg.REPLJOB:
            first_asked.setdefault(m.dst, m.at - start)
    later = sorted(at for at in first_asked.values() if at)
    assert len(later) == 2 and 400 <= later[0] < 420
    # The copy made meanwhile was quick: the average came down, so did the wait.
    assert 700 <= later[1] < 830


def test_replication_retries_visit_only_the_jobs_that_are_due():
    net = SimNet(3, seed=1)
    net.drop_rule = lambda m: m.kind == msg.REPLJOB      # nobody ever gets a copy
    early = net.add_job(0, repl=2, client="early", timeout_ms=5000)
    net.run_for(30)
    late = net.add_job(0, repl=2, client="late", timeout_ms=5000)
    net.run_for(25)                          # early is due (55 ms), late is not (25 ms)
    start = net.sent[0].at
    asked = [m.at - start for m in net.sent if m.kind == msg.REPLJOB]
    # early and late each asked one node; then early alone asked one more and
    # its first node again.
    assert asked[:2] == [0, 30] and len(asked) == 4 and all(50 <= at < 55 for at in asked[2:])
    assert list(net.nodes[0].replication.replicating) == [late, early]      # early asked last


def test_replication_timeout_answers_norepl_and_deletes_the_partial_copies():
    net = SimNet(3, seed=3)
    net.drop_rule = lambda m: m.kind == msg.GOTJOB and m.src == 2   # 2 keeps a copy, mute
    job = net.add_job(0, repl=3, client="p", timeout_ms=500)
    assert net.run_until(lambda: "p" in net.unblocked, 2000)
    (outcome,) = net.unblocked["p"]
    assert isinstance(outcome, NoReplError) and str(outcome) == TIMEOUT_BEFORE_COPIES
    assert net.unblocks[0][0] - net.sent[0].at in range(500, 520)
    deljobs = [m for m in net.sent if m.kind == msg.DELJOB]
    assert {m.dst for m in deljobs} == {1, 2} and all(m.src == 0 for m in deljobs)
    assert net.run_until(gone_everywhere(net, job.id), 100)
    assert not net.nodes[0].replication.replicating and net.nodes[0].parking.blocked_clients == 0
    net.run_for(10_000)
    assert not net.copies(job.id)


def test_a_job_that_expires_while_waiting_for_copies_releases_the_producer():
    # Disque registers a wait-repl job in the awake list like any other
    # (registerJob -> updateJobAwakeTime), so its TTL ends the wait with
    # "job removed (expired?) ..." even when ADDJOB has no timeout.
    net = SimNet(3, seed=3)
    net.drop_rule = lambda m: m.kind == msg.REPLJOB      # every peer refuses silently
    job = net.add_job(0, repl=3, ttl=2, client="p")      # TIMEOUT 0: no deadline
    assert net.run_until(lambda: "p" in net.unblocked, 5000), net.copies(job.id)
    (outcome,) = net.unblocked["p"]
    assert isinstance(outcome, NoReplError) and str(outcome) == REMOVED_BEFORE_COPIES
    assert 2000 <= net.unblocks[0][0] - net.sent[0].at <= 3100
    assert not net.copies(job.id) and not net.nodes[0].replication.replicating


def test_a_partitioned_node_refuses_replication_it_cannot_reach():
    net = SimNet(5, seed=3)
    net.partition({0, 1}, {2, 3, 4})
    with pytest.raises(NoReplError, match="Not enough reachable nodes"):
        net.add_job(0, repl=3)
    job = replicated(net, repl=2)
    assert set(net.copies(job.id)) == {0, 1}
    net.heal()
    replicated(net, repl=5)


def test_the_same_seed_replays_the_same_run():
    def run(seed: int) -> list:
        net = SimNet(4, seed=seed)
        net.dup, net.jitter_ms, net.drop = 0.2, 4, 0.1
        for n in range(10):
            net.add_job(n % 4, body=b"%d" % n, repl=3, retry=1, client=n, timeout_ms=2000)
        net.run_for(5000)
        return [(m.at, m.src, m.dst, m.kind, m.keys) for m in net.delivered]

    first = run(5)
    assert first == run(5) and first != run(6)


def test_async_add_queues_at_once_and_replicates_without_gotjob():
    net = SimNet(3, seed=4)
    job = net.add_job(0, repl=3, async_=True, client="p")
    assert job.state == QUEUED and "p" not in net.unblocked
    repljobs = [m for m in net.sent if m.kind == msg.REPLJOB]
    assert len(repljobs) == 2 and all(m.mflags == msg.MSG_NOREPLY for m in repljobs)
    net.run_for(100)
    assert net.copies(job.id) == {0: "queued", 1: "active", 2: "active"}
    assert not [m for m in net.sent if m.kind == msg.GOTJOB]
    assert not net.unblocked


def test_a_leaving_node_keeps_no_copy_and_asks_a_holder_to_queue_the_job():
    net = SimNet(4, seed=5)
    net.set_leaving(0)
    job = net.add_job(0, repl=2, client="p")
    targets = {m.dst for m in net.sent if m.kind == msg.REPLJOB}
    assert len(targets) == 2 and 0 not in targets
    assert net.run_until(lambda: "p" in net.unblocked, 100)
    assert net.unblocked["p"] == [job.id]
    assert net.run_until(lambda: "queued" in net.copies(job.id).values(), 100)
    copies = net.copies(job.id)
    assert set(copies) == targets and sorted(copies.values()) == ["active", "queued"]
    (enqueue,) = [m for m in net.sent if m.kind == msg.ENQUEUE]
    assert enqueue.src == 0 and copies[enqueue.dst] == "queued"
    for i in targets:
        assert holders_seen_by(net, i, job.id) == targets


def test_a_leaving_node_async_add_keeps_no_copy_at_all():
    net = SimNet(4, seed=6)
    net.set_leaving(0)
    job = net.add_job(0, repl=2, async_=True)
    assert net.nodes[0].lookup(job.id) is None
    net.run_for(50)
    copies = net.copies(job.id)
    assert len(copies) == 2 and 0 not in copies
    assert sorted(copies.values()) == ["active", "queued"]


# ------------------------------------------------------------------ acks and GC

def test_ackjob_collects_every_copy_with_setack_gotack_deljob():
    net = SimNet(3, seed=7)
    job = replicated(net, repl=3)
    (got,) = net.get_jobs(0, b"q")
    assert got is job
    mark = len(net.delivered)
    assert net.call(0, ack_jobs, [job.id]) == 1
    assert net.run_until(gone_everywhere(net, job.id), 100)
    later = net.delivered[mark:]
    assert sorted(kinds(later)) == ["DELJOB"] * 2 + ["GOTACK"] * 2 + ["SETACK"] * 2
    assert {(m.src, m.dst) for m in later if m.kind == msg.SETACK} == {(0, 1), (0, 2)}
    assert {(m.src, m.dst) for m in later if m.kind == msg.DELJOB} == {(0, 1), (0, 2)}
    net.run_for(30_000)
    assert not net.copies(job.id) and net.quiet()


def test_ack_on_a_holder_that_did_not_deliver_also_collects_everything():
    net = SimNet(5, seed=8)
    job = replicated(net, 2, repl=3)
    holder = next(i for i, state in net.copies(job.id).items() if state == "active")
    assert net.call(holder, ack_jobs, [job.id]) == 1
    assert net.run_until(gone_everywhere(net, job.id), 100)
    assert net.nodes[2].queue_length(b"q") == 0


def test_a_lost_gotack_makes_gc_retry_with_disques_backoff_until_done():
    # ack.c: ACKJOB schedules the first retry at gc_retry 0 (1 s; the attempt
    # made by the command itself bumps gc_retry without rescheduling), then
    # every timer attempt waits 1 s << gc_retry: 4, 8, 16 s ... up to 3 min.
    net = SimNet(3, seed=9)
    job = replicated(net, repl=3)
    losing = [True]
    net.drop_rule = lambda m: losing[0] and m.kind == msg.GOTACK
    net.call(0, ack_jobs, [job.id])
    net.run_for(40_000)
    assert set(net.copies(job.id)) == {0, 1, 2}        # nobody can finish without GOTACK
    resends = sorted(m.at for m in net.sent if m.kind == msg.SETACK and (m.src, m.dst) == (0, 1))
    gaps = [b - a for a, b in zip(resends, resends[1:])]
    assert len(gaps) == 4, gaps
    for gap, expected in zip(gaps, (1000, 4000, 8000, 16000)):
        assert abs(gap - expected) <= RETRY_ERROR_MS + 10, gaps
    losing[0] = False
    assert net.run_until(gone_everywhere(net, job.id), 40_000)


def test_a_dummy_ack_on_a_node_without_the_job_removes_copies_elsewhere():
    net = SimNet(4, seed=10)
    job = replicated(net, repl=2)
    stranger = next(i for i in range(4) if i not in net.copies(job.id))
    assert net.call(stranger, ack_jobs, [job.id]) == 0
    assert net.copies(job.id)[stranger] == "acked"
    setacks = [m for m in net.sent if m.kind == msg.SETACK and m.src == stranger]
    assert {m.dst for m in setacks} == set(range(4)) - {stranger}
    assert net.run_until(gone_everywhere(net, job.id), 200)
    net.run_for(30_000)
    assert not net.copies(job.id)


def test_a_dummy_ack_nobody_knows_goes_once_every_node_answered():
    net = SimNet(5, seed=11)
    net.partition({4})
    net.call(0, ack_jobs, [AT_LEAST_ONCE_ID])
    net.run_for(5000)
    assert net.copies(AT_LEAST_ONCE_ID) == {0: "acked"}   # node 4 has not answered
    answered = {m.src for m in net.delivered if m.kind == msg.GOTACK}
    assert answered == {1, 2, 3}
    for i in (1, 2, 3):
        assert net.nodes[i].lookup(AT_LEAST_ONCE_ID) is None
    net.heal()
    assert net.run_until(gone_everywhere(net, AT_LEAST_ONCE_ID), 20_000)


def test_acking_an_unknown_at_most_once_id_leaves_nothing_and_says_nothing():
    net = SimNet(3, seed=12)
    assert net.call(0, ack_jobs, [AT_MOST_ONCE_ID]) == 0
    assert not net.copies(AT_MOST_ONCE_ID) and not net.sent


def test_fastack_deletes_at_once_and_sends_deljob_to_holders_only():
    net = SimNet(5, seed=13)
    job = replicated(net, repl=3)
    holders = set(net.copies(job.id))
    mark = len(net.sent)
    assert net.call(0, "fast_ack", [job.id]) == 1
    assert net.nodes[0].lookup(job.id) is None
    assert net.run_until(gone_everywhere(net, job.id), 10)
    later = net.sent[mark:]
    assert kinds(later) == ["DELJOB"] * 2 and {m.dst for m in later} == holders - {0}


def test_fastack_of_an_unknown_job_asks_every_node_to_delete_it():
    net = SimNet(4, seed=14)
    job = replicated(net, 1, repl=2)
    stranger = next(i for i in range(4) if i not in net.copies(job.id))
    assert net.call(stranger, "fast_ack", [job.id]) == 0
    assert {m.dst for m in net.sent if m.kind == msg.DELJOB} == set(range(4)) - {stranger}
    assert net.run_until(gone_everywhere(net, job.id), 10)


# ------------------------------------------------------------------ re-queueing

def watch_states(net: SimNet, job_id: bytes, seen: dict):
    """A run_until condition that records every state each node had."""
    def record() -> bool:
        for i, state in net.copies(job_id).items():
            seen.setdefault(i, set()).add(state)
        return False
    return record


def test_willqueue_is_answered_with_queued_by_the_node_that_has_it_queued():
    net = SimNet(3, seed=15)
    job = replicated(net, repl=3, retry=2)
    seen: dict = {}
    net.run_until(watch_states(net, job.id, seen), 10_000)
    assert seen == {0: {"queued"}, 1: {"active"}, 2: {"active"}}
    willqueues = [m for m in net.delivered if m.kind == msg.WILLQUEUE]
    assert willqueues and {m.src for m in willqueues} <= {1, 2}
    answers = [m for m in net.delivered if m.kind == msg.QUEUED]
    assert answers and all(m.src == 0 and m.mflags == 0 for m in answers)
    assert all(net.nodes[i].lookup(job.id).deliveries == 0 for i in range(3))


def test_a_retry_requeues_on_one_node_and_every_holder_counts_the_delivery():
    net = SimNet(3, seed=16)
    job = replicated(net, repl=3, retry=1)
    assert net.get_jobs(0, b"q") == [job]              # delivered, never acked
    assert net.run_until(lambda: "queued" in net.copies(job.id).values(), 2000)
    net.run_for(200)
    assert sorted(net.copies(job.id).values()) == ["active", "active", "queued"]
    queued = [m for m in net.delivered if m.kind == msg.QUEUED]
    assert queued and all(m.mflags == msg.MSG_INCR_DELIV for m in queued)
    assert [net.nodes[i].lookup(job.id).deliveries for i in range(3)] == [1, 1, 1]


def test_nack_is_counted_on_every_holder():
    net = SimNet(3, seed=17)
    job = replicated(net, repl=3)
    net.get_jobs(0, b"q")
    assert net.call(0, enqueue_jobs, [job.id], True) == 1
    net.run_for(10)
    assert [net.nodes[i].lookup(job.id).nacks for i in range(3)] == [1, 1, 1]
    assert [net.nodes[i].lookup(job.id).deliveries for i in range(3)] == [0, 0, 0]
    assert net.copies(job.id) == {0: "queued", 1: "active", 2: "active"}


@pytest.mark.parametrize("winner_queues", [True, False])
def test_queued_makes_the_loser_of_the_id_comparison_dequeue(winner_queues):
    # Which node wins depends on the job ID: take the first seed that puts a
    # winner (or a loser) of the comparison beside node 0.
    for seed in range(18, 100):
        net = SimNet(3, seed=seed)
        job = replicated(net, repl=3)                   # queued on node 0
        other = next((i for i in (1, 2)
                      if (compare_node_ids_by_job(net.ids[i], net.ids[0], job.id) > 0)
                      == winner_queues), None)
        if other is not None:
            break
    assert net.call(other, enqueue_jobs, [job.id], False) == 1   # ENQUEUE <id> there
    net.run_for(10)
    copies = net.copies(job.id)
    assert copies[other] == "queued"
    assert copies[0] == ("active" if winner_queues else "queued")
    assert [net.nodes[i].lookup(job.id).deliveries for i in range(3)] == [1, 1, 1]


def test_working_postpones_the_requeue_on_every_node_and_dequeues_elsewhere():
    net = SimNet(3, seed=19)
    job = replicated(net, repl=3, retry=2)
    net.get_jobs(0, b"q")
    seen: dict = {}
    for _ in range(6):                                   # a consumer busy for 6 s
        net.run_until(watch_states(net, job.id, seen), 1000)
        assert net.call(0, "working", job.id) == 2
    assert all(states == {"active"} for states in seen.values()), seen
    # WORKING sent by a holder takes the job out of a queue elsewhere.
    assert net.run_until(lambda: "queued" in net.copies(job.id).values(), 3000)
    queued_on = next(i for i, s in net.copies(job.id).items() if s == "queued")
    worker = next(i for i in range(3) if i != queued_on)
    net.call(worker, "working", job.id)
    net.run_for(10)
    assert set(net.copies(job.id).values()) == {"active"}


# ------------------------------------------------------------------ stray messages

STATES = ["unknown", "wait-repl", "active", "queued", "acked", "deleted"]


def job_in_state(state: str):
    """A 3-node net, a job whose copy on node 1 is in `state`, and the job
    serialized as a peer would send it (node 0 made it, except in wait-repl:
    then node 1 is the producer, waiting for copies it never gets)."""
    net = SimNet(3, seed=20)
    if state == "wait-repl":
        net.drop_rule = lambda m: m.kind == msg.GOTJOB
        job = net.add_job(1, repl=3, client="p", timeout_ms=60_000)
        net.run_for(5)
        return net, job, serialize_job(job, net.clock.now_ms() // 1000)
    job = replicated(net, repl=3)
    probe = serialize_job(job, net.clock.now_ms() // 1000)
    if state == "unknown":
        net.call(0, "fast_ack", [job.id])
    elif state == "queued":
        net.call(1, enqueue_jobs, [job.id], False)
    elif state == "acked":
        net.drop_rule = lambda m: m.kind in (msg.GOTACK, msg.DELJOB)
        net.call(1, ack_jobs, [job.id])
    elif state == "deleted":
        net.call(1, ack_jobs, [job.id])
    net.run_for(5)
    net.drop_rule = None
    expected = {"unknown": None, "deleted": None}.get(state, state)
    assert net.copies(job.id).get(1) == expected
    return net, job, probe


def stray_messages(job, probe: bytes):
    job_ids = [msg.GOTJOB, msg.ENQUEUE, msg.QUEUED, msg.WORKING, msg.WILLQUEUE, msg.SETACK,
               msg.GOTACK, msg.DELJOB]
    for kind in job_ids:
        for mflags, aux in ((0, 0), (0, 1), (0, 3), (msg.MSG_INCR_DELIV, 0),
                            (msg.MSG_INCR_NACKS, 0), (msg.MSG_NOREPLY, 7)):
            yield kind, mflags, msg.JobIds([(job.id, aux), (job.id, aux)])
    for kind in (msg.REPLJOB, msg.YOURJOBS):
        for mflags in (0, msg.MSG_NOREPLY):
            yield kind, mflags, msg.Jobs([probe, probe])
    yield msg.NEEDJOBS, 0, msg.QueueOp(b"q", 5)
    yield msg.PAUSE, 0, msg.QueueOp(b"q", 0)


def inject(net: SimNet, src: int, dst: int, kind: int, mflags: int, body) -> None:
    """Hand node `dst` a frame from `src` twice, as a duplicating network would."""
    frame = msg.encode(msg.Header(kind, net.ids[src], 7711, 0, mflags), body)
    for _ in range(2):
        header, decoded = msg.decode(frame[4:])
        net.nodes[dst].on_peer_message(header.sender, header.type, header.mflags, decoded)
        net._drain(dst)


@pytest.mark.parametrize("state", STATES)
def test_every_message_twice_in_any_state_never_raises_nor_breaks_the_books(state):
    for sender in (0, 2):
        net, job, probe = job_in_state(state)
        for kind, mflags, body in stray_messages(job, probe):
            inject(net, sender, 1, kind, mflags, body)
            check_structure(net)
        net.run_for(1000)
        check_structure(net)


ID_ONLY = [msg.GOTJOB, msg.ENQUEUE, msg.QUEUED, msg.WORKING, msg.WILLQUEUE, msg.SETACK,
           msg.GOTACK, msg.DELJOB]


@pytest.mark.parametrize("state", ["unknown", "deleted"])
@pytest.mark.parametrize("kind", ID_ONLY, ids=lambda k: msg.TYPE_NAMES[k])
def test_messages_about_a_job_we_do_not_have_never_create_it(state, kind):
    # REPLJOB and YOURJOBS carry the whole job: a node that never had it (or
    # forgot it) takes it, as in Disque. Every other message names an ID only.
    net, job, _ = job_in_state(state)
    for mflags, aux in ((0, 0), (0, 1), (msg.MSG_INCR_DELIV, 0)):
        inject(net, 0, 1, kind, mflags, msg.JobIds([(job.id, aux)]))
    net.run_for(30_000)
    assert net.nodes[1].lookup(job.id) is None


@pytest.mark.parametrize("kind", [msg.QUEUED, msg.WILLQUEUE, msg.ENQUEUE, msg.WORKING,
                                  msg.REPLJOB, msg.YOURJOBS, msg.GOTJOB],
                         ids=lambda k: msg.TYPE_NAMES[k])
def test_an_acked_job_is_never_queued_again_by_a_late_message(kind):
    net, job, probe = job_in_state("acked")
    body = msg.Jobs([probe]) if kind in (msg.REPLJOB, msg.YOURJOBS) \
        else msg.JobIds([(job.id, 0)])
    net.drop_rule = lambda m: m.kind in (msg.GOTACK, msg.DELJOB)   # keep the ack alive
    mark = len(net.sent)
    inject(net, 0, 1, kind, 0, body)
    assert net.nodes[1].lookup(job.id).state == ACKED
    assert net.nodes[1].queue_length(b"q") == 0
    if kind in (msg.WILLQUEUE, msg.YOURJOBS):       # the sender is told it was acked
        assert (1, 0, msg.SETACK) in {(m.src, m.dst, m.kind) for m in net.sent[mark:]}


def test_a_job_still_waiting_for_its_copies_is_not_queued_by_a_yourjobs():
    # Found by the simulator (tests/sim, seed 955). A holder re-queued its
    # copy (RETRY) while the producer still waited for copies, and handed it
    # to the producer's polling consumer (YOURJOBS). The producer queued its
    # wait-repl copy, a consumer acked it, and the producer, still in its
    # replication loop, sent the acked job out again as REPLJOB: the copies
    # came back to life after the ACK had reached every node.
    net = SimNet(3, seed=1)
    net.drop_rule = lambda m: m.kind == msg.GOTJOB and m.src == 2   # 0 waits on
    job = net.add_job(0, repl=3, retry=1, client="p")
    # A holder (1 or 2: their retry timers race) re-queues its copy.
    assert net.run_until(lambda: "queued" in (net.copies(job.id).get(1),
                                              net.copies(job.id).get(2)), 2000)
    assert net.get_jobs(0, b"q") == []                   # NEEDJOBS: 1 gives it
    assert net.run_until(lambda: net.count(msg.YOURJOBS, delivered=True), 100)
    assert net.copies(job.id)[0] == "wait-repl" and net.nodes[0].queue_length(b"q") == 0
    assert net.run_until(lambda: "queued" in net.copies(job.id).values(), 2000)
    holder = next(i for i, state in net.copies(job.id).items() if state == "queued")
    assert [j.id for j in net.get_jobs(holder, b"q")] == [job.id]
    net.call(holder, ack_jobs, [job.id])
    acked_at = net.clock.now_ms()
    assert net.run_until(lambda: "p" in net.unblocked, 100)
    assert net.unblocked["p"] == [job.id]                # the ACK proves the copies
    net.drop_rule = None
    assert net.run_until(gone_everywhere(net, job.id), 30_000)
    assert not [m for m in net.sent if m.kind == msg.REPLJOB and m.at > acked_at]
    assert not net.nodes[0].replication.replicating
    net.run_for(10_000)
    assert not net.copies(job.id)


def test_duplicated_reordered_lossy_network_delivers_and_collects_every_job():
    net = SimNet(5, seed=21)
    net.dup, net.dup_delay_ms, net.jitter_ms, net.drop = 0.3, 20, 5, 0.05
    deliveries: dict[bytes, int] = {}
    jobs = []
    for n in range(40):
        client = ("p", n)
        job = net.add_job(n % 5, body=b"%d" % n, repl=3, retry=5, client=client,
                          timeout_ms=5000)
        net.run_until(lambda: client in net.unblocked, 6000)
        if net.unblocked[client] == [job.id]:
            jobs.append(job.id)
    assert len(jobs) >= 35

    def consume() -> bool:
        for i in net.live():
            for job in net.get_jobs(i, b"q", count=10):
                deliveries[job.id] = deliveries.get(job.id, 0) + 1
                net.call(i, ack_jobs, [job.id])
        return all(job_id in deliveries for job_id in jobs)

    assert net.run_until(consume, 120_000)
    net.dup = net.drop = 0
    assert net.run_until(lambda: not any(net.copies(j) for j in jobs), 400_000)
    check_structure(net)


def test_a_crashed_holder_loses_its_copy_and_the_others_still_deliver():
    net = SimNet(3, seed=22)
    job = replicated(net, repl=3, retry=2)
    net.crash(0)                                         # the only queued copy
    assert net.run_until(lambda: "queued" in net.copies(job.id).values(), 3000)
    net.restart(0)
    assert net.nodes[0].lookup(job.id) is None
    got = [j for i in (1, 2) for j in net.get_jobs(i, b"q")]
    assert [j.id for j in got] == [job.id]


def test_a_node_restarted_with_its_aof_has_its_jobs_back():
    net = SimNet(3, seed=34)
    net.with_aof(1)
    kept = replicated(net, repl=3, retry=2, body=b"kept")
    acked = replicated(net, repl=3, retry=2, body=b"acked")
    net.call(0, ack_jobs, [acked.id])
    assert net.run_until(gone_everywhere(net, acked.id), 100)
    assert net.aof_jobs[1] == {kept.id}
    net.crash(1)
    net.crash(2)                                         # no AOF: comes back empty
    node = net.restart(1)
    assert net.restart(2).lookup(kept.id) is None
    job = node.lookup(kept.id)
    assert job.state == ACTIVE and job.body == b"kept" and node.lookup(acked.id) is None
    assert holders_seen_by(net, 1, kept.id) == {0, 1, 2}
    net.crash(0)                                         # the queued copy is gone too
    assert net.run_until(lambda: net.copies(kept.id).get(1) == "queued", 3000)
    assert [j.id for j in net.get_jobs(1, b"q")] == [kept.id]
    net.call(1, ack_jobs, [kept.id])
    assert net.copies(kept.id) == {1: "acked"} and not net.aof_jobs[1]
    net.crash(1)
    assert net.restart(1).lookup(kept.id) is None        # its DELJOB record replayed


# ------------------------------------------------------------------ federation

def block(net: SimNet, i: int, client, queue: bytes = b"q", timeout_ms: int = 0) -> None:
    assert net.get_jobs(i, queue, client=client, timeout_ms=timeout_ms) == []


def test_needjobs_moves_a_job_the_giver_keeps_an_active_copy_both_list_each_other():
    net = SimNet(3, seed=23)
    job = replicated(net, repl=2)                        # on 0 (queued) and one other
    other = next(i for i in net.copies(job.id) if i != 0)
    receiver = 3 - other                                 # the node without a copy
    block(net, receiver, "c")
    assert net.run_until(lambda: "c" in net.unblocked, 100)
    assert [j.id for j in net.unblocked["c"][0]] == [job.id]
    copies = net.copies(job.id)
    assert copies == {0: "active", other: "active", receiver: "active"}
    for i in (0, other, receiver):
        assert holders_seen_by(net, i, job.id) == {0, other, receiver}
    assert [m.name for m in net.delivered if m.kind in (msg.NEEDJOBS, msg.YOURJOBS)
            and m.dst == receiver] == ["YOURJOBS"]


def test_a_moved_job_is_queued_at_the_receiver_until_fetched():
    net = SimNet(2, seed=24)
    job = replicated(net, repl=1)
    net.call(1, get_jobs, [b"q"], 1)                   # nobody waits: only asks
    assert net.run_until(lambda: net.copies(job.id).get(1) == "queued", 100)
    assert net.copies(job.id) == {0: "active", 1: "queued"}
    assert holders_seen_by(net, 0, job.id) == holders_seen_by(net, 1, job.id) == {0, 1}
    assert net.call(1, ack_jobs, [job.id]) == 1
    assert net.run_until(gone_everywhere(net, job.id), 100)


def test_an_at_most_once_job_moves_and_leaves_no_copy_behind():
    net = SimNet(3, seed=25)
    job = replicated(net, repl=1, retry=0)
    block(net, 2, "c")
    assert net.run_until(lambda: "c" in net.unblocked, 100)
    assert [j.id for j in net.unblocked["c"][0]] == [job.id]
    assert net.copies(job.id) == {2: "active"}
    assert holders_seen_by(net, 2, job.id) == {2}
    net.run_for(30_000)
    assert net.copies(job.id) == {2: "active"}
    assert net.nodes[2].queue_length(b"q") == 0


def test_the_receiver_records_its_responders_and_import_rate():
    net = SimNet(3, seed=26)
    for n in range(20):
        net.add_job(0, body=b"%d" % n, repl=1)
    block(net, 1, "c")
    assert net.run_until(lambda: "c" in net.unblocked, 100)
    now = net.clock.now_ms()
    q = net.nodes[1].queues.get(b"q")
    assert list(q.responders) == [net.ids[0]]
    assert q.import_rate(now) > 0
    sender, receiver = net.nodes[0].federation, net.nodes[1].federation
    assert receiver.needjobs_sent >= 2 and sender.needjobs_received >= 1
    assert sender.jobs_sent == receiver.jobs_received >= 1
    assert net.nodes[2].federation.jobs_sent == 0
    net.run_for(6000)
    assert net.nodes[1].queues.get(b"q").import_rate(net.clock.now_ms()) == 0


def test_a_queue_paused_in_output_gives_nothing_until_the_pause_ends():
    net = SimNet(2, seed=27)
    job = replicated(net, repl=1)
    net.call(0, "consumers.pause", b"q", PAUSED_OUT, False)
    block(net, 1, "c")
    net.run_for(20_000)
    assert "c" not in net.unblocked
    assert net.copies(job.id) == {0: "queued"}
    assert not [m for m in net.sent if m.kind == msg.YOURJOBS]
    assert [m for m in net.delivered if m.kind == msg.NEEDJOBS and m.dst == 0]
    net.call(0, "consumers.pause", b"q", 0, False)
    assert net.run_until(lambda: "c" in net.unblocked, BCAST_MAX_DELAY_MS + 200)
    assert [j.id for j in net.unblocked["c"][0]] == [job.id]


def test_a_job_queued_after_an_empty_handed_needjobs_is_pushed_at_once():
    net = SimNet(3, seed=28)
    block(net, 1, "c")
    net.run_for(3000)                                     # asked, nobody had anything
    needjobs = len([m for m in net.delivered if m.kind == msg.NEEDJOBS and m.dst == 0])
    assert needjobs >= 1
    added_at = net.clock.now_ms()
    job = replicated(net, repl=2)
    assert net.run_until(lambda: "c" in net.unblocked, 100)
    assert [j.id for j in net.unblocked["c"][0]] == [job.id]
    served_at = net.unblocks[-1][0]
    assert served_at - added_at <= 10                    # no NEEDJOBS round needed
    assert len([m for m in net.delivered if m.kind == msg.NEEDJOBS and m.dst == 0]) == needjobs
    assert net.nodes[0].federation.offers >= 1


def test_interest_expires_after_its_ttl():
    net = SimNet(2, seed=29)
    block(net, 1, "c", timeout_ms=500)
    assert net.run_until(lambda: net.unblocked.get("c") == [TIMED_OUT], 1000)
    last_ask = max(m.at for m in net.delivered if m.kind == msg.NEEDJOBS)
    net.run_until(lambda: net.clock.now_ms() > last_ask + INTEREST_TTL_MS, INTEREST_TTL_MS + 100)
    job = replicated(net, repl=1)
    net.run_for(1000)
    assert net.copies(job.id) == {0: "queued"}
    assert not [m for m in net.sent if m.kind == msg.YOURJOBS]


def test_interest_still_alive_pushes_even_after_the_consumer_left():
    net = SimNet(2, seed=30)
    block(net, 1, "c", timeout_ms=500)
    assert net.run_until(lambda: net.unblocked.get("c") == [TIMED_OUT], 1000)
    net.run_for(INTEREST_TTL_MS // 2)
    job = replicated(net, repl=1)
    net.run_for(100)
    assert net.copies(job.id) == {0: "active", 1: "queued"}


def test_a_job_pushed_to_a_node_that_imports_stays_there_for_its_consumers():
    # Found by the simulator (tests/sim, seed 5). Consumers polling with
    # GETJOB NOHANG on every node keep every node's interest fresh; a job
    # pushed to an interested node was pushed on at once to the next one,
    # and so on: always in flight, never in a queue when a consumer looked.
    net = SimNet(5, seed=33)
    net.jitter_ms = 10
    for i in range(5):
        assert net.get_jobs(i, b"q") == []           # NEEDJOBS everywhere
    net.run_for(10)
    job = net.add_job(0, repl=1, retry=5)
    got = []

    def poll() -> bool:
        for i in range(5):
            got.extend((i, j.id) for j in net.get_jobs(i, b"q"))
        return bool(got)

    assert net.run_until(poll, 1000)
    assert [job_id for _, job_id in got] == [job.id] and got[0][0] != 0
    assert len([m for m in net.sent if m.kind == msg.YOURJOBS]) == 1


def test_no_job_is_delivered_twice_without_retries_or_failures():
    net = SimNet(5, seed=31)
    deliveries: dict[bytes, list[int]] = {}
    consumers = {("c", i, k): i for i in (1, 2, 3) for k in range(2)}
    for client, i in consumers.items():
        block(net, i, client)
    served = [0]

    def serve() -> bool:
        for when, i, client, outcome in net.unblocks[served[0]:]:
            served[0] += 1
            if client not in consumers:
                continue                # a producer's copies were confirmed
            jobs = outcome
            while jobs:                 # ack, then GETJOB again: served or parked
                for job in jobs:
                    deliveries.setdefault(job.id, []).append(i)
                    net.call(i, ack_jobs, [job.id])
                jobs = net.get_jobs(i, b"q", client=client)
        return False

    added = []
    for n in range(300):
        producer = net.rng.choice([0, 0, 4, 1])
        job = net.add_job(producer, body=b"%d" % n, repl=net.rng.choice([1, 2, 3]),
                          async_=n % 3 == 0)
        added.append(job.id)
        net.run_until(serve, net.rng.choice([0, 1, 5, 40]))
    net.run_until(lambda: serve() or len(deliveries) == len(added), 30_000)
    assert set(deliveries) == set(added)
    twice = {job_id: nodes for job_id, nodes in deliveries.items() if len(nodes) > 1}
    assert not twice
    moved = sum(net.nodes[i].federation.jobs_received for i in (1, 2, 3))
    assert moved >= len(added) // 2                      # most came from nodes 0 and 4
    assert net.run_until(lambda: serve() or not any(net.copies(j) for j in added), 60_000)
    check_structure(net)


def test_a_parked_pattern_consumer_keeps_asking_for_its_queues_jobs():
    net = SimNet(2, seed=31)
    assert net.get_jobs(1, b"jobs:x") == []              # node 1 knows the queue now
    net.run_for(INTEREST_TTL_MS + 1000)                  # node 0 forgot that it asked
    net.call(1, "consumers.block_pattern", "c", b"jobs:*", 0, False)
    job = net.add_job(0, b"jobs:x", repl=1)
    assert net.run_until(lambda: "c" in net.unblocked, 5000)
    assert [j.id for j in net.unblocked["c"][0]] == [job.id]
