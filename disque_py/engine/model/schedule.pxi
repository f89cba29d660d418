# The awake schedule: every registered job, ordered by when it next needs
# attention (first queueing after DELAY, re-queueing after RETRY and the
# WILLQUEUE notice before it, expiry at TTL, the collection of an acked job).
#
# Jobs sit in time buckets of BUCKET_MS, each a doubly linked list threaded
# through the jobs themselves (awake_prev/awake_next), and a heap orders
# the buckets' times; a small direct-mapped cache finds the buckets of the
# next moments without a dict lookup (jobs made together spread over a few
# dozen buckets: the retry jitter). Inserting or removing any job is O(1)
# and costs no allocation; "100,000 jobs due at once" is one bucket handed out in
# slices, never a scan of every job. A job is due at or after its exact
# time and at most BUCKET_MS later. The schedule holds one reference to
# each job in it; a bucket lives while it holds jobs (or until its time
# comes), and a job points at its bucket only while it is in it.

from heapq import heappop, heappush

from libc.string cimport memset


@cython.final
cdef class Bucket:

    def __repr__(self):
        return "<Bucket due=%d jobs=%d>" % (self.due, self.count)


cdef inline void _unlink(Job job) noexcept:
    """Take `job` out of its bucket's list (the caller drops the reference)."""
    cdef Bucket bucket = <Bucket>job.awake_bucket
    if job.awake_prev == NULL:
        bucket.first = job.awake_next
    else:
        (<Job>job.awake_prev).awake_next = job.awake_next
    if job.awake_next == NULL:
        bucket.last = job.awake_prev
    else:
        (<Job>job.awake_next).awake_prev = job.awake_prev
    bucket.count -= 1
    job.awake_prev = job.awake_next = job.awake_bucket = NULL


@cython.final
cdef class AwakeSchedule:

    def __cinit__(self):
        self._buckets = {}
        self._heap = []

    def __dealloc__(self):
        self._drop_all()

    def __len__(self):
        return self._len

    cpdef schedule(self, Job job, int64_t at_ms):
        """(Re)place `job` so it is due at `at_ms` (0 takes it off)."""
        cdef Bucket bucket
        cdef int64_t slot
        if job.awake_bucket != NULL:
            bucket = <Bucket>job.awake_bucket
            if at_ms and bucket.due - BUCKET_MS < at_ms <= bucket.due:
                return
            _unlink(job)
            self._len -= 1
            Py_DECREF(job)
        if not at_ms:
            return
        slot = (at_ms + BUCKET_MS - 1) // BUCKET_MS * BUCKET_MS
        cached = self._cache[(slot // BUCKET_MS) & (SCHEDULE_CACHE - 1)]
        if cached != NULL and (<Bucket>cached).due == slot:
            bucket = <Bucket>cached
        else:
            bucket = self._bucket_for(slot)
        Py_INCREF(job)
        job.awake_bucket = <PyObject*>bucket
        job.awake_prev = bucket.last
        job.awake_next = NULL
        if bucket.last == NULL:
            bucket.first = <PyObject*>job
        else:
            (<Job>bucket.last).awake_next = <PyObject*>job
        bucket.last = <PyObject*>job
        bucket.count += 1
        self._len += 1

    cpdef unschedule(self, Job job):
        if job.awake_bucket != NULL:
            _unlink(job)
            self._len -= 1
            Py_DECREF(job)

    cdef Bucket _bucket_for(self, int64_t slot):
        bucket = self._buckets.get(slot)
        if bucket is None:
            bucket = Bucket.__new__(Bucket)
            (<Bucket>bucket).due = slot
            self._buckets[slot] = bucket
            heappush(self._heap, slot)
        self._cache[(slot // BUCKET_MS) & (SCHEDULE_CACHE - 1)] = <PyObject*>bucket
        return <Bucket>bucket

    cdef void _drop_bucket(self, int64_t slot) except *:
        cdef PyObject** cached = &self._cache[(slot // BUCKET_MS) & (SCHEDULE_CACHE - 1)]
        heappop(self._heap)
        bucket = self._buckets.pop(slot)
        if cached[0] == <PyObject*>bucket:
            cached[0] = NULL

    def next_due(self):
        """When the earliest non-empty bucket is due, or None."""
        cdef Bucket bucket
        while self._heap:
            slot = self._heap[0]
            bucket = self._buckets[slot]
            if bucket.count:
                return slot
            self._drop_bucket(slot)
        return None

    def pop_due(self, int64_t now_ms, Py_ssize_t limit):
        """Take up to `limit` due jobs off the schedule, earliest first."""
        cdef Bucket bucket
        cdef Job job
        taken = []
        while self._heap and self._heap[0] <= now_ms and len(taken) < limit:
            slot = self._heap[0]
            bucket = self._buckets[slot]
            while bucket.first != NULL and len(taken) < limit:
                job = <Job>bucket.first
                _unlink(job)
                self._len -= 1
                taken.append(job)
                Py_DECREF(job)       # the list holds it now
            if bucket.count == 0:
                self._drop_bucket(slot)
        return taken

    def clear(self):
        """Empty the schedule at once."""
        self._drop_all()
        self._buckets = {}
        self._heap = []
        memset(self._cache, 0, sizeof(self._cache))

    cdef void _drop_all(self) noexcept:
        cdef Bucket bucket
        cdef Job job
        if self._buckets is None:
            return
        for bucket in self._buckets.values():
            while bucket.first != NULL:
                job = <Job>bucket.first
                _unlink(job)
                Py_DECREF(job)
        self._len = 0
