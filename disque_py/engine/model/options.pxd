# Job options beyond Disque (options.pxi): BACKOFF, MAXDELIVERIES and
# DEADLETTER, PRIORITY; the DEDUP key travels in the same block.

cpdef enum:
    DEAD_NONE = 0
    DEAD_MAX_DELIVERIES = 1
    DEFAULT_PRIORITY = 5           # ADDJOB ... PRIORITY n, 0 to 9, higher first
    MAX_PRIORITY = 9
    OPTIONS_V1 = 1                 # the options block's versions (options.pxi)
    OPTIONS_V2 = 2                 # ... v1 and the priority
    OPTIONS_V3 = 3                 # ... v2 and the DEDUP key with its window
    OPTIONS_LATEST = 3


@cython.final
cdef class JobOptions:
    cdef public uint32_t backoff_base_ms   # 0: no BACKOFF
    cdef public uint32_t backoff_max_ms
    cdef public uint32_t max_deliveries    # 0: no limit
    cdef public uint8_t dead_reason        # DEAD_NONE until dead-lettered
    cdef public uint8_t priority           # DEFAULT_PRIORITY unless ADDJOB gave one
    cdef public object deadletter          # bytes, or None: "<queue>:dead"
    cdef public object origin              # a dead job's queue before, or None

    cdef bint dead_letter_due(self, Job job) noexcept
    cdef bytes dead_queue(self, Job job)
    cdef int64_t backoff_ms(self, Job job, int64_t random_permille) noexcept

cdef JobOptions new_job_options(uint32_t backoff_base_ms, uint32_t backoff_max_ms,
                                uint32_t max_deliveries, object deadletter, uint8_t priority)
cdef JobOptions priority_options(uint8_t priority)
