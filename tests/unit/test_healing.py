"""Copies that heal (node/healing.py), on the in-memory network.

A holder of a job is lost (flagged FAIL, or restarted without its jobs: its
start epoch changes): exactly one surviving holder copies the job again,
until it is back at its REPLICATE level; the new holders and the survivors
end up with the full holder list, so an ACK after healing reaches every
copy. The work is paced, nothing is copied twice, and `rereplicate no`
turns it all off. Every run is deterministic (seeded network, fake clock).
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from disque_py.base.errors import NoReplError
from disque_py.formats import bus as msg
from disque_py.node.healing import HEAL_FALLBACK_MS, HEAL_JOBS_PER_PERIOD, HEAL_PERIOD_MS
from disque_py.node.replication import ABANDONED_IDS_MAX, ABANDONED_REFUSE_MS
from disque_py.engine import ACKED
from tests.unit.simnet import SimNet
from tests.engine.commands import ack_jobs

_clients = itertools.count()
HEAL_DEADLINE_MS = 2_000          # a few periods: far more than one job needs


def replicated(net: SimNet, node: int = 0, *, repl: int = 3, queue: bytes = b"q",
               retry: int = 30, ttl: int = 3600):
    """ADDJOB REPLICATE repl on `node`, run until the producer has its ID."""
    client = ("producer", next(_clients))
    job = net.add_job(node, queue, b"body-%d" % next(_clients), repl=repl, client=client,
                      retry=retry, ttl=ttl)
    assert net.run_until(lambda: client in net.unblocked, 1000)
    assert net.unblocked[client] == [job.id]
    return job


def holders(net: SimNet, job_id: bytes) -> set[int]:
    """Live nodes with an unacknowledged copy."""
    return {i for i in net.live() if (job := net.nodes[i].lookup(job_id)) is not None
            and job.state != ACKED}


def listed_by(net: SimNet, i: int, job_id: bytes) -> set[int]:
    return {net.index[node_id] for node_id in net.nodes[i].lookup(job_id).delivered}


def repljobs_since(net: SimNet, since: int, job_id: bytes | None = None) -> list:
    return [m for m in net.sent if m.kind == msg.REPLJOB and m.at >= since
            and (job_id is None or job_id in m.keys)]


def at_level(net: SimNet, job_id: bytes, repl: int = 3):
    return lambda: len(holders(net, job_id)) >= repl


def five(seed: int = 1, **kwargs) -> SimNet:
    return SimNet(5, seed=seed, failure_detection=True, **kwargs)


# ------------------------------------------------------------------ a holder fails

def test_a_failed_holder_is_replaced_by_exactly_one_survivor():
    net = five()
    job = replicated(net)
    first = holders(net, job.id)
    assert len(first) == 3 and 0 in first
    lost = min(first - {0})
    t0 = net.clock.now_ms()
    net.crash(lost)                                   # FAIL at once (fail_delay_ms 0)
    assert net.run_until(at_level(net, job.id), HEAL_DEADLINE_MS)
    now_holding = holders(net, job.id)
    assert len(now_holding) == 3 and lost not in now_holding
    new = now_holding - first
    assert len(new) == 1
    # One survivor acted: its REPLJOBs went to every holder it lists, once each.
    frames = repljobs_since(net, t0, job.id)
    assert len({m.src for m in frames}) == 1
    actor = frames[0].src
    assert actor in first - {lost}
    assert sorted(m.dst for m in frames) == sorted((first | new) - {actor})
    assert all(m.mflags & msg.MSG_NOREPLY for m in frames)
    # The new holder and both survivors know every holder, the lost one included
    # (it may come back with its AOF: the ack must reach it too).
    for i in now_holding:
        assert listed_by(net, i, job.id) == first | new, i
    net.run_for(3 * HEAL_FALLBACK_MS)                 # nobody acts again
    assert repljobs_since(net, t0, job.id) == frames
    assert holders(net, job.id) == now_holding
    assert net.nodes[actor].healing.jobs_restored == 1
    assert net.nodes[actor].healing.copies_restored == 1


def test_two_holders_failing_at_once_leave_one_survivor_that_makes_two_copies():
    net = five(seed=3)
    job = replicated(net)
    first = holders(net, job.id)
    survivor, *lost = sorted(first)
    for i in lost:
        net.crash(i)
    assert net.run_until(at_level(net, job.id), HEAL_DEADLINE_MS)
    assert holders(net, job.id) == {survivor} | (set(range(5)) - first)
    assert {m.src for m in repljobs_since(net, 0) if m.at > 0 and job.id in m.keys
            and m.src != 0} <= {survivor}


def test_the_work_spreads_over_the_survivors():
    net = five(seed=4)
    jobs = [replicated(net, node=i % 5) for i in range(60)]
    lost = 2
    affected = [job for job in jobs if lost in holders(net, job.id)]
    t0 = net.clock.now_ms()
    net.crash(lost)
    assert net.run_until(lambda: all(len(holders(net, job.id)) == 3 for job in affected),
                         HEAL_DEADLINE_MS)
    actors = Counter()
    for job in affected:
        sources = {m.src for m in repljobs_since(net, t0, job.id)}
        assert len(sources) == 1, (job.id, sources)     # exactly one acts per job
        actors.update(sources)
    assert len(actors) >= 3, actors                       # ... not always the same one
    assert not repljobs_since(net, t0) or all(
        set(m.keys) <= {job.id for job in affected} for m in repljobs_since(net, t0))


# ------------------------------------------------------------------ a holder restarts empty

def test_a_holder_restarted_empty_gets_its_copy_back_from_one_survivor():
    # FAIL comes late (as with a default node timeout): the restart is seen first.
    net = five(seed=5, fail_delay_ms=60_000)
    job = replicated(net)
    first = holders(net, job.id)
    wiped = min(first - {0})
    net.crash(wiped)
    net.run_for(500)
    assert not repljobs_since(net, net.clock.now_ms() - 500, job.id)   # not FAIL yet
    t0 = net.clock.now_ms()
    net.restart(wiped)                                # no AOF: a new start epoch
    assert net.nodes[wiped].lookup(job.id) is None
    assert net.run_until(at_level(net, job.id), HEAL_DEADLINE_MS)
    # Still listed everywhere, it is the cheapest place for the copy: no new node.
    assert holders(net, job.id) == first
    frames = repljobs_since(net, t0, job.id)
    assert len({m.src for m in frames}) == 1
    assert sorted(m.dst for m in frames) == sorted(first - {frames[0].src})
    assert listed_by(net, wiped, job.id) == first
    assert net.nodes[frames[0].src].healing.peers_restarted_empty == 1
    net.run_for(3 * HEAL_FALLBACK_MS)
    assert repljobs_since(net, t0, job.id) == frames


def test_a_holder_restarted_with_its_aof_loses_nothing_and_nothing_is_copied():
    net = five(seed=6, fail_delay_ms=60_000)
    for i in range(5):
        net.with_aof(i)
    job = replicated(net)
    first = holders(net, job.id)
    back = min(first - {0})
    net.crash(back)
    net.run_for(200)
    t0 = net.clock.now_ms()
    net.restart(back)                                 # same epoch: its jobs are back
    assert net.nodes[back].lookup(job.id) is not None
    net.run_for(3 * HEAL_FALLBACK_MS)
    assert not repljobs_since(net, t0)
    assert holders(net, job.id) == first


def test_a_failed_holder_that_comes_back_empty_after_healing_costs_one_resend():
    """Its restart is a loss: the job, at its level, is resent once, by one
    holder, to the holders that count; the emptied one gets no copy."""
    net = five(seed=7)
    job = replicated(net)
    first = holders(net, job.id)
    lost = min(first - {0})
    net.crash(lost)
    assert net.run_until(at_level(net, job.id), HEAL_DEADLINE_MS)
    healed = holders(net, job.id)
    t0 = net.clock.now_ms()
    net.restart(lost)                                 # empty: marked, but not needed
    net.run_for(3 * HEAL_FALLBACK_MS)
    frames = repljobs_since(net, t0)
    assert len({m.src for m in frames}) == 1
    assert sorted(m.dst for m in frames) == sorted(healed - {frames[0].src})
    assert holders(net, job.id) == healed
    assert net.nodes[frames[0].src].healing.jobs_resent == 1


def test_a_resend_leaves_the_marks_of_holders_it_did_not_go_to():
    """The simulation's seed 42361: a resend (MSG_RESENT) goes to the
    holders that count only, so its receivers keep the mark of the holder
    that restarted empty. When another holder is lost, they count it as
    missing and heal the job, giving it its copy back, rather than take
    the job for whole and only resend it."""
    net = five(seed=7)
    job = replicated(net)
    emptied = min(holders(net, job.id) - {0})
    net.crash(emptied)
    assert net.run_until(at_level(net, job.id), HEAL_DEADLINE_MS)
    net.restart(emptied)                              # marked; the job resent by one holder
    net.run_for(2 * HEAL_DEADLINE_MS)
    healed = holders(net, job.id)
    assert emptied not in healed
    counters = {i: (net.nodes[i].healing.jobs_restored, net.nodes[i].healing.jobs_resent)
                for i in healed}
    lost = min(healed)
    net.crash(lost)
    assert net.run_until(lambda: net.nodes[emptied].lookup(job.id) is not None,
                         HEAL_FALLBACK_MS + HEAL_DEADLINE_MS)
    acted = [i for i in healed - {lost}
             if (net.nodes[i].healing.jobs_restored, net.nodes[i].healing.jobs_resent) != counters[i]]
    assert len(acted) == 1
    restored, resent = counters[acted[0]]
    assert net.nodes[acted[0]].healing.jobs_restored == restored + 1
    assert net.nodes[acted[0]].healing.jobs_resent == resent


def test_a_holder_listed_by_a_frame_lost_with_its_producer_gets_the_job_when_the_producer_is_lost():
    """The simulation's seeds 11768 and 15594: the producer's last REPLJOB
    to one holder died with it, and the job was at its level on paper
    (that holder listed). The producer's loss makes a survivor resend it,
    so the listed holder really has a copy."""
    net = five(seed=2)
    phantom = []

    def lose_one_copy(m):           # the producer's REPLJOB to one node, lost
        if m.kind == msg.REPLJOB and m.src == 0 and not phantom:
            phantom.append(m.dst)
        return m.kind == msg.REPLJOB and m.src == 0 and m.dst in phantom

    net.drop_rule = lose_one_copy
    job = net.add_job(0, b"q", b"body", repl=2, client="producer", retry=30)
    assert net.run_until(lambda: "producer" in net.unblocked, 2000)
    listed = listed_by(net, 0, job.id)
    assert phantom[0] in listed and net.nodes[phantom[0]].lookup(job.id) is None
    net.drop_rule = None
    net.crash(0)                                     # FAIL at once
    # The phantom may come first in the survivors' order, and never act:
    # the next one acts at its fallback.
    assert net.run_until(lambda: net.nodes[phantom[0]].lookup(job.id) is not None,
                         HEAL_FALLBACK_MS + HEAL_DEADLINE_MS)
    assert len(holders(net, job.id)) >= 2


def test_holders_replaced_one_by_one_keep_the_job_alive_past_all_of_them():
    net = five(seed=8, fail_delay_ms=2_000)
    job = replicated(net)
    original = holders(net, job.id)
    for i in sorted(original):                        # every original holder, in turn
        net.crash(i)
        assert net.run_until(at_level(net, job.id), 10_000), i
        net.restart(i)
        net.run_for(1_000)
    assert len(holders(net, job.id)) >= 3
    # And it is still delivered, once, then acked everywhere.
    taker = min(holders(net, job.id))
    got = net.get_jobs(taker, b"q")
    if not got:                                       # queued elsewhere: wait for its retry
        assert net.run_until(lambda: any(net.nodes[i].queue_length(b"q") for i in net.live()),
                             60_000)
        taker = next(i for i in net.live() if net.nodes[i].queue_length(b"q"))
        got = net.get_jobs(taker, b"q")
    assert [j.id for j in got] == [job.id]
    net.call(taker, ack_jobs, [job.id])
    assert net.run_until(lambda: not net.copies(job.id), 10_000), net.copies(job.id)


# ------------------------------------------------------------------ acks reach new copies

def test_an_ack_after_healing_removes_every_copy_the_new_ones_included():
    net = five(seed=9)
    job = replicated(net)
    first = holders(net, job.id)
    lost = min(first - {0})
    net.crash(lost)
    assert net.run_until(at_level(net, job.id), HEAL_DEADLINE_MS)
    new = holders(net, job.id) - first
    assert new
    net.restart(lost)                                 # back, empty: it answers SETACK too
    non_holder = next(i for i in range(5) if i not in holders(net, job.id))
    net.call(non_holder, ack_jobs, [job.id])        # a dummy ack, from a node without it
    assert net.run_until(lambda: not net.copies(job.id), 10_000), net.copies(job.id)


def test_an_ack_on_the_new_holder_removes_every_copy():
    net = five(seed=10)
    job = replicated(net)
    first = holders(net, job.id)
    lost = min(first - {0})
    net.crash(lost)
    assert net.run_until(at_level(net, job.id), HEAL_DEADLINE_MS)
    (new,) = holders(net, job.id) - first
    net.call(new, ack_jobs, [job.id])
    # The lost holder is still listed (it could come back with its AOF): every
    # live copy is acked, never queued again, and the collection waits for it.
    assert net.run_until(lambda: set(net.copies(job.id).values()) == {"acked"}, 1_000)
    assert set(net.copies(job.id)) == (first | {new}) - {lost}
    net.run_for(5_000)
    assert set(net.copies(job.id).values()) == {"acked"}
    net.restart(lost)
    assert net.run_until(lambda: not net.copies(job.id), 200_000), net.copies(job.id)


# ------------------------------------------------------------------ pacing, storms

def test_healing_is_paced_by_a_budget_of_jobs_per_period():
    net = five(seed=11)
    count = 3 * HEAL_JOBS_PER_PERIOD
    jobs = [net.add_job(0, b"q", b"%d" % n, repl=3, retry=30, async_=True)
            for n in range(count)]
    net.run_for(200)
    assert all(len(holders(net, job.id)) == 3 for job in jobs)
    lost = 1
    affected = {job.id for job in jobs if lost in holders(net, job.id)}
    assert len(affected) > HEAL_JOBS_PER_PERIOD
    t0 = net.clock.now_ms()
    net.crash(lost)
    net.run_for(HEAL_PERIOD_MS // 2)
    for i in net.live():
        assert net.nodes[i].healing.jobs_restored <= HEAL_JOBS_PER_PERIOD
    assert net.run_until(lambda: all(len(holders(net, job_id)) == 3 for job_id in affected),
                         10 * HEAL_PERIOD_MS * (count // HEAL_JOBS_PER_PERIOD + 1))
    per_job = Counter()
    for m in repljobs_since(net, t0):
        per_job.update(m.keys)
    # No storm: each affected job sent once to each of its 4 listed holders but the actor.
    assert set(per_job) == affected
    assert set(per_job.values()) == {3}
    restored = sum(net.nodes[i].healing.jobs_restored for i in net.live())
    assert restored == len(affected)


def test_only_the_jobs_of_the_lost_holder_are_copied_and_a_blip_copies_nothing():
    net = five(seed=12, fail_delay_ms=3_000)
    jobs = [replicated(net, node=i % 5) for i in range(40)]
    lost = 3
    held = {job.id for job in jobs if lost in holders(net, job.id)}
    assert 0 < len(held) < len(jobs)
    # Down for less than the failure detection, and back with nothing lost
    # (same epoch: as after a restart with its AOF, or a pause): no copy.
    t0 = net.clock.now_ms()
    net.partition({lost}, {0, 1, 2, 4})
    net.run_for(1_000)
    net.heal()
    net.run_for(3 * HEAL_FALLBACK_MS)
    assert not repljobs_since(net, t0)
    # Flagged FAIL: exactly its jobs are copied, each once.
    t1 = net.clock.now_ms()
    net.crash(lost)
    assert net.run_until(lambda: all(len(holders(net, job_id)) == 3 for job_id in held),
                         3_000 + HEAL_DEADLINE_MS)
    net.run_for(3 * HEAL_FALLBACK_MS)
    copied = Counter(key for m in repljobs_since(net, t1) for key in m.keys)
    assert set(copied) == held
    assert set(copied.values()) == {3}                # to the 2 other survivors and 1 new


# ------------------------------------------------------------------ off, and corners

def test_rereplicate_no_leaves_the_job_below_its_level():
    net = five(seed=13)
    for node in net.nodes:
        node.healing.set_enabled(False)
    job = replicated(net)
    first = holders(net, job.id)
    t0 = net.clock.now_ms()
    net.crash(min(first - {0}))
    net.run_for(3 * HEAL_FALLBACK_MS)
    assert not repljobs_since(net, t0)
    assert len(holders(net, job.id)) == 2
    # Turned on again: the nodes failing now are looked for at once.
    for i in net.live():
        net.nodes[i].healing.set_enabled(True)
    assert net.run_until(at_level(net, job.id), HEAL_DEADLINE_MS)


def test_no_node_to_copy_to_waits_for_one_to_come_back():
    net = SimNet(4, seed=14, failure_detection=True)
    job = replicated(net)
    first = holders(net, job.id)
    spare = ({0, 1, 2, 3} - first).pop()
    lost = min(first - {0})
    net.crash(spare)
    net.crash(lost)
    net.run_for(1_000)
    assert len(holders(net, job.id)) == 2
    survivors = first - {lost}
    for i in survivors:                               # rereplicate_jobs_below_level
        assert dict(net.nodes[i].healing.info())["rereplicate_jobs_below_level"] == 1
    net.restart(spare)
    assert net.run_until(at_level(net, job.id), HEAL_DEADLINE_MS)
    assert holders(net, job.id) == survivors | {spare}


def test_a_watcher_acts_when_the_first_in_line_does_not():
    net = five(seed=15)
    job = replicated(net)
    first = holders(net, job.id)
    lost = min(first - {0})
    survivors = sorted(first - {lost})
    # Find who is first in line by letting it act once, on a copy of the run.
    probe = five(seed=15)
    probe_job = replicated(probe)
    assert probe_job.id == job.id
    crashed_at = probe.clock.now_ms()
    probe.crash(lost)
    assert probe.run_until(at_level(probe, job.id), HEAL_DEADLINE_MS)
    (actor,) = {m.src for m in repljobs_since(probe, crashed_at, job.id)}
    net.nodes[actor].healing.set_enabled(False)           # first in line, but does nothing
    t0 = net.clock.now_ms()
    net.crash(lost)
    net.run_for(HEAL_FALLBACK_MS // 2)
    assert not repljobs_since(net, t0, job.id)
    assert net.run_until(at_level(net, job.id), 2 * HEAL_FALLBACK_MS)
    assert {m.src for m in repljobs_since(net, t0, job.id)} == set(survivors) - {actor}


def test_the_same_seed_replays_the_same_healing():
    def run() -> list:
        net = five(seed=16)
        for i in range(30):
            replicated(net, node=i % 5)
        net.crash(3)
        net.run_for(2_000)
        net.restart(3)
        net.crash(1)
        net.run_for(2_000)
        return [(m.at, m.src, m.dst, m.kind, m.keys) for m in net.sent]

    assert run() == run()


def test_a_watcher_acts_at_once_when_the_first_in_line_loses_its_link():
    # A holder restarts empty; the survivor first in line does nothing (as if
    # killed a moment later: its link breaks, FAIL is far off). The other
    # survivor must not wait for its fallback: it ranks the job again now.
    net = five(seed=5, fail_delay_ms=60_000)
    job = replicated(net)
    first = holders(net, job.id)
    wiped = min(first - {0})
    probe = five(seed=5, fail_delay_ms=60_000)
    assert replicated(probe).id == job.id
    probe.crash(wiped)
    probe.run_for(500)
    restarted_at = probe.clock.now_ms()
    probe.restart(wiped)
    assert probe.run_until(lambda: probe.nodes[wiped].lookup(job.id) is not None,
                           HEAL_DEADLINE_MS)
    (actor,) = {m.src for m in repljobs_since(probe, restarted_at, job.id)}
    (watcher,) = first - {wiped, actor}
    net.nodes[actor].healing.set_enabled(False)
    net.crash(wiped)
    net.run_for(500)
    net.restart(wiped)
    net.run_for(1000)
    assert net.nodes[wiped].lookup(job.id) is None     # the watcher waits for the actor
    t0 = net.clock.now_ms()
    net.crash(actor)
    assert net.run_until(lambda: net.nodes[wiped].lookup(job.id) is not None,
                         HEAL_DEADLINE_MS)
    assert {m.src for m in repljobs_since(net, t0, job.id)} == {watcher}


# ------------------------------------------------------------------ a heal crossing an abandon

CROSSING_LATENCY_MS = 50          # a loaded machine: longer than the heal's lead


def stopped_holder_flagged_just_before_the_end(outcome: str, seed: int = 2):
    """Node 0 adds a job (REPLICATE 3); node 2 stops (never answers), and
    is flagged FAIL 10 ms before the ADDJOB ends: the job `outcome`
    ("expires": TTL 1, as tests/cluster/test_02_replication.py's
    expiring job; "times out": the ADDJOB's timeout). Node 1, first in the
    job's order, heals it at once; the frames are slow (a loaded machine),
    so its REPLJOB to node 0 and node 0's DELJOB to it cross. Returns the
    network, the job and the time the ADDJOB ended."""
    net = SimNet(3, seed=seed, failure_detection=True)
    net.drop_rule = lambda m: m.dst == 2
    if outcome == "expires":
        job = net.add_job(0, repl=3, client="producer", ttl=1, timeout_ms=8000)
        ends = job.etime * 1000 + 1000              # its first awake time past the TTL
    else:
        job = net.add_job(0, repl=3, client="producer", timeout_ms=1000)
        ends = net.clock.now_ms() + 1000
    assert net.run_until(lambda: net.nodes[1].lookup(job.id) is not None, 100)
    net.fail_delay_ms = ends - net.clock.now_ms() - 10
    net.crash(2)
    net.latency_ms = CROSSING_LATENCY_MS
    assert net.run_until(lambda: "producer" in net.unblocked, ends - net.clock.now_ms() + 10)
    return net, job, ends


@pytest.mark.parametrize("outcome", ["expires", "times out"])
def test_a_heal_crossing_its_producers_abandon_brings_no_copy_back(outcome):
    # The flake of test_a_job_expiring_before_its_copies_exist_gets_norepl_job_removed:
    # the producer answered NOREPL, then adopted the heal's copy of the job
    # it had just deleted (and, had the ADDJOB timed out, queued it later).
    net, job, ends = stopped_holder_flagged_just_before_the_end(outcome)
    (answer,) = net.unblocked["producer"]
    assert isinstance(answer, NoReplError)
    heal = [m for m in repljobs_since(net, ends - 10, job.id) if m.src == 1 and m.dst == 0]
    assert heal and heal[0].at < ends, "node 1 healed before the ADDJOB ended (precondition)"
    assert net.nodes[0].lookup(job.id) is None
    net.run_for(2 * CROSSING_LATENCY_MS)            # the heal arrives, then the DELJOB
    assert net.copies(job.id) == {}
    assert not [m for m in net.sent if m.kind == msg.GOTJOB and m.at >= ends]
    net.run_for(1000)
    assert net.copies(job.id) == {}


def test_a_heal_reaching_a_holder_after_the_abandon_makes_no_copy_there():
    # Node 2 got the producer's DELJOB (flagged MSG_ABANDONED) before node
    # 1's heal, sent before node 1 got its own: a copy there would outlive
    # the job everywhere else.
    net = SimNet(4, seed=2, failure_detection=True)
    net.drop_rule = lambda m: m.dst == 3
    job = net.add_job(0, repl=4, client="producer", timeout_ms=1000)
    assert net.run_until(lambda: all(net.nodes[i].lookup(job.id) for i in (1, 2)), 100)
    heal = net.nodes[1].job_bytes(net.nodes[1].lookup(job.id), net.clock.now_ms() // 1000,
                                  net.ids[2])
    assert net.run_until(lambda: "producer" in net.unblocked, 1100)
    assert net.run_until(lambda: not net.copies(job.id), 100)
    net.call(2, "healing.on_repljob", net.ids[1], msg.MSG_NOREPLY, [heal])
    net.call(2, "healing.on_repljob", net.ids[1], 0, [heal])
    assert net.nodes[2].lookup(job.id) is None
    assert not [m for m in net.sent if m.kind == msg.GOTJOB and m.src == 2
                and m.at >= net.clock.now_ms()]


def test_a_failed_addjobs_id_is_refused_a_while_and_for_a_bounded_number_of_ids():
    net, job, ends = stopped_holder_flagged_just_before_the_end("times out")
    producer = net.nodes[0]
    assert job.id in producer.abandoned
    replication = producer.replication
    for i in range(ABANDONED_IDS_MAX):
        replication.refuse_copies(b"%040d" % i)
    assert len(producer.abandoned) == ABANDONED_IDS_MAX and job.id not in producer.abandoned
    net.run_for(ABANDONED_REFUSE_MS)
    assert not producer.abandoned
    # Past that time, a REPLJOB makes a copy again.
    net.call(0, "healing.on_repljob", net.ids[1], msg.MSG_NOREPLY,
             [producer.job_bytes(job, net.clock.now_ms() // 1000, net.ids[1])])
    assert producer.lookup(job.id) is not None
