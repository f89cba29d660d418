# Loading the AOF's version-2 records into a node (load.pxi).

cpdef enum:
    LOAD_BAD_JOB = 3               # after read_record's statuses: a whole 'J' record
                                   # whose job does not parse

cdef enum:
    NAME_CACHE_SIZE = 64               # AofLoader's queue names (a power of two)
    READ_AHEAD = 1024                  # bytes of the file asked for ahead of the record read


@cython.final
cdef class AofLoader:
    cdef NodeCore node
    cdef bint enqueue                      # aof-enqueue-jobs-once: queued jobs queued again
    cdef list names                        # recent queue names (_queue_name), per slice
    cdef public Py_ssize_t pos             # where the next record starts
    cdef public Py_ssize_t records         # records replayed
    cdef public Py_ssize_t jobs            # jobs loaded ('J' records that made or changed one)
    cdef public int status                 # RECORD_OK, or why it stopped at `pos`
    cdef public str problem                # ... in words

    cdef int _replay(self, AofRecordView* record, int64_t now) except -1
    cdef bytes _queue_name(self, const char* name, Py_ssize_t length)


cdef bint aof_load_job(NodeCore node, WireJob* wire, JobOptions options, DedupFields* dedup,
                       bytes queue, bint enqueue, int64_t now) except -1
