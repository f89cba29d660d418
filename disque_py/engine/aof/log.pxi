# AofLog: the records the node's paths make, kept until the writer takes
# them once per loop turn, and the batch numbers replies wait for.
#
# A path notes what changed (note: a job's state, a job gone, a DEDUP key
# kept or forgotten) with the object itself: no record and no Python
# object is made per change. take() encodes every note of the turn in
# order into one buffer (records.pxi), reading each job's state then: the
# records describe the state at the turn's end (a job noted twice is
# written twice, in order; load.pxi's aof_load_job says which of a job's
# records counts). The first note of a turn calls the on_records hook
# once: the server layer writes the records at the turn's end, before
# the replies that wait for them (a log without the hook, a node alone
# in a test or the simulation, is taken by its owner).
#
# Batches: each take() that the writer writes is one batch (written_gen);
# the writer advances released_gen when replies waiting for batches may
# leave (written: everysec and no; fsynced: always). reply_gen() is the
# batch a reply made now waits for, 0 for none: the records noted this
# turn if any (the reply may show state they hold), else with appendfsync
# always those written but not yet fsynced. That is for a reply that may
# show anything: a client's batch that noted no record (`noted` did not
# move while it ran) waits for none (ConnectionBase.deliver): what it
# read may be in records not yet durable, but it acknowledged nothing.

@cython.final
cdef class AofLog:

    def __cinit__(self):
        self.pending = []
        self.out = WriteBuffer.__new__(WriteBuffer)

    cdef int note(self, int kind, object item) except -1:
        if not self.scheduled:
            self.scheduled = True
            if self.on_records is not None:      # None: no server (tests take() themselves)
                self.on_records()
        self.pending.append(kind)
        self.pending.append(item)
        self.noted += 1
        return 0

    cdef int encode_pending(self) except -1:
        cdef list pending = self.pending
        cdef Py_ssize_t i, count = PyList_GET_SIZE(pending)
        cdef int kind
        cdef object item
        self.pending = []
        for i in range(0, count, 2):
            kind = <int><object>PyList_GET_ITEM(pending, i)
            item = <object>PyList_GET_ITEM(pending, i + 1)
            if kind == AOF_JOB:
                put_job_record(self.out, <Job>item)
            elif kind == AOF_GONE:
                put_gone_record(self.out, (<Job>item).id_)
            else:
                queue, key, job_id, until_ms = <tuple>item
                put_dedup_record(self.out, kind, queue, PyBytes_AS_STRING(key),
                                 PyBytes_GET_SIZE(key), PyBytes_AS_STRING(job_id), until_ms)
        return 0

    cpdef uint64_t reply_gen(self) noexcept:
        """The batch a reply made now waits for (0: none)."""
        if self.scheduled:
            return self.written_gen + 1
        if self.released_gen < self.written_gen:
            return self.written_gen
        return 0

    def take(self):
        """The records noted since the last take, encoded (b"" if none)."""
        self.scheduled = False
        self.encode_pending()
        return self.out.take() if self.out.size else b""

    def drop(self):
        """Forget the records noted (the AOF was turned off)."""
        self.scheduled = False
        self.pending = []
        self.out.size = 0

    @property
    def has_records(self):
        return self.scheduled
