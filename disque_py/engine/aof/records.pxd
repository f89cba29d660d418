# The AOF's records, format version 2 (records.pxi).

cpdef enum:
    AOF_VERSION = 2                    # the header's version: what this engine writes
    AOF_JOB = 0x4A                     # 'J': a job's whole state (its wire bytes)
    AOF_GONE = 0x44                    # 'D': a job is gone (its 40-byte ID)
    AOF_DEDUP = 0x4B                   # 'K': a DEDUP key kept beyond its job's record
    AOF_UNDEDUP = 0x55                 # 'U': that key forgotten (its ADDJOB failed)
    AOF_RECORD_HEAD = 5                # kind (1 byte), payload length (4)
    AOF_RECORD_OVERHEAD = 9            # the head and the checksum (4) after the payload
    AOF_DEDUP_FIXED = 52               # until-ms (8), job ID (40), queue length (4)
    AOF_MAX_PAYLOAD = 600 * 1024 * 1024
    # What read_record found
    RECORD_OK = 0
    RECORD_TORN = 1                    # the data ends inside it: a crash during a write
    RECORD_BAD = 2                     # damage followed by more data


cdef struct AofRecordView:
    int kind
    const char* payload
    Py_ssize_t length
    Py_ssize_t end                     # where the next record starts
    const char* problem                # why it is not OK (a static string)


cdef struct DedupRecord:
    int64_t until_ms                   # 0 for an UNDEDUP record
    const char* job_id
    const char* queue
    Py_ssize_t queue_len
    const char* key
    Py_ssize_t key_len


cdef int put_job_record(WriteBuffer out, Job job) except -1
cdef int put_gone_record(WriteBuffer out, const char* job_id) except -1
cdef int put_dedup_record(WriteBuffer out, int kind, bytes queue, const char* key,
                          Py_ssize_t key_len, const char* job_id, int64_t until_ms) except -1
cdef int read_record(const char* data, Py_ssize_t pos, Py_ssize_t data_end,
                     Py_ssize_t file_end, AofRecordView* record) noexcept
cdef int parse_dedup_record(AofRecordView* record, DedupRecord* out) noexcept
