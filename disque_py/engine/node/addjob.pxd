# ADDJOB (addjob.pxi).

cdef object add_job_bytes(NodeCore node, bytes queue, bytes body, int64_t repl, int64_t delay,
                          int64_t retry, int64_t ttl, int64_t maxlen, bint async_, object client,
                          int64_t timeout_ms, JobOptions options, bytes dedup_key,
                          int64_t dedup_until_ms)
cdef Job create_job(NodeCore node, bytes queue, Queue q, const char* body, Py_ssize_t body_len,
                    int64_t repl, int64_t delay, int64_t retry, int64_t ttl, int64_t maxlen,
                    bint async_, object client, int64_t timeout_ms, JobOptions options,
                    int64_t now, DedupFields* dedup)
