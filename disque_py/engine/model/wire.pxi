# A job's bytes: on the cluster bus (REPLJOB, YOURJOBS) and in the AOF.
#
#   40 bytes ID, u8 state, u8 flags, u16 repl, u64 ctime, i64 expire time,
#   u32 delay, u32 retry, u16 nacks, u16 additional deliveries,
#   u32 queue name length + name, u32 body length + body (NO_BODY for an
#   ack without body), u16 node count + 40-byte node IDs that may have it,
#   then, only for a job that has options beyond Disque, their block
#   (options.pxi; a node that does not read it is never sent one).
#
# Integers are big-endian. For a message the expire time is the TTL left
# (seconds, at least 1), so nodes need not agree on the clock, and the
# DELIVERED flag (a fact about this node) is not sent; on disk the expire
# time is absolute, and the flags a node keeps for itself (LOCAL_FLAGS) are
# written (a restart keeps them) while a message never carries them. One packer and one parser, in C: a replica makes its copy
# straight from the parsed fields, with no Python record between.

cdef inline uint64_t _get_be(const char* at, int size) noexcept:
    cdef uint64_t value = 0
    cdef int i
    for i in range(size):
        value = (value << 8) | (<const unsigned char*>at)[i]
    return value


cdef inline char* _put_be(char* at, uint64_t value, int size) noexcept:
    cdef int i
    for i in range(size - 1, -1, -1):
        at[i] = <char>(value & 0xFF)
        value >>= 8
    return at + size


cdef int parse_wire(const char* data, Py_ssize_t size, WireJob* job) except -1:
    """Read a serialized job; ValueError on anything malformed."""
    cdef Py_ssize_t pos = WIRE_FIXED
    cdef uint64_t body_len
    if size < WIRE_FIXED:
        raise ValueError("truncated job")
    job.id = data
    job.state = <unsigned char>data[40]
    job.flags = <unsigned char>data[41]
    job.repl = <int>_get_be(data + 42, 2)
    job.ctime = _get_be(data + 44, 8)
    job.etime = <int64_t>_get_be(data + 52, 8)
    job.delay = <uint32_t>_get_be(data + 60, 4)
    job.retry = <uint32_t>_get_be(data + 64, 4)
    job.nacks = <uint32_t>_get_be(data + 68, 2)
    job.deliveries = <uint32_t>_get_be(data + 70, 2)
    job.queue_len = <Py_ssize_t>_get_be(data + 72, 4)
    if job.queue_len > size - pos - 4:
        raise ValueError("job length does not match its fields")
    job.queue = data + pos
    pos += job.queue_len
    body_len = _get_be(data + pos, 4)
    pos += 4
    if body_len == NO_BODY:
        job.body, job.body_len = NULL, 0
    else:
        if <Py_ssize_t>body_len > size - pos - 2:
            raise ValueError("job length does not match its fields")
        job.body, job.body_len = data + pos, <Py_ssize_t>body_len
        pos += job.body_len
    if size - pos < 2:
        raise ValueError("truncated job")
    job.node_count = <Py_ssize_t>_get_be(data + pos, 2)
    pos += 2
    job.nodes = data + pos
    if size - pos < job.node_count * NODE_ID_LEN:
        raise ValueError("job length does not match its fields")
    pos += job.node_count * NODE_ID_LEN
    job.options, job.options_len = NULL, size - pos
    if size > pos:
        job.options = data + pos
    if not id_is_valid(job.id, JOB_ID_LEN) or job.state > ACKED:
        raise ValueError("bad job ID or state")
    return 0


cdef inline JobOptions _options_of(JobFields* job):
    return <JobOptions>job.options if job.options != NULL else None


cdef Py_ssize_t wire_size(JobFields* job) noexcept:
    """How many bytes write_wire writes for `job`."""
    return WIRE_FIXED + job.queue_len + 4 + job.body_len + 2 + \
        PyTuple_GET_SIZE(<object>job.delivered) * NODE_ID_LEN + \
        options_size(_options_of(job), job.dedup, job.version)


cdef char* write_wire(char* at, JobFields* job) except NULL:
    """Write the job's bytes (wire_size of them) at `at`; returns their end.
    ValueError for a node ID that is not 40 bytes (nothing else can fail)."""
    cdef tuple delivered = <tuple>job.delivered
    cdef Py_ssize_t node_count = PyTuple_GET_SIZE(delivered), i
    memcpy(at, job.id, JOB_ID_LEN)
    at += JOB_ID_LEN
    at = _put_be(at, job.state, 1)
    at = _put_be(at, job.flags, 1)
    at = _put_be(at, job.repl, 2)
    at = _put_be(at, job.ctime, 8)
    at = _put_be(at, <uint64_t>job.etime, 8)
    at = _put_be(at, job.delay, 4)
    at = _put_be(at, job.retry, 4)
    at = _put_be(at, job.nacks if job.nacks < COUNTER_MAX else COUNTER_MAX, 2)
    at = _put_be(at, job.deliveries if job.deliveries < COUNTER_MAX else COUNTER_MAX, 2)
    at = _put_be(at, job.queue_len, 4)
    memcpy(at, job.queue, job.queue_len)
    at += job.queue_len
    at = _put_be(at, NO_BODY if job.body == NULL else job.body_len, 4)
    if job.body != NULL:
        memcpy(at, job.body, job.body_len)
        at += job.body_len
    at = _put_be(at, node_count, 2)
    for i in range(node_count):
        node = <object>PyTuple_GET_ITEM(delivered, i)
        if PyBytes_GET_SIZE(node) != NODE_ID_LEN:
            raise ValueError("a node ID has 40 bytes")
        memcpy(at, PyBytes_AS_STRING(node), NODE_ID_LEN)
        at += NODE_ID_LEN
    if job.version:
        at = pack_options(at, _options_of(job), job.dedup, job.version)
    return at


cdef bytes pack_wire(JobFields* job):
    """The job's bytes, as a new bytes object."""
    cdef bytes out = PyBytes_FromStringAndSize(NULL, wire_size(job))
    write_wire(PyBytes_AS_STRING(out), job)
    return out


cdef JobFields* job_fields(Job job, int64_t now_s, int readable, JobFields* out,
                           DedupFields* dedup) noexcept:
    """The fields to serialize `job` with (`dedup`: storage for its key);
    now_s >= 0: for a message (relative expire time). Its options in the
    newest block version up to `readable` (0: none)."""
    cdef JobOptions options = <JobOptions>job.options_ if job.options_ != NULL else None
    out.id = job.id_
    out.state = job.state
    out.flags = job.flags
    out.repl = job.repl
    out.ctime = job.ctime
    out.etime = job.etime
    if now_s >= 0:
        out.etime = out.etime - now_s + 1
        if out.etime < 1:
            out.etime = 1
        out.flags &= ~LOCAL_FLAGS
    out.delay, out.retry, out.nacks, out.deliveries = job.delay, job.retry, job.nacks, \
        job.deliveries
    if job.queue_ != NULL:
        out.queue = PyBytes_AS_STRING(<object>job.queue_)
        out.queue_len = PyBytes_GET_SIZE(<object>job.queue_)
    else:
        out.queue, out.queue_len = b"", 0
    out.body, out.body_len = job.body_, job.body_len
    out.delivered = job.delivered_
    out.options = job.options_
    out.dedup = dedup_fields_of(job, dedup)
    out.version = options_version(options, out.dedup, readable)
    return out


cdef bytes serialize(Job job, int64_t now_s, int readable):
    """The job's bytes; now_s >= 0: for a message (relative expire time).
    Its options in the newest block version up to `readable` (0: none)."""
    cdef JobFields fields
    cdef DedupFields dedup
    return pack_wire(job_fields(job, now_s, readable, &fields, &dedup))


def serialize_job(Job job, now_s=None, int readable=OPTIONS_LATEST):
    """The job's bytes, its options in the newest block version up to
    `readable`; with `now_s`, for a message (relative expire time)."""
    return serialize(job, -1 if now_s is None else now_s, readable)


def pack_job(bytes job_id, int state, int flags, int repl, uint64_t ctime, int64_t etime,
             uint32_t delay, uint32_t retry, uint32_t nacks, uint32_t deliveries,
             bytes queue, body, tuple delivered, options=None):
    """A job's bytes from its fields (a parsed job written again; `options`
    as option_fields() gives them, or None)."""
    cdef JobFields job
    cdef DedupFields dedup
    cdef JobOptions parsed = None if options is None else job_options(*options)
    if PyBytes_GET_SIZE(job_id) != JOB_ID_LEN:
        raise ValueError("a job ID has 40 bytes")
    job.id, job.state, job.flags, job.repl = PyBytes_AS_STRING(job_id), state, flags, repl
    job.ctime, job.etime, job.delay, job.retry = ctime, etime, delay, retry
    job.nacks, job.deliveries = nacks, deliveries
    job.queue, job.queue_len = PyBytes_AS_STRING(queue), PyBytes_GET_SIZE(queue)
    job.body = NULL if body is None else PyBytes_AS_STRING(body)
    job.body_len = 0 if body is None else PyBytes_GET_SIZE(body)
    job.delivered = <PyObject*>delivered
    job.options = <PyObject*>parsed if parsed is not None else NULL
    job.dedup = record_dedup(options, &dedup)
    job.version = options_version(parsed, job.dedup, OPTIONS_LATEST)
    return pack_wire(&job)


cdef tuple _node_tuple(const char* nodes, Py_ssize_t count):
    return tuple([PyBytes_FromStringAndSize(nodes + i * NODE_ID_LEN, NODE_ID_LEN)
                  for i in range(count)])


def unpack_job(data, now_s=None):
    """The fields of a serialized job, in JobRecord's order (its options as
    option_fields() gives them, or None); with `now_s`, a message's
    relative expire time becomes absolute. ValueError if malformed."""
    cdef WireJob job
    cdef DedupFields dedup
    cdef bytes raw = data if type(data) is bytes else bytes(data)
    parse_wire(PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw), &job)
    options = None
    if job.options != NULL:
        parsed = parse_options(job.options, job.options_len, &dedup)
        options = option_fields(parsed, &dedup if dedup.key != NULL else NULL)
    return (PyBytes_FromStringAndSize(job.id, JOB_ID_LEN), job.state, job.flags, job.repl,
            job.ctime, job.etime + (0 if now_s is None else now_s), job.delay, job.retry,
            job.nacks, job.deliveries, PyBytes_FromStringAndSize(job.queue, job.queue_len),
            None if job.body == NULL else PyBytes_FromStringAndSize(job.body, job.body_len),
            _node_tuple(job.nodes, job.node_count), options)
