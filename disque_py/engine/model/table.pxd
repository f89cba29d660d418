# The job table by ID (table.pxi), partitioned for stateless scans.

cpdef enum:
    TABLE_PARTITIONS = 4096
    TABLE_PARTITION_BITS = 12


cdef class JobTable:
    cdef IndexPartition* _parts            # items: Job (one reference each)
    cdef Py_ssize_t _len
    cdef Py_ssize_t _released      # partitions freed so far by release_some()
    cdef readonly Py_ssize_t acked # jobs in the acked state (NodeCore.acknowledge counts too)

    cdef Job find(self, const char* job_id)
    cdef bint insert(self, Job job) except -1
    cdef bint remove(self, Job job) except -1
