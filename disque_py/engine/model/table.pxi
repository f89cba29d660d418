# The job table: every job this node knows, by ID.
#
# The partitioned hash index of index.pxi, its items the jobs: an entry
# costs a 16-byte bucket, an eighth to half full, and no bytes key nor dict
# entry. The hash is keyed (siphash.pxi): a client that makes up IDs
# cannot aim them at one probe run. The job keeps its ID's hash
# (job.table_hash), computed once for its insert, prefetch and removal.
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


cdef inline uint64_t job_hash(Job job) noexcept:
    """The job's ID hash, computed once: job.table_hash, when not 0, is it
    (a hash that is truly 0 is computed each time, and is still right)."""
    if job.table_hash == 0:
        job.table_hash = _id_hash(job.id_)
    return job.table_hash


cdef inline IndexPartition* _partition_of(IndexPartition* parts, uint64_t h) noexcept:
    return &parts[h & (TABLE_PARTITIONS - 1)]


cdef inline void* _find_in(IndexPartition* parts, uint64_t h, const char* job_id) noexcept:
    """The job with this ID (and this ID's hash), or NULL."""
    cdef IndexPartition* part = _partition_of(parts, h)
    cdef uint32_t i
    cdef void* item
    if part.buckets == NULL:
        return NULL
    i = index_home(part, h, TABLE_PARTITION_BITS)
    item = part.buckets[i].item
    while item != NULL:
        if part.buckets[i].hash == h and memcmp((<Job>item).id_, job_id, JOB_ID_LEN) == 0:
            return item
        i = (i + 1) & part.mask
        item = part.buckets[i].item
    return NULL


cdef inline void jobs_prefetch(JobTable table, Job job) noexcept:
    """Start reading the bucket the job's insert will probe (index.pxi)."""
    cdef uint64_t h = job_hash(job)
    index_prefetch(_partition_of(table._parts, h), h, TABLE_PARTITION_BITS)


cdef inline void jobs_prefetch_id(JobTable table, const char* job_id) noexcept:
    """The same for the job with this ID, not made yet (the AOF loader's
    next record)."""
    cdef uint64_t h = _id_hash(job_id)
    index_prefetch(_partition_of(table._parts, h), h, TABLE_PARTITION_BITS)


@cython.final
cdef class JobTable:

    def __cinit__(self):
        self._parts = <IndexPartition*>PyMem_Calloc(TABLE_PARTITIONS, sizeof(IndexPartition))
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
        cdef void* item = _find_in(self._parts, _id_hash(job_id), job_id)
        return None if item == NULL else <Job>item

    cdef bint insert(self, Job job) except -1:
        """Add `job`; False (and nothing changes) if its ID is here already."""
        cdef uint64_t h = job_hash(job)
        if _find_in(self._parts, h, job.id_) != NULL:
            return False
        index_add(_partition_of(self._parts, h), h, <void*>job, TABLE_PARTITION_BITS)
        Py_INCREF(job)
        self._len += 1
        if job.state == ACKED:
            self.acked += 1
        return True

    cdef bint remove(self, Job job) except -1:
        """Take `job` itself out; False if it is not in the table."""
        cdef uint64_t h = job_hash(job)
        cdef IndexPartition* part = _partition_of(self._parts, h)
        cdef int64_t at = index_find_item(part, h, <void*>job, TABLE_PARTITION_BITS)
        if at < 0:
            return False
        index_remove_at(part, <uint32_t>at, TABLE_PARTITION_BITS)
        self._len -= 1
        if job.state == ACKED:
            self.acked -= 1
        Py_DECREF(job)        # last: the table's reference may be the last one
        return True

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
        cdef IndexPartition* part
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
        cdef IndexPartition* part
        while self._released < TABLE_PARTITIONS and freed < budget_jobs:
            part = &self._parts[self._released]
            freed += part.count + 1
            self._len -= part.count
            _release_partition(part)
            self._released += 1
        return self._released == TABLE_PARTITIONS


cdef list _partition_list(IndexPartition* part):
    found = []
    _append_partition(part, found)
    return found


cdef void _append_partition(IndexPartition* part, list found) except *:
    cdef uint32_t i
    if part.buckets == NULL:
        return
    for i in range(part.mask + 1):
        if part.buckets[i].item != NULL:
            found.append(<Job>part.buckets[i].item)


cdef void _release_partition(IndexPartition* part) noexcept:
    cdef uint32_t i
    if part.buckets != NULL:
        for i in range(part.mask + 1):
            Py_XDECREF(<PyObject*>part.buckets[i].item)
    index_free(part)
