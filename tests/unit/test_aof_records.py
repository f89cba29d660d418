"""The AOF reader (persistence/aof_format.records, which check-aof uses)
and the loader (server/persistence_service.py) must call the same files
damaged: a record the loader refuses that the reader calls valid leaves an
operator with a node that will not start and a check-aof --fix that cuts
nothing (issue 33, d730e6f). The reader is the one place that rule lives:
the loader reads through it. Here the well-framed records with a known
name but the wrong fields, read by the reader and by the loader as the
server loads a file at start."""

from __future__ import annotations

import pytest

from disque_py.persistence import aof_format
from tests.fuzz.aof import load      # a node loading a file as the server does at start

JOB_ID = b"D-1f452c41-hXUYhYS3B95g8be3V7Vu445g-05a1"
AFTER = aof_format.del_job_record(JOB_ID)       # so that the bad record is not a torn last one


WRONG_FIELDS = {
    "dedup-4-fields": aof_format.encode(aof_format.DEDUP, b"q", b"k", JOB_ID),
    "dedup-6-fields": aof_format.encode(aof_format.DEDUP, b"q", b"k", JOB_ID, b"5", b"x"),
    "dedup-time-not-a-number": aof_format.encode(aof_format.DEDUP, b"q", b"k", JOB_ID, b"5q"),
    "undedup-3-fields": aof_format.encode(aof_format.UNDEDUP, b"q", b"k"),
    "undedup-5-fields": aof_format.encode(aof_format.UNDEDUP, b"q", b"k", JOB_ID, b"5"),
    # One bit flipped in the job ID: the node's DEDUP table raised on it,
    # a traceback at start, while check-aof called the file valid.
    "dedup-bad-job-id": aof_format.dedup_record(b"q", b"k", b"E" + JOB_ID[1:], 5),
    "undedup-bad-job-id": aof_format.undedup_record(b"q", b"k", b"E" + JOB_ID[1:]),
}


@pytest.mark.parametrize("record", WRONG_FIELDS.values(), ids=WRONG_FIELDS.keys())
def test_a_known_record_with_the_wrong_fields_is_damage_to_reader_and_loader(record):
    data = aof_format.HEADER + record + AFTER
    with pytest.raises(aof_format.AofDamage) as found:
        list(aof_format.records(data))
    assert found.value.offset == len(aof_format.HEADER) and not found.value.torn
    assert load(data) is None


def test_a_deljob_without_a_job_id_is_damage_to_the_reader():
    # The server never writes one (a DELJOB record names its jobs). The
    # loader takes it (DELJOB with no ID is a command that deletes nothing):
    # here the reader is the stricter of the two, and --fix cuts from it.
    data = aof_format.HEADER + aof_format.encode(b"DELJOB") + AFTER
    with pytest.raises(aof_format.AofDamage, match="DELJOB record with 1 fields"):
        list(aof_format.records(data))


@pytest.mark.parametrize("record", [
    aof_format.dedup_record(b"q", b"k", JOB_ID, 5),
    aof_format.undedup_record(b"q", b"k", JOB_ID),
    aof_format.encode(b"DELJOB", JOB_ID, JOB_ID),          # a DELJOB may name several jobs
    # A bit flipped in a name's case: the same record to both (the loader
    # took only DEDUP in capitals, and refused a file check-aof called valid).
    aof_format.encode(b"dEDUP", b"q", b"k", JOB_ID, b"5"),
    aof_format.encode(b"uNDEDUP", b"q", b"k", JOB_ID),
], ids=["dedup", "undedup", "deljob-two-ids", "dedup-lower-case-bit", "undedup-lower-case-bit"])
def test_records_the_server_writes_or_a_case_bit_away_are_read_and_loaded(record):
    data = aof_format.HEADER + record + AFTER
    assert len(list(aof_format.records(data))) == 3
    assert load(data) is not None
