# A client connection's fast path (conn.pxi).

cdef class ConnectionBase:
    cdef public ServerCore server
    cdef public SessionCore session
    cdef object _transport
    cdef object _transport_write           # its bound write method
    cdef public RequestParser reader
    cdef public object pending             # deque of commands waiting, or None
    cdef public object pending_error
    cdef public object _order              # replies behind a parked command, or None
    cdef public uint64_t held_gen          # the AOF batch the replies in _out wait for (0: none)
    cdef public bint closing
    cdef public bint draining              # closing once the replies held for the AOF left
    cdef public bint _running
    cdef HotCall call
    cdef list _out                         # replies not written yet (this turn), or None

    # Hooks: the server layer's (server/protocol.py's ClientConnection
    # overrides each; conn.pxi says what each must do).
    cpdef run_commands(self, list commands, double started, bytes replies)
    cpdef park(self, waiter, bint overlaps, bytes replies)
    cpdef yield_loop(self)
    cpdef flush_order(self)
    cpdef close_after_replies(self)
    cpdef after_commands(self)

    cdef int _run_fast(self, double started) except -1
    cdef int _finish_fast(self, bint pipelined, bint wrote) except -1
    cpdef deliver(self, bytes payload, bint pipelined=*, bint wrote=*)
    cpdef write_out(self, bytes payload, bint pipelined=*)
    cpdef flush_out(self)
