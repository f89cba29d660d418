"""Failed-job options in the core, on the fake clock: the backoff schedule
and its jitter bounds, deliveries counted through NACK and RETRY, NACK
DELAY, dead-lettering exactly once at the limit, QREQUEUE, a dead job's own
TTL, and the options surviving the job's bytes (REPLJOB and the AOF).
"""

from __future__ import annotations

import pytest

from disque_py.base.clock import FakeClock
from disque_py.engine import JobOptions, deserialize_job
from disque_py.node.node import Node
from tests.unit.simnet import START_MS
from tests.engine.commands import get_jobs, nack_jobs

NODE_ID = b"0123456789abcdef0123456789abcdef01234567"


def node(seed: int = 1) -> Node:
    return Node(NODE_ID, FakeClock(START_MS, seed=seed), id_seed=b"options-%d" % seed)


def add(core, *, base=0, cap=0, limit=0, deadletter=None, retry=60, ttl=3600, queue=b"q"):
    options = JobOptions(base, cap, limit, deadletter) if base or limit else None
    return core.add_job(queue, b"body", 1, 0, retry, ttl, 0, False, options=options)


def take(core, queue=b"q"):
    (job,) = get_jobs(core, [queue], 1)
    return job


def backoff_wait(core, job) -> int:
    """NACK without DELAY: how long until it is queued again."""
    assert nack_jobs(core, [job.id]) == 1
    return job.qtime - core.clock.now_ms()


@pytest.mark.parametrize("seed", range(20))
def test_backoff_doubles_per_delivery_within_ten_percent_and_stops_at_its_cap(seed):
    core = node(seed)
    job = add(core, base=100, cap=1000)
    for delivery, expected in enumerate([100, 200, 400, 800, 1000, 1000], start=1):
        take(core) if delivery == 1 else None
        wait = backoff_wait(core, job)
        assert 0.9 * expected <= wait <= min(1.1 * expected, 1000), (delivery, wait)
        assert job.nacks == delivery
        assert core.queue_length(b"q") == 0
        core.clock.advance(wait)
        core.tick()
        assert core.queue_length(b"q") == 1
        take(core)


def test_the_jitter_spreads_over_its_whole_range():
    waits = set()
    for seed in range(200):
        core = node(seed)
        job = add(core, base=1000, cap=100_000)
        take(core)
        waits.add(backoff_wait(core, job))
    assert min(waits) < 920 and max(waits) > 1080 and len(waits) > 50
    assert 900 <= min(waits) and max(waits) <= 1100


def test_nack_delay_overrides_backoff_and_counts_at_once():
    core = node()
    job = add(core, base=60_000, cap=60_000)
    take(core)
    assert nack_jobs(core, [job.id], 2000) == 1
    assert job.nacks == 1 and job.qtime - core.clock.now_ms() == 2000
    core.clock.advance(1999)
    core.tick()
    assert core.queue_length(b"q") == 0
    core.clock.advance(1)
    core.tick()
    assert core.queue_length(b"q") == 1
    assert job.nacks == 1                             # counted once, not again when queued


def test_a_retry_timeout_backs_off_then_counts_one_delivery():
    core = node()
    job = add(core, base=5000, cap=5000, retry=1)
    take(core)
    core.clock.advance(1000)
    core.tick()                                       # RETRY due: backs off about 5 s
    assert core.queue_length(b"q") == 0
    core.clock.advance(6000)
    core.tick()
    assert core.queue_length(b"q") == 1 and job.deliveries == 1


@pytest.mark.parametrize("limit", [1, 2, 3, 5])
def test_dead_lettered_at_the_limit_never_before_and_once(limit):
    core = node()
    job = add(core, limit=limit)
    for delivery in range(1, limit):
        take(core)
        nack_jobs(core, [job.id])
        assert job.queue == b"q" and core.options_of(job).dead_reason_name is None, delivery
    take(core)
    nack_jobs(core, [job.id])
    assert job.queue == b"q:dead" and core.stats_dead_lettered == 1
    assert core.options_of(job).dead_reason_name == b"max-deliveries"
    assert core.options_of(job).origin == b"q"
    for _ in range(3):                                # it lives on in the dead queue
        take(core, b"q:dead")
        nack_jobs(core, [job.id])
    assert job.queue == b"q:dead" and core.stats_dead_lettered == 1
    assert job.nacks == limit + 3 and job.body == b"body"


def test_retry_requeues_count_toward_the_limit():
    core = node()
    job = add(core, limit=2, retry=1)
    take(core)
    core.clock.advance(1100)
    core.tick()
    assert job.queue == b"q" and job.deliveries == 1
    take(core)
    core.clock.advance(1100)
    core.tick()
    assert job.queue == b"q:dead" and core.queue_length(b"q:dead") == 1


def test_a_named_dead_letter_queue():
    core = node()
    job = add(core, limit=1, deadletter=b"failed")
    take(core)
    nack_jobs(core, [job.id])
    assert job.queue == b"failed" and core.queue_length(b"failed") == 1


def test_qrequeue_resets_counters_and_leaves_direct_jobs():
    core = node()
    dead = [add(core, limit=1) for _ in range(3)]
    for job in dead:
        take(core)
        nack_jobs(core, [job.id])
    direct = add(core, queue=b"q:dead")
    moved = core.requeue.requeue_dead(b"q:dead", None, 2)
    assert moved == 2 and core.queue_length(b"q") == 2
    assert core.requeue.requeue_dead(b"q:dead", b"elsewhere", -1) == 1
    assert core.queue_length(b"q:dead") == 1 and get_jobs(core, [b"q:dead"], 1) == [direct]
    for job in dead:
        assert job.nacks == job.deliveries == 0
        assert core.options_of(job).dead_reason_name is None


def test_a_dead_job_keeps_its_own_ttl():
    core = node()
    job = add(core, limit=1, ttl=10)
    take(core)
    nack_jobs(core, [job.id])
    assert job.queue == b"q:dead"
    core.clock.advance(11_000)
    core.tick()
    assert core.lookup(job.id) is None and core.queue_length(b"q:dead") == 0


def test_options_survive_the_jobs_bytes_for_the_aof_and_for_peers():
    core = node()
    job = add(core, base=100, cap=900, limit=4, deadletter=b"dlq")
    record = deserialize_job(core.job_bytes(job))
    assert record.options == core.options_of(job).fields() + (None, 0, None)   # no DEDUP key
    peer = b"f" * 40
    core.options_readers = {peer: 0}
    assert deserialize_job(core.job_bytes(job, START_MS // 1000, peer)).options is None
    plain = add(core)
    assert deserialize_job(core.job_bytes(plain)).options is None
