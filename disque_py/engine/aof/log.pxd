# The node's AOF records of this loop turn (log.pxi).

@cython.final
cdef class AofLog:
    cdef list pending                      # (kind, item) pairs flat, in order
    cdef WriteBuffer out                   # encoded records not taken yet
    cdef bint scheduled                    # on_records was called this turn
    cdef public object on_records          # hook: records wait (the turn's end writes them)
    cdef public uint64_t noted             # records noted so far (a batch compares it)
    cdef public uint64_t written_gen       # batches of records written by the writer
    cdef public uint64_t released_gen      # replies waiting for batches up to this may leave
    cdef public bint refusing              # the AOF takes no records now (-MISCONF)

    cdef int note(self, int kind, object item) except -1
    cdef int encode_pending(self) except -1
    cpdef uint64_t reply_gen(self) noexcept
