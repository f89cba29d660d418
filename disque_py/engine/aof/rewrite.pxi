# The AOF rewrite's records, made in C: the live jobs and the DEDUP keys.
#
# RewriteWalk walks a jobs table partition by partition (the table's own
# order: a partition is walked whole, so a cursor between partitions is
# all it keeps), writing a 'J' record (records.pxi: put_job_record) for
# every active or queued job into its buffer; acked and waiting jobs have
# none (an acked job is gone for the AOF; a waiting one is written once
# its copies are made). Then a 'K' record per DEDUP key of a snapshot. The
# server layer (persistence/rewrite.py) sizes the slices, takes the buffer
# in large blocks and writes them; a walk never calls back into Python, so
# the table cannot change under it.


@cython.final
cdef class RewriteWalk:

    def __cinit__(self, JobTable jobs):
        self.jobs = jobs
        self.out = WriteBuffer.__new__(WriteBuffer)

    def walk(self, Py_ssize_t max_jobs):
        """Walk whole partitions until `max_jobs` jobs were walked (or the
        table ends); True once every partition is walked."""
        cdef IndexPartition* part
        cdef Py_ssize_t walked = 0
        while self.partition < TABLE_PARTITIONS and walked < max_jobs:
            part = &self.jobs._parts[self.partition]
            self.partition += 1
            if part.buckets != NULL:
                walked += part.count
                self._put_partition(part)
        self.walked += walked
        return self.partition >= TABLE_PARTITIONS

    cdef int _put_partition(self, IndexPartition* part) except -1:
        """The records of a partition's live jobs. On a table larger than
        the cache every job and body is a miss: each is asked for some
        buckets ahead (PREFETCH_AHEAD), so they arrive while others are
        written."""
        cdef IndexBucket* buckets = part.buckets
        cdef uint32_t i, size = part.mask + 1
        cdef void* ahead
        cdef Job job
        for i in range(size):
            if i + PREFETCH_AHEAD < size and buckets[i + PREFETCH_AHEAD].item != NULL:
                disque_prefetch(buckets[i + PREFETCH_AHEAD].item)
            if i + PREFETCH_AHEAD // 2 < size:
                ahead = buckets[i + PREFETCH_AHEAD // 2].item
                if ahead != NULL and (<Job>ahead).body_ != NULL:
                    disque_prefetch((<Job>ahead).body_)
                    disque_prefetch((<Job>ahead).body_ + 64)
            if buckets[i].item == NULL:
                continue
            job = <Job>buckets[i].item
            if job.state == ACTIVE or job.state == QUEUED:
                put_job_record(self.out, job)
                self.written += 1
        return 0

    def put_dedup_keys(self, list keys, Py_ssize_t count):
        """'K' records of up to `count` keys taken from the end of `keys`
        (DedupTable.items()'s tuples: queue, key, job ID, window end)."""
        cdef Py_ssize_t end = PyList_GET_SIZE(keys), i
        cdef Py_ssize_t first = end - count if end > count else 0
        for i in range(first, end):
            queue, key, job_id, until_ms = <tuple>PyList_GET_ITEM(keys, i)
            put_dedup_record(self.out, AOF_DEDUP, queue, PyBytes_AS_STRING(key),
                             PyBytes_GET_SIZE(key), PyBytes_AS_STRING(job_id), until_ms)
        del keys[first:]

    @property
    def buffered(self):
        """Bytes of records made and not taken yet."""
        return self.out.size

    def take(self):
        """The records made since the last take (b"" if none)."""
        return self.out.take() if self.out.size else b""
