# GETJOB's take, ENQUEUE, DEQUEUE, NACK, WORKING (delivery.pxi).

cdef list take_jobs(NodeCore node, list names, list queues, Py_ssize_t count)
cdef Job take_one(NodeCore node, Queue q)
cdef int64_t enqueue_views(NodeCore node, ArgView* ids, Py_ssize_t count, bint nack) except -1
cdef int64_t dequeue_views(NodeCore node, ArgView* ids, Py_ssize_t count) except -1
cdef int enqueue_one(NodeCore node, const char* job_id, bint nack) except -1
cdef int dequeue_one(NodeCore node, const char* job_id) except -1
cdef object job_working(NodeCore node, object job_id)
cdef int nack_one(NodeCore node, const char* job_id, int64_t delay_ms) except -1
cdef int64_t nack_views(NodeCore node, ArgView* ids, Py_ssize_t count,
                        int64_t delay_ms) except -1
