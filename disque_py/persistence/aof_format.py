"""The append-only file's formats, and a reader that knows offsets.

Version 2, what this server writes, is binary: after the header (the RESP
array "DQPAOF 2") come records whose format, writer and reader are the
engine's (engine/aof/records.pxi: a job's state, a job gone, a DEDUP key
kept or forgotten, each with its checksum). records() gives each as the
version-1 record with the same meaning, so tools read both alike; the
loader replays version 2 in the engine.

Version 1, written by the previous release and still read, is a sequence
of RESP commands, replayed through the command table like commands from a
client (the loader's session may use LOADJOB); a node that loads one with
the AOF on rewrites it in version 2 before appending:

    DQPAOF 1                          header, always the first record
    LOADJOB <job> <crc32>             a job's full state (engine/model/wire.pxi's
                                      storage serialization, absolute expire
                                      time) and the CRC32 of those bytes, as
                                      8 hex digits
    DELJOB <job-id>                   the job is gone (acked, expired, deleted)
    DEDUP <queue> <key> <job-id> <ms> an ADDJOB ... DEDUP key remembered until
                                      <ms> (unix time), beyond its job's
                                      LOADJOB (engine/node/dedup.pxi)
    UNDEDUP <queue> <key> <job-id>    that key forgotten: its ADDJOB failed

Every record is an array of bulk strings with exact framing (each bulk is
followed by CRLF), one of the names above with its number of fields (a
DELJOB may name several jobs); anything else is damage, found by the reader
as the loader would find it (check-aof and the loader must agree). A reader reports, for damaged files, the byte offset of
the first record that cannot be read and whether the damage is a torn tail
(the file ends inside that record: a crash during a write) or corruption
followed by more data. Bytes of value 0 after the last record are free
space the writer reserved (fallocate) and mark the end; records are judged
against that end, so a record torn by a crash and followed by reserved
space is a torn tail, as it would be at the end of the file.

Upgrading the format means a new version number in the header; a reader
refuses versions it does not know, naming them. A file without a header
whose first record is Disque's is Disque 1.0's AOF: the reader hands its
jobs on in this format (disque_aof.py), so the loader replays one format.
"""

from __future__ import annotations

import zlib
from typing import Iterator, NamedTuple

from disque_py.engine import (AOF_DEDUP, AOF_GONE, AOF_JOB, AOF_VERSION, RECORD_OK,
                              RECORD_TORN, aof_record_at, is_valid_id, serialize_record)
from disque_py.persistence import disque_aof

HEADER_COMMAND = b"DQPAOF"
DEDUP = b"DEDUP"                # records the loader reads itself (no client command)
UNDEDUP = b"UNDEDUP"
VERSION = AOF_VERSION           # what this server writes
V1 = 1                          # the previous release's RESP records, still read
DISQUE = 0                      # file_version() of an AOF Disque 1.0 wrote
MAX_RECORD_ARGS = 8
RECORD_ARITY = {b"DELJOB": 2, DEDUP: 5, UNDEDUP: 4}     # fields, the name included
MAX_BULK = 600 * 1024 * 1024
_SCAN_CHUNK = 1 << 20           # bytes looked at per step when finding the data's end


class AofRecord(NamedTuple):
    offset: int             # where the record starts
    end: int                # where the next one starts
    argv: list[bytes]


class AofDamage(Exception):
    """A record that cannot be read at `offset`; `torn` if the file ends in it."""

    def __init__(self, offset: int, reason: str, torn: bool) -> None:
        super().__init__(f"{reason} at byte offset {offset}")
        self.offset = offset
        self.reason = reason
        self.torn = torn


def encode(*args: bytes) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        parts.append(b"$%d\r\n%b\r\n" % (len(arg), arg))
    return b"".join(parts)


HEADER = encode(HEADER_COMMAND, b"%d" % VERSION)
V1_HEADER = encode(HEADER_COMMAND, b"%d" % V1)


# Version 1's records (the previous release wrote them; tests build such files).

def load_job_record(serialized_job: bytes) -> bytes:
    return encode(b"LOADJOB", serialized_job, _crc(serialized_job))


def del_job_record(job_id: bytes) -> bytes:
    return encode(b"DELJOB", job_id)


def dedup_record(queue: bytes, key: bytes, job_id: bytes, until_ms: int) -> bytes:
    return encode(DEDUP, queue, key, job_id, b"%d" % until_ms)


def undedup_record(queue: bytes, key: bytes, job_id: bytes) -> bytes:
    return encode(UNDEDUP, queue, key, job_id)


def check_crc(serialized_job: bytes, crc: bytes) -> bool:
    return crc == _crc(serialized_job)


def _crc(serialized_job: bytes) -> bytes:
    return b"%08x" % zlib.crc32(serialized_job)


def records(data: bytes | memoryview) -> Iterator[AofRecord]:
    """Every record in `data`, header first; AofDamage at the first bad one.
    A file Disque wrote has no header, and its LOADJOBs come out in
    version 1's form (see disque_aof.py), as do version 2's records."""
    # Reserved zero bytes must not pass for a torn record's missing tail.
    end = data_end(data)
    if end == 0:
        raise AofDamage(0, "empty file: no header", torn=True)
    record = _read_record(data, 0, end)
    if disque_aof.is_disque_record(record.argv):
        yield from _disque_records(data, record, end)
        return
    if _check_header(record) == VERSION:
        yield record
        yield from v2_records(data, record.end, end)
        return
    while True:
        yield record
        if record.end >= end:
            return
        record = _read_record(data, record.end, end)
        problem = _record_problem(record.argv)
        if problem:
            raise AofDamage(record.offset, problem, torn=record.end >= end)


def _record_problem(argv: list[bytes]) -> str:
    """Why a well-framed record is not one this format writes ('' if it is):
    the loader would refuse it, so the reader (and check-aof) must too."""
    name = argv[0].upper()
    if name == b"LOADJOB":
        return "" if len(argv) == 3 and check_crc(argv[1], argv[2]) \
            else "LOADJOB record fails its checksum"
    arity = RECORD_ARITY.get(name)
    if arity is None:
        return "unknown record %r" % name.decode("latin-1")
    if len(argv) != arity and not (name == b"DELJOB" and len(argv) > 1):
        return "%s record with %d fields" % (name.decode(), len(argv))
    if name in (DEDUP, UNDEDUP) and not is_valid_id(argv[3]):
        return "%s record with a bad job ID" % name.decode()
    if name == DEDUP and not argv[4].isdigit():
        return "DEDUP record with a bad time"
    return ""


def written_by_disque(data: bytes | memoryview) -> bool:
    """Whether the file is an AOF of Disque 1.0 (no header, Disque's records)."""
    end = data_end(data)
    try:
        return end > 0 and disque_aof.is_disque_record(_read_record(data, 0, end).argv)
    except AofDamage:
        return False


def _disque_records(data, record: AofRecord, end: int) -> Iterator[AofRecord]:
    while True:
        argv = record.argv
        if not disque_aof.is_disque_record(argv):
            raise AofDamage(record.offset, "not a Disque LOADJOB or DELJOB record",
                            torn=False)
        if argv[0].upper() == disque_aof.LOADJOB:
            try:
                job = serialize_record(disque_aof.parse_job(argv[1]))
            except ValueError as error:
                raise AofDamage(record.offset, f"malformed LOADJOB ({error})",
                                torn=False) from None
            record = AofRecord(record.offset, record.end, [b"LOADJOB", job, _crc(job)])
        yield record
        if record.end >= end:
            return
        record = _read_record(data, record.end, end)


def data_end(data: bytes | memoryview) -> int:
    """Where the written data ends: the trailing zero bytes are reserved space."""
    end = len(data)
    while end:
        start = max(0, end - _SCAN_CHUNK)
        written = bytes(data[start:end]).rstrip(b"\0")
        if written:
            return start + len(written)
        end = start
    return 0


def file_version(data: bytes | memoryview) -> int:
    """The format of an AOF that records() reads: VERSION, V1 or DISQUE."""
    if written_by_disque(data):
        return DISQUE
    return _check_header(_read_record(data, 0, data_end(data)))


def records_start(data: bytes | memoryview, end: int) -> int | None:
    """Where a version-2 file's records start (after its header); None for
    a file of another format, or whose header cannot be read (records()
    reports why). `end`: where the written data ends (data_end)."""
    try:
        header = _read_record(data, 0, end)
        if disque_aof.is_disque_record(header.argv) or _check_header(header) != VERSION:
            return None
    except AofDamage:
        return None
    return header.end


def _check_header(record: AofRecord) -> int:
    """The version the header names, if this server reads it."""
    argv = record.argv
    if len(argv) != 2 or argv[0] != HEADER_COMMAND:
        raise AofDamage(0, "neither a disque-py AOF (no DQPAOF header) nor a Disque one",
                        torn=False)
    if argv[1] not in (b"%d" % V1, b"%d" % VERSION):
        raise AofDamage(0, "AOF format version %s is not supported (this server reads "
                        "versions %d and %d)" % (argv[1].decode("latin-1"), V1, VERSION),
                        torn=False)
    return int(argv[1])


def v2_records(data, pos: int = 0, end: int | None = None) -> Iterator[AofRecord]:
    """Version 2's records from `pos` (no header there: an AofLog's take(),
    or a file past its header) to `end` (the data's end: data_end() if
    None), each as version 1's record of the same meaning (check-aof, the
    simulation, tests: the loader reads them in the engine); AofDamage at
    the first bad one."""
    if end is None:
        end = data_end(data)
    while pos < end:
        status, kind, payload, next_pos = aof_record_at(data, pos, end)
        if status != RECORD_OK:
            raise AofDamage(pos, payload, torn=status == RECORD_TORN)
        yield AofRecord(pos, next_pos, _v1_argv(kind, payload))
        pos = next_pos


def _v1_argv(kind: int, payload: bytes) -> list[bytes]:
    if kind == AOF_JOB:
        return [b"LOADJOB", payload, _crc(payload)]
    if kind == AOF_GONE:
        return [b"DELJOB", payload]
    until_ms = int.from_bytes(payload[:8], "big")
    job_id = payload[8:48]
    queue_len = int.from_bytes(payload[48:52], "big")
    queue, key = payload[52:52 + queue_len], payload[52 + queue_len:]
    if kind == AOF_DEDUP:
        return [DEDUP, queue, key, job_id, b"%d" % until_ms]
    return [UNDEDUP, queue, key, job_id]


def _read_line_int(data, pos: int, end: int, prefix: int, limit: int) -> tuple[int, int]:
    """Parse `<prefix><digits>\\r\\n` at pos, before end; returns (value, next pos)."""
    if pos >= end:
        raise _Torn()
    if data[pos] != prefix:
        raise ValueError("expected %r" % chr(prefix))
    line_end = bytes(data[pos:min(pos + 24, end)]).find(b"\r\n")
    if line_end < 0:
        if end - pos < 24:
            raise _Torn()
        raise ValueError("bad length line")
    digits = bytes(data[pos + 1:pos + line_end])
    if not digits.isdigit() or int(digits) > limit:
        raise ValueError("bad length")
    return int(digits), pos + line_end + 2


class _Torn(Exception):
    pass


def _read_record(data, start: int, end: int) -> AofRecord:
    """The record at start, which must end by end (the end of the data)."""
    try:
        count, pos = _read_line_int(data, start, end, 0x2A, MAX_RECORD_ARGS)
        if count == 0:
            raise ValueError("empty record")
        argv = []
        for _ in range(count):
            length, pos = _read_line_int(data, pos, end, 0x24, MAX_BULK)
            if pos + length + 2 > end:
                raise _Torn()
            if bytes(data[pos + length:pos + length + 2]) != b"\r\n":
                raise ValueError("bulk not followed by CRLF")
            argv.append(bytes(data[pos:pos + length]))
            pos += length + 2
    except _Torn:
        raise AofDamage(start, "record cut short", torn=True) from None
    except ValueError as error:
        raise AofDamage(start, f"malformed record ({error})", torn=False) from None
    return AofRecord(start, pos, argv)
