# Copies between nodes: REPLJOB, GOTJOB, adopting a copy (copies.pxi).

cdef int64_t copies_replicate(NodeCore node, Job job, int64_t count, bint noreply,
                              bint promised=*, tuple only=*) except -1
cdef int copies_on_repljob(NodeCore node, bytes sender, int mflags, list jobs) except -1
cdef Job copies_adopt(NodeCore node, WireJob* wire, JobOptions options, DedupFields* dedup,
                      bytes queue, int64_t now, int state, bint persist)
cdef int copies_revise(NodeCore node, Job job, WireJob* wire, JobOptions options,
                       int64_t now) except -1
cdef tuple copies_known_holders(NodeCore node, const char* nodes, Py_ssize_t count)
cdef int copies_learn_holders(NodeCore node, Job job, const char* nodes,
                              Py_ssize_t count) except -1
cdef int copies_on_gotjob(NodeCore node, bytes sender, bytes job_id) except -1
cdef bint copies_take_frame(NodeCore node, bytes sender, int mflags, const char* body,
                            Py_ssize_t size) except -1
cdef bint copies_take_one(NodeCore node, bytes sender, int mflags, const char* data,
                          Py_ssize_t size, bint take_new, int64_t now) except -1
cdef int copies_confirmed(NodeCore node, bytes sender, Job job) except -1
cdef bint copies_achieved(NodeCore node, Job job) except -1
