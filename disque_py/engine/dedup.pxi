# Idempotent producers: ADDJOB ... DEDUP key [WINDOW seconds].
#
# A node remembers, per (queue, key), the ID of the first job added with
# that key until the key's window ends; an ADDJOB with a remembered key
# answers that ID instead of making a job. The rules it keeps:
#
#   * every node that holds a copy of the job remembers its key (the key
#     travels in the job's options, options.pxi), and so does the node that
#     received the ADDJOB, even when it keeps no copy;
#   * a key outlives its job (acked, expired): it lasts its window, which
#     ends at an absolute time (unix ms) every holder agrees on;
#   * a key is forgotten before its window ends only when the ADDJOB that
#     made it failed (NOREPL: the job is deleted from every node that may
#     have a copy), so a retry can try again;
#   * the table is bounded: dedup-max-keys keys, each counted in
#     used_memory; a full table refuses new keys (ADDJOB gets -OOM, a copy
#     from a peer is kept without its key and counted in `dropped`).
#
# Persistence: a job's LOADJOB record carries its key, so loading the AOF
# remembers it; DEDUP records (a key whose job has no record here, and
# every key at a rewrite) and UNDEDUP records (a failed ADDJOB) carry the
# rest. Expired keys are skipped when loaded.

from cpython.dict cimport PyDict_Size

import heapq

from disque_py.core.effects import AofDedup, AofUndedup

DEFAULT_DEDUP_MAX_KEYS = 1000000
DEDUP_TABLE_FULL = "DEDUP key table is full (dedup-max-keys %d)"


@cython.final
@cython.no_gc
cdef class DedupEntry:
    """The job a (queue, key) pair names, until the window's end."""

    def __repr__(self):
        return "DedupEntry(%r, %d)" % (self.job_id, self.until_ms)


cdef inline int64_t _entry_memory(tuple qkey) noexcept:
    return DEDUP_MEMORY_OVERHEAD + PyBytes_GET_SIZE(<object>PyTuple_GET_ITEM(qkey, 1))


@cython.final
cdef class DedupTable:
    """(queue, key) -> DedupEntry, with its windows' ends in a heap."""

    def __init__(self, Py_ssize_t max_keys=DEFAULT_DEDUP_MAX_KEYS):
        self._entries = {}
        self._expiry = []
        self.max_keys = max_keys

    def __len__(self):
        return len(self._entries)

    @property
    def full(self):
        return len(self._entries) >= self.max_keys

    cdef bytes find(self, tuple qkey, int64_t now_ms):
        """The ID remembered for qkey, or None (also once its window ended)."""
        found = self._entries.get(qkey)
        if found is None or (<DedupEntry>found).until_ms <= now_ms:
            return None
        return (<DedupEntry>found).job_id

    cdef int64_t add(self, tuple qkey, bytes job_id, int64_t until_ms) except -1:
        """Remember qkey -> job_id; the memory it took (0: known already, or
        the table is full). A key already held for another job keeps it: the
        first job wins, as every holder heard of it first."""
        cdef DedupEntry entry
        found = self._entries.get(qkey)
        if found is not None:
            entry = <DedupEntry>found
            if entry.job_id == job_id and until_ms > entry.until_ms:
                entry.until_ms = until_ms
                heapq.heappush(self._expiry, (until_ms, qkey))
            return 0
        if PyDict_Size(self._entries) >= self.max_keys:
            return 0
        entry = DedupEntry.__new__(DedupEntry)
        entry.job_id = job_id
        entry.until_ms = until_ms
        self._entries[qkey] = entry
        heapq.heappush(self._expiry, (until_ms, qkey))
        self.memory += _entry_memory(qkey)
        return _entry_memory(qkey)

    cdef int64_t discard(self, tuple qkey, bytes job_id) except -1:
        """Forget qkey if it names job_id; the memory freed."""
        found = self._entries.get(qkey)
        if found is None or (<DedupEntry>found).job_id != job_id:
            return 0
        del self._entries[qkey]
        self.memory -= _entry_memory(qkey)
        return _entry_memory(qkey)

    def expire(self, int64_t now_ms, Py_ssize_t limit):
        """Forget up to `limit` keys whose window ended; the memory freed."""
        cdef int64_t freed = 0
        cdef list heap = self._expiry
        entries = self._entries
        while heap and limit > 0 and <int64_t>heap[0][0] <= now_ms:
            qkey = heapq.heappop(heap)[1]
            limit -= 1
            found = entries.get(qkey)
            if found is not None and (<DedupEntry>found).until_ms <= now_ms:
                del entries[qkey]
                freed += _entry_memory(qkey)
        if len(heap) > 2 * len(entries) + 64:      # windows extended or keys discarded
            self._expiry = [(entry.until_ms, qkey) for qkey, entry in entries.items()]
            heapq.heapify(self._expiry)
        self.memory -= freed
        return freed

    def next_due(self):
        """When the earliest window ends (ms), or None."""
        return self._expiry[0][0] if self._expiry else None

    def lookup(self, bytes queue, bytes key, int64_t now_ms):
        return self.find((queue, key), now_ms)

    def items(self):
        """[(queue, key, job ID, window end ms)], a snapshot."""
        return [(qkey[0], qkey[1], entry.job_id, entry.until_ms)
                for qkey, entry in self._entries.items()]

    def clear(self):
        self._entries = {}
        self._expiry = []
        self.memory = 0


cdef object dedup_duplicate(NodeCore node, bytes queue, bytes key, object client,
                            int64_t timeout_ms):
    """ADDJOB ... DEDUP key: None when the job is to be made; else the
    earlier job's ID (bytes) to answer, or, while that job still waits for
    its copies here, a Waiter: `client` parks until the same outcome (or
    its own timeout). Raises -OOM when a new key would not fit."""
    cdef DedupTable table = node.dedup
    cdef int64_t now = node.now_ms()
    cdef Job first
    found = table.find((queue, key), now)
    if found is None:
        if PyDict_Size(table._entries) >= table.max_keys:
            table.refused += 1
            raise OutOfMemoryError(DEDUP_TABLE_FULL % table.max_keys)
        return None
    table.hits += 1
    first = node.jobs.find(PyBytes_AS_STRING(found))
    if first is not None and first.state == WAIT_REPL:
        return node.follow_replication(first, client, now + timeout_ms if timeout_ms else 0)
    return found


cdef int dedup_remember(NodeCore node, Job job, bint log_it) except -1:
    """Remember the key of a job that has one (`log_it`: in a DEDUP record
    too, for a job with no LOADJOB record here)."""
    cdef JobOptions options
    cdef int64_t added
    if job.options_ == NULL:
        return 0
    options = <JobOptions>job.options_
    if options.dedup_key is None or options.dedup_until_ms <= node.now_ms():
        return 0
    qkey = (<object>job.queue_, options.dedup_key)
    added = node.dedup.add(qkey, job.id, options.dedup_until_ms)
    if added == 0:
        if node.dedup.find(qkey, node.now_ms()) is None:
            node.dedup.dropped += 1          # full
        return 0
    node.used_memory += added
    if log_it and node.aof_enabled:
        node.effects.append(AofDedup(<object>job.queue_, options.dedup_key, job.id,
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
    freed = node.dedup.discard((<object>job.queue_, options.dedup_key), job.id)
    if freed:
        node.used_memory -= freed
        if node.aof_enabled:
            node.effects.append(AofUndedup(<object>job.queue_, options.dedup_key, job.id))
    return 0
