# Loading the AOF: version 2's records replayed into a node, in C.
#
# AofLoader reads the records (records.pxi: read_record) from a buffer,
# the mapped file, from a position, a slice of records per call, so that
# the server layer gives its loop a turn between slices (-LOADING answers,
# INFO's progress, a shutdown while loading: server/persistence_service.py).
# Each record changes the node as it did when the record was written:
#
#     'J'  aof_load_job: the job back (the rule below; one implementation,
#          which the older formats' LOADJOB reaches too: NodeCore.load_job)
#     'D'  the job forgotten, as DELJOB forgets it (acks.pxi: delete_job)
#     'K'  a DEDUP key remembered until its window ends (dedup.pxi)
#     'U'  that key forgotten
#
# The loader stops at the first record it cannot replay and says why
# (`status`, `problem`, at `pos`): torn or damaged (read_record's verdict,
# judged against the end of the written data and of the file), or a whole
# 'J' record whose job does not parse (LOAD_BAD_JOB). Nothing it replays
# is written to the AOF again (the AOF is not open while it loads).


@cython.final
cdef class AofLoader:

    def __cinit__(self, NodeCore node, bint enqueue, Py_ssize_t pos):
        """Replay into `node` from byte `pos` (the first record after the
        header); `enqueue`: aof-enqueue-jobs-once."""
        self.node = node
        self.enqueue = enqueue
        self.pos = pos
        self.status = RECORD_OK

    def run(self, data, Py_ssize_t data_end, Py_ssize_t max_records):
        """Replay up to `max_records` records of `data` (a buffer: the file)
        that end by `data_end` (where the written data ends). True while
        records remain; False at the end or where it stopped (`status`)."""
        cdef const unsigned char[::1] view
        cdef const char* base
        cdef AofRecordView record
        cdef Py_ssize_t count = 0, ahead
        cdef int64_t now = self.node.now_ms()
        if self.status != RECORD_OK or self.pos >= data_end:
            return False
        view = data
        base = <const char*>&view[0]
        ahead = self.pos
        self.names = [None] * NAME_CACHE_SIZE      # queues may change between slices
        while count < max_records and self.pos < data_end:
            self.status = read_record(base, self.pos, data_end, view.shape[0], &record)
            if self.status != RECORD_OK:
                self.problem = record.problem.decode()
                return False
            # The next job's bucket in the job table (a miss on a large
            # table) is asked for now: it arrives while this one is made.
            if record.end + AOF_RECORD_HEAD + JOB_ID_LEN <= data_end and \
                    base[record.end] == AOF_JOB:
                jobs_prefetch_id(self.node.jobs, base + record.end + AOF_RECORD_HEAD)
            while ahead < record.end + READ_AHEAD and ahead < data_end:
                disque_prefetch(base + ahead)       # the mapped file, a few records on
                ahead += 64
            if self._replay(&record, now):
                return False
            self.pos = record.end
            self.records += 1
            count += 1
        return self.pos < data_end

    cdef int _replay(self, AofRecordView* record, int64_t now) except -1:
        """One record (read_record accepted it): 0, or 1 with LOAD_BAD_JOB
        set for a job that does not parse."""
        cdef WireJob wire
        cdef DedupFields dedup
        cdef DedupRecord key
        cdef JobOptions options = None
        if record.kind == AOF_JOB:
            dedup.key = NULL
            try:
                parse_wire(record.payload, record.length, &wire)
                if wire.options != NULL:
                    options = parse_options(wire.options, wire.options_len, &dedup)
            except ValueError as error:
                self.status, self.problem = LOAD_BAD_JOB, f"malformed job record ({error})"
                return 1
            self.jobs += aof_load_job(self.node, &wire, options, &dedup,
                                  self._queue_name(wire.queue, wire.queue_len), self.enqueue,
                                  now)
        elif record.kind == AOF_GONE:
            delete_job(self.node, record.payload)
        else:
            parse_dedup_record(record, &key)
            dedup_restore(self.node, self.node.queue_name(
                              PyBytes_FromStringAndSize(key.queue, key.queue_len)),
                          key.key, key.key_len, key.job_id, key.until_ms,
                          record.kind == AOF_UNDEDUP)
        return 0

    cdef bytes _queue_name(self, const char* name, Py_ssize_t length):
        """The queue name object for jobs of the queue `name`: the one its
        queue holds, else one shared by the slice's jobs of that queue. A
        small direct-mapped cache: files interleave a few queues."""
        cdef Py_ssize_t slot = (length * 31 + (<const unsigned char*>name)[length - 1]
                                if length else 0) & (NAME_CACHE_SIZE - 1)
        cached = <object>PyList_GET_ITEM(self.names, slot)
        if cached is not None and PyBytes_GET_SIZE(cached) == length and \
                memcmp(PyBytes_AS_STRING(cached), name, length) == 0:
            return <bytes>cached
        found = self.node.queue_name(PyBytes_FromStringAndSize(name, length))
        self.names[slot] = found
        return found


cdef bint aof_load_job(NodeCore node, WireJob* wire, JobOptions options, DedupFields* dedup,
                   bytes queue, bint enqueue, int64_t now) except -1:
    """A job's record from the AOF (absolute expire time; `options` and
    `dedup` parsed from its block): back as active (queued again by its
    retry timer), or queued again when `enqueue` (a controlled restart)
    and it was. True if it made or changed a job."""
    cdef Job job
    if wire.etime * 1000 <= now:
        # Gone by TTL: its DEDUP key outlives it while its window (WINDOW
        # beyond the TTL) is open, here as on the other holders.
        if dedup.key != NULL:
            dedup_restore(node, queue if dedup.queue == NULL else node.queue_name(
                              PyBytes_FromStringAndSize(dedup.queue, dedup.queue_len)),
                          dedup.key, dedup.key_len, wire.id, dedup.until_ms, False)
        return False
    job = node.jobs.find(wire.id)
    if job is not None:
        # A later record of a job with options: dead-lettered, or moved
        # back by QREQUEUE, since the first one was written.
        if options is None:
            return False
        return revise_job(node, job, queue, wire.nacks, wire.deliveries, options)
    job = copies_adopt(node, wire, options, dedup, queue, now, ACTIVE, False)
    job.flags = wire.flags | (FLAG_BCAST_WILLQUEUE if job.retry else 0)
    if enqueue and wire.state == QUEUED:
        if job.retry == 0:
            job.qtime = now          # queued once more: it never was delivered
        node.enqueue(job, False, now)
    return True
