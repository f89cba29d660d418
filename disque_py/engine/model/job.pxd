# The job record (job.pxi): C fields, no cyclic-GC tracking.

cpdef enum:
    JOB_ID_LEN = 40
    NODE_ID_LEN = 40
    # Job states (job.pxi)
    WAIT_REPL = 0
    ACTIVE = 1
    QUEUED = 2
    ACKED = 3
    # Job flags
    FLAG_BCAST_QUEUED = 1
    FLAG_BCAST_WILLQUEUE = 2
    FLAG_DELIVERED = 4
    # ... local ones (never sent to a peer), for the options of options.pxi
    FLAG_COUNTED = 16              # the next re-queue was counted already (a delayed NACK)
    FLAG_BACKED_OFF = 32           # its retry timeout was pushed back once by BACKOFF
    FLAG_PROMISED = 64             # its ID answered a duplicate ADDJOB (dedup.pxi)
    FLAG_CONFIRMED = 128           # this node saw it reach its REPLICATE level
    LOCAL_FLAGS = 4 | 16 | 32 | 64 | 128


cdef class Job:
    # The ID's 40 characters, inline: no bytes object per job.
    cdef char id_[40]
    # Raw, owned references (INCREF'd): a bytes queue name shared by every
    # job of the queue, and a tuple of node-ID bytes. Raw pointers keep the
    # class out of the cyclic GC (neither can lead back to a job).
    cdef PyObject* queue_
    cdef PyObject* delivered_
    # Its JobOptions (options beyond Disque), owned, or NULL: a plain job
    # pays one pointer and no lookup.
    cdef PyObject* options_
    # Its DEDUP key's slot in the key table (dedup_table.pxi), or NULL: the
    # job holds one of the slot's references (it fills the 8 bytes the
    # allocator rounded the record up to: no memory for a plain job).
    cdef DedupSlot* dedup_
    # The body, in a PyMem buffer (NULL: a dummy ack, which has none).
    cdef char* body_
    # The ID's hash once the job table (table.pxi) computed it (0: not yet):
    # a removal finds the job's bucket without hashing the ID again.
    cdef uint64_t table_hash
    # Links owned by the awake schedule (borrowed pointers; it holds its
    # own reference to the job).
    cdef PyObject* awake_prev
    cdef PyObject* awake_next
    cdef PyObject* awake_bucket
    cdef public int64_t ctime
    cdef public int64_t qtime
    cdef public uint32_t etime
    cdef uint32_t body_len
    cdef public uint32_t delay
    cdef public uint32_t retry
    cdef public uint32_t nacks
    cdef public uint32_t deliveries
    cdef public uint16_t repl
    cdef public uint8_t state
    cdef public uint8_t flags
    cdef public uint8_t gc_retry
    # Its priority - DEFAULT_PRIORITY (0 for a plain job, as allocated), the
    # queue order's first key; set only with its options (set_options).
    cdef int8_t prio_delta


cdef Job make_job(const char* job_id, object queue, const char* body, Py_ssize_t body_len,
                  bint has_body, int state, int repl, uint32_t delay, uint32_t retry,
                  int64_t ctime, int64_t etime, tuple delivered)
cdef bint id_is_valid(const char* data, Py_ssize_t size) noexcept
cdef void set_job_queue(Job job, bytes name) noexcept
