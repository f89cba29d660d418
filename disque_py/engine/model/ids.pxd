# Job IDs (ids.pxi): making them.

cdef class IdGenerator:
    cdef bytes _prefix
    cdef bytes _seed
    cdef uint64_t _counter
    cdef bytes _spare          # IDS_PER_REFILL random parts, 24 characters each
    cdef Py_ssize_t _left      # parts not handed out yet, taken from the end
    cdef int64_t _suffix_key   # the TTL suffix cached for (ttl, at-least-once)
    cdef char _suffix[5]

    cdef void fill(self, char* out, int64_t ttl_s, int64_t retry_s) except *
    cdef void _refill(self) except *
