"""Memory pressure on real nodes (Disque's FAQ "What happens when a node
runs out of memory?", and the OOM tests of its Tcl units 02 and 04):

  * above 75% of maxmemory a node keeps no copy of new jobs: ADDJOB
    replicates them to REPLICATE other nodes ("external replication"), and
    the node accepts no copies from others;
  * above 95% every command first evicts what is safe to lose:
    acknowledged jobs and at-most-once jobs already delivered (idle empty
    queues go after 2 s idle); commands that may grow memory are refused
    with -OOM when that cannot bring memory back under 95% (Disque's
    freeMemoryIfNeeded), or at once under maxmemory-policy noeviction.

The nodes run with --maxmemory 3mb. Our server measures the memory the
maxmemory policy uses as its estimate of job and queue memory, INFO used_memory_dataset
(Disque uses the allocator's total); the thresholds are checked against
that field and INFO maxmemory. Where a test needs a node between two
thresholds it sets maxmemory with CONFIG SET relative to used_memory_dataset.
One three-node cluster is shared by the module; before every test every
node runs, has maxmemory 3mb again and is flushed with DEBUG FLUSHALL.
"""

from __future__ import annotations

import time
import uuid

import pytest

from tests.cluster.harness import (MARGIN_S, call, info, poll, raw_reply, registered_jobs, show,
                                   states)
from tests.support import encode_command

MAXMEMORY = 3 * 1024 * 1024
BODY = "x" * 2000
OOM_ERROR = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
OUT_OF_MEMORY_NOREPL = (b"-NOREPL Not enough reachable nodes for the requested replication "
                        b"level, since I'm unable to hold a copy of the message for the "
                        b"following reason: I'm out of memory\r\n")
TIMEOUT_NOREPL = (b"-NOREPL Timeout reached before replicating to the requested "
                  b"number of nodes\r\n")
IDLE_QUEUE_S_AT_95 = 2


# ------------------------------------------------------------------ helpers

def used(proc) -> int:
    return int(info(proc, "memory")["used_memory_dataset"])


def registered_queues(proc) -> int:
    return int(info(proc, "queues")["registered_queues"])


def stays(condition, seconds: float, message: str) -> None:
    """`condition` holds at every poll for `seconds` (behaviour over time)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert condition(), message
        time.sleep(0.1)
    assert condition(), message


def set_maxmemory(proc, limit: int) -> None:
    assert call(proc, "CONFIG", "SET", "maxmemory", str(limit)) == b"OK"


def fill_until_no_local_copy(proc, queue: str, repl: int) -> tuple[bytes, int]:
    """Disque's unit 02 loop: ADDJOB until the node keeps no copy of the
    new job. Returns that job's ID and how many jobs the node kept."""
    client = proc.client()
    for kept in range(5000):
        job_id = client.execute_command("ADDJOB", queue, BODY, 5000, "REPLICATE", repl)
        if client.execute_command("SHOW", job_id) is None:
            return job_id, kept
    raise AssertionError("the node kept a copy of every job: no external replication")


def add_many(proc, queue: str, count: int, *options) -> list[bytes]:
    client = proc.client()
    pipe = client.pipeline(transaction=False)
    for _ in range(count):
        pipe.execute_command("ADDJOB", queue, BODY, 5000, *options)
    return pipe.execute()


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def trio(make_cluster):
    return make_cluster(3, extra_args=["--maxmemory", "3mb"])


@pytest.fixture
def cluster(trio):
    for proc in trio:
        proc.resume()
    trio.wait_full_mesh(timeout=30)
    for proc in trio:
        set_maxmemory(proc, MAXMEMORY)
        assert call(proc, "DEBUG", "FLUSHALL") == b"OK"
    yield trio
    for proc in trio:
        proc.resume()
        set_maxmemory(proc, MAXMEMORY)


@pytest.fixture
def queue():
    return f"mem-{uuid.uuid4().hex[:12]}"


# ------------------------------------------------------------------ INFO

def test_info_reports_maxmemory_and_the_job_memory_estimate(cluster, queue):
    fields = info(cluster[0], "memory")
    assert int(fields["maxmemory"]) == MAXMEMORY
    assert int(fields["used_memory_dataset"]) == 0
    add_many(cluster[0], queue, 10, "REPLICATE", 1, "RETRY", 0)
    per_job = used(cluster[0]) / 10
    assert per_job >= len(BODY)
    assert call(cluster[0], "DEBUG", "FLUSHALL") == b"OK"
    assert used(cluster[0]) == 0


# ------------------------------------------------------------------ 75%: external replication

@pytest.mark.parametrize("repl", [1, 2])
def test_above_75_percent_a_node_keeps_no_copy_and_replicates_externally(cluster, queue,
                                                                          repl):
    job_id, kept = fill_until_no_local_copy(cluster[0], queue, repl)
    memory, jobs = used(cluster[0]), registered_jobs(cluster[0])
    assert jobs == kept
    # It kept copies up to the 75% mark, and no further.
    assert memory > MAXMEMORY * 0.75
    assert memory * (jobs - 1) / jobs <= MAXMEMORY * 0.75
    # The job lives on `repl` other nodes, one of which queued it.
    found = poll(lambda: (lambda f: f if len(f) == repl and "queued" in f.values()
                          else None)(states(cluster, job_id)),
                 5 + MARGIN_S, f"{repl} external copies, one queued")
    assert 0 not in found
    assert sorted(found.values()) == sorted(["queued"] + ["active"] * (repl - 1))
    # And more jobs still go elsewhere, the node's own memory unchanged.
    more = call(cluster[0], "ADDJOB", queue, BODY, 5000, "REPLICATE", repl)
    assert show(cluster[0], more) is None
    assert (used(cluster[0]), registered_jobs(cluster[0])) == (memory, jobs)


def test_above_75_percent_replicate_equal_to_the_cluster_size_gets_norepl_out_of_memory(
        cluster, queue):
    fill_until_no_local_copy(cluster[0], queue, 1)
    assert raw_reply(cluster[0], "ADDJOB", queue, BODY, 5000, "REPLICATE", 3) \
        == OUT_OF_MEMORY_NOREPL
    assert call(cluster[0], "ADDJOB", queue, BODY, 5000, "REPLICATE", 2).startswith(b"D-")


def test_above_75_percent_a_node_accepts_no_copies_from_others(cluster, queue):
    fill_until_no_local_copy(cluster[0], queue, 1)
    for _ in range(5):
        job_id = call(cluster[1], "ADDJOB", queue, BODY, 5000, "REPLICATE", 2)
        assert set(states(cluster, job_id)) == {1, 2}
    # A third copy could only be on node 0, which refuses it.
    assert raw_reply(cluster[1], "ADDJOB", queue, BODY, 1000, "REPLICATE", 3) \
        == TIMEOUT_NOREPL


@pytest.mark.parametrize("repl", [1, 2])
def test_async_addjob_above_75_percent_answers_with_the_id_and_replicates_externally(
        cluster, queue, repl):
    fill_until_no_local_copy(cluster[0], queue, 1)
    reply = raw_reply(cluster[0], "ADDJOB", queue, BODY, 5000, "REPLICATE", repl, "ASYNC")
    assert reply.startswith(b"+D-"), reply
    job_id = reply[1:-2]
    assert show(cluster[0], job_id) is None
    poll(lambda: len(states(cluster, job_id)) == repl
         and "queued" in states(cluster, job_id).values(),
         5 + MARGIN_S, f"{repl} external copies, one queued")


# ------------------------------------------------------------------ 95%: eviction

def make_evictable_jobs(cluster, queue: str) -> tuple[list[bytes], list[bytes]]:
    """On node 0: big jobs that must survive eviction (queued at-most-once,
    unacknowledged at-least-once) and many small ones that may go (at-most-
    once jobs already delivered, and acks that cannot be collected because
    the other holders are stopped: the caller resumes nodes 1 and 2).
    Returns (safe, evictable)."""
    big = "s" * 100_000
    client = cluster[0].client()
    safe = [client.execute_command("ADDJOB", queue, big, 5000, "REPLICATE", 1, "RETRY", 0)
            for _ in range(10)]
    safe += [client.execute_command("ADDJOB", queue, big, 5000, "REPLICATE", 2, "RETRY", 60)
             for _ in range(10)]
    done = queue + "-done"
    delivered = [client.execute_command("ADDJOB", done, "x", 5000, "REPLICATE", 1, "RETRY", 0)
                 for _ in range(50)]
    assert len(call(cluster[0], "GETJOB", "COUNT", 50, "FROM", done)) == 50
    acked = [client.execute_command("ADDJOB", done, "x", 5000, "REPLICATE", 2, "RETRY", 60)
             for _ in range(50)]
    for proc in cluster.procs[1:]:
        proc.pause()
    assert call(cluster[0], "ACKJOB", *acked) == 50
    assert {show(cluster[0], job_id)["state"] for job_id in acked} == {b"acked"}
    return safe, delivered + acked


def test_above_95_percent_acked_and_delivered_at_most_once_jobs_are_evicted(cluster, queue):
    try:
        safe, evictable = make_evictable_jobs(cluster, queue)
        memory = used(cluster[0])
        # 99.5% of maxmemory: evicting every small job is not enough to get
        # under 95%, so every one of them must go, and nothing else.
        set_maxmemory(cluster[0], int(memory / 0.995))
        # Every command makes the node free what it can (Disque samples jobs
        # at random, so give it a few commands).
        poll(lambda: registered_jobs(cluster[0]) == len(safe), 5,
             "every acked and delivered at-most-once job evicted")
        # Still above 95% with nothing left to evict: growth is refused.
        assert raw_reply(cluster[0], "ENQUEUE", safe[0]) == OOM_ERROR
        for job_id in evictable:
            assert show(cluster[0], job_id) is None, job_id
        for job_id in safe:
            assert show(cluster[0], job_id) is not None, job_id
        assert call(cluster[0], "QLEN", queue) == len(safe)
        assert used(cluster[0]) < memory
    finally:
        for proc in cluster.procs[1:]:
            proc.resume()


def test_above_95_percent_eviction_happens_without_waiting_for_a_write(cluster, queue):
    # Disque frees memory when CONFIG SET maxmemory lowers the limit and
    # before every command it runs, reads included, not only writes.
    try:
        safe, evictable = make_evictable_jobs(cluster, queue)
        set_maxmemory(cluster[0], int(used(cluster[0]) / 0.995))
        poll(lambda: registered_jobs(cluster[0]) == len(safe), 5,
             "the evictable jobs evicted while only INFO is sent")
        for job_id in safe:
            assert show(cluster[0], job_id) is not None, job_id
    finally:
        for proc in cluster.procs[1:]:
            proc.resume()


def test_above_95_percent_idle_empty_queues_are_evicted(cluster, queue):
    names = [f"{queue}-{n}" for n in range(30)]
    for name in names:          # empty queues (their jobs delivered)
        call(cluster[0], "ADDJOB", name, "x", 5000, "REPLICATE", 1, "RETRY", 0)
        assert len(call(cluster[0], "GETJOB", "FROM", name)) == 1
    paused = f"{queue}-paused"
    assert call(cluster[0], "PAUSE", paused, "in") == b"in"
    waited = f"{queue}-waited"
    consumer = cluster[0].raw()
    consumer.send(encode_command("GETJOB", "FROM", waited))
    poll(lambda: info(cluster[0], "clients")["blocked_clients"] == "1", 5, "a blocked GETJOB")
    # A holding job keeps memory up, so the thresholds mean something.
    add_many(cluster[0], queue + "-kept", 20, "REPLICATE", 1, "RETRY", 0)
    expected_all = len(names) + 3
    # Below 75% idle queues live for minutes: past the 2 s of 95% they stay.
    stays(lambda: registered_queues(cluster[0]) == expected_all, IDLE_QUEUE_S_AT_95 + 0.5,
          "every queue kept while memory is low")
    set_maxmemory(cluster[0], int(used(cluster[0]) / 0.97))
    # Idle for 2 s at most, then forgotten; paused, waited-on and
    # non-empty queues are never evicted.
    poll(lambda: registered_queues(cluster[0]) == 3, IDLE_QUEUE_S_AT_95 + 3 + MARGIN_S,
         "the idle empty queues evicted")
    assert call(cluster[0], "QSTAT", paused) is not None
    assert call(cluster[0], "QSTAT", waited) is not None
    assert call(cluster[0], "QLEN", queue + "-kept") == 20
    for name in names:
        assert raw_reply(cluster[0], "QSTAT", name) == b"*-1\r\n"
    consumer.close()


# ------------------------------------------------------------------ 100%: refusal

def test_between_95_and_100_percent_with_nothing_to_evict_addjob_is_refused_with_oom(
        cluster, queue):
    # Disque's freeMemoryIfNeeded (server.c): above 95% a command that may
    # grow memory is refused when eviction cannot get back under 95%.
    add_many(cluster[0], queue, 50, "REPLICATE", 1, "RETRY", 0)
    set_maxmemory(cluster[0], int(used(cluster[0]) / 0.97))
    assert raw_reply(cluster[0], "ADDJOB", queue, "y", 5000, "REPLICATE", 1) == OOM_ERROR
    assert registered_jobs(cluster[0]) == 50
    assert call(cluster[0], "QLEN", queue) == 50          # reading still works


def test_noeviction_policy_refuses_above_95_percent_without_evicting(cluster, queue):
    add_many(cluster[0], queue, 20, "REPLICATE", 1, "RETRY", 0)
    assert len(call(cluster[0], "GETJOB", "COUNT", 20, "FROM", queue)) == 20   # evictable now
    assert call(cluster[0], "CONFIG", "SET", "maxmemory-policy", "noeviction") == b"OK"
    try:
        set_maxmemory(cluster[0], int(used(cluster[0]) / 0.97))
        assert raw_reply(cluster[0], "ADDJOB", queue, "y", 5000, "REPLICATE", 1) == OOM_ERROR
        assert registered_jobs(cluster[0]) == 20
    finally:
        call(cluster[0], "CONFIG", "SET", "maxmemory-policy", "acks")


def test_above_100_percent_commands_that_grow_memory_are_refused_with_oom(cluster, queue):
    jobs = add_many(cluster[0], queue, 50, "REPLICATE", 1, "RETRY", 0)
    memory = used(cluster[0])
    limit = int(memory * 0.9)
    set_maxmemory(cluster[0], limit)
    assert raw_reply(cluster[0], "ADDJOB", queue, "y", 5000, "REPLICATE", 1) == OOM_ERROR
    assert raw_reply(cluster[0], "ADDJOB", queue, "y", 5000, "REPLICATE", 2, "ASYNC") \
        == OOM_ERROR
    assert raw_reply(cluster[0], "ENQUEUE", jobs[0]) == OOM_ERROR
    assert raw_reply(cluster[0], "NACK", jobs[0]) == OOM_ERROR
    assert registered_jobs(cluster[0]) == 50
    # Reading, consuming and acknowledging still work, and free memory.
    assert call(cluster[0], "QLEN", queue) == 50
    taken = call(cluster[0], "GETJOB", "COUNT", 10, "FROM", queue)
    assert len(taken) == 10
    # Delivered at-most-once jobs are evicted before the next commands run.
    rest = [job_id for job_id in jobs if job_id not in {job[1] for job in taken}]
    assert call(cluster[0], "FASTACK", *rest[:10]) == 10
    assert call(cluster[0], "ACKJOB", *rest[10:20]) == 10
    assert used(cluster[0]) <= limit
    assert call(cluster[0], "ADDJOB", queue, "y", 5000, "REPLICATE", 1).startswith(b"D-")
