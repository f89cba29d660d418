"""The compiled engine's own rules, driven directly: the job record, the job
table, ID generation and the queues' order. (The awake schedule's rules are
in test_schedule.py; the node's, built on these, in test_core_*.py.)"""

from __future__ import annotations

import gc
import os
import random
import subprocess
import sys

import pytest

from disque_py import engine
from disque_py.engine import (ACKED, ACTIVE, QUEUED, AwakeSchedule, IdGenerator, Job, JobQueue,
                              JobTable, is_valid_id, new_job)

NODE_ID = b"0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"
T0_S = 1_700_000_000


@pytest.fixture
def ids():
    return IdGenerator(NODE_ID, b"engine tests")


def make(ids, queue=b"q", body=b"body", state=ACTIVE, delivered=(NODE_ID,), ttl=3600,
         retry=60):
    return new_job(ids.next_id(ttl, retry), queue, body, state, 1, 0, retry, 1, T0_S + ttl,
                   delivered)


# ------------------------------------------------------------------ the build

def test_the_build_matches_its_sources():
    from disque_py.engine import _core, _sources
    assert _core.SOURCE_HASH == _sources.source_hash()


def test_a_stale_build_is_refused_at_import(monkeypatch):
    from disque_py.engine import _sources
    monkeypatch.setattr(_sources, "source_hash", lambda: "0" * 64)
    with pytest.raises(ImportError, match="make build"):
        engine._check_build_matches_sources()


# ------------------------------------------------------------------ job record

def test_jobs_are_not_tracked_by_the_cyclic_gc(ids):
    job = make(ids)
    assert not gc.is_tracked(job)
    assert not gc.is_tracked(make(ids, queue=None, body=None, state=ACKED, delivered=()))


def test_a_job_is_one_small_object(ids):
    # 160 bytes for Disque's fields, 8 for the pointer to options beyond
    # Disque, 8 for the one to its DEDUP key: 176, the 16-byte size class
    # the allocator already gave the 168 bytes before the last pointer.
    assert sys.getsizeof(make(ids)) <= 176


def test_jobs_cannot_be_made_by_calling_the_class():
    with pytest.raises(TypeError):
        Job()


def test_fields_read_back_as_given(ids):
    job_id = ids.next_id(3600, 60)
    job = new_job(job_id, b"q", b"payload", QUEUED, 3, 5, 60, 123456, T0_S, (NODE_ID,))
    assert (job.id, job.queue, job.body, job.state, job.repl, job.delay, job.retry,
            job.ctime, job.etime, job.delivered) == \
        (job_id, b"q", b"payload", QUEUED, 3, 5, 60, 123456, T0_S, (NODE_ID,))
    assert (job.nacks, job.deliveries, job.gc_retry, job.qtime, job.flags) == (0, 0, 0, 0, 0)
    assert job.awake_due is None and not job.is_dummy_ack()


def test_a_dummy_ack_has_no_queue_no_body_no_holders(ids):
    job = make(ids, queue=None, body=None, state=ACKED, delivered=())
    assert (job.queue, job.body, job.delivered) == (None, None, ())
    assert job.is_dummy_ack()


def test_an_empty_body_is_not_a_missing_one(ids):
    assert make(ids, body=b"").body == b""


def test_a_job_holds_its_queue_name_and_holders_without_copying_them(ids):
    queue, holders = b"shared-queue-name", (NODE_ID,)
    before = sys.getrefcount(queue), sys.getrefcount(holders)
    job = make(ids, queue=queue, delivered=holders)
    assert job.queue is queue and job.delivered is holders
    assert (sys.getrefcount(queue), sys.getrefcount(holders)) == (before[0] + 1, before[1] + 1)
    del job
    assert (sys.getrefcount(queue), sys.getrefcount(holders)) == before


def test_holders_can_be_replaced(ids):
    job = make(ids)
    job.delivered = (NODE_ID, b"x" * 40)
    assert job.delivered == (NODE_ID, b"x" * 40)


# ------------------------------------------------------------------ IDs

def test_ids_have_disques_shape_and_the_node_prefix(ids):
    job_id = ids.next_id(3600, 60)
    assert len(job_id) == 40 and job_id.startswith(b"D-" + NODE_ID[:8] + b"-")
    assert is_valid_id(job_id)


@pytest.mark.parametrize("ttl, retry, suffix", [
    (3600, 60, b"-003d"),             # 60 minutes, at least once: odd
    (3600, 0, b"-003c"),              # at most once: even
    (59, 1, b"-0001"),
    (10 ** 9, 1, b"-ffff"),           # capped at 0xffff minutes
])
def test_the_ttl_suffix_encodes_minutes_and_the_guarantee(ids, ttl, retry, suffix):
    assert ids.next_id(ttl, retry).endswith(suffix)


def test_ids_do_not_repeat_across_refills(ids):
    made = {ids.next_id(3600, 60) for _ in range(2000)}
    assert len(made) == 2000


def test_the_same_seed_gives_the_same_ids():
    first = IdGenerator(NODE_ID, b"seed")
    second = IdGenerator(NODE_ID, b"seed")
    assert [first.next_id(60, 1) for _ in range(300)] == [second.next_id(60, 1) for _ in range(300)]


@pytest.mark.parametrize("job_id", [
    b"D-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-05a1",
    b"D-DCB833CF-8YL1NT17e9+wsA/09NqxscQI-05A1",
])
def test_well_formed_ids(job_id):
    assert is_valid_id(job_id)


@pytest.mark.parametrize("job_id", [
    b"", b"D-", b"D-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-05a",      # short
    b"D-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-05a1x",                  # long
    b"X-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-05a1",                   # prefix
    b"D-dcb833cg-8YL1NT17e9+wsA/09NqxscQI-05a1",                   # node part not hex
    b"D-dcb833cf-8YL1NT17e9+wsA/09Nqxsc=I-05a1",                   # not base64
    b"D-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-05a\x00",                # suffix not hex
    b"D-dcb833cf_8YL1NT17e9+wsA/09NqxscQI-05a1",                   # separator
    "D-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-05a1",                    # not bytes
])
def test_malformed_ids(job_id):
    assert not is_valid_id(job_id)


# ------------------------------------------------------------------ keyed hash

# PYTHONHASHSEED=0 zeroes CPython's SipHash key: its hash() of bytes is then
# SipHash-1-3 with a key of zeros, as a signed word with -1 read as -2.
CPYTHON_HASHES = """
import sys
for word in sys.argv[1:]:
    print(hash(bytes.fromhex(word)))
"""


def test_the_tables_hash_is_siphash_1_3_as_cpython_computes_it():
    samples = [b"", b"a", b"abcdefg", b"abcdefgh", b"abcdefghi", b"k:000000000042",
               b"D-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-05a1", bytes(range(256)) * 3]
    out = subprocess.run([sys.executable, "-c", CPYTHON_HASHES, *(s.hex() for s in samples)],
                         env={**os.environ, "PYTHONHASHSEED": "0"}, capture_output=True,
                         text=True, check=True).stdout.split()
    for sample, expected in zip(samples, out):
        ours = engine.siphash13_of(sample, bytes(16))
        signed = ours - (1 << 64) if ours >= 1 << 63 else ours
        if sample:                   # CPython hashes b"" to 0 without SipHash
            assert (signed if signed != -1 else -2) == int(expected), sample


def _siphash13_reference(data: bytes, key: bytes) -> int:
    """SipHash-1-3 as its paper defines it, slowly (the engine's is checked
    against this for keys CPython cannot give)."""
    mask = (1 << 64) - 1

    def rotl(x, bits):
        return ((x << bits) | (x >> (64 - bits))) & mask

    def sip_round(v):
        v[0] = (v[0] + v[1]) & mask
        v[1] = rotl(v[1], 13) ^ v[0]
        v[0] = rotl(v[0], 32)
        v[2] = (v[2] + v[3]) & mask
        v[3] = rotl(v[3], 16) ^ v[2]
        v[0] = (v[0] + v[3]) & mask
        v[3] = rotl(v[3], 21) ^ v[0]
        v[2] = (v[2] + v[1]) & mask
        v[1] = rotl(v[1], 17) ^ v[2]
        v[2] = rotl(v[2], 32)

    k0, k1 = int.from_bytes(key[:8], "little"), int.from_bytes(key[8:], "little")
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D,
         k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]
    words = [int.from_bytes(data[at:at + 8], "little") for at in range(0, len(data) - 7, 8)]
    tail = data[len(data) - len(data) % 8:]
    words.append(int.from_bytes(tail, "little") | (len(data) & 0xFF) << 56)
    for word in words:
        v[3] ^= word
        sip_round(v)
        v[0] ^= word
    v[2] ^= 0xFF
    for _ in range(3):
        sip_round(v)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def test_the_tables_hash_is_siphash_1_3_for_any_key_and_length():
    rng = random.Random(20)
    for size in range(0, 50):
        key, data = rng.randbytes(16), rng.randbytes(size)
        assert engine.siphash13_of(data, key) == _siphash13_reference(data, key), size


def test_the_hash_depends_on_the_key():
    assert engine.siphash13_of(b"same bytes", bytes(16)) != \
        engine.siphash13_of(b"same bytes", bytes(15) + b"\x01")
    with pytest.raises(ValueError):
        engine.siphash13_of(b"x", bytes(8))


# ------------------------------------------------------------------ job table

def test_table_add_get_discard(ids):
    table, job = JobTable(), make(ids)
    assert table.add(job) and len(table) == 1
    assert table.get(job.id) is job and job.id in table
    assert not table.add(make(ids)) or len(table) == 2
    assert table.discard(job) and table.get(job.id) is None
    assert not table.discard(job)


def test_a_second_job_with_the_same_id_is_refused(ids):
    table, job = JobTable(), make(ids)
    twin = new_job(job.id, b"other", b"x", ACTIVE, 1, 0, 1, 1, T0_S, ())
    assert table.add(job) and not table.add(twin)
    assert table.get(job.id) is job and len(table) == 1


def test_lookups_of_anything_but_an_id_find_nothing(ids):
    table = JobTable()
    table.add(make(ids))
    assert table.get(b"short") is None and table.get("D-" * 20) is None
    assert table.pop(b"x" * 40) is None


def test_the_table_holds_one_reference_per_job(ids):
    table, job = JobTable(), make(ids)
    before = sys.getrefcount(job)
    table.add(job)
    assert sys.getrefcount(job) == before + 1
    table.discard(job)
    assert sys.getrefcount(job) == before


def test_the_table_agrees_with_a_dict_through_random_adds_and_removals(ids):
    """Growing, shrinking and removals that wrap around a partition's end,
    against a dict, checked along the way (a seeded mix, not a timed one)."""
    rng = random.Random(7)
    table, expected = JobTable(), {}
    for step in range(60_000):
        if expected and (rng.random() < 0.45 or len(expected) > 20_000):
            job_id = rng.choice(list(expected)) if step % 500 == 0 else next(iter(expected))
            assert table.discard(expected.pop(job_id))
        else:
            job = make(ids)
            expected[job.id] = job
            assert table.add(job)
        if step % 5_000 == 0:
            assert len(table) == len(expected)
            assert all(table.get(job_id) is job for job_id, job in expected.items())
    assert sorted(job.id for job in table.values()) == sorted(expected)
    for job in list(expected.values()):
        assert table.discard(job) and not table.discard(job)
    assert len(table) == 0 and table.values() == []


def test_a_large_table_grows_and_shrinks_and_finds_everything(ids):
    table = JobTable()
    jobs = [make(ids) for _ in range(30_000)]
    for job in jobs:
        assert table.add(job)
    assert len(table) == 30_000 and all(table.get(job.id) is job for job in jobs)
    rng = random.Random(1)
    gone = set(rng.sample(range(30_000), 25_000))
    for index in gone:
        assert table.pop(jobs[index].id) is jobs[index]
    assert len(table) == 5_000
    assert sorted(job.id for job in table.values()) == \
        sorted(jobs[i].id for i in range(30_000) if i not in gone)


def test_scan_returns_every_stable_job_despite_changes(ids):
    table = JobTable()
    stable = [make(ids) for _ in range(3000)]
    for job in stable:
        table.add(job)
    seen, cursor, churn = set(), 0, []
    while True:
        cursor, found = table.scan(cursor, 50, None, False)
        seen.update(job.id for job in found)
        for _ in range(20):               # adds and removes between calls
            extra = make(ids)
            table.add(extra)
            churn.append(extra)
        while len(churn) > 100:
            table.discard(churn.pop(0))
        if cursor == 0:
            break
    assert {job.id for job in stable} <= seen


def test_scan_filters_and_bounds_its_work(ids):
    table = JobTable()
    for n in range(500):
        table.add(make(ids, queue=b"even" if n % 2 == 0 else b"odd"))
    cursor, found = table.scan(0, 10, lambda job: job.queue == b"even", False)
    assert cursor != 0 and 10 <= len(found) and all(job.queue == b"even" for job in found)
    assert table.scan(0, 10, None, True)[0] == 0              # busyloop: all at once
    assert len(table.scan(0, -1, None, False)[1]) == 500      # negative count: the same


@pytest.mark.parametrize("cursor", [-1, 4096, 10 ** 30])
def test_a_cursor_out_of_range_is_a_finished_scan(ids, cursor):
    table = JobTable()
    table.add(make(ids))
    assert table.scan(cursor, 10, None, False) == (0, [])


def test_a_huge_count_scans_everything(ids):
    table = JobTable()
    for _ in range(100):
        table.add(make(ids))
    cursor, found = table.scan(0, 10 ** 30, None, False)
    assert (cursor, len(found)) == (0, 100)


def test_release_some_frees_a_flushed_table_in_slices(ids):
    table = JobTable()
    jobs = [make(ids) for _ in range(5000)]
    for job in jobs:
        table.add(job)
    slices = 0
    while not table.release_some(1000):
        slices += 1
    assert slices >= 4 and len(table) == 0
    del job
    jobs.append(make(ids))                  # never in the table: as the others are now
    assert len({sys.getrefcount(job) for job in jobs}) == 1


def test_a_job_in_the_table_and_the_schedule_outlives_both(ids):
    table, schedule = JobTable(), AwakeSchedule()
    job = make(ids)
    job_id = job.id
    table.add(job)
    schedule.schedule(job, 1000)
    del job
    table.pop(job_id)           # the schedule still holds it
    [due] = schedule.pop_due(10_000, 10)
    assert due.id == job_id and due.awake_due is None


# ------------------------------------------------------------------ queues

def queued(ids, ctime, tag=b""):
    return new_job(ids.next_id(3600, 60), b"q", tag, QUEUED, 1, 0, 60, ctime, T0_S + 3600,
                   (NODE_ID,))


def test_fresh_jobs_are_appended_and_served_oldest_first(ids):
    q = JobQueue()
    jobs = [queued(ids, ctime) for ctime in range(1, 3001)]
    for job in jobs:
        q.push(job)
    assert len(q) == 3000 and q.peek(3) == jobs[:3] and q.peek(-2) == [jobs[-1], jobs[-2]]
    assert [q.pop() for _ in range(3000)] == jobs
    assert q.pop() is None and not q


def test_a_requeued_job_goes_back_to_its_place_near_the_head(ids):
    q = JobQueue()
    jobs = [queued(ids, ctime * 10) for ctime in range(1, 2001)]
    for job in jobs[1:]:
        q.push(job)
    q.push(jobs[0])                       # NACKed: older than everything queued
    assert q.pop() is jobs[0]
    middle = jobs[1000]
    assert q.remove(middle) and not q.remove(middle) and middle not in q
    q.push(middle)
    assert list(q) == jobs[1:]


def test_equal_creation_times_are_ordered_by_id(ids):
    q = JobQueue()
    twins = [queued(ids, 5) for _ in range(50)]
    for job in twins:
        q.push(job)
    assert list(q) == sorted(twins, key=lambda job: job.id)


def test_a_queue_matches_a_sorted_model_under_random_operations(ids):
    rng = random.Random(7)
    q, model, pool = JobQueue(), [], [queued(ids, rng.randrange(5000)) for _ in range(3000)]
    key = lambda job: (job.ctime, job.id)     # noqa: E731
    for _ in range(20_000):
        action = rng.random()
        if action < 0.5:
            job = rng.choice(pool)
            if job not in model:
                q.push(job)
                model.append(job)
        elif action < 0.8 and model:
            job = rng.choice(model)
            assert q.remove(job)
            model.remove(job)
        elif model:
            model.sort(key=key)
            assert q.pop() is model.pop(0)
    model.sort(key=key)
    assert list(q) == model and len(q) == len(model)


def test_a_queue_holds_one_reference_per_job(ids):
    q, job = JobQueue(), queued(ids, 1)
    before = sys.getrefcount(job)
    q.push(job)
    assert sys.getrefcount(job) == before + 1
    q.clear()
    assert sys.getrefcount(job) == before and len(q) == 0
