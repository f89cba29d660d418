"""The timer structures under the core: AwakeSchedule (job timers),
Deadlines (parked clients) and ScanTable (QSCAN/JSCAN cursors)."""

from __future__ import annotations

import random

import pytest

from disque_py.engine import ACTIVE, BUCKET_MS, AwakeSchedule, IdGenerator, new_job
from disque_py.base.scantable import ScanTable
from disque_py.node.waiters import GETJOB, Deadlines, Waiter

T0 = 1_700_000_000_000
_ids = IdGenerator(b"0123456789abcdef" * 2 + b"01234567", b"schedule tests")


class Item:
    """A job made for the schedule's tests (the schedule uses only its links)."""

    def __new__(cls, name):
        return new_job(_ids.next_id(3600, 60), b"q", b"body %r" % (name,), ACTIVE, 1, 0, 60,
                       0, T0 // 1000 + 3600, ())


def items(n):
    return [Item(i) for i in range(n)]


# ------------------------------------------------------------ AwakeSchedule


def test_empty_schedule_has_nothing_due():
    s = AwakeSchedule()
    assert s.next_due() is None
    assert s.pop_due(T0, 100) == []
    assert len(s) == 0


def test_job_not_due_before_its_time():
    s, job = AwakeSchedule(), Item("a")
    s.schedule(job, T0 + 1005)
    assert s.pop_due(T0 + 1004, 100) == []
    assert job.awake_due is not None


def test_job_due_at_most_one_bucket_after_its_time():
    s, job = AwakeSchedule(), Item("a")
    s.schedule(job, T0 + 1005)
    assert T0 + 1005 <= s.next_due() <= T0 + 1005 + BUCKET_MS
    assert s.pop_due(T0 + 1005 + BUCKET_MS, 100) == [job]
    assert job.awake_due is None
    assert len(s) == 0


def test_job_on_bucket_boundary_due_exactly_then():
    s, job = AwakeSchedule(), Item("a")
    s.schedule(job, T0 + 1000)
    assert s.next_due() == T0 + 1000
    assert s.pop_due(T0 + 1000, 10) == [job]


def test_pop_due_returns_earliest_first():
    s = AwakeSchedule()
    a, b, c = items(3)
    s.schedule(c, T0 + 300)
    s.schedule(a, T0 + 100)
    s.schedule(b, T0 + 200)
    assert s.pop_due(T0 + 1000, 10) == [a, b, c]


def test_pop_due_leaves_later_jobs():
    s = AwakeSchedule()
    a, b = items(2)
    s.schedule(a, T0 + 100)
    s.schedule(b, T0 + 5000)
    assert s.pop_due(T0 + 1000, 10) == [a]
    assert len(s) == 1
    assert s.next_due() >= T0 + 5000


def test_pop_due_respects_limit_inside_one_bucket():
    s = AwakeSchedule()
    jobs = items(25)
    for job in jobs:
        s.schedule(job, T0 + 100)
    first = s.pop_due(T0 + 100, 10)
    second = s.pop_due(T0 + 100, 10)
    third = s.pop_due(T0 + 100, 10)
    assert len(first) == len(second) == 10 and len(third) == 5
    assert first + second + third == jobs          # insertion order kept
    assert s.pop_due(T0 + 100, 10) == []
    assert s.next_due() is None


def test_pop_due_respects_limit_across_buckets():
    s = AwakeSchedule()
    jobs = items(30)
    for i, job in enumerate(jobs):
        s.schedule(job, T0 + 100 * (i % 3 + 1))
    taken = s.pop_due(T0 + 1000, 7)
    assert len(taken) == 7
    assert len(s) == 23


def test_reschedule_moves_the_job():
    s, job = AwakeSchedule(), Item("a")
    s.schedule(job, T0 + 100)
    s.schedule(job, T0 + 5000)
    assert s.pop_due(T0 + 1000, 10) == []
    assert s.pop_due(T0 + 5000, 10) == [job]


def test_reschedule_earlier_moves_the_job():
    s, job = AwakeSchedule(), Item("a")
    s.schedule(job, T0 + 5000)
    s.schedule(job, T0 + 100)
    assert s.pop_due(T0 + 100, 10) == [job]
    assert s.pop_due(T0 + 10_000, 10) == []


def test_reschedule_within_same_bucket_keeps_one_entry():
    s, job = AwakeSchedule(), Item("a")
    s.schedule(job, T0 + 101)
    s.schedule(job, T0 + 105)
    assert len(s) == 1
    assert s.pop_due(T0 + 110, 10) == [job]


def test_schedule_zero_takes_job_off():
    s, job = AwakeSchedule(), Item("a")
    s.schedule(job, T0 + 100)
    s.schedule(job, 0)
    assert job.awake_due is None
    assert s.pop_due(T0 + 1000, 10) == []


def test_unschedule_removes_job():
    s = AwakeSchedule()
    a, b = items(2)
    s.schedule(a, T0 + 100)
    s.schedule(b, T0 + 100)
    s.unschedule(a)
    assert s.pop_due(T0 + 100, 10) == [b]


def test_unschedule_of_unscheduled_job_is_harmless():
    s, job = AwakeSchedule(), Item("a")
    s.unschedule(job)
    assert job.awake_due is None


def test_next_due_skips_emptied_buckets():
    s = AwakeSchedule()
    a, b = items(2)
    s.schedule(a, T0 + 100)
    s.schedule(b, T0 + 900)
    s.unschedule(a)
    assert s.next_due() == T0 + 900


def test_job_scheduled_again_after_pop():
    s, job = AwakeSchedule(), Item("a")
    s.schedule(job, T0 + 100)
    s.pop_due(T0 + 100, 10)
    s.schedule(job, T0 + 100)                  # same slot as the popped bucket
    assert s.pop_due(T0 + 100, 10) == [job]


def test_schedule_in_the_past_is_due_at_once():
    s, job = AwakeSchedule(), Item("a")
    s.schedule(job, T0 - 5000)
    assert s.pop_due(T0, 10) == [job]


def test_clear_empties_schedule():
    s = AwakeSchedule()
    for job in items(10):
        s.schedule(job, T0 + 100)
    s.clear()
    assert s.next_due() is None
    assert s.pop_due(T0 + 1000, 100) == []


def test_random_schedule_matches_a_model():
    rng = random.Random(3)
    s = AwakeSchedule()
    jobs = items(300)
    expected = {}
    for _ in range(3000):
        job = rng.choice(jobs)
        action = rng.random()
        if action < 0.6:
            at = T0 + rng.randrange(1, 10_000)
            s.schedule(job, at)
            expected[job] = at
        elif action < 0.8:
            s.unschedule(job)
            expected.pop(job, None)
        else:
            s.schedule(job, 0)
            expected.pop(job, None)
    assert len(s) == len(expected)
    now = T0 + 5000
    due = s.pop_due(now, 10_000)
    for job in due:
        assert expected[job] <= now
    for job, at in expected.items():
        if at <= now - BUCKET_MS:
            assert job in due
        if at > now:
            assert job not in due
    assert len(s) == len(expected) - len(due)


# ---------------------------------------------------------------- Deadlines


def waiter(deadline):
    return Waiter(object(), GETJOB, deadline)


def test_deadlines_empty():
    d = Deadlines()
    assert d.next_due() is None
    assert d.pop_expired(T0) == []


def test_deadline_zero_is_never_tracked():
    d = Deadlines()
    d.add(waiter(0))
    assert d.next_due() is None
    assert d.pop_expired(T0 * 2) == []


def test_next_due_is_earliest_deadline():
    d = Deadlines()
    d.add(waiter(T0 + 300))
    d.add(waiter(T0 + 100))
    d.add(waiter(T0 + 200))
    assert d.next_due() == T0 + 100


def test_pop_expired_returns_due_waiters_in_deadline_order():
    d = Deadlines()
    late, early, mid = waiter(T0 + 300), waiter(T0 + 100), waiter(T0 + 200)
    for w in (late, early, mid):
        d.add(w)
    assert d.pop_expired(T0 + 200) == [early, mid]
    assert d.next_due() == T0 + 300


def test_pop_expired_includes_deadline_equal_to_now():
    d, w = Deadlines(), waiter(T0 + 100)
    d.add(w)
    assert d.pop_expired(T0 + 99) == []
    assert d.pop_expired(T0 + 100) == [w]


def test_same_deadline_expires_in_arrival_order():
    d = Deadlines()
    ws = [waiter(T0 + 100) for _ in range(5)]
    for w in ws:
        d.add(w)
    assert d.pop_expired(T0 + 100) == ws


def test_expired_waiter_returned_once():
    d, w = Deadlines(), waiter(T0 + 100)
    d.add(w)
    d.pop_expired(T0 + 100)
    assert d.pop_expired(T0 + 1000) == []
    assert d.next_due() is None


def test_discarded_waiter_never_expires():
    d = Deadlines()
    a, b = waiter(T0 + 100), waiter(T0 + 200)
    d.add(a)
    d.add(b)
    d.discard(a)
    assert d.next_due() == T0 + 200
    assert d.pop_expired(T0 + 1000) == [b]


def test_discard_twice_is_harmless():
    d = Deadlines()
    a, b = waiter(T0 + 100), waiter(T0 + 200)
    d.add(a)
    d.add(b)
    d.discard(a)
    d.discard(a)
    assert d.pop_expired(T0 + 1000) == [b]


def test_discard_of_untracked_waiter_is_harmless():
    d = Deadlines()
    d.discard(waiter(T0 + 100))
    d.discard(waiter(0))
    assert d.next_due() is None


def test_discarded_entries_do_not_pile_up():
    """Long timeouts served early are dropped, not kept until they expire."""
    d = Deadlines()
    keep = waiter(T0 + 10)
    d.add(keep)
    for i in range(10_000):
        w = waiter(T0 + 3_600_000 + i)
        d.add(w)
        d.discard(w)
    assert len(d._heap) <= 2 * 1 + 64 + 1
    assert d.pop_expired(T0 + 10_000_000) == [keep]


# ---------------------------------------------------------------- ScanTable


def full_scan(table, count=10, between=None, keep=None):
    """Run a whole scan, calling between(step) after each call."""
    seen, cursor, step = [], 0, 0
    while True:
        cursor, found = table.scan(cursor, count, keep, False)
        seen.extend(found)
        step += 1
        if cursor == 0:
            return seen, step
        if between is not None:
            between(step)
        assert step < 100_000


def test_partitions_must_be_a_power_of_two():
    with pytest.raises(ValueError):
        ScanTable(100)


def test_scan_table_add_get_pop_len():
    t = ScanTable(16)
    assert t.add(b"a", 1)
    assert not t.add(b"a", 2)
    assert t.get(b"a") == 1
    assert b"a" in t and b"b" not in t
    assert len(t) == 1
    assert t.pop(b"a") == 1
    assert t.pop(b"a") is None
    assert len(t) == 0
    assert t.get(b"a") is None


def test_values_lists_everything():
    t = ScanTable(16)
    for i in range(100):
        t.add(b"k%d" % i, i)
    assert sorted(t.values()) == list(range(100))


def test_scan_of_empty_table_ends_at_once():
    cursor, found = ScanTable(16).scan(0, 10, None, True)
    assert (cursor, found) == (0, [])


def test_busyloop_returns_everything_in_one_call():
    t = ScanTable(64)
    for i in range(1000):
        t.add(b"k%d" % i, i)
    cursor, found = t.scan(0, 1, None, True)
    assert cursor == 0
    assert sorted(found) == list(range(1000))


def test_scan_by_steps_returns_everything_and_ends_with_zero():
    t = ScanTable(64)
    for i in range(1000):
        t.add(b"k%d" % i, i)
    seen, steps = full_scan(t, count=10)
    assert sorted(seen) == list(range(1000))
    assert steps > 1


def test_scan_returns_each_element_once_without_changes():
    t = ScanTable(64)
    for i in range(500):
        t.add(b"k%d" % i, i)
    seen, _ = full_scan(t, count=7)
    assert len(seen) == len(set(seen)) == 500


def test_scan_returns_stable_elements_despite_adds_and_removes():
    rng = random.Random(11)
    t = ScanTable(256)
    stable = {b"stable%d" % i for i in range(300)}
    churn = [b"churn%d" % i for i in range(2000)]
    for key in stable:
        t.add(key, key)
    for key in churn[:500]:
        t.add(key, key)

    def mutate(step):
        for _ in range(20):
            key = rng.choice(churn)
            if key in t:
                t.pop(key)
            else:
                t.add(key, key)

    seen, _ = full_scan(t, count=5, between=mutate)
    assert stable <= set(seen)


def test_scan_with_filter_keeps_only_matching():
    t = ScanTable(16)
    for i in range(100):
        t.add(b"k%d" % i, i)
    seen, _ = full_scan(t, count=5, keep=lambda v: v % 2 == 0)
    assert sorted(seen) == list(range(0, 100, 2))


def test_scan_call_stops_once_count_reached():
    t = ScanTable(1024)
    for i in range(5000):
        t.add(b"k%d" % i, i)
    cursor, found = t.scan(0, 10, None, False)
    assert cursor != 0
    assert len(found) >= 10
    assert len(found) < 100             # a few partitions, not the table


def test_scan_call_bounded_to_ten_times_count_non_empty_partitions():
    t = ScanTable(64)
    for i in range(1000):                # every partition holds something
        t.add(b"k%d" % i, i)
    cursor, found = t.scan(0, 3, lambda v: False, False)
    assert cursor == 30                  # 3 * 10 partitions visited, nothing kept
    assert found == []


def test_scan_of_a_small_table_finishes_in_one_call():
    """Empty partitions are free, so a fresh node lists a few jobs at once,
    as Disque does with its small hash table."""
    t = ScanTable(4096)
    for i in range(3):
        t.add(b"k%d" % i, i)
    cursor, found = t.scan(0, 100, None, False)
    assert (cursor, sorted(found)) == (0, [0, 1, 2])


def test_scan_cursor_out_of_range_is_a_finished_scan():
    """As in Disque, where a cursor past the table ends the iteration."""
    t = ScanTable(16)
    for i in range(10):
        t.add(b"k%d" % i, i)
    assert t.scan(10 ** 6, 100, None, False) == (0, [])
