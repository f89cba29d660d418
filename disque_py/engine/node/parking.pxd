# Parked clients' shared bookkeeping (parking.pxi).

cpdef enum:
    # What a waiter waits for (Waiter.kind)
    WAIT_GETJOB = 0
    WAIT_JOB_REPLICATION = 1
    WAIT_WAITJOB = 2
    WAIT_QWAIT = 3
    WAIT_DUPLICATE_ADD = 4             # replication.py's followers


cdef class Waiter:
    cdef public object client
    cdef public int kind
    cdef public tuple queues
    cdef public object pattern         # GETJOB PATTERN (consumers.py), or None
    cdef public bint withcounters
    cdef public int64_t deadline       # 0: no deadline
    cdef public object job
    cdef public bint active
    cdef public int64_t seq
    cdef public int64_t copies         # DUPLICATE_ADD: the confirmed copies it waits for


cdef class Deadlines:
    cdef readonly list _heap
    cdef public int64_t _live
    cdef int64_t _seq

    cpdef add(self, Waiter waiter)
    cpdef discard(self, Waiter waiter)


cdef class Parking:
    cdef public NodeCore core
    cdef public Deadlines deadlines
    cdef public int64_t blocked_clients
    cdef dict _forgetters              # kind -> its owner's forget(waiter)
    cdef dict _cancellers              # kind -> its owner's cancel(waiter)

    cpdef start(self, Waiter waiter)
    cpdef forget(self, Waiter waiter)
    cpdef release(self, Waiter waiter, outcome)
