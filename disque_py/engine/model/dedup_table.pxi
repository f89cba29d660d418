# The DEDUP key table (dedup.pxi says what the keys mean): the hash index
# of index.pxi over the slots (DEDUP_PARTITIONS partitions), and the
# windows' ends in a binary heap kept in a C array. A slot is one C block
# with the key inline (DedupSlot, dedup_table.pxd), and the job points to it: an
# ADDJOB with a new key costs a hash of the key, one allocation and a heap
# push, and no Python object (a DedupEntry object, the key's bytes and a
# JobOptions of the job's own cost 1.5 plain ADDJOBs' instructions). A new
# key, the producer's common case, is found absent without touching a slot
# (the index keeps the hashes).
#
# A slot's references: one for the heap (until its window ends, or a
# compaction drops it once unlinked) and one per job whose key it is; it is
# in the index while `live`. A job keeps its slot, and so its key,
# after the table forgot the pair (window ended, table cleared, ADDJOB
# failed): the key still travels with the job, as a job's options do.

from cpython.mem cimport PyMem_Realloc

DEFAULT_DEDUP_MAX_KEYS = 1000000

cdef enum:
    DEDUP_PARTITION_BITS = 8
    DEDUP_PARTITIONS = 256
    DEDUP_HEAP_MIN = 64


cdef inline uint64_t dedup_hash(object queue, const char* key, Py_ssize_t key_len) except? 0:
    """The pair's hash: keyed (a client choosing keys cannot aim them at one
    probe run); the queue's is cached in its name."""
    return keyed_hash(key, key_len) ^ \
        (<uint64_t>hash(queue) * <uint64_t>0x9E3779B97F4A7C15)


cdef inline bint _same_name(PyObject* name, object other) noexcept:
    """Two queue names are equal (a queue's jobs share one object)."""
    return name == <PyObject*>other or (
        PyBytes_GET_SIZE(<object>name) == PyBytes_GET_SIZE(other) and
        memcmp(PyBytes_AS_STRING(<object>name), PyBytes_AS_STRING(other),
               PyBytes_GET_SIZE(other)) == 0)


cdef inline bint _slot_is(DedupSlot* slot, uint64_t h, object queue, const char* key,
                          Py_ssize_t key_len) noexcept:
    return slot.hash == h and slot.key_len == key_len and \
        memcmp(slot.key, key, key_len) == 0 and _same_name(slot.queue, queue)


cdef inline int64_t _slot_memory(DedupSlot* slot) noexcept:
    return DEDUP_MEMORY_OVERHEAD + slot.key_len


cdef inline void slot_release(DedupSlot* slot) noexcept:
    """Drop one reference; the last one frees the slot."""
    slot.refs -= 1
    if slot.refs == 0:
        Py_DECREF(<object>slot.queue)
        PyMem_Free(slot)


cdef inline void slot_attach(Job job, DedupSlot* slot) noexcept:
    slot.refs += 1
    if job.dedup_ != NULL:
        slot_release(job.dedup_)
    job.dedup_ = slot


cdef DedupSlot* _new_slot(object queue, const char* key, Py_ssize_t key_len, uint64_t h,
                          const char* job_id, int64_t until_ms) except NULL:
    cdef DedupSlot* slot = <DedupSlot*>PyMem_Malloc(sizeof(DedupSlot) + key_len)
    if slot == NULL:
        raise MemoryError()
    slot.hash = h
    slot.until_ms = until_ms
    Py_INCREF(queue)
    slot.queue = <PyObject*>queue
    slot.refs = 1                          # the heap's
    slot.key_len = <uint32_t>key_len
    slot.live = False
    memcpy(slot.id, job_id, JOB_ID_LEN)
    memcpy(slot.key, key, key_len)
    return slot


cdef inline DedupSlot* dedup_find(DedupTable table, object queue, const char* key,
                                  Py_ssize_t key_len, uint64_t h, int64_t now_ms) noexcept:
    """The pair's slot whose window ends last, or NULL (none open)."""
    cdef IndexPartition* part = &table._parts[h & (DEDUP_PARTITIONS - 1)]
    cdef IndexBucket* bucket
    cdef DedupSlot* slot
    cdef DedupSlot* best = NULL
    cdef uint32_t i
    if part.buckets == NULL:
        return NULL
    i = index_home(part, h, DEDUP_PARTITION_BITS)
    bucket = &part.buckets[i]
    while bucket.item != NULL:
        if bucket.hash == h:
            slot = <DedupSlot*>bucket.item
            if slot.until_ms > now_ms and (best == NULL or slot.until_ms > best.until_ms) \
                    and _slot_is(slot, h, queue, key, key_len):
                best = slot
        i = (i + 1) & part.mask
        bucket = &part.buckets[i]
    return best


cdef inline DedupSlot* dedup_add(DedupTable table, object queue, const char* key,
                                 Py_ssize_t key_len, uint64_t h, const char* job_id,
                                 int64_t until_ms, bint fresh) except? NULL:
    """Remember the pair for job_id: its slot (the one known already, for
    a pair and job seen before), or NULL when the table is full (counted
    in `dropped`). `fresh`: a job just made, which cannot be here yet.
    Inline, with what it calls: ADDJOB's path."""
    cdef DedupSlot* slot
    if not fresh:
        slot = table._find_job(queue, key, key_len, h, job_id)
        if slot != NULL:
            return slot
    if table._len >= table.max_keys:
        table.dropped += 1
        return NULL
    if table._heap_len == table._heap_cap:
        _grow_heap(table)              # first: a slot made is never dropped
    slot = _new_slot(queue, key, key_len, h, job_id, until_ms)
    _heap_push(table, slot)
    _link(table, slot)
    table.memory += _slot_memory(slot)
    return slot


cdef inline void dedup_prefetch(DedupTable table, uint64_t h) noexcept:
    """Start reading the bucket the pair's probe begins at (index.pxi)."""
    index_prefetch(&table._parts[h & (DEDUP_PARTITIONS - 1)], h, DEDUP_PARTITION_BITS)


@cython.final
cdef class DedupTable:
    """(queue, key) -> the slots naming jobs, with the windows' ends in a heap."""

    def __cinit__(self):
        self._parts = <IndexPartition*>PyMem_Calloc(DEDUP_PARTITIONS, sizeof(IndexPartition))
        if self._parts == NULL:
            raise MemoryError()

    def __init__(self, Py_ssize_t max_keys=DEFAULT_DEDUP_MAX_KEYS):
        self.max_keys = max_keys

    def __dealloc__(self):
        self._release()
        PyMem_Free(self._parts)
        self._parts = NULL

    def __len__(self):
        return self._len

    # ------------------------------------------------------------- C API

    cdef DedupSlot* _find_job(self, object queue, const char* key, Py_ssize_t key_len,
                              uint64_t h, const char* job_id) noexcept:
        """The pair's slot for that job, or NULL."""
        cdef IndexPartition* part = &self._parts[h & (DEDUP_PARTITIONS - 1)]
        cdef uint32_t i
        cdef DedupSlot* slot
        if part.buckets == NULL:
            return NULL
        i = index_home(part, h, DEDUP_PARTITION_BITS)
        while part.buckets[i].item != NULL:
            slot = <DedupSlot*>part.buckets[i].item
            if part.buckets[i].hash == h and memcmp(slot.id, job_id, JOB_ID_LEN) == 0 and \
                    _slot_is(slot, h, queue, key, key_len):
                return slot
            i = (i + 1) & part.mask
        return NULL

    cdef int64_t unlink(self, DedupSlot* slot) noexcept:
        """Forget a live slot's pair (its references stay where they are);
        the memory freed."""
        cdef IndexPartition* part = &self._parts[slot.hash & (DEDUP_PARTITIONS - 1)]
        cdef int64_t at = index_find_item(part, slot.hash, slot, DEDUP_PARTITION_BITS)
        cdef int64_t freed = _slot_memory(slot)
        if at < 0:                 # not live: nothing to forget
            return 0
        index_remove_at(part, <uint32_t>at, DEDUP_PARTITION_BITS)
        slot.live = False
        self._len -= 1
        self.memory -= freed
        if self._len * 2 + DEDUP_HEAP_MIN < self._heap_len:
            self._compact_heap()  # may free the slot: unlinked ones would wait there
        return freed

    # The heap: one reference per slot, ordered by until_ms.

    cdef DedupSlot* _heap_pop(self) noexcept:
        """The earliest slot, its reference handed to the caller."""
        cdef DedupDue* heap = self._heap
        cdef DedupSlot* first = heap[0].slot
        self._heap_len -= 1
        _sift_down(heap, self._heap_len, 0, heap[self._heap_len])
        return first

    cdef void _compact_heap(self) noexcept:
        """Keep the live slots only, re-ordered (unlinking made the heap
        hold more dead slots than live ones)."""
        cdef Py_ssize_t i, kept = 0
        cdef DedupDue* heap = self._heap
        for i in range(self._heap_len):
            if heap[i].slot.live:
                heap[kept] = heap[i]
                kept += 1
            else:
                slot_release(heap[i].slot)
        self._heap_len = kept
        for i in range(kept // 2 - 1, -1, -1):
            _sift_down(heap, kept, i, heap[i])

    # -------------------------------------------------------- Python API

    def expire(self, int64_t now_ms, Py_ssize_t limit):
        """Forget up to `limit` pairs whose window ended; the memory freed."""
        cdef int64_t freed = 0
        cdef DedupSlot* slot
        while self._heap_len and limit > 0 and self._heap[0].until_ms <= now_ms:
            slot = self._heap_pop()
            limit -= 1
            if slot.live:
                freed += self.unlink(slot)
            slot_release(slot)
        return freed

    def next_due(self):
        """When the earliest window ends (ms), or None."""
        return self._heap[0].until_ms if self._heap_len else None

    def lookup(self, bytes queue, bytes key, int64_t now_ms):
        """The job ID the pair names now, or None."""
        cdef Py_ssize_t size = PyBytes_GET_SIZE(key)
        cdef DedupSlot* slot = dedup_find(self, queue, PyBytes_AS_STRING(key), size,
                                          dedup_hash(queue, PyBytes_AS_STRING(key), size), now_ms)
        return None if slot == NULL else PyBytes_FromStringAndSize(slot.id, JOB_ID_LEN)

    def items(self):
        """[(queue, key, job ID, window end ms)], a snapshot."""
        cdef Py_ssize_t p
        cdef uint32_t i
        cdef IndexPartition* part
        found = []
        for p in range(DEDUP_PARTITIONS):
            part = &self._parts[p]
            if part.buckets == NULL:
                continue
            for i in range(part.mask + 1):
                if part.buckets[i].item != NULL:
                    found.append(slot_fields(<DedupSlot*>part.buckets[i].item))
        return found

    def clear(self):
        self._release()
        self.memory = 0

    cdef void _release(self) noexcept:
        cdef Py_ssize_t i
        for i in range(DEDUP_PARTITIONS):
            _release_dedup_partition(&self._parts[i])
        for i in range(self._heap_len):
            slot_release(self._heap[i].slot)
        PyMem_Free(self._heap)
        self._heap = NULL
        self._heap_len = self._heap_cap = 0
        self._len = 0


cdef tuple slot_fields(DedupSlot* slot):
    """(queue, key, job ID, window end ms)"""
    return (<object>slot.queue, PyBytes_FromStringAndSize(slot.key, slot.key_len),
            PyBytes_FromStringAndSize(slot.id, JOB_ID_LEN), slot.until_ms)


cdef void _sift_down(DedupDue* heap, Py_ssize_t n, Py_ssize_t i, DedupDue moving) noexcept:
    """Put `moving` at i, or below it: the heap of n entries stays ordered."""
    cdef Py_ssize_t child
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and heap[child + 1].until_ms < heap[child].until_ms:
            child += 1
        if moving.until_ms <= heap[child].until_ms:
            break
        heap[i] = heap[child]
        i = child
    heap[i] = moving


cdef inline void _heap_push(DedupTable table, DedupSlot* slot) noexcept:
    """The heap takes the slot's new reference (inline: ADDJOB's path); the
    caller made room."""
    cdef Py_ssize_t i = table._heap_len, parent
    cdef DedupDue* heap = table._heap
    cdef int64_t until_ms = slot.until_ms
    while i > 0:
        parent = (i - 1) >> 1
        if heap[parent].until_ms <= until_ms:
            break
        heap[i] = heap[parent]
        i = parent
    heap[i].until_ms = until_ms
    heap[i].slot = slot
    table._heap_len += 1


cdef int _grow_heap(DedupTable table) except -1:
    cdef Py_ssize_t capacity = table._heap_cap * 2 if table._heap_cap else DEDUP_HEAP_MIN
    cdef DedupDue* grown = <DedupDue*>PyMem_Realloc(table._heap, capacity * sizeof(DedupDue))
    if grown == NULL:
        raise MemoryError()
    table._heap = grown
    table._heap_cap = capacity
    return 0


cdef inline int _link(DedupTable table, DedupSlot* slot) except -1:
    """Index a new slot (inline: ADDJOB's path)."""
    index_add(&table._parts[slot.hash & (DEDUP_PARTITIONS - 1)], slot.hash, slot,
              DEDUP_PARTITION_BITS)
    slot.live = True
    table._len += 1
    return 0


cdef void _release_dedup_partition(IndexPartition* part) noexcept:
    """Unlink every slot (the heap and the jobs hold their references)."""
    cdef uint32_t i
    if part.buckets != NULL:
        for i in range(part.mask + 1):
            if part.buckets[i].item != NULL:
                (<DedupSlot*>part.buckets[i].item).live = False
    index_free(part)
