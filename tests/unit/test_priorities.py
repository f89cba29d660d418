"""ADDJOB ... PRIORITY in the core, on the fake clock: the queue order
(higher first, FIFO by creation within a priority), re-queues keeping it,
and the priority carried in the job's bytes: version 2 of the options
block for the AOF and for peers that read it, version 1 (or no block) for
peers that do not, and old v1 records loading as the default priority."""

from __future__ import annotations

import pytest

from disque_py.base.clock import FakeClock
from disque_py.engine import JobOptions, deserialize_job, serialize_record
from disque_py.node.node import Node
from tests.unit.simnet import START_MS
from tests.engine.commands import get_jobs, nack_jobs

NODE_ID = b"0123456789abcdef0123456789abcdef01234567"
PEER = b"f" * 40
NOW_S = START_MS // 1000


@pytest.fixture
def core() -> Node:
    return Node(NODE_ID, FakeClock(START_MS, seed=1), id_seed=b"priorities")


def add(core, priority=None, *, body=b"body", queue=b"q", limit=0):
    options = JobOptions(0, 0, limit, None, priority) if priority is not None or limit else None
    return core.add_job(queue, body, 1, 0, 60, 3600, 0, False, options=options)


def bodies(jobs) -> list[bytes]:
    return [job.body for job in jobs]


def test_higher_priorities_are_served_first_and_fifo_within_one(core):
    for body, priority in ((b"a", None), (b"b", 9), (b"c", 0), (b"d", None), (b"e", 9),
                           (b"f", 7)):
        add(core, priority, body=body)
        core.clock.advance(1)
    assert bodies(core.queues.get(b"q").jobs.peek(10)) == [b"b", b"e", b"f", b"a", b"d", b"c"]
    assert bodies(get_jobs(core, [b"q"], 10)) == [b"b", b"e", b"f", b"a", b"d", b"c"]


def test_a_plain_job_has_the_default_priority_and_no_options(core):
    job = add(core)
    assert job.priority == 5 and job.options is None


def test_a_nacked_job_goes_back_in_its_priority_s_place(core):
    urgent = add(core, 9, body=b"urgent")
    core.clock.advance(1)
    add(core, body=b"normal")
    get_jobs(core, [b"q"], 1)
    add(core, 9, body=b"urgent-later")
    assert nack_jobs(core, [urgent.id]) == 1
    assert bodies(get_jobs(core, [b"q"], 3)) == [b"urgent", b"urgent-later", b"normal"]


def test_a_big_queue_takes_an_urgent_job_at_its_head(core):
    for index in range(3000):             # several chunks
        add(core, body=b"%d" % index)
    urgent = add(core, 8, body=b"urgent")
    low = add(core, 1, body=b"low")
    jobs = core.queues.get(b"q").jobs
    assert jobs.peek(1) == [urgent] and jobs.peek(-1) == [low]
    assert get_jobs(core, [b"q"], 1) == [urgent]


def test_the_aof_and_peers_that_read_v2_get_the_priority(core):
    job = add(core, 8, limit=3)
    record = deserialize_job(core.job_bytes(job))
    assert record.options == (0, 0, 3, 0, None, None, 8, None, 0, None)
    assert deserialize_job(core.job_bytes(job, NOW_S, PEER)).options[6] == 8


def test_a_peer_that_reads_v1_gets_the_other_options_without_the_priority(core):
    core.options_readers = {PEER: 1}
    job = add(core, 8, limit=3)
    data = core.job_bytes(job, NOW_S, PEER)
    assert deserialize_job(data).options == (0, 0, 3, 0, None, None, 5, None, 0, None)
    only_priority = add(core, 8)
    assert deserialize_job(core.job_bytes(only_priority, NOW_S, PEER)).options is None


def test_a_v1_block_loads_with_the_default_priority(core):
    job = add(core, 8, limit=3)
    core.options_readers = {PEER: 1}
    record = deserialize_job(core.job_bytes(job, NOW_S, PEER), NOW_S)
    other = Node(PEER, FakeClock(START_MS, seed=2), id_seed=b"other")
    other.load_job(record, True)
    copy = other.lookup(job.id)
    assert copy.priority == 5 and copy.options.max_deliveries == 3


def test_a_replica_and_a_restart_keep_the_priority(core):
    job = add(core, 2, body=b"low")
    record = deserialize_job(core.job_bytes(job))
    other = Node(PEER, FakeClock(START_MS, seed=2), id_seed=b"other")
    other.load_job(record, True)
    add(other, body=b"normal")
    assert bodies(get_jobs(other, [b"q"], 2)) == [b"normal", b"low"]


@pytest.mark.parametrize("priority", [10, 255])
def test_a_block_with_an_impossible_priority_is_refused(core, priority):
    job = add(core, 9)
    record = deserialize_job(core.job_bytes(job))
    options = record.options[:6] + (priority,) + record.options[7:]
    bad = serialize_record(record._replace(options=options))
    with pytest.raises(ValueError):
        deserialize_job(bad)
