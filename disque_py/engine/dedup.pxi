# Idempotent producers: ADDJOB ... DEDUP key [WINDOW seconds].
#
# A node remembers, per job made with a DEDUP key, its (queue, key) until
# the key's window ends; an ADDJOB with a remembered pair answers that
# job's ID instead of making a job. The rules it keeps:
#
#   * every node that holds a copy of the job remembers its key (the key
#     travels in the job's options block, options.pxi), and so does the node that
#     received the ADDJOB, even when it keeps no copy;
#   * the pair is the ADDJOB's queue and key, wherever the job moves later
#     (dead-lettered, QREQUEUE TO: the slot keeps the ADDJOB's queue);
#   * two jobs with one pair (a retry that reached a node that knew neither,
#     then copies of both) are both remembered, each until its own window
#     ends: a duplicate gets the one whose window ends last;
#   * a key outlives its job (acked, expired): it lasts its window, which
#     ends at an absolute time (unix ms) every holder agrees on;
#   * an ID is answered only for a job this node saw reach its REPLICATE
#     level (FLAG_CONFIRMED: it made it, or it is acked); a holder with a
#     copy, which knows nothing of the first ADDJOB's fate, first asks the
#     job's holders to confirm their copies, as a first ADDJOB would
#     (REPLJOB flagged MSG_PROMISED, core/replication.py: confirm_copies;
#     it makes no copy where there is none: a node may have collected the
#     job after its ack),
#     and while the first ADDJOB still waits here, the duplicate waits for
#     its outcome;
#   * a key is forgotten before its window ends only when the ADDJOB that
#     made it failed (NOREPL: the job is deleted from every node that may
#     have a copy), so a retry can try again; but a node whose copy was
#     promised to a duplicate (FLAG_PROMISED) keeps the job then;
#   * the table is bounded: dedup-max-keys entries, each counted in
#     used_memory; a full table refuses new keys (ADDJOB gets -OOM, a copy
#     from a peer is kept without its key and counted in `dropped`).
#
# Persistence: a job's LOADJOB record carries its key, so loading the AOF
# remembers it; DEDUP records (a key whose job has no record here, and
# every key at a rewrite) and UNDEDUP records (a failed ADDJOB) carry the
# rest. Expired keys are skipped when loaded.

from cpython.mem cimport PyMem_Realloc

from disque_py.core.effects import AofDedup, AofUndedup

DEFAULT_DEDUP_MAX_KEYS = 1000000
DEDUP_TABLE_FULL = "DEDUP key table is full (dedup-max-keys %d)"


# The table: the hash index of index.pxi over the slots (DEDUP_PARTITIONS
# partitions), and the windows' ends in a binary heap kept in a C array. A
# slot is one C block with the key inline (DedupSlot, _core.pxd), and the
# job points to it: an ADDJOB with a new key costs a hash of the key, one
# allocation and a heap push, and no Python object (a DedupEntry object,
# the key's bytes and a JobOptions of the job's own cost 1.5 plain ADDJOBs'
# instructions). A new key, the producer's common case, is found absent
# without touching a slot (the index keeps the hashes).
#
# A slot's references: one for the heap (until its window ends, or a
# compaction drops it once unlinked) and one per job whose key it is; it is
# in the index while `live`. A job keeps its slot, and so its key,
# after the table forgot the pair (window ended, table cleared, ADDJOB
# failed): the key still travels with the job, as a job's options do.

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


# ------------------------------------------------ the rules, for node.pxi

cdef inline DedupSlot* dedup_lookup(NodeCore node, object queue, DedupFields* wanted,
                                    int64_t now) except? NULL:
    """ADDJOB ... DEDUP key at `now`: the slot of the earlier job the pair
    names (dedup_duplicate() says what to answer), or NULL when a job is to
    be made; `wanted` gets the pair's hash. Raises -OOM when a new key
    would not fit."""
    cdef DedupTable table = node.dedup
    cdef DedupSlot* found
    if wanted.hash == 0:
        wanted.hash = dedup_hash(queue, wanted.key, wanted.key_len)
    found = dedup_find(table, queue, wanted.key, wanted.key_len, wanted.hash, now)
    if found == NULL and table._len >= table.max_keys:
        table.refused += 1
        raise OutOfMemoryError(DEDUP_TABLE_FULL % table.max_keys)
    return found


cdef object dedup_duplicate(NodeCore node, DedupSlot* found, object client, int64_t timeout_ms,
                            int64_t repl, int64_t now):
    """A duplicate ADDJOB (REPLICATE `repl`, -1: the default) of the job
    `found` names: None when that job's ID is the answer; else a Waiter:
    `client` parks until the first ADDJOB's outcome while it still waits
    here, or until `repl` (at most the job's own) holders confirm their
    copies (or its own timeout). Raises NOREPL when too few nodes are
    reachable."""
    cdef Job first
    node.dedup.hits += 1
    first = node.jobs.find(found.id)
    if first is None or first.state == ACKED or first.flags & FLAG_CONFIRMED:
        return None
    deadline = now + timeout_ms if timeout_ms else 0
    if first.state == WAIT_REPL:
        return node.follow_replication(first, client, deadline)
    if repl < 0:
        repl = node.cluster_size if node.cluster_size < MAX_DEFAULT_REPLICATION \
            else MAX_DEFAULT_REPLICATION
    if first.repl < repl:
        repl = first.repl
    if repl <= 1:                          # this copy is all it asks for: keep it
        dedup_promise(node, first)
        return None
    if repl - 1 > node.reachable_peers or repl > PyTuple_GET_SIZE(<object>first.delivered_):
        raise NoReplError(NOT_ENOUGH_NODES)       # too few nodes, or holders, to confirm
    return node.confirm_copies(first, client, deadline, repl)


cdef DedupFields* dedup_fields_of(Job job, DedupFields* out) noexcept:
    """The job's key as a message carries it (queue NULL: the job's own
    queue), or NULL: it has none."""
    cdef DedupSlot* slot = job.dedup_
    if slot == NULL:
        return NULL
    out.key = slot.key
    out.key_len = slot.key_len
    out.until_ms = slot.until_ms
    out.hash = slot.hash
    if job.queue_ != NULL and _same_name(slot.queue, <object>job.queue_):
        out.queue = NULL
        out.queue_len = 0
    else:
        out.queue = PyBytes_AS_STRING(<object>slot.queue)
        out.queue_len = PyBytes_GET_SIZE(<object>slot.queue)
    return out


cdef int dedup_remember(NodeCore node, Job job, object queue, DedupFields* fields, bint fresh,
                        int64_t now) except -1:
    """Remember the key of `job` for the pair (queue, fields' key), unless
    its window ended by `now`; the job gets the slot. `fresh`: the job was
    just made by this node's ADDJOB (nothing to search for). 1 if
    remembered (0: window ended, or the table is full)."""
    cdef DedupTable table = node.dedup
    cdef int64_t before = table.memory
    cdef DedupSlot* slot
    if fields.until_ms <= now:
        return 0
    if fields.hash == 0:
        fields.hash = dedup_hash(queue, fields.key, fields.key_len)
    slot = dedup_add(table, queue, fields.key, fields.key_len, fields.hash, job.id_,
                     fields.until_ms, fresh)
    if slot == NULL:
        return 0
    node.used_memory += table.memory - before
    slot_attach(job, slot)
    return 1


cdef int dedup_remember_copy(NodeCore node, Job job, DedupFields* fields, int64_t now) except -1:
    """A copy's key, as its message or record carried it."""
    if fields.key == NULL:
        return 0
    if fields.queue == NULL:
        queue = <object>job.queue_
    else:
        queue = PyBytes_FromStringAndSize(fields.queue, fields.queue_len)
        known = node.queues.get(queue)
        if known is not None:
            queue = (<Queue>known).name
    return dedup_remember(node, job, queue, fields, False, now)


cdef int dedup_promise(NodeCore node, Job job) except -1:
    """Its ID answers (or will answer) a duplicate: the copy is kept if the
    first ADDJOB fails (FLAG_PROMISED), through a restart too. An acked
    job's last record is its DELJOB; a waiting one is written once made."""
    if job.flags & FLAG_PROMISED or job.state == ACKED:
        return 0
    job.flags |= FLAG_PROMISED
    if job.state != WAIT_REPL:
        node.persist_job(job)
    return 0


cdef int dedup_log(NodeCore node, Job job) except -1:
    """A DEDUP record for the key of a job no LOADJOB record here carries
    (written once its copies are made: a restart must not bring back the
    key of an ADDJOB that did not succeed)."""
    if job.dedup_ != NULL and node.aof_enabled:
        node.effects.append(AofDedup(*slot_fields(job.dedup_)))
    return 0


cdef int dedup_forget(NodeCore node, Job job) except -1:
    """The ADDJOB that made `job` failed: its key no longer names it."""
    cdef DedupSlot* slot = job.dedup_
    if slot == NULL or not slot.live:
        return 0
    node.used_memory -= node.dedup.unlink(slot)
    if node.aof_enabled:
        queue, key, job_id, _ = slot_fields(slot)
        node.effects.append(AofUndedup(queue, key, job_id))
    return 0
