# Queues: the jobs waiting in a named queue, in delivery order, and the
# queue's own state (pause flags, waiting clients, statistics, federation).
#
# JobQueue keeps jobs ordered by (priority, ctime, job ID), higher priority
# first (options.pxi: PRIORITY; plain jobs all have the default), then
# oldest first, in a list of chunks: C arrays of at most CHUNK_CAPACITY job
# pointers, each sorted, the chunks in order. What each operation costs:
#   * a fresh job (no older than the newest queued) is appended: O(1);
#   * GETJOB takes the head: O(1) (a chunk's used part is [head, tail));
#   * a job queued again (NACK, a retry) goes back in its place, near the
#     head, and DEQUEUE/ACKJOB/expiry take any job out: a binary search over
#     the chunks' last keys, then one within a chunk, then a memmove of at
#     most one chunk; a full chunk splits in two;
#   * memory: one pointer per job, chunks at least half full except at the
#     ends.
# The queue holds one reference to each job in it. Queue (the named queue)
# owns no policy: the node decides when jobs enter and leave.

from cpython.mem cimport PyMem_Realloc
from libc.string cimport memmove

cdef enum:
    IMPORT_RATE_WINDOW_MS = 5000
    IMPORT_RATE_MIN_ELAPSED_MS = 50

PAUSE_STATE_NAMES = {0: b"none", PAUSED_IN: b"in", PAUSED_OUT: b"out", PAUSED_ALL: b"all"}


cdef inline int _job_cmp(Job a, Job b) noexcept:
    """Queue order: higher priority first, then creation time, then ID
    (Disque's tie-break)."""
    if a.prio_delta != b.prio_delta:
        return -1 if a.prio_delta > b.prio_delta else 1
    if a.ctime != b.ctime:
        return -1 if a.ctime < b.ctime else 1
    return memcmp(a.id_, b.id_, JOB_ID_LEN)


cdef Chunk* _new_chunk() except NULL:
    cdef Chunk* chunk = <Chunk*>PyMem_Malloc(sizeof(Chunk))
    if chunk == NULL:
        raise MemoryError()
    chunk.head = chunk.tail = 0
    return chunk


@cython.final
cdef class JobQueue:

    def __dealloc__(self):
        self._release()

    def __len__(self):
        return self.count

    def __bool__(self):
        return self.count != 0

    def __iter__(self):
        return iter(self.peek(self.count))

    def __contains__(self, Job job):
        return self._find(job, NULL) != NULL

    # ------------------------------------------------------------- C API

    cdef int add(self, Job job) except -1:
        """Put `job` in its place (the caller knows it is not queued)."""
        cdef Chunk* last
        if self.nchunks:
            last = self.chunks[self.nchunks - 1]
            if _job_cmp(<Job>last.items[last.tail - 1], job) <= 0:
                if last.tail == CHUNK_CAPACITY:
                    last = self._append_chunk()
                Py_INCREF(job)
                last.items[last.tail] = <PyObject*>job
                last.tail += 1
                self.count += 1
                return 0
        else:
            self._append_chunk()
        self._insert(job)
        return 0

    cdef Job pop_first(self):
        """Take the oldest job out (None if empty); the caller gets the reference."""
        cdef Chunk* chunk
        cdef PyObject* item
        if self.count == 0:
            return None
        chunk = self.chunks[0]
        item = chunk.items[chunk.head]
        chunk.head += 1
        self.count -= 1
        if chunk.head == chunk.tail:
            self._drop_chunk(0)
        job = <Job>item
        Py_DECREF(job)           # `job` (a local) holds it now
        return job

    cdef bint discard(self, Job job) except -1:
        """Take `job` out; False if it is not in this queue."""
        cdef Py_ssize_t chunk_index
        cdef PyObject** slot = self._find(job, &chunk_index)
        cdef Chunk* chunk
        if slot == NULL:
            return False
        chunk = self.chunks[chunk_index]
        memmove(slot, slot + 1, (chunk.items + chunk.tail - slot - 1) * sizeof(PyObject*))
        chunk.tail -= 1
        self.count -= 1
        if chunk.head == chunk.tail:
            self._drop_chunk(chunk_index)
        Py_DECREF(job)
        return True

    cdef Chunk* _append_chunk(self) except NULL:
        cdef Chunk** grown
        if self.nchunks == self.capacity:
            grown = <Chunk**>PyMem_Realloc(self.chunks,
                                           (self.capacity * 2 + 4) * sizeof(Chunk*))
            if grown == NULL:
                raise MemoryError()
            self.chunks = grown
            self.capacity = self.capacity * 2 + 4
        chunk = _new_chunk()
        self.chunks[self.nchunks] = chunk
        self.nchunks += 1
        return chunk

    cdef void _drop_chunk(self, Py_ssize_t index) noexcept:
        PyMem_Free(self.chunks[index])
        self.nchunks -= 1
        memmove(&self.chunks[index], &self.chunks[index + 1],
                (self.nchunks - index) * sizeof(Chunk*))

    cdef Py_ssize_t _chunk_for(self, Job job) noexcept:
        """The first chunk whose last job is not before `job` (or the last)."""
        cdef Py_ssize_t low = 0, high = self.nchunks - 1, middle
        cdef Chunk* chunk
        while low < high:
            middle = (low + high) // 2
            chunk = self.chunks[middle]
            if _job_cmp(<Job>chunk.items[chunk.tail - 1], job) < 0:
                low = middle + 1
            else:
                high = middle
        return low

    cdef PyObject** _position(self, Chunk* chunk, Job job) noexcept:
        """Where `job` is or would go in `chunk` (first item not before it)."""
        cdef Py_ssize_t low = chunk.head, high = chunk.tail, middle
        while low < high:
            middle = (low + high) // 2
            if _job_cmp(<Job>chunk.items[middle], job) < 0:
                low = middle + 1
            else:
                high = middle
        return &chunk.items[low]

    cdef PyObject** _find(self, Job job, Py_ssize_t* chunk_index) noexcept:
        cdef Py_ssize_t index
        cdef Chunk* chunk
        cdef PyObject** slot
        if self.count == 0:
            return NULL
        index = self._chunk_for(job)
        chunk = self.chunks[index]
        slot = self._position(chunk, job)
        if slot == chunk.items + chunk.tail or slot[0] != <PyObject*>job:
            return NULL
        if chunk_index != NULL:
            chunk_index[0] = index
        return slot

    cdef int _insert(self, Job job) except -1:
        cdef Py_ssize_t index = self._chunk_for(job)
        cdef Chunk* chunk = self.chunks[index]
        cdef PyObject** slot
        if chunk.tail - chunk.head == CHUNK_CAPACITY:
            self._split(index)
            if _job_cmp(<Job>chunk.items[chunk.tail - 1], job) < 0:
                index += 1
                chunk = self.chunks[index]
        slot = self._position(chunk, job)
        if chunk.tail < CHUNK_CAPACITY:
            memmove(slot + 1, slot, (chunk.items + chunk.tail - slot) * sizeof(PyObject*))
            chunk.tail += 1
        else:
            # Room only before the head: the items before `slot` move left.
            memmove(chunk.items + chunk.head - 1, chunk.items + chunk.head,
                    (slot - chunk.items - chunk.head) * sizeof(PyObject*))
            chunk.head -= 1
            slot -= 1
        Py_INCREF(job)
        slot[0] = <PyObject*>job
        self.count += 1
        return 0

    cdef int _split(self, Py_ssize_t index) except -1:
        """A full chunk becomes two half-full ones."""
        cdef Chunk* upper
        cdef Chunk* lower
        cdef Py_ssize_t half, moved
        self._append_chunk()
        upper = self.chunks[self.nchunks - 1]
        memmove(&self.chunks[index + 2], &self.chunks[index + 1],
                (self.nchunks - index - 2) * sizeof(Chunk*))
        self.chunks[index + 1] = upper
        lower = self.chunks[index]
        half = (lower.tail - lower.head) // 2
        moved = lower.tail - lower.head - half
        memcpy(upper.items, lower.items + lower.head + half, moved * sizeof(PyObject*))
        upper.head, upper.tail = 0, moved
        memmove(lower.items, lower.items + lower.head, half * sizeof(PyObject*))
        lower.head, lower.tail = 0, half
        return 0

    cdef void _release(self) noexcept:
        cdef Py_ssize_t i, j
        cdef Chunk* chunk
        for i in range(self.nchunks):
            chunk = self.chunks[i]
            for j in range(chunk.head, chunk.tail):
                Py_XDECREF(chunk.items[j])
            PyMem_Free(chunk)
        PyMem_Free(self.chunks)
        self.chunks = NULL
        self.nchunks = self.capacity = self.count = 0

    # -------------------------------------------------------- Python API

    def peek(self, Py_ssize_t count):
        """Up to `count` jobs from the head; a negative count, from the
        newest backwards (QPEEK)."""
        cdef Py_ssize_t i, j
        cdef Chunk* chunk
        found = []
        if count >= 0:
            for i in range(self.nchunks):
                chunk = self.chunks[i]
                for j in range(chunk.head, chunk.tail):
                    if len(found) >= count:
                        return found
                    found.append(<object>chunk.items[j])
        else:
            for i in range(self.nchunks - 1, -1, -1):
                chunk = self.chunks[i]
                for j in range(chunk.tail - 1, chunk.head - 1, -1):
                    if len(found) >= -count:
                        return found
                    found.append(<object>chunk.items[j])
        return found

    def push(self, Job job):
        """Add a job (tests and tools; the node queues through enqueue)."""
        self.add(job)

    def pop(self):
        return self.pop_first()

    def remove(self, Job job):
        return self.discard(job)

    def clear(self):
        self._release()


@cython.final
cdef class Queue:
    """A named queue: its jobs, the clients blocked on it, its pause
    state, the counters QSTAT shows and the federation state."""

    def __init__(self, bytes name, int64_t now_ms):
        self.name = name
        self.jobs = JobQueue.__new__(JobQueue)
        self.ctime = now_ms // 1000
        self.atime = self.ctime
        self.live = True
        self.import_current_time = now_ms
        self.import_prev_time = now_ms

    def __len__(self):
        return self.jobs.count

    @property
    def blocked(self):
        return len(self.waiters) if self.waiters else 0

    @property
    def pause_state(self):
        return PAUSE_STATE_NAMES[self.flags & PAUSED_ALL]

    def add_waiter(self, waiter):
        if self.waiters is None:
            self.waiters = {}
        self.waiters[waiter] = None

    def remove_waiter(self, waiter):
        waiters = self.waiters
        if waiters is not None:
            waiters.pop(waiter, None)
            if not waiters:
                self.waiters = None

    def import_rate(self, int64_t now_ms):
        """Jobs per second imported from other nodes, roughly."""
        cdef int64_t elapsed, jobs
        if now_ms - self.import_current_time > IMPORT_RATE_WINDOW_MS:
            return 0
        elapsed = max(now_ms - self.import_prev_time, IMPORT_RATE_MIN_ELAPSED_MS)
        jobs = self.import_prev_count + self.import_current_count
        return (jobs * 1000 + elapsed - 1) // elapsed

    def count_import(self, int64_t now_ms):
        if now_ms - self.import_current_time > 1000:
            self.import_prev_time = self.import_current_time
            self.import_prev_count = self.import_current_count
            self.import_current_time = now_ms
            self.import_current_count = 0
        self.import_current_count += 1

    def is_evictable(self, int64_t now_s, int64_t max_idle_s):
        """Empty, idle, nobody waiting, not paused: safe to forget."""
        return (self.jobs.count == 0 and not self.waiters and not self.flags & PAUSED_ALL
                and now_s - self.atime >= max_idle_s)

    def __repr__(self):
        return "<Queue %r jobs=%d>" % (self.name, self.jobs.count)
