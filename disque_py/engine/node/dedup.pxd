# ADDJOB ... DEDUP: what a key means for the node (dedup.pxi).

cdef object dedup_duplicate(NodeCore node, DedupSlot* found, object client, int64_t timeout_ms,
                            int64_t repl, int64_t now)
cdef DedupFields* dedup_fields_of(Job job, DedupFields* out) noexcept
cdef int dedup_remember(NodeCore node, Job job, object queue, DedupFields* fields, bint fresh,
                        int64_t now) except -1
cdef int dedup_remember_copy(NodeCore node, Job job, DedupFields* fields,
                             int64_t now) except -1
cdef int dedup_promise(NodeCore node, Job job) except -1
cdef int dedup_log(NodeCore node, Job job) except -1
cdef int dedup_forget(NodeCore node, Job job) except -1
cdef int dedup_restore(NodeCore node, object queue, const char* key, Py_ssize_t key_len,
                       const char* job_id, int64_t until_ms, bint forget) except -1
