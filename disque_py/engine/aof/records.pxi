# The AOF's records, format version 2: one writer and one reader, in C.
#
# After the header (a RESP array "DQPAOF 2", as version 1's, so an older
# reader names the version it does not know), the file is a sequence of
# binary records:
#
#     kind (1 byte) | payload length (u32) | payload | checksum (u32)
#
# integers big-endian, the checksum the low 32 bits of xxHash's XXH3-64
# over the kind, the length and the payload (zlib's CRC-32 cost 9% of a
# node's CPU under pipelined ADDJOBs; XXH3 is some ten times faster on
# records this short and detects damage as well). Kinds and payloads:
#
#     'J' AOF_JOB      a job's wire bytes (model/wire.pxi), expire time
#                      absolute, local flags kept: the job's whole state
#     'D' AOF_GONE     the 40-byte ID of a job that is gone (acked,
#                      expired, deleted)
#     'K' AOF_DEDUP    until-ms (u64) | job ID (40) | queue length (u32) |
#                      queue | key (the rest): a DEDUP key remembered
#                      until that unix time, beyond its job's 'J' record
#     'U' AOF_UNDEDUP  the same with until-ms 0: that key is forgotten
#
# A queued job with a 100-byte body on one node is 232 bytes (version 1's
# RESP records took 262; Disque 1.0's take 239). Version 1 files are still
# read (persistence/aof_format.py), and rewritten in this version.
#
# Reading (read_record) judges each record against two ends: the end of
# the written data (`data_end`: trailing zero bytes are space the writer
# reserved) and the end of the file. A record whose checksum fails, or that
# runs past the file, or whose head is cut, is torn when no written byte
# follows it (a crash during a write) and damage otherwise; an unknown
# kind or an impossible length before the end of the data is damage.

cdef extern from *:
    """
    #define XXH_INLINE_ALL
    #include <xxhash.h>
    """
    uint64_t XXH3_64bits(const void* data, size_t length) nogil


cdef inline uint32_t _record_checksum(const char* record, Py_ssize_t length) noexcept nogil:
    """The checksum of a record's head and payload (`length`: the payload's)."""
    return <uint32_t>XXH3_64bits(record, <size_t>(AOF_RECORD_HEAD + length))


cdef inline char* _open_record(WriteBuffer out, int kind, Py_ssize_t length) except NULL:
    """Room for a record of `length` payload bytes at the buffer's end:
    its head written, the payload's place returned (_close_record ends it)."""
    cdef char* at
    if out.size + length + AOF_RECORD_OVERHEAD > out.capacity:
        out._grow(length + AOF_RECORD_OVERHEAD)
    at = out.data + out.size
    at[0] = <char>kind
    _put_be(at + 1, <uint64_t>length, 4)
    return at + AOF_RECORD_HEAD


cdef inline int _close_record(WriteBuffer out, Py_ssize_t length) noexcept:
    cdef char* record = out.data + out.size
    _put_be(record + AOF_RECORD_HEAD + length, _record_checksum(record, length), 4)
    out.size += length + AOF_RECORD_OVERHEAD
    return 0


cdef int put_job_record(WriteBuffer out, Job job) except -1:
    """A 'J' record of the job's state as it is now (absolute expire time,
    its options in the newest block version)."""
    cdef JobFields fields
    cdef DedupFields dedup
    cdef Py_ssize_t length
    cdef char* at
    job_fields(job, -1, OPTIONS_LATEST if job.options_ != NULL or job.dedup_ != NULL else 0,
               &fields, &dedup)
    length = wire_size(&fields)
    at = _open_record(out, AOF_JOB, length)
    write_wire(at, &fields)
    return _close_record(out, length)


cdef int put_gone_record(WriteBuffer out, const char* job_id) except -1:
    memcpy(_open_record(out, AOF_GONE, JOB_ID_LEN), job_id, JOB_ID_LEN)
    return _close_record(out, JOB_ID_LEN)


cdef int put_dedup_record(WriteBuffer out, int kind, bytes queue, const char* key,
                          Py_ssize_t key_len, const char* job_id, int64_t until_ms) except -1:
    """A 'K' record (kind AOF_DEDUP) or a 'U' one (AOF_UNDEDUP: until_ms 0)."""
    cdef Py_ssize_t queue_len = PyBytes_GET_SIZE(queue)
    cdef Py_ssize_t length = AOF_DEDUP_FIXED + queue_len + key_len
    cdef char* at = _open_record(out, kind, length)
    at = _put_be(at, <uint64_t>(until_ms if kind == AOF_DEDUP else 0), 8)
    memcpy(at, job_id, JOB_ID_LEN)
    at = _put_be(at + JOB_ID_LEN, <uint64_t>queue_len, 4)
    memcpy(at, PyBytes_AS_STRING(queue), queue_len)
    memcpy(at + queue_len, key, key_len)
    return _close_record(out, length)


cdef inline int _cut(AofRecordView* record, Py_ssize_t claimed_end, Py_ssize_t data_end,
                     const char* problem) noexcept:
    """A record that cannot be read: torn if no written byte follows it."""
    record.problem = problem
    return RECORD_TORN if claimed_end >= data_end else RECORD_BAD


cdef int read_record(const char* data, Py_ssize_t pos, Py_ssize_t data_end,
                     Py_ssize_t file_end, AofRecordView* record) noexcept:
    """The record at `pos` (< data_end): RECORD_OK with `record` filled, or
    RECORD_TORN / RECORD_BAD with record.problem set."""
    cdef int kind
    cdef uint64_t length
    if pos + AOF_RECORD_HEAD > file_end:
        return _cut(record, file_end, data_end, "record cut short")
    kind = (<const unsigned char*>data)[pos]
    if kind != AOF_JOB and kind != AOF_GONE and kind != AOF_DEDUP and kind != AOF_UNDEDUP:
        record.problem = "unknown record kind"
        return RECORD_BAD
    length = _get_be(data + pos + 1, 4)
    if length > AOF_MAX_PAYLOAD:
        record.problem = "record length out of range"
        return RECORD_BAD
    record.end = pos + AOF_RECORD_OVERHEAD + <Py_ssize_t>length
    if record.end > file_end:
        return _cut(record, record.end, data_end, "record cut short")
    if _get_be(data + record.end - 4, 4) != _record_checksum(data + pos, <Py_ssize_t>length):
        return _cut(record, record.end, data_end, "record fails its checksum")
    record.kind = kind
    record.payload = data + pos + AOF_RECORD_HEAD
    record.length = <Py_ssize_t>length
    if kind == AOF_GONE and (length != JOB_ID_LEN or not id_is_valid(record.payload, length)):
        record.problem = "'D' record without a job ID"
        return RECORD_BAD
    if (kind == AOF_DEDUP or kind == AOF_UNDEDUP) and \
            (length < AOF_DEDUP_FIXED or not id_is_valid(record.payload + 8, JOB_ID_LEN)
             or _get_be(record.payload + 48, 4) > length - AOF_DEDUP_FIXED):
        record.problem = "DEDUP record with bad fields"
        return RECORD_BAD
    record.problem = NULL
    return RECORD_OK


cdef int parse_dedup_record(AofRecordView* record, DedupRecord* out) noexcept:
    """The fields of a 'K' or 'U' record read_record accepted."""
    cdef const char* at = record.payload
    out.until_ms = <int64_t>_get_be(at, 8)
    out.job_id = at + 8
    out.queue_len = <Py_ssize_t>_get_be(at + 48, 4)
    out.queue = at + AOF_DEDUP_FIXED
    out.key = out.queue + out.queue_len
    out.key_len = record.length - AOF_DEDUP_FIXED - out.queue_len
    return 0


def aof_record_at(data, Py_ssize_t pos, Py_ssize_t data_end):
    """The version-2 record at `pos` of `data` (a buffer): (RECORD_OK, kind,
    payload, end), or (RECORD_TORN or RECORD_BAD, 0, problem, 0). For the
    Python reader (check-aof, tests); the loader reads in C."""
    cdef const unsigned char[::1] view = data
    cdef AofRecordView record
    cdef int status
    if pos < 0 or pos >= view.shape[0]:
        raise ValueError("position outside the data")
    status = read_record(<const char*>&view[0], pos, data_end, view.shape[0], &record)
    if status != RECORD_OK:
        return status, 0, record.problem.decode(), 0
    return status, record.kind, PyBytes_FromStringAndSize(record.payload, record.length), \
        record.end


def aof_record(int kind, bytes payload):
    """One version-2 record of `kind` around `payload` (tests, tools)."""
    cdef WriteBuffer out = WriteBuffer.__new__(WriteBuffer)
    cdef Py_ssize_t length = PyBytes_GET_SIZE(payload)
    memcpy(_open_record(out, kind, length), PyBytes_AS_STRING(payload), length)
    _close_record(out, length)
    return out.take()


def aof_job_record(Job job):
    """The 'J' record AofLog writes for the job as it is now (the rewrite's)."""
    cdef WriteBuffer out = WriteBuffer.__new__(WriteBuffer)
    put_job_record(out, job)
    return out.take()


def aof_dedup_record(int kind, bytes queue, bytes key, bytes job_id, int64_t until_ms):
    """A 'K' record (AOF_DEDUP) or a 'U' one (AOF_UNDEDUP) of a DEDUP key
    (the rewrite's, tests')."""
    cdef WriteBuffer out = WriteBuffer.__new__(WriteBuffer)
    if PyBytes_GET_SIZE(job_id) != JOB_ID_LEN:
        raise ValueError("a job ID has 40 bytes")
    put_dedup_record(out, kind, queue, PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key),
                     PyBytes_AS_STRING(job_id), until_ms)
    return out.take()
