# Idempotent producers: ADDJOB ... DEDUP key [WINDOW seconds].
#
# A node remembers, per job made with a DEDUP key, its (queue, key) until
# the key's window ends; an ADDJOB with a remembered pair answers that
# job's ID instead of making a job. The rules it keeps:
#
#   * every node that holds a copy of the job remembers its key (the key
#     travels in the job's options, options.pxi), and so does the node that
#     received the ADDJOB, even when it keeps no copy;
#   * the pair is the ADDJOB's queue and key, wherever the job moves later
#     (dead-lettered, QREQUEUE TO: options.dedup_queue keeps that queue);
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

import heapq

from disque_py.core.effects import AofDedup, AofUndedup

DEFAULT_DEDUP_MAX_KEYS = 1000000
DEDUP_TABLE_FULL = "DEDUP key table is full (dedup-max-keys %d)"


# The table is the job table's shape (table.pxi): DEDUP_PARTITIONS small
# chained hash tables threaded through the entries, and the windows' ends
# in a binary heap kept in a C array; entries are untracked by the cyclic
# GC. A dict keyed by (queue, key) tuples with a heapq beside it cost three
# times a plain ADDJOB's instructions (the tuples fed the GC's young
# generation, every collection walked the table); this costs a hash of the
# key (cached in the bytes object, which the job's options keep), one
# object and a heap push.

cdef enum:
    DEDUP_PARTITION_BITS = 8
    DEDUP_PARTITIONS = 256
    DEDUP_MIN_BUCKETS = 4
    DEDUP_MAX_LOAD = 2
    DEDUP_HEAP_MIN = 64


@cython.final
@cython.no_gc
cdef class DedupEntry:
    """The job a (queue, key) pair names, until the window's end. Never
    changed once made: a new job for the pair gets a new entry."""

    @property
    def job_id(self):
        return PyBytes_FromStringAndSize(self.id_, JOB_ID_LEN)

    def __repr__(self):
        return "DedupEntry(%r, %r, %r, %d)" % (self.queue, self.key, self.job_id, self.until_ms)


cdef inline uint64_t _pair_hash(bytes queue, bytes key) except? 0:
    # Python's keyed hash of each (cached in the bytes objects): a client
    # choosing keys cannot aim them at one chain.
    return <uint64_t>hash(key) ^ (<uint64_t>hash(queue) * <uint64_t>0x9E3779B97F4A7C15)


cdef inline int64_t _entry_memory(DedupEntry entry) noexcept:
    return DEDUP_MEMORY_OVERHEAD + PyBytes_GET_SIZE(entry.key)


@cython.final
cdef class DedupTable:
    """(queue, key) -> DedupEntry, with the windows' ends in a heap."""

    def __cinit__(self):
        self._parts = <Partition*>PyMem_Calloc(DEDUP_PARTITIONS, sizeof(Partition))
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

    cdef DedupEntry _find(self, bytes queue, bytes key, uint64_t h, const char* job_id):
        """The pair's entry for that job."""
        cdef Partition* part = &self._parts[h & (DEDUP_PARTITIONS - 1)]
        cdef PyObject* entry
        if part.buckets == NULL:
            return None
        entry = part.buckets[(h >> DEDUP_PARTITION_BITS) & part.mask]
        while entry != NULL:
            if (<DedupEntry>entry).hash == h and \
                    memcmp((<DedupEntry>entry).id_, job_id, JOB_ID_LEN) == 0 and \
                    (<DedupEntry>entry).key == key and (<DedupEntry>entry).queue == queue:
                return <DedupEntry>entry
            entry = (<DedupEntry>entry).next_
        return None

    cdef DedupEntry find(self, bytes queue, bytes key, int64_t now_ms):
        """The pair's entry whose window ends last, or None (none open)."""
        cdef uint64_t h = _pair_hash(queue, key)
        cdef Partition* part = &self._parts[h & (DEDUP_PARTITIONS - 1)]
        cdef PyObject* entry
        cdef DedupEntry best = None
        if part.buckets == NULL:
            return None
        entry = part.buckets[(h >> DEDUP_PARTITION_BITS) & part.mask]
        while entry != NULL:
            if (<DedupEntry>entry).hash == h and (<DedupEntry>entry).until_ms > now_ms and \
                    (best is None or (<DedupEntry>entry).until_ms > best.until_ms) and \
                    (<DedupEntry>entry).key == key and (<DedupEntry>entry).queue == queue:
                best = <DedupEntry>entry
            entry = (<DedupEntry>entry).next_
        return best

    cdef int64_t add(self, bytes queue, bytes key, const char* job_id, int64_t until_ms,
                     bint fresh) except -1:
        """Remember the pair for job_id; the memory it took (0: known
        already, or the table is full: counted in `dropped`). `fresh`: a job
        just made, which cannot be here yet."""
        cdef uint64_t h = _pair_hash(queue, key)
        cdef DedupEntry entry
        if not fresh and self._find(queue, key, h, job_id) is not None:
            return 0
        if self._len >= self.max_keys:
            self.dropped += 1
            return 0
        entry = DedupEntry.__new__(DedupEntry)
        entry.hash = h
        entry.queue = queue
        entry.key = key
        memcpy(entry.id_, job_id, JOB_ID_LEN)
        entry.until_ms = until_ms
        self._link(entry)
        self._heap_push(entry)
        self.memory += _entry_memory(entry)
        return _entry_memory(entry)

    cdef int64_t discard(self, bytes queue, bytes key, const char* job_id) except -1:
        """Forget the pair for job_id; the memory freed."""
        cdef DedupEntry found = self._find(queue, key, _pair_hash(queue, key), job_id)
        if found is None:
            return 0
        self._unlink(found)
        self.memory -= _entry_memory(found)
        return _entry_memory(found)

    cdef int _link(self, DedupEntry entry) except -1:
        cdef Partition* part = &self._parts[entry.hash & (DEDUP_PARTITIONS - 1)]
        cdef PyObject** slot
        if part.buckets == NULL:
            _resize_dedup(part, DEDUP_MIN_BUCKETS)
        slot = &part.buckets[(entry.hash >> DEDUP_PARTITION_BITS) & part.mask]
        Py_INCREF(entry)
        entry.next_ = slot[0]
        slot[0] = <PyObject*>entry
        entry.live = True
        part.count += 1
        self._len += 1
        if part.count > (part.mask + 1) * DEDUP_MAX_LOAD:
            _resize_dedup(part, (part.mask + 1) * 2)
        return 0

    cdef int _unlink(self, DedupEntry entry) except -1:
        cdef Partition* part = &self._parts[entry.hash & (DEDUP_PARTITIONS - 1)]
        cdef PyObject** link = &part.buckets[(entry.hash >> DEDUP_PARTITION_BITS) & part.mask]
        while link[0] != <PyObject*>entry:
            link = &(<DedupEntry>link[0]).next_
        link[0] = entry.next_
        entry.next_ = NULL
        entry.live = False
        part.count -= 1
        self._len -= 1
        Py_DECREF(entry)          # the heap still holds one
        if self._len * 2 + DEDUP_HEAP_MIN < self._heap_len:
            self._compact_heap()  # discarded entries would wait for their window there
        return 0

    # The heap: owned references, ordered by until_ms.

    cdef int _heap_push(self, DedupEntry entry) except -1:
        cdef Py_ssize_t i = self._heap_len, parent
        cdef PyObject** heap
        if i == self._heap_cap:
            self._heap_grow()
        heap = self._heap
        Py_INCREF(entry)
        while i > 0:
            parent = (i - 1) >> 1
            if (<DedupEntry>heap[parent]).until_ms <= entry.until_ms:
                break
            heap[i] = heap[parent]
            i = parent
        heap[i] = <PyObject*>entry
        self._heap_len += 1
        return 0

    cdef DedupEntry _heap_pop(self):
        """The earliest entry, its reference handed to the caller."""
        cdef PyObject** heap = self._heap
        cdef DedupEntry first = <DedupEntry>heap[0]
        cdef PyObject* last
        cdef Py_ssize_t i = 0, child, n
        self._heap_len -= 1
        n = self._heap_len
        last = heap[n]
        while True:
            child = 2 * i + 1
            if child >= n:
                break
            if child + 1 < n and (<DedupEntry>heap[child + 1]).until_ms < \
                    (<DedupEntry>heap[child]).until_ms:
                child += 1
            if (<DedupEntry>last).until_ms <= (<DedupEntry>heap[child]).until_ms:
                break
            heap[i] = heap[child]
            i = child
        heap[i] = last
        Py_DECREF(first)          # the caller's typed variable holds its own
        return first

    cdef int _heap_grow(self) except -1:
        cdef Py_ssize_t capacity = self._heap_cap * 2 if self._heap_cap else DEDUP_HEAP_MIN
        cdef PyObject** grown = <PyObject**>PyMem_Realloc(self._heap, capacity * sizeof(PyObject*))
        if grown == NULL:
            raise MemoryError()
        self._heap = grown
        self._heap_cap = capacity
        return 0

    cdef int _compact_heap(self) except -1:
        """Keep the live entries only, re-ordered (a discard made the heap
        hold more dead entries than live ones)."""
        cdef Py_ssize_t i, kept = 0, n = self._heap_len
        cdef PyObject** heap = self._heap
        live = []
        for i in range(n):
            if (<DedupEntry>heap[i]).live:
                live.append(<object>heap[i])
            Py_DECREF(<object>heap[i])
        self._heap_len = 0
        live.sort(key=_until)
        for entry in live:
            self._heap_push(<DedupEntry>entry)      # sorted: each push is one comparison
        return 0

    # -------------------------------------------------------- Python API

    def expire(self, int64_t now_ms, Py_ssize_t limit):
        """Forget up to `limit` pairs whose window ended; the memory freed."""
        cdef int64_t freed = 0
        cdef DedupEntry entry
        while self._heap_len and limit > 0 and \
                (<DedupEntry>self._heap[0]).until_ms <= now_ms:
            entry = self._heap_pop()
            limit -= 1
            if entry.live:
                self._unlink(entry)
                freed += _entry_memory(entry)
        self.memory -= freed
        return freed

    def next_due(self):
        """When the earliest window ends (ms), or None."""
        return (<DedupEntry>self._heap[0]).until_ms if self._heap_len else None

    def lookup(self, bytes queue, bytes key, int64_t now_ms):
        """The job ID the pair names now, or None."""
        entry = self.find(queue, key, now_ms)
        return None if entry is None else entry.job_id

    def items(self):
        """[(queue, key, job ID, window end ms)], a snapshot."""
        cdef Py_ssize_t p
        cdef uint32_t i
        cdef PyObject* entry
        cdef Partition* part
        found = []
        for p in range(DEDUP_PARTITIONS):
            part = &self._parts[p]
            if part.buckets == NULL:
                continue
            for i in range(part.mask + 1):
                entry = part.buckets[i]
                while entry != NULL:
                    found.append(((<DedupEntry>entry).queue, (<DedupEntry>entry).key,
                                  (<DedupEntry>entry).job_id, (<DedupEntry>entry).until_ms))
                    entry = (<DedupEntry>entry).next_
        return found

    def clear(self):
        self._release()
        self.memory = 0

    cdef void _release(self) noexcept:
        cdef Py_ssize_t i
        for i in range(DEDUP_PARTITIONS):
            _release_dedup_partition(&self._parts[i])
        for i in range(self._heap_len):
            Py_DECREF(<object>self._heap[i])
        PyMem_Free(self._heap)
        self._heap = NULL
        self._heap_len = self._heap_cap = 0
        self._len = 0


def _until(DedupEntry entry):
    return entry.until_ms


cdef int _resize_dedup(Partition* part, uint32_t size) except -1:
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
                following = (<DedupEntry>entry).next_
                slot = &buckets[((<DedupEntry>entry).hash >> DEDUP_PARTITION_BITS) & (size - 1)]
                (<DedupEntry>entry).next_ = slot[0]
                slot[0] = entry
                entry = following
        PyMem_Free(part.buckets)
    part.buckets = buckets
    part.mask = size - 1
    return 0


cdef void _release_dedup_partition(Partition* part) noexcept:
    cdef uint32_t i
    cdef PyObject* entry
    cdef PyObject* following
    if part.buckets == NULL:
        return
    for i in range(part.mask + 1):
        entry = part.buckets[i]
        while entry != NULL:
            following = (<DedupEntry>entry).next_
            (<DedupEntry>entry).next_ = NULL
            (<DedupEntry>entry).live = False
            Py_DECREF(<object>entry)
            entry = following
    PyMem_Free(part.buckets)
    part.buckets = NULL
    part.mask = 0
    part.count = 0


cdef object dedup_duplicate(NodeCore node, bytes queue, bytes key, object client,
                            int64_t timeout_ms, int64_t repl, int64_t now):
    """ADDJOB ... DEDUP key (REPLICATE `repl`, -1: the default) at `now`: None when
    the job is to be made; else the earlier job's DedupEntry (its ID is the
    answer), or a Waiter: `client` parks until the first ADDJOB's outcome
    while it still waits here, or until `repl` (at most the job's own)
    holders confirm their copies (or its own timeout). Raises -OOM when a
    new key would not fit, NOREPL when too few nodes are reachable."""
    cdef DedupTable table = node.dedup
    cdef DedupEntry found = table.find(queue, key, now)
    cdef Job first
    if found is None:
        if table._len >= table.max_keys:
            table.refused += 1
            raise OutOfMemoryError(DEDUP_TABLE_FULL % table.max_keys)
        return None
    table.hits += 1
    first = node.jobs.find(found.id_)
    if first is None or first.state == ACKED or first.flags & FLAG_CONFIRMED:
        return found
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
        return found
    if repl - 1 > node.reachable_peers or repl > PyTuple_GET_SIZE(<object>first.delivered_):
        raise NoReplError(NOT_ENOUGH_NODES)       # too few nodes, or holders, to confirm
    return node.confirm_copies(first, client, deadline, repl)


cdef inline object dedup_queue_of(Job job, JobOptions options):
    """The queue of the job's ADDJOB: the pair's first half."""
    return options.dedup_queue if options.dedup_queue is not None else <object>job.queue_


cdef inline void dedup_moving(JobOptions options, object old_queue) noexcept:
    """The job leaves `old_queue`: its DEDUP pair stays the ADDJOB's."""
    if options.dedup_key is not None and options.dedup_queue is None:
        options.dedup_queue = old_queue


cdef int dedup_remember(NodeCore node, Job job, bint made_here, int64_t now) except -1:
    """Remember the key of a job that has one, unless its window ended by
    `now`. `made_here`: the job was
    just made by this node's ADDJOB (nothing to search for); if it keeps
    no copy (`external`) nor LOADJOB record, its key gets a DEDUP record."""
    cdef JobOptions options
    cdef int64_t added
    if job.options_ == NULL:
        return 0
    options = <JobOptions>job.options_
    if options.dedup_key is None or options.dedup_until_ms <= now:
        return 0
    queue = dedup_queue_of(job, options)
    added = node.dedup.add(queue, options.dedup_key, job.id_, options.dedup_until_ms,
                           made_here)
    node.used_memory += added
    return added


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
    cdef JobOptions options
    if job.options_ == NULL or (<JobOptions>job.options_).dedup_key is None:
        return 0
    options = <JobOptions>job.options_
    if node.aof_enabled:
        node.effects.append(AofDedup(dedup_queue_of(job, options), options.dedup_key, job.id,
                                     options.dedup_until_ms))
    return 0


cdef int dedup_forget(NodeCore node, Job job) except -1:
    """The ADDJOB that made `job` failed: its key no longer names it."""
    cdef JobOptions options
    cdef int64_t freed
    if job.options_ == NULL:
        return 0
    options = <JobOptions>job.options_
    if options.dedup_key is None:
        return 0
    queue = dedup_queue_of(job, options)
    freed = node.dedup.discard(queue, options.dedup_key, job.id_)
    if freed:
        node.used_memory -= freed
        if node.aof_enabled:
            node.effects.append(AofUndedup(queue, options.dedup_key, job.id))
    return 0
