"""Reading the AOF of Disque 1.0-rc1 (persistence/disque_aof.py and the
reader in aof_format.py), against files the real Disque wrote.

tests/persistence/data/ holds two files from a lone Disque 1.0-rc1 node
(ID ac62de30...), made with redis-cli: ADDJOB q1 body-one; ADDJOB q1
body-two RETRY 0; ADDJOB q2 delayed DELAY 3600 TTL 7200; ADDJOB q2
"bin\\x01\\x02x" TTL 86400 RETRY 120; ADDJOB q3 acked + ACKJOB; ADDJOB q3
working + GETJOB + NACK + GETJOB; ADDJOB q4 deleted + DELJOB.
disque-1.0-rc1-live.aof is the AOF as it grew (appendfsync always);
disque-1.0-rc1-rewritten.aof is what SHUTDOWN REWRITE-AOF left after
CONFIG SET aof-enqueue-jobs-once yes. The expected values are what SHOW
answered on that node.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from disque_py.engine import ACTIVE, QUEUED, JobRecord, deserialize_job
from disque_py.persistence import aof_format, disque_aof
from tests.persistence import disque_files

DATA = Path(__file__).parent.parent / "persistence" / "data"
NODE = b"ac62de303955b22bd7d90fc22bb35203e032b33a"
BODY_ONE = b"D-ac62de30-IO8KCiGWVvt+/vlQULcW1kqy-05a1"
BODY_TWO = b"D-ac62de30-7i0BAU229g4UlAGlZQzkJLmb-05a0"
DELAYED = b"D-ac62de30-kI7tLd5wsHrQkEmFRX2MTOAf-0079"
BINARY = b"D-ac62de30-16QGRhNJSZsgIKFbW6kYmDkN-05a1"
WORKING = b"D-ac62de30-SzItrVPICHdPT9CR0fJRUSIS-05a1"
ACKED = b"D-ac62de30-96tUVASDA3lv76HEhNjExC0T-05a1"
DELETED = b"D-ac62de30-QKI/P2Mv7+ADwyC0tHC0tK8O-05a1"


def _read(name: str) -> bytes:
    return (DATA / f"disque-1.0-rc1-{name}.aof").read_bytes()


def _jobs(data: bytes) -> dict[bytes, JobRecord]:
    jobs = {}
    for record in aof_format.records(data):
        if record.argv[0] == b"LOADJOB":
            job = deserialize_job(record.argv[1])
            jobs[job.id] = job
    return jobs


def test_the_rewritten_file_of_a_controlled_restart_reads_as_the_jobs_show_showed():
    data = _read("rewritten")
    assert aof_format.written_by_disque(data)
    jobs = _jobs(data)
    assert set(jobs) == {BODY_ONE, BODY_TWO, DELAYED, BINARY, WORKING}
    one = jobs[BODY_ONE]
    assert (one.state, one.queue, one.body, one.repl) == (QUEUED, b"q1", b"body-one", 1)
    assert (one.ctime, one.delay, one.retry) == (1795292924623000000, 0, 300)
    assert one.delivered == (NODE,)
    assert jobs[BODY_TWO].retry == 0 and jobs[BODY_TWO].state == QUEUED
    delayed = jobs[DELAYED]
    assert (delayed.state, delayed.delay, delayed.etime - one.etime) == (ACTIVE, 3600, -79200)
    assert jobs[BINARY].body == b"bin\x01\x02x" and jobs[BINARY].retry == 120
    working = jobs[WORKING]
    assert (working.state, working.nacks, working.deliveries) == (ACTIVE, 1, 0)


def test_the_live_file_keeps_its_order_and_its_deljobs():
    records = list(aof_format.records(_read("live")))
    kinds = [(r.argv[0], deserialize_job(r.argv[1]).id if r.argv[0] == b"LOADJOB"
              else r.argv[1]) for r in records]
    assert kinds == [(b"LOADJOB", BODY_ONE), (b"LOADJOB", BODY_TWO), (b"LOADJOB", DELAYED),
                     (b"LOADJOB", BINARY), (b"LOADJOB", ACKED), (b"DELJOB", ACKED),
                     (b"LOADJOB", WORKING), (b"LOADJOB", DELETED), (b"DELJOB", DELETED)]
    # Translated records carry this server's checksum, as its own file would.
    assert all(aof_format.check_crc(r.argv[1], r.argv[2])
               for r in records if r.argv[0] == b"LOADJOB")


@pytest.mark.parametrize("name", ["rewritten", "live"])
def test_the_tests_encoder_writes_the_same_bytes_as_disque(name):
    data = _read(name)
    rebuilt = b""
    for record in aof_format.records(data):
        if record.argv[0] == b"DELJOB":
            rebuilt += disque_files.deljob_record(record.argv[1])
            continue
        job = deserialize_job(record.argv[1])
        rebuilt += disque_files.loadjob_record(disque_files.DisqueJob(
            id=job.id, queue=job.queue, body=job.body, etime=job.etime, ctime=job.ctime,
            state=job.state, flags=job.flags, repl=job.repl, delay=job.delay,
            retry=job.retry, nacks=job.nacks, deliveries=job.deliveries,
            holders=list(job.delivered)))
    assert rebuilt == data


def _job(**overrides) -> disque_files.DisqueJob:
    fields = dict(id=BODY_ONE, queue=b"q", body=b"b", etime=2_000_000_000,
                  ctime=1795292924623000000)
    fields.update(overrides)
    return disque_files.DisqueJob(**fields)


def test_the_gc_retry_bits_beside_the_state_are_dropped():
    job = disque_aof.parse_job(disque_files.serialize(_job(state=ACTIVE, gc_retry=5)))
    assert job.state == ACTIVE


def test_a_job_with_no_queue_and_many_holders_reads():
    holders = [b"%040x" % n for n in range(9)]
    job = disque_aof.parse_job(disque_files.serialize(_job(queue=b"", holders=holders)))
    assert job.queue == b"" and job.delivered == tuple(holders)


@pytest.mark.parametrize("damage", [
    lambda blob: blob[:-1],                                  # shorter than its fields
    lambda blob: blob + b"x",                                # longer than its fields
    lambda blob: b"\x00\x00\x00\x00" + blob[4:],             # length prefix wrong
    lambda blob: blob[:4] + b"X" + blob[5:],                 # not a job ID
    lambda blob: blob[:44] + b"\x05" + blob[45:],            # no such state
    lambda blob: blob[:20],                                  # truncated fixed part
])
def test_a_malformed_disque_job_is_refused(damage):
    blob = disque_files.serialize(_job())
    with pytest.raises(ValueError):
        disque_aof.parse_job(damage(blob))


def test_a_malformed_job_in_the_middle_is_corruption_at_its_offset():
    good = disque_files.loadjob_record(_job())
    bad = disque_files.resp_array(b"LOADJOB", disque_files.serialize(_job())[:-3])
    with pytest.raises(aof_format.AofDamage) as caught:
        list(aof_format.records(good + bad + good))
    assert (caught.value.offset, caught.value.torn) == (len(good), False)


def test_a_disque_file_cut_inside_its_last_record_is_a_torn_tail():
    good = disque_files.loadjob_record(_job())
    with pytest.raises(aof_format.AofDamage) as caught:
        list(aof_format.records(good + good[:-7]))
    assert (caught.value.offset, caught.value.torn) == (len(good), True)


def test_a_record_disque_never_writes_is_corruption():
    good = disque_files.loadjob_record(_job())
    with pytest.raises(aof_format.AofDamage) as caught:
        list(aof_format.records(good + disque_files.resp_array(b"ADDJOB", b"q", b"x", b"0")))
    assert (caught.value.offset, caught.value.torn) == (len(good), False)


def test_a_file_of_neither_kind_is_refused_at_offset_zero():
    data = disque_files.resp_array(b"SET", b"k", b"v")
    assert not aof_format.written_by_disque(data)
    with pytest.raises(aof_format.AofDamage) as caught:
        list(aof_format.records(data))
    assert caught.value.offset == 0 and "Disque" in caught.value.reason
