"""The AOF reader (persistence/aof_format.records, which check-aof uses)
and the loader (server/persistence_service.py) must call the same files
damaged: a record the loader refuses that the reader calls valid leaves an
operator with a node that will not start and a check-aof --fix that cuts
nothing (issue 33, d730e6f). The reader is the one place that rule lives:
the loader reads through it. Here, in version 1 (the previous release's
RESP records, still read), the well-framed records with a known name but
the wrong fields; in version 2 (the engine's binary records), torn tails,
checksums, kinds and fields; each read by the reader, by check-aof and by
the loader as the server loads a file at start."""

from __future__ import annotations

import pytest

from disque_py.engine import AOF_DEDUP, AOF_GONE, AOF_UNDEDUP, aof_dedup_record, aof_record
from disque_py.persistence import aof_format
from disque_py.persistence.check import check_file
from tests.fuzz.aof import load      # a node loading a file as the server does at start

JOB_ID = b"D-1f452c41-hXUYhYS3B95g8be3V7Vu445g-05a1"
AFTER = aof_format.del_job_record(JOB_ID)       # so that the bad record is not a torn last one
V1_HEADER = aof_format.V1_HEADER


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
    data = V1_HEADER + record + AFTER
    with pytest.raises(aof_format.AofDamage) as found:
        list(aof_format.records(data))
    assert found.value.offset == len(V1_HEADER) and not found.value.torn
    assert load(data) is None


def test_a_deljob_without_a_job_id_is_damage_to_the_reader():
    # The server never writes one (a DELJOB record names its jobs). The
    # loader takes it (DELJOB with no ID is a command that deletes nothing):
    # here the reader is the stricter of the two, and --fix cuts from it.
    data = V1_HEADER + aof_format.encode(b"DELJOB") + AFTER
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
def test_records_the_server_wrote_or_a_case_bit_away_are_read_and_loaded(record):
    data = V1_HEADER + record + AFTER
    assert len(list(aof_format.records(data))) == 3
    assert load(data) is not None


# ------------------------------------------------------------------ version 2

HEADER = aof_format.HEADER
GONE = aof_record(AOF_GONE, JOB_ID)


def dedup(key: bytes = b"k", job_id: bytes = JOB_ID, kind: int = AOF_DEDUP) -> bytes:
    return aof_dedup_record(kind, b"q", key, job_id, 5)


def read(tmp_path, data: bytes):
    """What the reader, check-aof and the loader make of a file: (the
    records read, the damage or None), after checking they agree."""
    found, damage = [], None
    try:
        for record in aof_format.records(data):
            found.append(record)
    except aof_format.AofDamage as error:
        damage = error
    path = tmp_path / "appendonly.aof"
    path.write_bytes(data)
    count, end, checked = check_file(str(path))
    assert count == len(found) and end == (found[-1].end if found else 0)
    assert (checked.offset, checked.torn) == (damage.offset, damage.torn) if damage \
        else checked is None
    loaded = load(data)
    assert (loaded is None) == (damage is not None and not damage.torn)
    return found, damage


def test_version_2_records_read_in_version_1_form(tmp_path):
    data = HEADER + dedup() + dedup(kind=AOF_UNDEDUP) + GONE
    found, damage = read(tmp_path, data)
    assert damage is None
    assert [record.argv for record in found[1:]] == [
        [aof_format.DEDUP, b"q", b"k", JOB_ID, b"5"], [aof_format.UNDEDUP, b"q", b"k", JOB_ID],
        [b"DELJOB", JOB_ID]]
    assert found[-1].end == len(data)


@pytest.mark.parametrize("reserved", [0, 4096], ids=["at-the-end", "before-reserved-zeros"])
@pytest.mark.parametrize("cut", [1, 3, 20, -1], ids=["kind", "length", "payload", "crc"])
def test_a_version_2_record_cut_short_is_a_torn_tail(tmp_path, reserved, cut):
    whole = dedup(b"torn")
    data = HEADER + GONE + whole[:cut] + bytes(reserved)
    found, damage = read(tmp_path, data)
    assert damage.torn and damage.offset == len(HEADER + GONE)
    assert len(found) == 2


def test_a_checksum_failure_followed_by_data_is_damage(tmp_path):
    bad = bytearray(GONE)
    bad[-1] ^= 1
    found, damage = read(tmp_path, HEADER + bytes(bad) + GONE)
    assert not damage.torn and damage.offset == len(HEADER)
    assert "checksum" in damage.reason
    found, damage = read(tmp_path, HEADER + GONE + bytes(bad) + bytes(100))
    assert damage.torn and damage.offset == len(HEADER + GONE)    # the last one: torn


def _dedup_whose_crc_ends_in_zeros(zeros: int) -> bytes:
    """A 'K' record whose checksum's last `zeros` bytes are 0 (found by key)."""
    for n in range(1 << 20):
        record = dedup(b"key-%d" % n)
        if record.endswith(bytes(zeros)):
            return record
    raise AssertionError("no key found")


@pytest.mark.parametrize("zeros", [1, 2])
def test_a_last_record_whose_checksum_ends_in_zeros_is_whole_before_reserved_space(tmp_path,
                                                                                    zeros):
    # Reserved space is zeros, and so is the end of that checksum: the data's
    # end (aof_format.data_end) falls inside the record, which is whole.
    record = _dedup_whose_crc_ends_in_zeros(zeros)
    for reserved in (0, 4096):
        data = HEADER + GONE + record + bytes(reserved)
        assert aof_format.data_end(data) < len(HEADER + GONE + record)
        found, damage = read(tmp_path, data)
        assert damage is None and found[-1].argv[0] == aof_format.DEDUP
        assert found[-1].end == len(HEADER + GONE + record)


BAD_RECORDS = {
    "unknown-kind": aof_record(ord("X"), JOB_ID),
    "gone-bad-id": aof_record(AOF_GONE, b"E" + JOB_ID[1:]),
    "gone-short-id": aof_record(AOF_GONE, JOB_ID[:-1]),
    "dedup-too-short": aof_record(AOF_DEDUP, bytes(51)),
    "dedup-bad-job-id": dedup(job_id=b"E" + JOB_ID[1:]),
    "undedup-bad-job-id": dedup(job_id=b"E" + JOB_ID[1:], kind=AOF_UNDEDUP),
    "dedup-queue-past-the-end": aof_record(AOF_DEDUP, bytes(8) + JOB_ID + (9).to_bytes(4, "big")
                                           + b"q" * 8),
}


@pytest.mark.parametrize("record", BAD_RECORDS.values(), ids=BAD_RECORDS.keys())
def test_a_version_2_record_of_a_bad_kind_or_fields_is_damage_to_reader_and_loader(tmp_path,
                                                                                   record):
    found, damage = read(tmp_path, HEADER + record + GONE)
    assert damage.offset == len(HEADER) and not damage.torn
    assert len(found) == 1


def test_a_version_2_record_of_an_unknown_kind_is_damage_even_last(tmp_path):
    found, damage = read(tmp_path, HEADER + GONE + BAD_RECORDS["unknown-kind"])
    assert not damage.torn and damage.offset == len(HEADER + GONE)
