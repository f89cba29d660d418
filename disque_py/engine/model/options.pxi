# Job options beyond Disque: BACKOFF, MAXDELIVERIES and DEADLETTER,
# PRIORITY; and, in the same block on the wire, the DEDUP key (kept in the
# job's slot of dedup_table.pxi's table, not in its JobOptions).
#
# A plain job carries none and pays one pointer test where they matter: a
# job with options points to its JobOptions (Job.options_, 8 bytes in every
# job record; a side table cost a dict insert per job, ~400 instructions
# of an ADDJOB). The rules they add (core.pxi applies them):
#
#   * a job is delivered 1 + nacks + additional-deliveries times before a
#     re-queue; when that reaches max_deliveries, the re-queue puts it in
#     its dead-letter queue instead (once: a dead job re-queues there);
#   * with BACKOFF, a NACK without DELAY and a RETRY timeout re-queue it
#     after base * 2^(deliveries - 1) ms, capped at max, +-10% jitter;
#   * a queue serves higher priorities first (queue.pxi orders by the job's
#     prio_delta, which set_options() keeps equal to priority - 5).
#
# On the wire and in the AOF the options follow the holders (wire.pxi),
# only for a job that has them, and only to peers that announced they read
# them, in the newest version they read (cluster/nodes.py): a node that reads
# v1 gets a job without its priority, an older one without any option.
#
#   u8 version, u32 backoff base ms, u32 backoff max ms,
#   u32 max deliveries, u8 dead reason,
#   u32 length + dead-letter queue (NO_NAME: "<queue>:dead"),
#   u32 length + the queue a dead job came from (NO_NAME: none),
#   v2 on: u8 priority
#   v3 on: u32 length + the DEDUP key (NO_NAME: none), u64 its window's end
#          (unix ms), u32 length + the ADDJOB's queue once the job moved to
#          another (dead-lettered, QREQUEUE TO; NO_NAME: the job's queue)

cdef enum:
    OPTIONS_FIXED = 14             # version to dead reason
    NO_NAME = 0xFFFFFFFF
    BACKOFF_JITTER_PERMILLE = 100  # +-10%
    MAX_BACKOFF_SHIFT = 40

DEAD_REASON_NAMES = {DEAD_MAX_DELIVERIES: b"max-deliveries"}
DEAD_QUEUE_SUFFIX = b":dead"


@cython.final
@cython.no_gc
cdef class JobOptions:
    """What a job asked for beyond Disque, and whether it died."""

    def __init__(self, uint32_t backoff_base_ms=0, uint32_t backoff_max_ms=0,
                 uint32_t max_deliveries=0, deadletter=None,
                 uint8_t priority=DEFAULT_PRIORITY):
        _fill_options(self, backoff_base_ms, backoff_max_ms, max_deliveries, deadletter,
                      priority)

    cdef bint dead_letter_due(self, Job job) noexcept:
        """Whether the re-queue about to happen is one delivery too many."""
        return self.max_deliveries != 0 and self.dead_reason == DEAD_NONE and \
            1 + <int64_t>job.nacks + job.deliveries >= self.max_deliveries

    cdef bytes dead_queue(self, Job job):
        if self.deadletter is not None:
            return <bytes>self.deadletter
        return <bytes>job.queue_ + DEAD_QUEUE_SUFFIX

    cdef int64_t backoff_ms(self, Job job, int64_t random_permille) noexcept:
        """The wait before the next re-queue (0: none); `random_permille`
        in [0, 1000) picks the jitter."""
        cdef int64_t deliveries = 1 + <int64_t>job.nacks + job.deliveries
        cdef int64_t shift = deliveries - 1 if deliveries - 1 < MAX_BACKOFF_SHIFT \
            else MAX_BACKOFF_SHIFT
        cdef int64_t wait = <int64_t>self.backoff_base_ms << shift
        if self.backoff_base_ms == 0:
            return 0
        if wait > self.backoff_max_ms:
            wait = self.backoff_max_ms
        wait += wait * (2 * random_permille - 1000) * BACKOFF_JITTER_PERMILLE // 1000000
        return wait if wait < self.backoff_max_ms else self.backoff_max_ms

    @property
    def dead_reason_name(self):
        return DEAD_REASON_NAMES.get(self.dead_reason)

    def fields(self):
        """(backoff base, backoff max, max deliveries, dead reason,
        dead-letter queue, origin, priority): the block's first part."""
        return (self.backoff_base_ms, self.backoff_max_ms, self.max_deliveries,
                self.dead_reason, self.deadletter, self.origin, self.priority)

    def __eq__(self, other):
        return type(other) is JobOptions and self.fields() == (<JobOptions>other).fields()

    def __repr__(self):
        return "JobOptions%r" % (self.fields(),)


cdef inline int _fill_options(JobOptions options, uint32_t backoff_base_ms,
                              uint32_t backoff_max_ms, uint32_t max_deliveries,
                              object deadletter, uint8_t priority) except -1:
    options.backoff_base_ms = backoff_base_ms
    options.backoff_max_ms = backoff_max_ms
    options.max_deliveries = max_deliveries
    options.deadletter = deadletter
    options.dead_reason = DEAD_NONE
    options.priority = priority
    return 0


cdef JobOptions new_job_options(uint32_t backoff_base_ms, uint32_t backoff_max_ms,
                                uint32_t max_deliveries, object deadletter, uint8_t priority):
    """JobOptions(...) without the Python call (ADDJOB's path)."""
    cdef JobOptions options = JobOptions.__new__(JobOptions)
    _fill_options(options, backoff_base_ms, backoff_max_ms, max_deliveries, deadletter,
                  priority)
    return options


cdef inline void set_options(Job job, JobOptions options) noexcept:
    """Give a job its options (None: take them away). A C function, not a
    NodeCore method: a cpdef method looks for a Python override at every
    call, a sixth of what PRIORITY costs an ADDJOB."""
    cdef PyObject* given = NULL if options is None else <PyObject*>options
    Py_XINCREF(given)
    Py_XDECREF(job.options_)
    job.options_ = given
    job.prio_delta = <int8_t>options.priority - DEFAULT_PRIORITY if given != NULL else 0


# A job with a PRIORITY and no other option shares one of these (nothing in
# them changes for a job without MAXDELIVERIES): no object per job.
cdef tuple _PRIORITY_ONLY = tuple([new_job_options(0, 0, 0, None, priority)
                                   for priority in range(MAX_PRIORITY + 1)])


cdef JobOptions priority_options(uint8_t priority):
    return <JobOptions>_PRIORITY_ONLY[priority]


# What the block carries for a job with a DEDUP key and no other option.
cdef JobOptions _DEFAULT_OPTIONS = priority_options(DEFAULT_PRIORITY)
cdef tuple _DEFAULT_FIELDS = _DEFAULT_OPTIONS.fields()


def job_options(uint32_t backoff_base_ms, uint32_t backoff_max_ms, uint32_t max_deliveries,
                int dead_reason, deadletter, origin, uint8_t priority=DEFAULT_PRIORITY,
                *dedup):
    """JobOptions from a JobRecord's options (option_fields()), or None when
    all it sets is a DEDUP key (the job's slot keeps that)."""
    cdef JobOptions options = new_job_options(backoff_base_ms, backoff_max_ms, max_deliveries,
                                              deadletter, priority)
    options.dead_reason = dead_reason
    options.origin = origin
    return None if _all_default(options) else options


cdef bint _all_default(JobOptions options) noexcept:
    return not _v1_set(options) and options.priority == DEFAULT_PRIORITY


cdef inline bint _v1_set(JobOptions options) noexcept:
    return options.backoff_base_ms or options.max_deliveries or options.dead_reason or \
        options.deadletter is not None or options.origin is not None


cdef tuple option_fields(JobOptions options, DedupFields* dedup):
    """A job's options block as a JobRecord keeps it: fields() and the DEDUP
    key, its window's end and its queue (None: the job's), or None."""
    if options is None and dedup == NULL:
        return None
    head = options.fields() if options is not None else _DEFAULT_FIELDS
    if dedup == NULL:
        return head + (None, 0, None)
    return head + (PyBytes_FromStringAndSize(dedup.key, dedup.key_len), dedup.until_ms,
                   None if dedup.queue == NULL else
                   PyBytes_FromStringAndSize(dedup.queue, dedup.queue_len))


cdef DedupFields* record_dedup(tuple fields, DedupFields* out):
    """The DEDUP part of option_fields()' tuple, or NULL (no key)."""
    if fields is None or len(fields) < 10 or fields[7] is None:
        return NULL
    key, out.until_ms, queue = fields[7], fields[8], fields[9]
    out.key, out.key_len = PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key)
    out.queue = NULL if queue is None else PyBytes_AS_STRING(queue)
    out.queue_len = 0 if queue is None else PyBytes_GET_SIZE(queue)
    out.hash = 0
    return out


cdef int options_version(JobOptions options, DedupFields* dedup, int readable) noexcept:
    """The block to send a peer that reads up to version `readable` (0:
    none): the newest it reads, or none when all it could carry is unset
    (a job with only a priority for a v1 reader, only a DEDUP key for a
    v2 reader)."""
    cdef bint v1_set
    if (options is None and dedup == NULL) or readable == 0:
        return 0
    if readable >= OPTIONS_V3:
        return OPTIONS_V3
    if options is None:
        return 0
    v1_set = _v1_set(options)
    if readable == OPTIONS_V2 and (v1_set or options.priority != DEFAULT_PRIORITY):
        return OPTIONS_V2
    return OPTIONS_V1 if v1_set else 0


cdef inline Py_ssize_t _name_size(object name) noexcept:
    return 4 + (PyBytes_GET_SIZE(name) if name is not None else 0)


cdef Py_ssize_t options_size(JobOptions options, DedupFields* dedup, int version) noexcept:
    if version == 0:
        return 0
    if options is None:
        options = _DEFAULT_OPTIONS
    return OPTIONS_FIXED + _name_size(options.deadletter) + _name_size(options.origin) + \
        (1 if version >= OPTIONS_V2 else 0) + \
        ((16 if dedup == NULL else 16 + dedup.key_len + dedup.queue_len)
         if version >= OPTIONS_V3 else 0)


cdef char* _pack_chars(char* at, const char* name, Py_ssize_t size) noexcept:
    if name == NULL:
        return _put_be(at, NO_NAME, 4)
    at = _put_be(at, size, 4)
    memcpy(at, name, size)
    return at + size


cdef inline char* _pack_name(char* at, object name) noexcept:
    if name is None:
        return _pack_chars(at, NULL, 0)
    return _pack_chars(at, PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name))


cdef char* pack_options(char* at, JobOptions options, DedupFields* dedup, int version) noexcept:
    if options is None:
        options = _DEFAULT_OPTIONS
    at = _put_be(at, version, 1)
    at = _put_be(at, options.backoff_base_ms, 4)
    at = _put_be(at, options.backoff_max_ms, 4)
    at = _put_be(at, options.max_deliveries, 4)
    at = _put_be(at, options.dead_reason, 1)
    at = _pack_name(at, options.deadletter)
    at = _pack_name(at, options.origin)
    if version >= OPTIONS_V2:
        at = _put_be(at, options.priority, 1)
    if version >= OPTIONS_V3 and dedup == NULL:
        at = _put_be(at, NO_NAME, 4)
        at = _put_be(at, 0, 8)
        at = _put_be(at, NO_NAME, 4)
    elif version >= OPTIONS_V3:
        at = _pack_chars(at, dedup.key, dedup.key_len)
        at = _put_be(at, <uint64_t>dedup.until_ms, 8)
        at = _pack_chars(at, dedup.queue, dedup.queue_len)
    return at


cdef const char* _parse_chars(const char* data, Py_ssize_t size, Py_ssize_t* pos,
                              Py_ssize_t* length) except? NULL:
    """A length-prefixed name in place (NULL: NO_NAME), its length in `length`."""
    cdef uint64_t found
    if size - pos[0] < 4:
        raise ValueError("truncated job options")
    found = _get_be(data + pos[0], 4)
    pos[0] += 4
    length[0] = 0
    if found == NO_NAME:
        return NULL
    if <Py_ssize_t>found > size - pos[0]:
        raise ValueError("truncated job options")
    length[0] = <Py_ssize_t>found
    pos[0] += <Py_ssize_t>found
    return data + pos[0] - <Py_ssize_t>found


cdef object _parse_name(const char* data, Py_ssize_t size, Py_ssize_t* pos):
    cdef Py_ssize_t length
    cdef const char* name = _parse_chars(data, size, pos, &length)
    return None if name == NULL else PyBytes_FromStringAndSize(name, length)


cdef JobOptions parse_options(const char* data, Py_ssize_t size, DedupFields* dedup):
    """The options block (wire.pxi has found where it starts), v1 to v3:
    its JobOptions (None when it sets nothing but a DEDUP key), the key in
    `dedup` (key NULL: none; pointers into `data`). ValueError on anything
    malformed or from a later version."""
    cdef Py_ssize_t pos = OPTIONS_FIXED
    cdef JobOptions options = JobOptions.__new__(JobOptions)
    cdef int version = <unsigned char>data[0] if size else 0
    if size < OPTIONS_FIXED or not OPTIONS_V1 <= version <= OPTIONS_LATEST:
        raise ValueError("bad job options")
    options.backoff_base_ms = <uint32_t>_get_be(data + 1, 4)
    options.backoff_max_ms = <uint32_t>_get_be(data + 5, 4)
    options.max_deliveries = <uint32_t>_get_be(data + 9, 4)
    options.dead_reason = <uint8_t>data[13]
    options.deadletter = _parse_name(data, size, &pos)
    options.origin = _parse_name(data, size, &pos)
    options.priority = DEFAULT_PRIORITY
    if version >= OPTIONS_V2:
        if pos >= size:
            raise ValueError("truncated job options")
        options.priority = <uint8_t>data[pos]
        pos += 1
    dedup.key = NULL
    dedup.until_ms = 0
    dedup.hash = 0
    if version >= OPTIONS_V3:
        dedup.key = _parse_chars(data, size, &pos, &dedup.key_len)
        if size - pos < 8:
            raise ValueError("truncated job options")
        dedup.until_ms = <int64_t>_get_be(data + pos, 8)
        pos += 8
        dedup.queue = _parse_chars(data, size, &pos, &dedup.queue_len)
    if pos != size or options.dead_reason > DEAD_MAX_DELIVERIES or \
            options.backoff_max_ms < options.backoff_base_ms or \
            options.priority > MAX_PRIORITY or dedup.until_ms < 0:
        raise ValueError("bad job options")
    return None if _all_default(options) else options
