# The server and session state the fast path reads (server.pxi).

cdef enum:
    MAX_HOT_NAMES = 16


cdef struct HotName:
    const char* name
    Py_ssize_t size
    PyObject* command             # borrowed: _hot_names keeps it


cdef class StatsCore:
    cdef public int64_t connections_received
    cdef public int64_t commands_processed
    cdef public int64_t net_input_bytes
    cdef public int64_t net_output_bytes
    cdef public int64_t rejected_connections


cdef class SessionCore:
    cdef public bint authenticated
    cdef public bint resp3
    cdef public bint kill_requested
    cdef public int reply_flags
    cdef public double last_interaction
    cdef public object last_command


cdef class CommandCore:
    cdef public int arity
    cdef public int hot                # HotKind, or HOT_NONE
    cdef public bint needs_disk
    cdef public int64_t calls
    cdef public double seconds


cdef class ConnectionBase             # conn.pxi, below


cdef class ServerCore:
    cdef public NodeCore node
    cdef public StatsCore stats
    cdef public list monitors
    cdef public list kills
    cdef public object shutdown_request
    cdef public double paused_until
    cdef public double slow_after
    cdef public bytes _requirepass
    cdef public object timing_clock       # None: CLOCK_MONOTONIC, read in C
    cdef list _unflushed                  # connections with replies of this loop turn
    cdef list _waiting                    # connections whose replies wait for an fsync
    cdef bint _flush_scheduled
    cdef bint _batching                   # the last flush wrote to several connections
    cdef void* _last_writer               # the connection written to last (identity only)
    cdef list _hot_names
    cdef HotName _hot[16]         # MAX_HOT_NAMES
    cdef Py_ssize_t _hot_count

    # Hooks: the server layer's (server/state.py's ServerState overrides
    # each; server.pxi says what each must do).
    cpdef schedule_flush(self)
    cpdef write_aof(self)
    cpdef write_bus(self)
    cpdef bint aof_accepts(self) except -1
    cpdef command_took(self, command, list argv, double seconds)

    cdef CommandCore hot_command(self, const char* name, Py_ssize_t size)
    cdef bint disk_accepts(self) except -1
    cdef double now(self) except? -1
    cdef int want_flush(self, ConnectionBase conn) except -1
    cdef int _write_or_wait(self, ConnectionBase conn, uint64_t released) except -1
