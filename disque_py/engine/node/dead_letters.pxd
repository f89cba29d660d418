# Dead letters, QREQUEUE, a holder's newer state, BACKOFF (dead_letters.pxi).

cdef int dead_letter(NodeCore node, Job job, JobOptions options) except -1
cdef int mark_copy_dead(NodeCore node, Job job) except -1
cdef list revive_dead(NodeCore node, bytes dead_queue, object to_queue, int64_t count)
cdef bint revise_job(NodeCore node, Job job, bytes queue, uint32_t nacks, uint32_t deliveries,
                     JobOptions options) except -1
cdef bint back_off(NodeCore node, Job job, int64_t now) except -1
