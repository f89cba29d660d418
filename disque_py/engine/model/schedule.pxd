# The awake schedule (schedule.pxi): every job's next timer.

cpdef enum:
    BUCKET_MS = 10
    SCHEDULE_CACHE = 64


cdef class Bucket:
    cdef int64_t due
    cdef PyObject* first
    cdef PyObject* last
    cdef Py_ssize_t count


cdef class AwakeSchedule:
    cdef dict _buckets             # slot (ms) -> Bucket
    cdef list _heap                # slots, a heapq
    cdef PyObject* _cache[64]      # SCHEDULE_CACHE buckets by slot, borrowed from _buckets
    cdef Py_ssize_t _len

    cpdef schedule(self, Job job, int64_t at_ms)
    cpdef unschedule(self, Job job)
    cdef Bucket _bucket_for(self, int64_t slot)
    cdef void _drop_bucket(self, int64_t slot) except *
    cdef void _drop_all(self) noexcept
