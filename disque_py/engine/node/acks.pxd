# ACKJOB, FASTACK, DELJOB and the dummy ack (acks.pxi).

cdef int64_t ack_views(NodeCore node, ArgView* ids, Py_ssize_t count) except -1
cdef int ack_one(NodeCore node, const char* job_id) except -1
cdef Job dummy_ack(NodeCore node, const char* job_id)
cdef int64_t fast_ack_views(NodeCore node, ArgView* ids, Py_ssize_t count) except -1
cdef int fast_ack_one(NodeCore node, const char* job_id) except -1
cdef int64_t delete_jobs(NodeCore node, job_ids) except -1
cdef int delete_job(NodeCore node, const char* job_id) except -1
cdef list well_formed_ids(job_ids)
cdef int acks_on_setack(NodeCore node, bytes sender, const char* job_id,
                        int64_t may_have) except -1
cdef int acks_on_gotack(NodeCore node, bytes sender, const char* job_id,
                        int64_t known) except -1
cdef int acks_try_gc(NodeCore node, Job job, bint from_timer) except -1
