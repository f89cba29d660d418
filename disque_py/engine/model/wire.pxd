# A job's bytes on the bus and in the AOF (wire.pxi): the parsed form.

cdef enum:
    WIRE_FIXED = 76                # the fields before the queue name
    NO_BODY = 0xFFFFFFFF
    COUNTER_MAX = 0xFFFF


cdef struct WireJob:
    const char* id
    int state
    int flags
    int repl
    uint64_t ctime
    int64_t etime
    uint32_t delay
    uint32_t retry
    uint32_t nacks
    uint32_t deliveries
    const char* queue
    Py_ssize_t queue_len
    const char* body               # NULL: no body (a dummy ack)
    Py_ssize_t body_len
    const char* nodes              # node_count x 40 bytes
    Py_ssize_t node_count
    const char* options            # the options block, or NULL
    Py_ssize_t options_len


cdef struct JobFields:
    # What write_wire writes: a job's fields, borrowed (from a Job or a
    # parsed record) for the time of one call.
    const char* id
    int state
    int flags
    int repl
    uint64_t ctime
    int64_t etime
    uint32_t delay
    uint32_t retry
    uint32_t nacks
    uint32_t deliveries
    const char* queue
    Py_ssize_t queue_len
    const char* body               # NULL: no body
    Py_ssize_t body_len
    PyObject* delivered            # a tuple of 40-byte node IDs
    PyObject* options              # a JobOptions, or NULL
    DedupFields* dedup             # the DEDUP key the options block carries, or NULL
    int version                    # the options block's version (0: none)
