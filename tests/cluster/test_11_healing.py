"""Copies that heal, over real processes (node/healing.py, `rereplicate`).

Five nodes without an AOF (cluster-node-timeout 1000 ms). A holder of a
REPLICATE 3 job killed with kill -9 and restarted comes back empty; the
surviving holders bring the job back to 3 copies, whether the restart or the
FAIL flag is seen first; holders killed one at a time, with the copies
healed in between, never take the job with them; an ACKJOB after healing
removes every copy, the new ones included; each loss makes one copy, not a
storm; `rereplicate no` leaves the job below its level.
"""

from __future__ import annotations

import uuid

import pytest

from tests.cluster.harness import (MARGIN_S, call, fail_deadline_s, info, nodes_by_id, poll,
                                   show)

RETRY_S = 30
HEAL_DEADLINE_S = fail_deadline_s() + 2 * MARGIN_S     # FAIL, then a few heal periods
GC_DEADLINE_S = 15 + MARGIN_S


# ------------------------------------------------------------------ helpers

def alive(cluster) -> list[int]:
    return [i for i, proc in enumerate(cluster) if proc.alive()]


def copies(cluster, job_id) -> dict[int, str]:
    """{node: state} of the live nodes holding the job unacknowledged."""
    found = {}
    for i in alive(cluster):
        fields = show(cluster[i], job_id)
        if fields is not None and fields["state"] != b"acked":
            found[i] = fields["state"].decode()
    return found


def anywhere(cluster, job_id) -> dict[int, str]:
    """{node: state} of the live nodes that know the job at all (acked too)."""
    found = {}
    for i in alive(cluster):
        fields = show(cluster[i], job_id)
        if fields is not None:
            found[i] = fields["state"].decode()
    return found


def heal_counters(cluster, skip: int | None = None) -> tuple[int, int]:
    """(jobs restored, copies restored), summed over the live nodes but
    `skip` (a node restarted in between starts its counters at 0 again)."""
    jobs = copies_made = 0
    for i in alive(cluster):
        if i == skip:
            continue
        fields = info(cluster[i], "cluster")
        jobs += int(fields["rereplicate_jobs_restored"])
        copies_made += int(fields["rereplicate_copies_restored"])
    return jobs, copies_made


def add(cluster, index: int, queue: str, retry: int = RETRY_S) -> tuple[bytes, set[int]]:
    job_id = call(cluster[index], "ADDJOB", queue, "body", 5000, "REPLICATE", 3,
                  "RETRY", retry)
    holders = set(copies(cluster, job_id))
    assert len(holders) == 3, holders
    return job_id, holders


def kill(cluster, index: int) -> None:
    cluster[index].kill()


def restart(cluster, index: int) -> None:
    """Back on its port and directory, without an AOF: empty."""
    cluster[index].start()
    cluster.wait_full_mesh(timeout=30)


def flagged_fail(cluster, index: int) -> bool:
    target = cluster.ids[index]
    return all("fail" in nodes_by_id(cluster[i])[target].flags for i in alive(cluster))


def wait_copies(cluster, job_id, count: int, timeout: float, message: str):
    return poll(lambda: len(copies(cluster, job_id)) == count, timeout,
                f"{message}: {job_id!r} on {count} nodes")


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def five(make_cluster):
    return make_cluster(5)


@pytest.fixture
def cluster(five):
    for i, proc in enumerate(five):
        if not proc.alive():
            proc.start()
    five.wait_full_mesh(timeout=30)
    for proc in five:
        assert call(proc, "CONFIG", "SET", "rereplicate", "yes") == b"OK"
        assert call(proc, "DEBUG", "FLUSHALL") == b"OK"
    yield five
    for proc in five:
        if not proc.alive():
            proc.start()


@pytest.fixture
def queue():
    return f"heal-{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------ a holder lost

def test_a_holder_killed_and_restarted_at_once_gets_its_copy_back(cluster, queue):
    job_id, holders = add(cluster, 0, queue)
    victim = max(holders - {0})
    before = heal_counters(cluster, skip=victim)
    kill(cluster, victim)
    restart(cluster, victim)                 # before anyone flags it FAIL: its new
    wait_copies(cluster, job_id, 3, HEAL_DEADLINE_S, "the copy back")   # epoch says empty
    assert set(copies(cluster, job_id)) == holders        # the same three nodes
    after = heal_counters(cluster, skip=victim)
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)   # one copy, by one node
    fields = show(cluster[victim], job_id)
    listed = {node.decode() for node in fields["nodes-delivered"]}
    assert listed == {cluster.ids[i] for i in holders}


def test_a_holder_flagged_fail_is_replaced_and_comes_back_empty_at_no_cost(cluster, queue):
    job_id, holders = add(cluster, 0, queue)
    victim = max(holders - {0})
    before = heal_counters(cluster, skip=victim)
    kill(cluster, victim)
    poll(lambda: flagged_fail(cluster, victim), fail_deadline_s(), "FAIL")
    wait_copies(cluster, job_id, 3, HEAL_DEADLINE_S, "a new copy")
    new = set(copies(cluster, job_id)) - holders
    assert len(new) == 1
    restart(cluster, victim)                  # empty, and no longer needed
    wait_copies(cluster, job_id, 3, MARGIN_S, "still three copies")
    assert set(copies(cluster, job_id)) == (holders - {victim}) | new
    after = heal_counters(cluster, skip=victim)
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)
    (new_holder,) = new
    listed = {node.decode() for node in show(cluster[new_holder], job_id)["nodes-delivered"]}
    assert listed == {cluster.ids[i] for i in holders | new}     # the lost one included


def test_every_original_holder_killed_in_turn_and_the_job_survives(cluster, queue):
    job_id, original = add(cluster, 0, queue, retry=2)
    for victim in sorted(original):
        kill(cluster, victim)
        wait_copies(cluster, job_id, 3, HEAL_DEADLINE_S, f"healed after node{victim} died")
        restart(cluster, victim)
    assert len(copies(cluster, job_id)) >= 3
    # Still deliverable, once; its ACK then removes every copy.
    def take():
        for i in alive(cluster):
            got = call(cluster[i], "GETJOB", "NOHANG", "FROM", queue)
            if got:
                return i, got
        return None
    node, got = poll(take, 2 * 2 + MARGIN_S, "the job queued again somewhere")
    assert [entry[1] for entry in got] == [job_id]
    assert call(cluster[node], "ACKJOB", job_id) == 1
    poll(lambda: not anywhere(cluster, job_id), GC_DEADLINE_S, "every copy gone")


def test_an_ackjob_after_healing_removes_every_copy_the_new_ones_included(cluster, queue):
    job_id, holders = add(cluster, 0, queue)
    victim = max(holders - {0})
    kill(cluster, victim)
    wait_copies(cluster, job_id, 3, HEAL_DEADLINE_S, "a new copy")
    (new,) = set(copies(cluster, job_id)) - holders
    restart(cluster, victim)
    assert call(cluster[new], "ACKJOB", job_id) == 1          # on the new copy's node
    poll(lambda: not anywhere(cluster, job_id), GC_DEADLINE_S, "every copy gone")


def test_many_jobs_heal_with_one_copy_each(cluster, queue):
    jobs = [add(cluster, i % 5, queue) for i in range(30)]
    victim = 4
    affected = [job_id for job_id, holders in jobs if victim in holders]
    assert affected
    before = heal_counters(cluster, skip=victim)
    kill(cluster, victim)
    poll(lambda: all(len(copies(cluster, job_id)) == 3 for job_id in affected),
         HEAL_DEADLINE_S, "every affected job back at 3 copies")
    after = heal_counters(cluster, skip=victim)
    assert after[0] - before[0] == len(affected)              # no storm: once per job
    assert after[1] - before[1] == len(affected)
    for job_id, holders in jobs:                              # and the others untouched
        if job_id not in affected:
            assert set(copies(cluster, job_id)) == holders


# ------------------------------------------------------------------ off, and INFO

def test_rereplicate_no_leaves_the_job_at_two_copies_until_turned_on(cluster, queue):
    for proc in cluster:
        assert call(proc, "CONFIG", "SET", "rereplicate", "no") == b"OK"
        assert call(proc, "CONFIG", "GET", "rereplicate") == [b"rereplicate", b"no"]
    job_id, holders = add(cluster, 0, queue)
    victim = max(holders - {0})
    kill(cluster, victim)
    poll(lambda: flagged_fail(cluster, victim), fail_deadline_s(), "FAIL")
    wait_copies(cluster, job_id, 2, MARGIN_S, "two copies left")
    assert info(cluster[0], "cluster")["rereplicate"] == "no"
    for i in alive(cluster):
        assert call(cluster[i], "CONFIG", "SET", "rereplicate", "yes") == b"OK"
    wait_copies(cluster, job_id, 3, HEAL_DEADLINE_S, "healed once turned on")


def test_info_shows_what_healing_did_and_knows(cluster, queue):
    fields = info(cluster[0], "cluster")
    for name in ("rereplicate", "rereplicate_peers_failed", "rereplicate_peers_restarted_empty",
                 "rereplicate_peers_known_epoch", "rereplicate_jobs_to_check",
                 "rereplicate_jobs_below_level", "rereplicate_jobs_restored",
                 "rereplicate_copies_restored", "rereplicate_jobs_resent",
                 "rereplicate_pass_in_progress"):
        assert name in fields, name
    assert fields["rereplicate"] == "yes"
    assert int(fields["rereplicate_peers_known_epoch"]) == 4     # every peer told its epoch
    keys = list(fields)
    assert keys.index("rereplicate") > keys.index("cluster_bus_auth")   # appended


# ------------------------------------------------------------------ a damaged AOF

def test_a_holder_whose_aof_lost_its_tail_gets_its_copies_back(fresh_cluster, queue):
    """A holder restarted with its AOF keeps its start epoch: its peers take
    its jobs as back. But an AOF whose last record is cut short (a damaged
    file, or a power cut) may have lost copies the node had confirmed, and
    aof-load-truncated loads what is before the cut: the node must take a
    new epoch then, or its peers never copy those jobs back to it."""
    cluster = fresh_cluster(3, extra_args=["--appendonly", "yes"])
    job_id = call(cluster[0], "ADDJOB", queue, "body", 5000, "REPLICATE", 3)
    later = call(cluster[0], "ADDJOB", queue, "later", 5000, "REPLICATE", 3)
    assert len(copies(cluster, job_id)) == len(copies(cluster, later)) == 3
    cluster[2].kill()
    aof = cluster[2].dir / "disque.aof"
    data = aof.read_bytes()
    with open(aof, "r+b") as handle:             # cut inside the first job's record
        handle.truncate(data.index(job_id) + 10)
    cluster[2].start()
    cluster.wait_full_mesh(timeout=30)
    assert "was cut short by a crash and is dropped" in cluster[2].log_text()
    wait_copies(cluster, job_id, 3, HEAL_DEADLINE_S, "the dropped copy back on node2")
    wait_copies(cluster, later, 3, HEAL_DEADLINE_S, "the job after the cut back too")
    assert set(copies(cluster, job_id)) == {0, 1, 2}
