# The engine's C-level declarations: every cdef class's fields and cdef
# methods, so the parts included by _core.pyx call each other without a
# Python lookup. Bodies live in the .pxi files named beside each block.

from cpython.ref cimport PyObject
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t


cdef enum:
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
    # Job table (table.pxi)
    TABLE_PARTITIONS = 4096
    TABLE_PARTITION_BITS = 12
    TABLE_MIN_BUCKETS = 4
    # Awake schedule (schedule.pxi)
    BUCKET_MS = 10


# ------------------------------------------------------------------ job.pxi

cdef class Job:
    # The ID's 40 characters, inline: no bytes object per job.
    cdef char id_[40]
    # Raw, owned references (INCREF'd): a bytes queue name shared by every
    # job of the queue, and a tuple of node-ID bytes. Raw pointers keep the
    # class out of the cyclic GC (neither can lead back to a job).
    cdef PyObject* queue_
    cdef PyObject* delivered_
    # The body, in a PyMem buffer (NULL: a dummy ack, which has none).
    cdef char* body_
    # Links owned by the structures that hold the job (borrowed pointers;
    # each structure holds its own reference to the job).
    cdef PyObject* table_next
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


cdef Job make_job(const char* job_id, object queue, const char* body, Py_ssize_t body_len,
                  bint has_body, int state, int repl, uint32_t delay, uint32_t retry,
                  int64_t ctime, int64_t etime, tuple delivered)
cdef bint id_is_valid(const char* data, Py_ssize_t size) noexcept


# ------------------------------------------------------------------ ids.pxi

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


# ---------------------------------------------------------------- table.pxi

cdef struct Partition:
    PyObject** buckets
    uint32_t mask
    uint32_t count


cdef class JobTable:
    cdef Partition* _parts
    cdef Py_ssize_t _len
    cdef Py_ssize_t _released      # partitions freed so far by release_some()

    cdef Job find(self, const char* job_id)
    cdef bint insert(self, Job job) except -1
    cdef bint remove(self, Job job) except -1
    cdef int _resize(self, Partition* part, uint32_t size) except -1


# ------------------------------------------------------------- schedule.pxi

cdef class Bucket:
    cdef int64_t due
    cdef PyObject* first
    cdef PyObject* last
    cdef Py_ssize_t count


cdef class AwakeSchedule:
    cdef dict _buckets             # slot (ms) -> Bucket
    cdef list _heap                # slots, a heapq
    cdef Bucket _recent            # the bucket used last (most jobs share it)
    cdef Py_ssize_t _len

    cpdef schedule(self, Job job, int64_t at_ms)
    cpdef unschedule(self, Job job)
    cdef Bucket _bucket_for(self, int64_t slot)
    cdef void _drop_bucket(self, int64_t slot) except *
    cdef void _drop_all(self) noexcept
