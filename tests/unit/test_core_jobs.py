"""The node core: job IDs, ADDJOB/GETJOB/ACKJOB semantics and every timer.

No sockets and no sleeps: a FakeClock drives delays, retries and expiry,
and the `drive` fixture wakes the node exactly when it asked to be woken.
Expected values come from Disque 1.0-rc1 (README.md, src/job.c,
src/queue.c, src/ack.c).
"""

from __future__ import annotations

import re

import pytest

from disque_py.base.effects import Unblock
from disque_py.engine import (ACKED, ACTIVE, BUCKET_MS, DEFAULT_TTL_S, FLAG_BCAST_WILLQUEUE,
                              PAUSED_ALL, PAUSED_IN, PAUSED_OUT, QUEUED, QUEUE_MEMORY_OVERHEAD,
                              is_at_most_once_id, is_valid_id, ttl_minutes_from_id)
from disque_py.node.node import AWAKE_BATCH
from disque_py.node.waiters import TIMED_OUT
from disque_py.base.errors import (AckedError, CommandError, MaxlenError, NoJobError, NoReplError,
                                   PausedError, TooLateError)
from tests.unit.conftest import NODE_ID, START_MS
from tests.engine.commands import ack_jobs, dequeue_jobs, enqueue_jobs, get_jobs

RETRY_JITTER_MS = 250         # Disque's randomTimeError(500): [-250, +250)
QUEUE_MAX_IDLE_S = 300

RETRY0_NEEDS_REPL1 = ("With RETRY set to 0 please explicitly set  REPLICATE to 1 "
                      "(at-most-once delivery)")
DELAY_NOT_BELOW_TTL = ("The specified DELAY is greater than TTL. Job refused since "
                       "would never be delivered")
NOT_ENOUGH_NODES = "Not enough reachable nodes for the requested replication level"
MAXLEN_REACHED = "Queue is already longer than the specified MAXLEN count"
PAUSED_INPUT = "Queue paused in input, try later"

ID_SHAPE = re.compile(rb"D-[0-9a-f]{8}-[A-Za-z0-9+/]{24}-[0-9a-f]{4}\Z")


def job_memory(node) -> int:
    """The memory estimate without the queues' share (queues outlive jobs)."""
    return node.used_memory - QUEUE_MEMORY_OVERHEAD * len(node.queues)


def add(node, queue=b"q", body=b"body", *, repl=None, delay=0, retry=None,
        ttl=DEFAULT_TTL_S, maxlen=0, async_=False):
    return node.add_job(queue, body, repl, delay, retry, ttl, maxlen, async_)


def qlen(node, queue=b"q") -> int:
    return node.queue_length(queue)


def foreign_id(ttl_field: str = "0001") -> bytes:
    """A well-formed ID of a job made by some other node."""
    return b"D-abcdef01-" + b"A" * 24 + b"-" + ttl_field.encode()


# ------------------------------------------------------------------ job IDs


def test_job_id_is_40_chars_with_disque_layout(node):
    job_id = add(node).id
    assert len(job_id) == 40
    assert ID_SHAPE.match(job_id)


def test_job_id_carries_first_8_chars_of_node_id(node):
    job_id = add(node).id
    assert job_id[:11] == b"D-" + NODE_ID[:8] + b"-"
    assert job_id[10:11] == b"-" and job_id[35:36] == b"-"


def test_job_id_ttl_field_is_odd_when_retry_positive(node):
    job_id = add(node, ttl=86400, retry=30).id
    assert job_id[-4:] == b"05a1"          # 1440 minutes, forced odd
    assert not is_at_most_once_id(job_id)


def test_job_id_ttl_field_is_even_when_retry_zero(node):
    job_id = add(node, ttl=86400, retry=0).id
    assert job_id[-4:] == b"05a0"
    assert is_at_most_once_id(job_id)


def test_job_id_ttl_field_under_a_minute(node):
    assert add(node, ttl=59, retry=1).id[-4:] == b"0001"
    assert add(node, ttl=59, retry=0).id[-4:] == b"0000"


def test_job_id_ttl_field_capped_at_0xffff(node):
    huge = 0xFFFF * 60 * 10
    assert add(node, ttl=huge, retry=5).id[-4:] == b"ffff"
    assert add(node, ttl=huge, retry=0).id[-4:] == b"fffe"
    assert ttl_minutes_from_id(add(node, ttl=huge).id) == 0xFFFF


def test_job_ids_are_unique_over_many_jobs(node):
    ids = {add(node, body=b"%d" % i).id for i in range(20_000)}
    assert len(ids) == 20_000


def test_is_valid_id_accepts_generated_ids(node):
    for _ in range(100):
        assert is_valid_id(add(node).id)


@pytest.mark.parametrize("bad", [
    b"",
    b"D-9bfa56e3-" + b"A" * 24 + b"-05a",              # 39 chars
    b"D-9bfa56e3-" + b"A" * 24 + b"-05a1x",            # 41 chars
    b"X-9bfa56e3-" + b"A" * 24 + b"-05a1",             # prefix
    b"d-9bfa56e3-" + b"A" * 24 + b"-05a1",             # prefix case
    b"D_9bfa56e3-" + b"A" * 24 + b"-05a1",             # first separator
    b"D-9bfa56e3_" + b"A" * 24 + b"-05a1",             # second separator
    b"D-9bfa56e3-" + b"A" * 24 + b"_05a1",             # third separator
    b"D-9bfa56eZ-" + b"A" * 24 + b"-05a1",             # node part not hex
    b"D-9bfa56e3-" + b"A" * 23 + b"!" + b"-05a1",      # not base64
    b"D-9bfa56e3-" + b"A" * 24 + b"-05g1",             # ttl not hex
])
def test_is_valid_id_rejects_malformed(bad):
    assert not is_valid_id(bad)


# -------------------------------------------------------------------- ctime


def test_ctime_is_milliseconds_times_a_million(node, clock):
    job = add(node)
    assert job.ctime == START_MS * 1_000_000


def test_ctime_strictly_increases_within_one_millisecond(node):
    ctimes = [add(node).ctime for _ in range(1000)]
    assert all(b > a for a, b in zip(ctimes, ctimes[1:]))
    assert ctimes[-1] < (START_MS + 1) * 1_000_000


def test_ctime_follows_the_clock_across_milliseconds(node, clock):
    first = add(node).ctime
    clock.advance(5)
    assert add(node).ctime == (START_MS + 5) * 1_000_000 > first


def test_ctime_keeps_increasing_when_the_clock_goes_back(node, clock):
    first = add(node).ctime
    clock.advance(-1000)
    assert add(node).ctime > first


# ------------------------------------------------------------ ADDJOB defaults


def test_addjob_default_ttl_and_retry(node, clock):
    job = add(node)
    assert job.etime == START_MS // 1000 + DEFAULT_TTL_S
    assert job.retry == 300                      # ttl/10 capped at 5 minutes


def test_addjob_default_retry_is_a_tenth_of_ttl(node):
    assert add(node, ttl=100).retry == 10


def test_addjob_default_retry_is_at_least_one_second(node):
    assert add(node, ttl=5).retry == 1


def test_addjob_default_retry_capped_at_300(node):
    assert add(node, ttl=10_000).retry == 300


def test_addjob_defaults_replicate_to_1_on_a_lone_node(node):
    job = add(node)
    assert job.repl == 1
    assert job.delivered == (NODE_ID,)


def test_addjob_queues_the_job_at_once(node):
    job = add(node, body=b"hello")
    assert job.state == QUEUED
    assert qlen(node) == 1
    assert node.lookup(job.id) is job
    assert job.body == b"hello" and job.queue == b"q"


def test_addjob_explicit_retry_zero_is_at_most_once(node):
    job = add(node, retry=0)
    assert job.retry == 0
    assert job.qtime == 0                       # queued once, never again


# -------------------------------------------------------------- ADDJOB errors


def test_addjob_retry_zero_with_replicate_2_refused(node):
    with pytest.raises(CommandError) as err:
        add(node, repl=2, retry=0)
    assert type(err.value) is CommandError
    assert err.value.message == RETRY0_NEEDS_REPL1


def test_addjob_delay_equal_to_ttl_refused(node):
    with pytest.raises(CommandError) as err:
        add(node, delay=10, ttl=10)
    assert err.value.message == DELAY_NOT_BELOW_TTL


def test_addjob_delay_above_ttl_refused(node):
    with pytest.raises(CommandError) as err:
        add(node, delay=11, ttl=10)
    assert err.value.message == DELAY_NOT_BELOW_TTL


def test_addjob_replicate_2_on_lone_node_is_norepl(node):
    with pytest.raises(NoReplError) as err:
        add(node, repl=2)
    assert err.value.message == NOT_ENOUGH_NODES
    assert err.value.wire() == b"-NOREPL " + NOT_ENOUGH_NODES.encode() + b"\r\n"


def test_addjob_when_leaving_is_norepl_with_reason(node):
    node.leaving = True
    with pytest.raises(NoReplError) as err:
        add(node)
    assert err.value.message == (NOT_ENOUGH_NODES + ", since I'm unable to hold a copy of "
                                 "the message for the following reason: I'm leaving the cluster")


def test_addjob_under_memory_pressure_is_norepl_with_reason(node):
    for _ in range(10):
        add(node, queue=b"other", body=b"x" * 100)
    node.maxmemory = node.used_memory * 100 // 80      # above 75%: no local copy
    with pytest.raises(NoReplError) as err:
        add(node)
    assert err.value.message == (NOT_ENOUGH_NODES + ", since I'm unable to hold a copy of "
                                 "the message for the following reason: I'm out of memory")


def test_addjob_maxlen_reached_refused(node):
    add(node)
    add(node)
    with pytest.raises(MaxlenError) as err:
        add(node, maxlen=2)
    assert err.value.message == MAXLEN_REACHED
    assert err.value.wire() == b"-MAXLEN " + MAXLEN_REACHED.encode() + b"\r\n"


def test_addjob_maxlen_not_reached_accepted(node):
    add(node)
    add(node, maxlen=2)
    assert qlen(node) == 2


def test_addjob_maxlen_on_missing_queue_accepted(node):
    add(node, queue=b"new", maxlen=1)
    assert qlen(node, b"new") == 1


def test_addjob_paused_in_queue_refused(node):
    node.set_paused(node.queue(b"q"), PAUSED_IN)
    with pytest.raises(PausedError) as err:
        add(node)
    assert err.value.message == PAUSED_INPUT
    assert err.value.wire() == b"-PAUSED " + PAUSED_INPUT.encode() + b"\r\n"


def test_addjob_paused_out_queue_accepts_jobs(node):
    node.set_paused(node.queue(b"q"), PAUSED_OUT)
    add(node)
    assert qlen(node) == 1


@pytest.mark.parametrize("kwargs, error", [
    ({"repl": 2, "retry": 0}, CommandError),
    ({"delay": 5, "ttl": 5}, CommandError),
    ({"repl": 2}, NoReplError),
])
def test_addjob_refused_job_leaves_nothing_behind(node, kwargs, error):
    with pytest.raises(error):
        add(node, **kwargs)
    assert len(node.jobs) == 0
    assert job_memory(node) == 0
    assert node.stats_jobs_created == 0


def test_addjob_checks_retry0_before_delay(node):
    with pytest.raises(CommandError) as err:
        add(node, repl=2, retry=0, delay=20, ttl=10)
    assert err.value.message == RETRY0_NEEDS_REPL1


def test_addjob_checks_delay_before_replication(node):
    with pytest.raises(CommandError) as err:
        add(node, repl=2, delay=20, ttl=10)
    assert type(err.value) is CommandError
    assert err.value.message == DELAY_NOT_BELOW_TTL


def test_addjob_checks_replication_before_maxlen(node):
    add(node)
    with pytest.raises(NoReplError):
        add(node, repl=2, maxlen=1)


def test_addjob_checks_maxlen_before_pause(node):
    add(node)
    node.set_paused(node.queue(b"q"), PAUSED_IN)
    with pytest.raises(MaxlenError):
        add(node, maxlen=1)


# -------------------------------------------------------------------- DELAY


def test_delayed_job_is_active_not_queued(node):
    job = add(node, delay=5)
    assert job.state == ACTIVE
    assert qlen(node) == 0


def test_delayed_job_not_queued_before_its_time(node, drive):
    job = add(node, delay=5)
    drive(4999)
    assert job.state == ACTIVE
    assert qlen(node) == 0


def test_delayed_job_queued_within_100ms_of_its_time(node, drive):
    job = add(node, delay=5)
    drive(5000 + 100)
    assert job.state == QUEUED
    assert qlen(node) == 1


def test_delayed_job_queued_by_a_plain_tick(node, clock):
    job = add(node, delay=5)
    clock.advance(5000 + BUCKET_MS)
    node.tick()
    assert job.state == QUEUED


def test_delayed_at_most_once_job_is_queued_once(node, drive):
    job = add(node, delay=2, retry=0)
    drive(2000 + BUCKET_MS)
    assert job.state == QUEUED
    assert job.qtime == 0


# -------------------------------------------------------------------- RETRY


def test_fetched_job_requeued_after_retry(node, clock, drive):
    job = add(node, retry=10)
    assert get_jobs(node, [b"q"], 1) == [job]
    drive(10_000 - RETRY_JITTER_MS - 1)
    assert job.state == ACTIVE and qlen(node) == 0
    drive(2 * RETRY_JITTER_MS + 1 + BUCKET_MS)
    assert job.state == QUEUED and qlen(node) == 1


def test_requeue_counts_additional_deliveries(node, drive):
    job = add(node, retry=10)
    for expected in (1, 2, 3):
        get_jobs(node, [b"q"], 1)
        drive(10_000 + RETRY_JITTER_MS + BUCKET_MS)
        assert job.state == QUEUED
        assert job.deliveries == expected
    assert job.nacks == 0


def test_queued_job_not_fetched_is_not_counted_again(node, drive):
    job = add(node, retry=10)
    drive(35_000)
    assert job.state == QUEUED
    assert job.deliveries == 0
    assert qlen(node) == 1


def test_at_most_once_job_never_requeued(node, drive):
    job = add(node, retry=0)
    get_jobs(node, [b"q"], 1)
    drive(3_600_000)
    assert job.state == ACTIVE
    assert qlen(node) == 0
    assert job.deliveries == 0


def test_willqueue_flag_cleared_ahead_of_requeue(node, drive, clock):
    job = add(node, retry=10)
    get_jobs(node, [b"q"], 1)
    assert job.flags & FLAG_BCAST_WILLQUEUE
    drive(job.qtime - 500 + BUCKET_MS - clock.now_ms())
    assert not job.flags & FLAG_BCAST_WILLQUEUE
    assert job.state == ACTIVE


def test_willqueue_does_not_prevent_requeue(node, drive, clock):
    job = add(node, retry=10)
    get_jobs(node, [b"q"], 1)
    drive(job.qtime - 500 + BUCKET_MS - clock.now_ms())
    drive(job.qtime + BUCKET_MS - clock.now_ms())
    assert job.state == QUEUED
    assert job.flags & FLAG_BCAST_WILLQUEUE      # set again for the next round


# ---------------------------------------------------------------------- TTL


def _gone(node, job, queue=b"q"):
    return node.lookup(job.id) is None and qlen(node, queue) == 0


def test_queued_job_expires_at_ttl(node, drive):
    job = add(node, ttl=10, retry=100)
    drive(10_000 - 1)
    assert node.lookup(job.id) is job
    drive(1 + 1000 + BUCKET_MS)
    assert _gone(node, job)


def test_queued_job_with_short_retry_expires_at_ttl(node, drive):
    job = add(node, ttl=10, retry=1)
    drive(10_000 + 1000 + BUCKET_MS)
    assert _gone(node, job)


def test_active_job_expires_at_ttl(node, drive):
    job = add(node, ttl=10, retry=100)
    get_jobs(node, [b"q"], 1)
    drive(10_000 + 1000 + BUCKET_MS)
    assert node.lookup(job.id) is None


def test_delayed_job_expires_at_ttl_without_being_queued(node, drive):
    job = add(node, ttl=10, delay=5, retry=2)
    node.set_paused(node.queue(b"q"), PAUSED_IN)      # keeps postponing the first queueing
    drive(9_000)
    assert job.state == ACTIVE and node.lookup(job.id) is job
    drive(1000 + 1000 + BUCKET_MS)
    assert _gone(node, job)


def test_expired_job_no_longer_listed_by_queue(node, drive):
    add(node, ttl=10, retry=100)
    keep = add(node, ttl=100, retry=100)
    drive(11_000 + BUCKET_MS)
    q = node.queues.get(b"q")
    assert list(q.jobs) == [keep]
    assert get_jobs(node, [b"q"], 10) == [keep]


def test_expired_job_releases_its_memory(node, drive):
    add(node, ttl=10, body=b"x" * 1000)
    drive(11_000 + BUCKET_MS)
    assert job_memory(node) == 0


# ------------------------------------------------------ NACK, ENQUEUE, DEQUEUE


def test_nack_requeues_at_once_and_counts(node):
    job = add(node)
    get_jobs(node, [b"q"], 1)
    assert enqueue_jobs(node, [job.id], nack=True) == 1
    assert job.state == QUEUED and qlen(node) == 1
    assert job.nacks == 1
    assert job.deliveries == 0


def test_enqueue_requeues_and_counts_a_delivery(node):
    job = add(node)
    get_jobs(node, [b"q"], 1)
    assert enqueue_jobs(node, [job.id], nack=False) == 1
    assert job.state == QUEUED
    assert job.deliveries == 1
    assert job.nacks == 0


def test_nack_on_queued_job_does_nothing(node):
    job = add(node)
    assert enqueue_jobs(node, [job.id], nack=True) == 0
    assert job.nacks == 0
    assert qlen(node) == 1


def test_enqueue_of_unknown_id_does_nothing(node):
    assert enqueue_jobs(node, [foreign_id()], nack=False) == 0
    assert len(node.jobs) == 0


def test_nack_does_not_requeue_delivered_at_most_once_job(node):
    job = add(node, retry=0)
    get_jobs(node, [b"q"], 1)
    assert enqueue_jobs(node, [job.id], nack=True) == 0
    assert job.state == ACTIVE


def test_nacked_job_served_before_younger_jobs(node):
    old = add(node, body=b"old")
    get_jobs(node, [b"q"], 1)
    add(node, body=b"young")
    enqueue_jobs(node, [old.id], nack=True)
    assert get_jobs(node, [b"q"], 1) == [old]


def test_dequeue_queued_job_makes_it_active(node):
    job = add(node)
    assert dequeue_jobs(node, [job.id]) == 1
    assert job.state == ACTIVE
    assert qlen(node) == 0


def test_dequeue_active_job_does_nothing(node):
    job = add(node)
    get_jobs(node, [b"q"], 1)
    assert dequeue_jobs(node, [job.id]) == 0


def test_dequeue_counts_only_the_jobs_moved(node):
    a, b = add(node), add(node)
    dequeue_jobs(node, [a.id])
    assert dequeue_jobs(node, [a.id, b.id, foreign_id()]) == 1


# ------------------------------------------------------------------ WORKING


def test_working_returns_retry(node):
    job = add(node, retry=42)
    get_jobs(node, [b"q"], 1)
    assert node.working(job.id) == 42


def test_working_on_queued_job_dequeues_it(node):
    job = add(node, retry=42)
    node.working(job.id)
    assert job.state == ACTIVE
    assert qlen(node) == 0


def test_working_postpones_requeue(node, drive, clock):
    job = add(node, retry=10)
    get_jobs(node, [b"q"], 1)
    drive(5_000)
    node.working(job.id)
    drive(10_000 - RETRY_JITTER_MS - 1)            # t = 15 s - 251 ms
    assert job.state == ACTIVE
    drive(2 * RETRY_JITTER_MS + 1 + BUCKET_MS)
    assert job.state == QUEUED


def test_working_allowed_up_to_half_ttl(node, drive):
    job = add(node, ttl=100, retry=100)
    drive(50_000)
    assert node.working(job.id) == 100


def test_working_refused_past_half_ttl(node, drive):
    job = add(node, ttl=100, retry=100)
    drive(50_001)
    with pytest.raises(TooLateError) as err:
        node.working(job.id)
    assert err.value.message == ("Half of job TTL already elapsed, you are no longer "
                                 "allowed to postpone the next delivery.")
    assert err.value.wire().startswith(b"-TOOLATE Half of job TTL")


def test_working_unknown_job_is_nojob(node):
    with pytest.raises(NoJobError) as err:
        node.working(foreign_id())
    assert err.value.message == "Job not known in the context of this node."


def test_working_acked_job_is_acked_error(node):
    node.cluster_size = 2                         # so an ACK leaves a job to GC later
    job_id = foreign_id("0001")
    ack_jobs(node, [job_id])
    assert node.lookup(job_id).state == ACKED
    with pytest.raises(AckedError) as err:
        node.working(job_id)
    assert err.value.message == "The job is already acknowledged."


def test_working_on_at_most_once_job_returns_zero(node):
    job = add(node, retry=0)
    get_jobs(node, [b"q"], 1)
    assert node.working(job.id) == 0
    assert job.qtime == 0


# -------------------------------------------------- ACKJOB, FASTACK, DELJOB


def test_ackjob_on_lone_node_deletes_the_job(node):
    job = add(node, body=b"x" * 100)
    assert ack_jobs(node, [job.id]) == 1
    assert node.lookup(job.id) is None
    assert qlen(node) == 0
    assert job_memory(node) == 0


def test_ackjob_of_fetched_job_deletes_it(node):
    job = add(node)
    get_jobs(node, [b"q"], 1)
    assert ack_jobs(node, [job.id]) == 1
    assert len(node.jobs) == 0


def test_ackjob_counts_each_job_once(node):
    job = add(node)
    assert ack_jobs(node, [job.id, job.id]) == 1


def test_ackjob_unknown_id_on_lone_node_creates_nothing(node):
    assert ack_jobs(node, [foreign_id("0001")]) == 0
    assert len(node.jobs) == 0
    assert job_memory(node) == 0


def test_ackjob_unknown_id_in_cluster_leaves_dummy_ack(node):
    node.cluster_size = 2
    job_id = foreign_id("0003")
    assert ack_jobs(node, [job_id]) == 0
    dummy = node.lookup(job_id)
    assert dummy.state == ACKED and dummy.body is None
    assert dummy.etime == START_MS // 1000 + 3 * 60


def test_ackjob_unknown_at_most_once_id_in_cluster_creates_nothing(node):
    node.cluster_size = 2
    assert ack_jobs(node, [foreign_id("0002")]) == 0
    assert len(node.jobs) == 0


def test_fastack_deletes_and_counts_known(node):
    a, b = add(node), add(node)
    get_jobs(node, [b"q"], 1)
    assert node.fast_ack([a.id, b.id, foreign_id()]) == 2
    assert len(node.jobs) == 0
    assert qlen(node) == 0
    assert job_memory(node) == 0


def test_deljob_deletes_in_any_state_and_counts(node):
    queued, active, delayed = add(node), add(node), add(node, delay=10)
    dequeue_jobs(node, [active.id])
    assert node.delete_jobs([queued.id, active.id, delayed.id, foreign_id()]) == 3
    assert len(node.jobs) == 0
    assert qlen(node) == 0


def test_deleted_job_timers_never_fire(node, drive):
    job = add(node, delay=5)
    node.delete_jobs([job.id])
    drive(10_000)
    assert qlen(node) == 0
    assert node.next_wakeup() is None


# ------------------------------------------------------------------- GETJOB


def test_getjob_returns_jobs_in_ctime_order(node):
    jobs = [add(node, body=b"%d" % i) for i in range(5)]
    assert get_jobs(node, [b"q"], 5) == jobs


def test_getjob_marks_job_active(node):
    job = add(node)
    get_jobs(node, [b"q"], 1)
    assert job.state == ACTIVE
    assert qlen(node) == 0


def test_getjob_empty_queues_return_nothing(node):
    assert get_jobs(node, [b"a", b"b"], 3) == []


def test_getjob_takes_queues_left_to_right(node):
    b1 = add(node, queue=b"b")
    a1 = add(node, queue=b"a")
    assert get_jobs(node, [b"a", b"b"], 1) == [a1]
    assert get_jobs(node, [b"a", b"b"], 1) == [b1]


def test_getjob_count_spans_queues_pass_by_pass(node):
    a1, a2 = add(node, queue=b"a"), add(node, queue=b"a")
    b1 = add(node, queue=b"b")
    assert get_jobs(node, [b"a", b"b"], 3) == [a1, b1, a2]


def test_getjob_count_larger_than_available(node):
    jobs = [add(node, queue=b"a"), add(node, queue=b"b")]
    assert get_jobs(node, [b"a", b"b"], 10) == jobs


def test_getjob_skips_paused_out_queue(node):
    add(node, queue=b"a")
    b1 = add(node, queue=b"b")
    node.set_paused(node.queues.get(b"a"), PAUSED_OUT)
    assert get_jobs(node, [b"a", b"b"], 5) == [b1]
    assert qlen(node, b"a") == 1


def test_getjob_updates_queue_counters(node):
    add(node)
    add(node)
    get_jobs(node, [b"q"], 1)
    q = node.queues.get(b"q")
    assert (q.jobs_in, q.jobs_out) == (2, 1)


# --------------------------------------------------------- blocking GETJOB


def test_blocked_waiter_served_when_job_arrives(node):
    waiter = node.consumers.block("client-1", [b"q"], 0, False)
    job = add(node)
    node.consumers.serve_ready()
    assert node.take_effects() == [Unblock(waiter, [job])]
    assert job.state == ACTIVE
    assert node.parking.blocked_clients == 0


def test_waiters_served_oldest_first_one_job_each(node):
    w1 = node.consumers.block("c1", [b"q"], 0, False)
    w2 = node.consumers.block("c2", [b"q"], 0, False)
    w3 = node.consumers.block("c3", [b"q"], 0, False)
    j1, j2 = add(node), add(node)
    node.consumers.serve_ready()
    assert node.take_effects() == [Unblock(w1, [j1]), Unblock(w2, [j2])]
    assert node.queues.get(b"q").blocked == 1
    j3 = add(node)
    node.consumers.serve_ready()
    assert node.take_effects() == [Unblock(w3, [j3])]


def test_waiter_on_several_queues_served_once(node):
    waiter = node.consumers.block("c1", [b"a", b"b"], 0, False)
    ja = add(node, queue=b"a")
    jb = add(node, queue=b"b")
    node.consumers.serve_ready()
    effects = node.take_effects()
    assert len(effects) == 1 and effects[0].waiter is waiter
    assert effects[0].outcome in ([ja], [jb])
    assert qlen(node, b"a") + qlen(node, b"b") == 1
    assert node.queues.get(b"a").blocked == node.queues.get(b"b").blocked == 0


def test_waiter_naming_a_queue_twice_is_one_waiter(node):
    waiter = node.consumers.block("c1", [b"q", b"q"], 0, False)
    assert node.queues.get(b"q").blocked == 1
    job = add(node)
    node.consumers.serve_ready()
    assert node.take_effects() == [Unblock(waiter, [job])]


def test_no_effect_without_serve_ready_call(node):
    node.consumers.block("c1", [b"q"], 0, False)
    add(node)
    assert node.take_effects() == []


def test_waiter_deadline_expires_with_timed_out(node, clock):
    waiter = node.consumers.block("c1", [b"q"], START_MS + 100, False)
    clock.advance(99)
    node.tick()
    assert node.take_effects() == []
    clock.advance(1)
    node.tick()
    assert node.take_effects() == [Unblock(waiter, TIMED_OUT)]
    assert node.queues.get(b"q").blocked == 0
    assert node.parking.blocked_clients == 0


def test_waiter_without_deadline_never_times_out(node, drive):
    node.consumers.block("c1", [b"q"], 0, False)
    drive(3_600_000)
    assert node.take_effects() == []
    assert node.parking.blocked_clients == 1


def test_served_waiter_does_not_time_out_later(node, clock):
    waiter = node.consumers.block("c1", [b"q"], START_MS + 100, False)
    job = add(node)
    node.consumers.serve_ready()
    clock.advance(1000)
    node.tick()
    assert node.take_effects() == [Unblock(waiter, [job])]


def test_cancelled_waiter_is_not_served(node):
    waiter = node.consumers.block("c1", [b"q"], START_MS + 100, False)
    node.parking.cancel(waiter)
    add(node)
    node.consumers.serve_ready()
    assert node.take_effects() == []
    assert qlen(node) == 1
    assert node.parking.blocked_clients == 0
    assert node.queues.get(b"q").blocked == 0


def test_cancelled_waiter_does_not_time_out(node, clock):
    waiter = node.consumers.block("c1", [b"q"], START_MS + 100, False)
    node.parking.cancel(waiter)
    clock.advance(200)
    node.tick()
    assert node.take_effects() == []


def test_cancel_waiter_twice_is_harmless(node):
    waiter = node.consumers.block("c1", [b"q"], 0, False)
    node.parking.cancel(waiter)
    node.parking.cancel(waiter)
    assert node.parking.blocked_clients == 0


# -------------------------------------------------------------------- PAUSE


def test_paused_out_queue_does_not_wake_waiters(node):
    node.set_paused(node.queue(b"q"), PAUSED_OUT)
    node.consumers.block("c1", [b"q"], 0, False)
    add(node)
    node.consumers.serve_ready()
    assert node.take_effects() == []
    assert qlen(node) == 1


def test_clearing_pause_out_wakes_waiters(node):
    q = node.queue(b"q")
    node.set_paused(q, PAUSED_OUT)
    waiter = node.consumers.block("c1", [b"q"], 0, False)
    job = add(node)
    node.set_paused(q, 0)
    node.consumers.serve_ready()
    assert node.take_effects() == [Unblock(waiter, [job])]


def test_set_paused_replaces_previous_flags(node):
    q = node.queue(b"q")
    node.set_paused(q, PAUSED_ALL)
    node.set_paused(q, PAUSED_IN)
    assert q.pause_state == b"in"
    node.set_paused(q, 0)
    assert q.pause_state == b"none"


def test_paused_in_queue_postpones_requeue(node, drive):
    job = add(node, retry=10)
    get_jobs(node, [b"q"], 1)
    node.set_paused(node.queues.get(b"q"), PAUSED_IN)
    drive(30_000)
    assert job.state == ACTIVE
    assert qlen(node) == 0
    node.set_paused(node.queues.get(b"q"), 0)
    drive(10_000 + RETRY_JITTER_MS + BUCKET_MS)
    assert job.state == QUEUED


def test_paused_in_queue_still_takes_delayed_at_most_once_job(node, drive):
    job = add(node, delay=2, retry=0)
    node.set_paused(node.queue(b"q"), PAUSED_IN)
    drive(2000 + BUCKET_MS)
    assert job.state == QUEUED                    # else it would leak (Disque)


# ------------------------------------------------------------ queue eviction


def evict_all(node) -> int:
    return sum(node.memory.evict_idle_queues() for _ in range(64))


def test_idle_empty_queue_evicted_after_300s(node, clock):
    node.queue(b"q")
    clock.advance(QUEUE_MAX_IDLE_S * 1000)
    assert evict_all(node) == 1
    assert node.queues.get(b"q") is None


def test_queue_idle_less_than_300s_kept(node, clock):
    node.queue(b"q")
    clock.advance(QUEUE_MAX_IDLE_S * 1000 - 1000)
    assert evict_all(node) == 0
    assert node.queues.get(b"q") is not None


def test_queue_with_jobs_kept(node, clock):
    add(node, ttl=DEFAULT_TTL_S, retry=3600)
    clock.advance(QUEUE_MAX_IDLE_S * 1000 * 2)
    assert evict_all(node) == 0


def test_queue_with_waiters_kept(node, clock):
    node.consumers.block("c1", [b"q"], 0, False)
    clock.advance(QUEUE_MAX_IDLE_S * 1000 * 2)
    assert evict_all(node) == 0


@pytest.mark.parametrize("flags", [PAUSED_IN, PAUSED_OUT, PAUSED_ALL])
def test_paused_queue_kept(node, clock, flags):
    node.set_paused(node.queue(b"q"), flags)
    clock.advance(QUEUE_MAX_IDLE_S * 1000 * 2)
    assert evict_all(node) == 0


def test_queue_access_resets_idle_time(node, clock):
    add(node)
    clock.advance(200_000)
    get_jobs(node, [b"q"], 1)                      # now empty, but just used
    clock.advance(200_000)
    assert evict_all(node) == 0
    clock.advance(100_000)
    assert evict_all(node) == 1


@pytest.mark.parametrize("used_percent, level, max_idle_s", [
    (80, 1, QUEUE_MAX_IDLE_S // 30),      # above 75% of maxmemory: 10 s
    (97, 2, 2),                           # above 95%: 2 s
])
def test_idle_limit_shrinks_under_memory_pressure(node, clock, used_percent, level, max_idle_s):
    """Disque's evictIdleQueues() shortens the idle time when memory is short."""
    for _ in range(10):
        add(node, queue=b"full", body=b"x" * 100)
    node.queue(b"q")
    node.maxmemory = node.used_memory * 100 // used_percent
    assert node.memory.warning_level() == level
    clock.advance(max_idle_s * 1000)
    assert evict_all(node) == 1
    assert node.queues.get(b"q") is None


# ---------------------------------------------------------------- FLUSHALL


def test_flush_all_forgets_every_job_and_queue(node):
    for i in range(50):
        add(node, queue=b"q%d" % (i % 5))
    add(node, delay=10)
    node.flush_all()
    assert len(node.jobs) == 0
    assert len(node.queues) == 0
    assert job_memory(node) == 0
    assert get_jobs(node, [b"q0"], 5) == []


def test_flush_all_releases_blocked_waiters_with_timeout(node):
    w1 = node.consumers.block("c1", [b"a"], 0, False)
    w2 = node.consumers.block("c2", [b"a", b"b"], START_MS + 1000, False)
    node.flush_all()
    effects = node.take_effects()
    assert sorted(effects, key=lambda e: e.waiter.client) == [
        Unblock(w1, TIMED_OUT), Unblock(w2, TIMED_OUT)]
    assert node.parking.blocked_clients == 0


def test_flush_all_released_waiter_does_not_time_out_again(node, clock):
    node.consumers.block("c1", [b"a"], START_MS + 1000, False)
    node.flush_all()
    node.take_effects()
    clock.advance(2000)
    while node.tick():
        pass
    assert node.take_effects() == []


def test_flush_all_graveyard_drained_by_ticks(node):
    for _ in range(1000):
        add(node)
    node.flush_all()
    assert node.freeing
    for _ in range(10_000):
        if not node.freeing:
            break
        node.tick()
    assert not node.freeing


def test_flushed_jobs_timers_never_fire(node, drive):
    add(node, delay=1)
    add(node, retry=1)
    get_jobs(node, [b"q"], 1)
    node.flush_all()
    drive(5000)
    assert len(node.jobs) == 0
    assert len(node.queues) == 0
    assert node.next_wakeup() is None


def test_node_works_normally_after_flush(node):
    add(node)
    node.flush_all()
    job = add(node)
    assert get_jobs(node, [b"q"], 1) == [job]


# ------------------------------------------------------ many jobs due at once


def test_hundred_thousand_jobs_due_at_once_are_queued_in_slices(node, clock):
    total = 100_000
    for _ in range(total):
        add(node, body=b"", delay=5)
    assert qlen(node) == 0
    clock.advance(5000 + BUCKET_MS)
    ticks, queued = 0, 0
    while True:
        more = node.tick()
        ticks += 1
        now_queued = qlen(node)
        assert now_queued - queued <= AWAKE_BATCH
        queued = now_queued
        if not more:
            break
        assert ticks <= total // AWAKE_BATCH + 1
    assert queued == total
    assert ticks >= total // AWAKE_BATCH


def test_tick_reports_nothing_more_when_idle(node):
    add(node)
    assert node.tick() is False
