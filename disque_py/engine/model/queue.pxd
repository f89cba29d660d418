# Queues (queue.pxi): jobs in delivery order, and each queue's state.

cpdef enum:
    CHUNK_CAPACITY = 512
    PAUSED_IN = 1
    PAUSED_OUT = 2
    PAUSED_ALL = 3


cdef struct Chunk:
    Py_ssize_t head
    Py_ssize_t tail
    PyObject* items[512]          # CHUNK_CAPACITY


cdef class JobQueue:
    cdef Chunk** chunks
    cdef Py_ssize_t nchunks
    cdef Py_ssize_t capacity
    cdef readonly Py_ssize_t count

    cdef int add(self, Job job) except -1
    cdef Job pop_first(self)
    cdef bint discard(self, Job job) except -1
    cdef Chunk* _append_chunk(self) except NULL
    cdef void _drop_chunk(self, Py_ssize_t index) noexcept
    cdef Py_ssize_t _chunk_for(self, Job job) noexcept
    cdef PyObject** _position(self, Chunk* chunk, Job job) noexcept
    cdef PyObject** _find(self, Job job, Py_ssize_t* chunk_index) noexcept
    cdef int _insert(self, Job job) except -1
    cdef int _split(self, Py_ssize_t index) except -1
    cdef void _release(self) noexcept


cdef class Queue:
    cdef readonly bytes name
    cdef readonly JobQueue jobs
    cdef public int64_t ctime
    cdef public int64_t atime
    cdef public int flags
    cdef public object waiters             # dict (waiter -> None, FIFO) or None
    cdef public int64_t jobs_in
    cdef public int64_t jobs_out
    cdef public object responders          # node id -> last import (s), or None
    cdef public object interested          # node id -> (until ms, count), or None
    cdef public int64_t needjobs_bcast_time
    cdef public int64_t needjobs_bcast_attempt
    cdef public int64_t needjobs_adhoc_time
    cdef public int64_t needjobs_adhoc_attempt
    cdef public int64_t import_current_time
    cdef public int64_t import_current_count
    cdef public int64_t import_prev_time
    cdef public int64_t import_prev_count
    cdef public bint live                  # False once the node forgot the queue
