# The job record: Disque's unit of work, with C-typed fields.
#
# A job is a message in a named queue plus the bookkeeping that lets a
# cluster deliver it at least once (or at most once):
#   state     wait-repl (waiting for its copies), active (known here, not
#             queued), queued (in its queue here), acked (kept until GC);
#   ctime     creation, ms * 1e6 plus a same-millisecond counter: the queue
#             order, with the ID breaking ties;
#   etime     absolute expire time, seconds; qtime: next re-queue here, ms
#             (0: never again, as for an at-most-once job once queued);
#   repl, delay, retry  what the producer asked for;
#   delivered the nodes that may hold a copy (a tuple of node IDs; empty for
#             a "dummy ack", an ACKJOB for an ID never seen here).
#
# Memory is the product: a node holds millions of these, so the record is
# one 176-byte object plus its body, with no Python containers of its own.
# It holds no reference that can lead back to a job (raw pointers to a
# bytes name and a tuple of bytes), so the cyclic GC never tracks it. The
# table, the queue and the awake schedule that hold a job each own one
# reference to it; the links they thread through it are borrowed.
#
# Jobs are made by make_job() (Python: new_job()); Job() raises.

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF, Py_XINCREF
from libc.string cimport memcmp, memcpy

STATE_NAMES = (b"wait-repl", b"active", b"queued", b"acked")

# Characters a well-formed ID may hold at each place (id_is_valid).
cdef unsigned char _HEX[256]
cdef unsigned char _B64[256]


cdef void _init_char_classes() noexcept:
    cdef int c
    for c in range(256):
        _HEX[c] = (48 <= c <= 57) or (65 <= c <= 70) or (97 <= c <= 102)
        _B64[c] = (48 <= c <= 57) or (65 <= c <= 90) or (97 <= c <= 122) or c == 43 or c == 47


_init_char_classes()


cdef bint id_is_valid(const char* data, Py_ssize_t size) noexcept:
    """D-<8 hex>-<24 base64>-<4 hex>, exactly 40 bytes."""
    cdef const unsigned char* p = <const unsigned char*>data
    cdef int i
    if size != JOB_ID_LEN or p[0] != 68 or p[1] != 45 or p[10] != 45 or p[35] != 45:
        return False
    for i in range(2, 10):
        if not _HEX[p[i]]:
            return False
    for i in range(11, 35):
        if not _B64[p[i]]:
            return False
    for i in range(36, 40):
        if not _HEX[p[i]]:
            return False
    return True


@cython.final
cdef class Job:

    def __init__(self, *args, **kwargs):
        raise TypeError("jobs are made by the engine (new_job)")

    def __dealloc__(self):
        if self.body_ != NULL:
            PyMem_Free(self.body_)
        Py_XDECREF(self.queue_)
        Py_XDECREF(self.delivered_)
        Py_XDECREF(self.options_)
        if self.dedup_ != NULL:
            slot_release(self.dedup_)

    @property
    def id(self):
        return PyBytes_FromStringAndSize(self.id_, JOB_ID_LEN)

    @property
    def priority(self):
        return DEFAULT_PRIORITY + self.prio_delta

    @property
    def options(self):
        """Its JobOptions, or None (set_options() gives them)."""
        return <object>self.options_ if self.options_ != NULL else None

    @property
    def dedup(self):
        """(the ADDJOB's queue, its DEDUP key, the window's end in ms), or
        None: the job has no key (dedup.pxi)."""
        if self.dedup_ == NULL:
            return None
        return slot_fields(self.dedup_)[:2] + (self.dedup_.until_ms,)

    @property
    def queue(self):
        return <object>self.queue_ if self.queue_ != NULL else None

    @property
    def body(self):
        if self.body_ == NULL:
            return None
        return PyBytes_FromStringAndSize(self.body_, self.body_len)

    @property
    def body_size(self):
        return self.body_len

    @property
    def delivered(self):
        return <object>self.delivered_

    @delivered.setter
    def delivered(self, tuple nodes):
        Py_INCREF(nodes)
        Py_XDECREF(self.delivered_)
        self.delivered_ = <PyObject*>nodes

    @property
    def awake_due(self):
        """When the awake schedule next wakes this job (ms), or None."""
        if self.awake_bucket == NULL:
            return None
        return (<Bucket>self.awake_bucket).due

    def is_dummy_ack(self):
        return PyTuple_GET_SIZE(<object>self.delivered_) == 0

    def __repr__(self):
        return "<Job %s %s q=%r>" % (self.id.decode(), STATE_NAMES[self.state].decode(),
                                     self.queue)


cdef Job make_job(const char* job_id, object queue, const char* body, Py_ssize_t body_len,
                  bint has_body, int state, int repl, uint32_t delay, uint32_t retry,
                  int64_t ctime, int64_t etime, tuple delivered):
    cdef Job job = Job.__new__(Job)
    memcpy(job.id_, job_id, JOB_ID_LEN)
    if queue is not None:
        Py_INCREF(queue)
        job.queue_ = <PyObject*>queue
    if has_body:
        # PyMem never returns NULL for a non-zero size it can serve; an
        # empty body still gets a buffer so that NULL keeps meaning "none".
        job.body_ = <char*>PyMem_Malloc(body_len if body_len else 1)
        if job.body_ == NULL:
            raise MemoryError()
        memcpy(job.body_, body, body_len)
        job.body_len = <uint32_t>body_len
    Py_INCREF(delivered)
    job.delivered_ = <PyObject*>delivered
    job.state = state
    job.repl = repl
    job.delay = delay
    job.retry = retry
    job.ctime = ctime
    job.etime = <uint32_t>etime
    return job


cdef void set_job_queue(Job job, bytes name) noexcept:
    """Move a job that is in no queue to another queue name."""
    Py_INCREF(name)
    Py_XDECREF(job.queue_)
    job.queue_ = <PyObject*>name


def new_job(bytes job_id, queue, body, int state, int repl, uint32_t delay, uint32_t retry,
            int64_t ctime, int64_t etime, tuple delivered):
    """A job record (Python's constructor). `queue` is bytes or None,
    `body` bytes or None (a dummy ack)."""
    if PyBytes_GET_SIZE(job_id) != JOB_ID_LEN:
        raise ValueError("a job ID has 40 bytes")
    if queue is not None and type(queue) is not bytes:
        raise TypeError("queue must be bytes or None")
    cdef const char* data = NULL
    cdef Py_ssize_t size = 0
    if body is not None:
        data = PyBytes_AS_STRING(body)
        size = PyBytes_GET_SIZE(body)
    return make_job(PyBytes_AS_STRING(job_id), queue, data, size, body is not None, state,
                    repl, delay, retry, ctime, etime, delivered)


def is_valid_id(job_id):
    """A well-formed job ID (any node's)."""
    return type(job_id) is bytes and id_is_valid(PyBytes_AS_STRING(job_id),
                                                 PyBytes_GET_SIZE(job_id))
