# The rewrite's records of the node's state (rewrite.pxi).

cdef enum:
    PREFETCH_AHEAD = 8             # buckets between a job's prefetch and its record

@cython.final
cdef class RewriteWalk:
    cdef JobTable jobs
    cdef WriteBuffer out                   # records not taken yet
    cdef public Py_ssize_t partition       # the next partition of `jobs` to walk
    cdef public Py_ssize_t walked          # jobs walked (any state)
    cdef public Py_ssize_t written         # ... written as 'J' records

    cdef int _put_partition(self, IndexPartition* part) except -1
