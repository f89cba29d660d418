# The job table: every job this node knows, by ID.
#
# A hash table split by hash into TABLE_PARTITIONS partitions, each a small
# chained table threaded through the jobs (job.table_next), so an entry
# costs one pointer in the job and, at a load between 1 and 2 jobs per
# bucket, half a pointer or so in a bucket array: no bytes key, no dict
# entry. The hash is keyed (siphash.pxi): a client that makes up IDs
# cannot aim them at one chain.
#
# Partitions serve two purposes:
#   * JSCAN's stateless cursors: a cursor is the index of the next
#     partition to visit, and partitions are returned whole, so every job
#     present for a whole iteration is returned (duplicates allowed),
#     whatever is added or removed in between;
#   * a resize only ever rehashes one partition, so a table of millions of
#     jobs grows without a pause.
# The table holds one reference to each job it contains. It counts the
# jobs in the acked state it holds (acked: inserted or removed as such, or
# acknowledged while here), which /metrics reads instead of walking it.

from cpython.mem cimport PyMem_Calloc

cdef extern from "Python.h":
    const Py_ssize_t PY_SSIZE_T_MAX


cdef inline uint64_t _id_hash(const char* job_id) noexcept:
    return keyed_hash(job_id, JOB_ID_LEN)


cdef inline Partition* _partition_of(Partition* parts, uint64_t h) noexcept:
    return &parts[h & (TABLE_PARTITIONS - 1)]


@cython.final
cdef class JobTable:

    def __cinit__(self):
        self._parts = <Partition*>PyMem_Calloc(TABLE_PARTITIONS, sizeof(Partition))
        if self._parts == NULL:
            raise MemoryError()

    def __dealloc__(self):
        if self._parts == NULL:
            return
        cdef Py_ssize_t i
        for i in range(TABLE_PARTITIONS):
            _release_partition(&self._parts[i])
        PyMem_Free(self._parts)
        self._parts = NULL

    def __len__(self):
        return self._len

    # ------------------------------------------------------------- C API

    cdef Job find(self, const char* job_id):
        cdef uint64_t h = _id_hash(job_id)
        cdef Partition* part = _partition_of(self._parts, h)
        cdef PyObject* entry
        if part.buckets == NULL:
            return None
        entry = part.buckets[(h >> TABLE_PARTITION_BITS) & part.mask]
        while entry != NULL:
            if memcmp((<Job>entry).id_, job_id, JOB_ID_LEN) == 0:
                return <Job>entry
            entry = (<Job>entry).table_next
        return None

    cdef bint insert(self, Job job) except -1:
        """Add `job`; False (and nothing changes) if its ID is here already."""
        cdef uint64_t h = _id_hash(job.id_)
        cdef Partition* part = _partition_of(self._parts, h)
        cdef PyObject** slot
        cdef PyObject* entry
        if part.buckets == NULL:
            self._resize(part, TABLE_MIN_BUCKETS)
        slot = &part.buckets[(h >> TABLE_PARTITION_BITS) & part.mask]
        entry = slot[0]
        while entry != NULL:
            if memcmp((<Job>entry).id_, job.id_, JOB_ID_LEN) == 0:
                return False
            entry = (<Job>entry).table_next
        Py_INCREF(job)
        job.table_next = slot[0]
        slot[0] = <PyObject*>job
        part.count += 1
        self._len += 1
        if job.state == ACKED:
            self.acked += 1
        if part.count > (part.mask + 1) * TABLE_MAX_LOAD:
            self._resize(part, (part.mask + 1) * 2)
        return True

    cdef bint remove(self, Job job) except -1:
        """Take `job` itself out; False if it is not in the table."""
        cdef uint64_t h = _id_hash(job.id_)
        cdef Partition* part = _partition_of(self._parts, h)
        cdef PyObject** link
        if part.buckets == NULL:
            return False
        link = &part.buckets[(h >> TABLE_PARTITION_BITS) & part.mask]
        while link[0] != NULL and link[0] != <PyObject*>job:
            link = &(<Job>link[0]).table_next
        if link[0] == NULL:
            return False
        link[0] = job.table_next
        job.table_next = NULL
        part.count -= 1
        self._len -= 1
        if job.state == ACKED:
            self.acked -= 1
        if part.mask + 1 > TABLE_MIN_BUCKETS and part.count * 8 < part.mask + 1:
            self._resize(part, (part.mask + 1) // 2)
        Py_DECREF(job)        # last: the table's reference may be the last one
        return True

    cdef int _resize(self, Partition* part, uint32_t size) except -1:
        cdef PyObject** buckets = <PyObject**>PyMem_Calloc(size, sizeof(PyObject*))
        cdef PyObject* entry
        cdef PyObject* following
        cdef PyObject** slot
        cdef uint32_t i
        if buckets == NULL:
            raise MemoryError()
        if part.buckets != NULL:
            for i in range(part.mask + 1):
                entry = part.buckets[i]
                while entry != NULL:
                    following = (<Job>entry).table_next
                    slot = &buckets[(_id_hash((<Job>entry).id_) >> TABLE_PARTITION_BITS)
                                    & (size - 1)]
                    (<Job>entry).table_next = slot[0]
                    slot[0] = entry
                    entry = following
            PyMem_Free(part.buckets)
        part.buckets = buckets
        part.mask = size - 1
        return 0

    # -------------------------------------------------------- Python API

    def get(self, job_id):
        """The job with this ID, or None."""
        if type(job_id) is not bytes or PyBytes_GET_SIZE(job_id) != JOB_ID_LEN:
            return None
        return self.find(PyBytes_AS_STRING(job_id))

    def __contains__(self, job_id):
        return self.get(job_id) is not None

    def add(self, Job job):
        """Insert if no job has this ID; False if one has."""
        return self.insert(job)

    def discard(self, Job job):
        """Take this job out; False if it was not in the table."""
        return self.remove(job)

    def pop(self, job_id):
        """Remove and return the job with this ID, or None."""
        job = self.get(job_id)
        if job is not None:
            self.remove(job)
        return job

    def values(self):
        """Every job, as a list (a snapshot)."""
        found = []
        cdef Py_ssize_t i
        for i in range(TABLE_PARTITIONS):
            _append_partition(&self._parts[i], found)
        return found

    @property
    def partition_count(self):
        return TABLE_PARTITIONS

    def partition(self, Py_ssize_t index):
        """The jobs of one partition, as a list."""
        found = []
        _append_partition(&self._parts[index & (TABLE_PARTITIONS - 1)], found)
        return found

    def scan(self, cursor, count, keep, bint busyloop):
        """Jobs from partitions starting at `cursor`; returns (next cursor, jobs).

        Visits whole partitions until `count` jobs matched or count*10
        non-empty partitions were visited (Disque's bound on work), or to
        the end with `busyloop` (or a negative count, as in Disque). The
        next cursor is 0 once the scan is complete; a cursor past the last
        partition is a finished scan."""
        cdef Py_ssize_t index, budget, wanted
        cdef Partition* part
        found = []
        if not 0 <= cursor < TABLE_PARTITIONS:
            return 0, found
        if count < 0:
            busyloop = True
        # Clients choose COUNT: anything past the table's reach means "all".
        wanted = min(max(count, 1), PY_SSIZE_T_MAX // 10)
        index, budget = cursor, wanted * 10
        while index < TABLE_PARTITIONS:
            part = &self._parts[index]
            index += 1
            if part.count == 0:
                continue        # empty partitions cost nothing against the budget
            if keep is None:
                _append_partition(part, found)
            else:
                found.extend([job for job in _partition_list(part) if keep(job)])
            if not busyloop:
                budget -= 1
                if budget <= 0 or len(found) >= wanted:
                    break
        return (index if index < TABLE_PARTITIONS else 0), found

    def release_some(self, Py_ssize_t budget_jobs):
        """Drop the table's references partition by partition, about
        `budget_jobs` jobs per call (for a flushed table freed in slices).
        True once everything is released."""
        cdef Py_ssize_t freed = 0
        cdef Partition* part
        while self._released < TABLE_PARTITIONS and freed < budget_jobs:
            part = &self._parts[self._released]
            freed += part.count + 1
            self._len -= part.count
            _release_partition(part)
            self._released += 1
        return self._released == TABLE_PARTITIONS


cdef list _partition_list(Partition* part):
    found = []
    _append_partition(part, found)
    return found


cdef void _append_partition(Partition* part, list found) except *:
    cdef uint32_t i
    cdef PyObject* entry
    if part.buckets == NULL:
        return
    for i in range(part.mask + 1):
        entry = part.buckets[i]
        while entry != NULL:
            found.append(<object>entry)
            entry = (<Job>entry).table_next


cdef void _release_partition(Partition* part) noexcept:
    cdef uint32_t i
    cdef PyObject* entry
    cdef PyObject* following
    if part.buckets == NULL:
        return
    for i in range(part.mask + 1):
        entry = part.buckets[i]
        while entry != NULL:
            following = (<Job>entry).table_next
            (<Job>entry).table_next = NULL
            Py_XDECREF(entry)
            entry = following
    PyMem_Free(part.buckets)
    part.buckets = NULL
    part.mask = 0
    part.count = 0
