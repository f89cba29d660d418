"""A job's parsed fields, for the Python paths that want them.

A job's bytes on the bus (REPLJOB, YOURJOBS) and in the AOF have one
layout, with one packer and one parser, both in C (model/wire.pxi). A
JobRecord is what unpack_job gives Python: the fields of one job, for the
paths that read jobs one at a time (the AOF loader, federation's
YOURJOBS, Disque's AOF reader), never for the hot paths.
"""

from __future__ import annotations

from typing import NamedTuple

from disque_py.engine._core import pack_job, unpack_job


class JobRecord(NamedTuple):
    id: bytes
    state: int
    flags: int
    repl: int
    ctime: int
    etime: int
    delay: int
    retry: int
    nacks: int
    deliveries: int
    queue: bytes
    body: bytes | None
    delivered: tuple
    options: tuple | None = None      # option_fields(): its options block, if it has one


# Where JobOptions.fields() puts the DEDUP pair (model/options.pxi).
DEDUP_KEY_FIELD, DEDUP_UNTIL_FIELD, DEDUP_QUEUE_FIELD = 7, 8, 9

# JobRecord(...) runs namedtuple's __new__, a Python function; the loader
# builds the tuple directly (the same object).
_new_tuple = tuple.__new__


def serialize_record(record: JobRecord) -> bytes:
    """A parsed job's bytes again (absolute expire time: for the AOF)."""
    return pack_job(*record)


def deserialize_job(data: bytes, now_s: int | None = None) -> JobRecord:
    """Parse serialize_job's bytes; with `now_s`, a message's relative time
    becomes absolute. ValueError on anything malformed."""
    return _new_tuple(JobRecord, unpack_job(data, now_s))


def deserialize_jobs(blobs, now_s: int):
    """The jobs of a message (YOURJOBS), parsed in order; stops at the first
    malformed one, whose frame is not trusted any further."""
    for data in blobs:
        try:
            yield deserialize_job(data, now_s)
        except ValueError:
            return
