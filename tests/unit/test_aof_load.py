"""The AOF loaded and rewritten in the engine (engine/aof/load.pxi,
rewrite.pxi), on the fake clock: records a node wrote (its AofLog, as the
server writes them) or a rewrite made, replayed into a fresh node by the
AofLoader, a slice at a time; a torn tail, damage and a job that does not
parse stop it where they are; the persistence service turns those into
the start-up's verdicts (a dropped tail, a refusal with the offset).
"""

from __future__ import annotations

import asyncio
import mmap

import pytest

from disque_py.base.clock import FakeClock
from disque_py.base.errors import StartupError
from disque_py.config import Config
from disque_py.engine import (ACTIVE, AOF_GONE, AOF_JOB, AOF_UNDEDUP, LOAD_BAD_JOB, QUEUED,
                              RECORD_BAD, RECORD_OK, RECORD_TORN, AofLoader, JobOptions,
                              QUEUE_MEMORY_OVERHEAD, RewriteWalk, aof_record, deserialize_job)
from disque_py.node.node import Node
from disque_py.persistence import aof_format
from disque_py.persistence.aof import AofWriter
from disque_py.persistence.rewrite import Rewrite
from disque_py.server.persistence_service import PersistenceService
from disque_py.server.state import ServerState
from tests.engine.commands import ack_jobs, get_jobs
from tests.unit.conftest import NODE_ID, START_MS

HEADER = aof_format.HEADER


def new_node(now_ms: int = START_MS) -> Node:
    return Node(NODE_ID, FakeClock(now_ms, seed=5), id_seed=b"aof-load")


def logging_node() -> Node:
    """A node whose records are kept in its AofLog for the test to take."""
    node = new_node()
    node.aof_enabled = True
    node.aof.on_records = lambda: None
    return node


def fill(node: Node) -> dict:
    """Jobs of every state a record can hold, and DEDUP keys: by name."""
    add = node.add_job
    jobs = {
        "queued": add(b"q1", b"queued", 1, 0, 60, 3600, 0, False),
        "active": add(b"q1", b"active", 1, 0, 60, 3600, 0, False),
        "once": add(b"q2", b"at most once", 1, 0, 0, 3600, 0, False),
        "options": add(b"q2", b"options", 1, 0, 60, 3600, 0, False,
                       options=JobOptions(0, 0, 3, b"dlq")),
        "dedup": add(b"q3", b"dedup", 1, 0, 60, 3600, 0, False, dedup_key=b"k1"),
        "acked": add(b"q3", b"acked", 1, 0, 60, 3600, 0, False, dedup_key=b"k2"),
        "delayed": add(b"q4", b"delayed", 1, 30, 60, 3600, 0, False),
    }
    taken = get_jobs(node, [b"q1"], 2)
    assert {job.id for job in taken} == {jobs["queued"].id, jobs["active"].id}
    node.enqueue(jobs["queued"])
    ack_jobs(node, [jobs["acked"].id])
    return jobs


def load(data: bytes, node: Node, enqueue: bool = False, per_slice: int = 3) -> AofLoader:
    """Replay a whole file, `per_slice` records per call, as the service does."""
    end = aof_format.data_end(data)
    loader = AofLoader(node, enqueue, aof_format.records_start(data, end))
    while loader.run(data, end, per_slice):
        assert loader.records % per_slice == 0
    return loader


def state_of(node: Node) -> dict:
    """What a restart must keep: each live job's fields, and the DEDUP keys."""
    jobs = {job.id: (job.queue, job.body, job.flags, job.retry, job.delay, job.etime,
                     job.ctime, job.nacks, job.deliveries, job.priority,
                     job.options.fields() if job.options is not None else None)
            for job in node.jobs.values() if job.state in (ACTIVE, QUEUED)}
    return {"jobs": jobs, "keys": sorted(node.dedup.items())}


def same_state(before: dict, after: dict) -> None:
    # Flags: a loaded job is active, flagged to announce its re-queue.
    assert after["keys"] == before["keys"]
    assert set(after["jobs"]) == set(before["jobs"])
    for job_id, fields in before["jobs"].items():
        assert after["jobs"][job_id][:2] == fields[:2]
        assert after["jobs"][job_id][3:] == fields[3:]


# ---------------------------------------------------------------- loading

def test_a_node_s_records_load_back_its_live_jobs_and_keys():
    source = logging_node()
    jobs = fill(source)
    data = HEADER + source.aof.take()
    node = new_node()
    loader = load(data, node)
    assert (loader.status, loader.pos) == (RECORD_OK, len(data))
    same_state(state_of(source), state_of(node))
    assert jobs["acked"].id not in node.jobs and node.dedup.lookup(b"q3", b"k2", START_MS)
    assert all(job.state == ACTIVE for job in node.jobs.values())     # re-queued by retry
    assert len(node.jobs) == 6 and node.used_memory == source.used_memory - \
        len(source.queues) * QUEUE_MEMORY_OVERHEAD                       # its queues are not made again


def test_enqueue_once_queues_again_the_jobs_that_were_queued():
    source = logging_node()
    jobs = fill(source)
    node = new_node()
    load(HEADER + source.aof.take(), node, enqueue=True)
    queued = {job.id for job in node.jobs.values() if job.state == QUEUED}
    assert queued == {jobs[name].id for name in ("queued", "once", "options", "dedup")}
    assert node.queue_length(b"q1") == 1
    # The jobs of a queue share its name object.
    assert node.lookup(jobs["once"].id).queue is node.lookup(jobs["options"].id).queue


def test_a_gone_record_deletes_and_an_undedup_record_forgets():
    source = logging_node()
    jobs = fill(source)
    gone = aof_record(AOF_GONE, jobs["queued"].id)
    dedup = jobs["dedup"].dedup
    forget = aof_record(AOF_UNDEDUP, (0).to_bytes(8, "big") + jobs["dedup"].id
                        + len(dedup[0]).to_bytes(4, "big") + dedup[0] + dedup[1])
    node = new_node()
    load(HEADER + source.aof.take() + gone + forget, node)
    assert jobs["queued"].id not in node.jobs
    assert node.dedup.lookup(b"q3", b"k1", START_MS) is None


def test_an_expired_job_keeps_its_open_window_and_a_later_record_revises():
    source = logging_node()
    job = source.add_job(b"q", b"b", 1, 0, 60, 10, 0, False, dedup_key=b"k",
                         dedup_until_ms=START_MS + 3_600_000)
    kept = source.add_job(b"q", b"c", 1, 0, 60, 3600, 0, False,
                          options=JobOptions(0, 0, 1, b"dlq"))
    first = source.aof.take()
    get_jobs(source, [b"q"], 2)
    source.enqueue(kept, True)             # a NACK beyond MAXDELIVERIES: dead-lettered
    assert kept.queue == b"dlq"
    later = new_node(START_MS + 20_000)
    load(HEADER + first + source.aof.take(), later)
    assert job.id not in later.jobs
    assert later.dedup.lookup(b"q", b"k", START_MS + 20_000) == job.id
    assert later.lookup(kept.id).queue == b"dlq"


def test_the_older_formats_loadjob_follows_the_same_rule():
    source = logging_node()
    fill(source)
    node = new_node()
    for job in source.jobs.values():
        if job.state in (ACTIVE, QUEUED):
            node.load_job(deserialize_job(source.job_bytes(job)), False)
    for entry in source.dedup.items():
        node.restore_dedup(*entry)
    same_state(state_of(source), state_of(node))


# ------------------------------------------------------------- damage

def records_of(count: int) -> tuple[bytes, list[int]]:
    """A file of `count` job records; where each record starts."""
    source = logging_node()
    starts, data = [], HEADER
    for n in range(count):
        source.add_job(b"q", b"body-%d" % n, 1, 0, 60, 3600, 0, False)
        starts.append(len(data))
        data += source.aof.take()
    return data, starts


def test_a_torn_tail_stops_the_load_there_as_torn():
    data, starts = records_of(5)
    node = new_node()
    loader = load(data[:-3], node)
    assert (loader.status, loader.pos, loader.jobs) == (RECORD_TORN, starts[4], 4)
    reserved = data[:-3] + b"\0" * 100        # space the writer reserved: still the tail
    assert load(reserved, new_node()).status == RECORD_TORN


def test_damage_followed_by_data_stops_as_bad_at_its_offset():
    data, starts = records_of(5)
    broken = bytearray(data)
    broken[starts[2] + 60] ^= 0x55
    loader = load(bytes(broken), new_node())
    assert (loader.status, loader.pos, loader.jobs) == (RECORD_BAD, starts[2], 2)
    assert loader.problem == "record fails its checksum"


def test_a_job_record_that_does_not_parse_is_a_bad_job():
    data, starts = records_of(2)
    loader = load(data + aof_record(AOF_JOB, b"not a job"), new_node())
    assert (loader.status, loader.pos) == (LOAD_BAD_JOB, len(data))
    assert loader.problem.startswith("malformed job record (")


# ----------------------------------------------------- the service's verdicts

def service_over(tmp_path, data: bytes, truncated: bool = True) -> PersistenceService:
    node = new_node()
    config = Config()
    config.set(b"aof-load-truncated", b"yes" if truncated else b"no")
    server = ServerState(node, config)
    service = PersistenceService(node, config, server, lambda: False)
    service.path = str(tmp_path / "disque.aof")
    (tmp_path / "disque.aof").write_bytes(data)
    return service


def run_load(service: PersistenceService):
    service.begin_loading()
    try:
        return asyncio.run(service._load(enqueue=False))
    finally:
        service.end_loading()


def test_the_service_drops_a_torn_tail_and_cuts_the_file(tmp_path):
    data, starts = records_of(4)
    service = service_over(tmp_path, data[:-1])
    assert run_load(service) == (starts[3], aof_format.VERSION)
    assert service.dropped_torn_tail and len(service.node.jobs) == 3
    assert (tmp_path / "disque.aof").read_bytes() == data[:starts[3]]


@pytest.mark.parametrize("truncated", [True, False])
def test_the_service_refuses_damage_naming_its_offset(tmp_path, truncated):
    data, starts = records_of(4)
    if truncated:
        broken = bytearray(data)
        broken[starts[1] + 9] ^= 1
        data, expected = bytes(broken), f"record fails its checksum at byte offset {starts[1]}"
    else:
        data, expected = data[:-1], f"at byte offset {starts[3]} (aof-load-truncated is no)"
    with pytest.raises(StartupError, match="Bad file format") as refused:
        run_load(service_over(tmp_path, data, truncated))
    assert expected in str(refused.value)


def test_the_service_refuses_a_job_that_does_not_parse(tmp_path):
    data, _ = records_of(1)
    with pytest.raises(StartupError, match=f"Bad record in the AOF .* at byte offset {len(data)}"):
        run_load(service_over(tmp_path, data + aof_record(AOF_JOB, b"x" * 80)))


# ---------------------------------------------------------------- rewrite

def test_a_rewrite_of_every_state_loads_into_the_same_node(tmp_path):
    source = logging_node()
    fill(source)
    source.aof.take()
    walk = RewriteWalk(source.jobs)
    while not walk.walk(2):
        pass
    keys = source.dedup.items()
    walk.put_dedup_keys(keys, 1)
    walk.put_dedup_keys(keys, 10)
    assert keys == [] and (walk.walked, walk.written) == (len(source.jobs), 6)
    node = new_node()
    load(HEADER + walk.take(), node)
    same_state(state_of(source), state_of(node))


def test_the_rewrite_writes_its_file_in_blocks_and_finishes(tmp_path):
    source = logging_node()
    fill(source)
    writer = AofWriter(str(tmp_path / "disque.aof"), "everysec", None, source.aof)
    rewrite = writer.rewrite = Rewrite(writer, source.jobs, source.dedup.items())
    while not rewrite.step():
        pass
    rewrite.finish()
    data = (tmp_path / "disque.aof").read_bytes()
    assert data.startswith(HEADER)
    with open(tmp_path / "disque.aof", "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        node = new_node()
        load(mapped, node)
    same_state(state_of(source), state_of(node))
