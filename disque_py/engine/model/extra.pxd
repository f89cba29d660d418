# A job's extra record (extra.pxi): what only a job being replicated or
# collected needs, kept beside the job (NodeCore.extras), not in it.

@cython.final
cdef class JobExtra:
    # The nodes that confirmed: their copy (wait-repl) or the ack (acked),
    # a set of node IDs, or None.
    cdef public object confirmed
    # The producer parked until the copies are made (a Waiter), or None.
    cdef public object waiter
    # When the last node was asked for a copy (ms).
    cdef public int64_t repl_added_at
    # Duplicate ADDJOBs (DEDUP) awaiting the same outcome: a list, or None.
    cdef public object followers
