# The hot commands (hot.pxi): parsed, run and answered in C.

cdef enum HotKind:
    HOT_NONE = 0
    HOT_PING = 1
    HOT_ADDJOB = 2
    HOT_GETJOB = 3
    HOT_ACKJOB = 4
    HOT_FASTACK = 5
    HOT_NACK = 6
    HOT_ENQUEUE = 7
    HOT_DEQUEUE = 8
    HOT_WORKING = 9
    HOT_QLEN = 10

cdef enum HotStatus:
    HOT_DONE = 0           # the reply is in the buffer
    HOT_PARKED = 1         # the client waits on `waiter`


cdef class HotCall:
    cdef NodeCore node
    cdef object session
    cdef WriteBuffer out
    cdef bint resp3
    cdef object waiter
    cdef bint overlaps
    cdef Queue recent_queue
    cdef Queue found               # the queue queue_name() found, or None
    cdef ArgView* views
    cdef Py_ssize_t views_capacity

    cdef int _reserve(self, Py_ssize_t count) except -1
    cdef bytes arg_bytes(self, ArgView arg)
    cdef Queue known_queue(self, ArgView name)
    cdef bytes queue_name(self, ArgView name)
    cdef int run(self, int kind, ArgView* argv, Py_ssize_t argc) except -1
