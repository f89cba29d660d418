# ADDJOB's semantics, once its arguments are parsed (hot.pxi parses them):
# the checks in Disque's order, the new job, and what it waits for.
#
# Replication policy: the node keeps a copy and asks repl-1 peers for the
# rest, or, when it is leaving the cluster or short of memory, keeps no
# copy and asks repl peers ("external replication"). A producer that waits
# for its copies parks through NodeHooks.wait_for_copies (node/
# replication.py answers it). On a node that has met no peer, REPLICATE
# defaults to 1.

from disque_py.base.errors import (CommandError, MaxlenError, NoReplError, OutOfMemoryError,
                                   PausedError)
from disque_py.base.replies import (CANNOT_HOLD_COPY, DELAY_NOT_BELOW_TTL, ID_COLLISION,
                                    MAXLEN_REACHED, NOT_ENOUGH_NODES, OOM_MESSAGE, PAUSED_INPUT,
                                    REASON_LEAVING, REASON_MEMORY, RETRY0_NEEDS_REPL1)
from disque_py.formats.bus import ENQUEUE as MSG_ENQUEUE

cdef tuple _NO_NODES = ()


cdef object add_job_bytes(NodeCore node, bytes queue, bytes body, int64_t repl, int64_t delay,
                          int64_t retry, int64_t ttl, int64_t maxlen, bint async_, object client,
                          int64_t timeout_ms, JobOptions options, bytes dedup_key,
                          int64_t dedup_until_ms):
    """NodeCore.add_job: create a job (repl and retry -1: the defaults).
    It comes back queued (or active, when delayed), or in wait-repl state
    with node.more(job).waiter parked for `client` when the producer must
    wait for its copies (timeout 0: no deadline). With a `dedup_key` (its
    window ending at dedup_until_ms, or with the TTL when 0) that names an
    earlier job, no job is made: the answer is that job's ID, or a Waiter
    for its outcome (dedup.pxi)."""
    cdef int64_t now = node.now_ms()
    cdef DedupFields dedup
    if dedup_key is not None:
        dedup.key, dedup.key_len = PyBytes_AS_STRING(dedup_key), PyBytes_GET_SIZE(dedup_key)
        dedup.until_ms = dedup_until_ms or now + ttl * 1000
        dedup.queue, dedup.hash = NULL, 0
    job = create_job(node, queue, None, PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body), repl,
                     delay, retry, ttl, maxlen, async_, client, timeout_ms, options, now,
                     NULL if dedup_key is None else &dedup)
    if job is not None:
        return job
    waiter = dedup_duplicate(node, dedup.earlier, client, timeout_ms, repl, now)
    return PyBytes_FromStringAndSize(dedup.earlier.id, JOB_ID_LEN) if waiter is None \
        else waiter


cdef Job create_job(NodeCore node, bytes queue, Queue q, const char* body, Py_ssize_t body_len,
                    int64_t repl, int64_t delay, int64_t retry, int64_t ttl, int64_t maxlen,
                    bint async_, object client, int64_t timeout_ms, JobOptions options,
                    int64_t now, DedupFields* dedup):
    """ADDJOB's semantics once its arguments are parsed (repl, retry -1:
    the defaults; `q`: the queue, when the caller found it; `now`: the
    clock the command read once; `dedup`: its DEDUP key, or NULL).

    A key that names an earlier job is looked up before any other
    check: no job is made, the answer is None, and `dedup.earlier` is
    that job's slot (dedup_duplicate() says what to reply). The job is
    built first all the same (all but its body), and dropped on a
    duplicate or a refusal: the key's bucket, which the caller
    prefetched, is a cache miss on a large table that the building
    hides. The checks run in Disque's order, so a request that breaks
    several rules gets the error Disque would give: at-most-once with
    copies, DELAY >= TTL, too few reachable nodes, MAXLEN, queue paused
    in input. The body is copied once they passed: a refusal or a
    duplicate costs the same whatever the body's size."""
    cdef bint external, wait
    cdef int64_t extra_copies
    cdef Job job
    if repl < 0:
        repl = node.cluster_size if node.cluster_size < MAX_DEFAULT_REPLICATION \
            else MAX_DEFAULT_REPLICATION
    if retry < 0:
        retry = ttl // 10 if ttl < 10 * DEFAULT_RETRY_MAX_S else DEFAULT_RETRY_MAX_S
        if retry == 0:
            retry = 1
    external = node.leaving or node.used_memory > node.memory_warn_at
    extra_copies = repl if external else repl - 1
    # A producer that waits for copies waits in wait-repl; otherwise the
    # job is active at once and enqueue() (or the awake timer) takes it.
    wait = extra_copies and not async_
    if q is None:
        found = node.queues.get(queue)
        if found is not None:
            q = <Queue>found
    if q is not None:
        queue = q.name                # every job of a queue shares its name
    job = _build_job(node, queue, repl, delay, retry, ttl, wait, external, async_, options, now)
    if dedup != NULL:
        dedup.earlier = dedup_lookup(node, queue, dedup, now)
        if dedup.earlier != NULL:
            return None
    _check_new_job(node, q, body_len, repl, delay, retry, ttl, maxlen, extra_copies, external,
                   async_)
    _fill_body(job, body, body_len)
    if keep_copy(external, async_):
        if not node.jobs.insert(job):
            raise CommandError(ID_COLLISION)
        node.used_memory += JOB_MEMORY_OVERHEAD + body_len
        if node.watch_queues:
            node.hooks.job_live(job)
    if dedup != NULL:
        if dedup_remember(node, job, queue, dedup, True, now) and external and not wait:
            dedup_log(node, job)       # no LOADJOB record here carries its key
    if not wait:
        job.flags |= FLAG_CONFIRMED    # nothing (more) to wait for
    node.stats_jobs_created += 1
    if wait:
        node.hooks.wait_for_copies(job, client, now + timeout_ms if timeout_ms else 0,
                                   extra_copies, external, now)
        return job
    if delay == 0 and not external:
        node.enqueue(job, False, now, q)
    elif keep_copy(external, async_):    # delayed, or external: a holder will queue it
        node.update_awake(job)
    if node.aof_enabled and not external:
        node.aof.note(AOF_JOB, job)
    if extra_copies:
        copies_replicate(node, job, extra_copies, True)
    if not keep_copy(external, async_) and PyTuple_GET_SIZE(<object>job.delivered_):
        # No copy here: ask one holder to queue it first.
        send_to_peer(node, node.rng.choice(job.delivered), MSG_ENQUEUE, (job.id, delay), 0)
    return job


cdef int _refuse_replication(NodeCore node, int64_t extra_copies, bint external) except -1:
    if external and extra_copies - 1 == node.reachable_peers:
        reason = REASON_LEAVING if node.leaving else REASON_MEMORY
        raise NoReplError(CANNOT_HOLD_COPY % reason)
    raise NoReplError(NOT_ENOUGH_NODES)


cdef inline bint keep_copy(bint external, bint async_) noexcept:
    """Whether ADDJOB keeps a copy here: all but an asynchronous job
    replicated externally (leaving, or short of memory)."""
    return not (async_ and external)


cdef inline Job _build_job(NodeCore node, bytes queue, int64_t repl, int64_t delay,
                           int64_t retry, int64_t ttl, bint wait, bint external, bint async_,
                           JobOptions options, int64_t now):
    """create_job()'s new job, its ID drawn, in no table yet, its body
    not copied yet."""
    cdef Job job = Job.__new__(Job)
    cdef tuple delivered = _NO_NODES if external else node._only_me
    node.ids.fill(job.id_, ttl, retry)
    if keep_copy(external, async_):
        jobs_prefetch(node.jobs, job)  # its bucket is read while the job is filled
    Py_INCREF(queue)
    job.queue_ = <PyObject*>queue
    Py_INCREF(delivered)
    job.delivered_ = <PyObject*>delivered
    job.state = WAIT_REPL if wait else ACTIVE
    job.repl = <uint16_t>repl
    job.delay = <uint32_t>delay
    job.retry = <uint32_t>retry
    job.ctime = node.next_ctime(now)
    job.etime = <uint32_t>(now // 1000 + ttl)
    job.qtime = now + (delay if delay else retry) * 1000
    if options is not None:
        set_options(job, options)
    return job


cdef inline int _check_new_job(NodeCore node, Queue q, Py_ssize_t body_len, int64_t repl,
                               int64_t delay, int64_t retry, int64_t ttl, int64_t maxlen,
                               int64_t extra_copies, bint external, bint async_) except -1:
    """create_job()'s checks, in Disque's order."""
    if retry == 0 and repl > 1:
        raise CommandError(RETRY0_NEEDS_REPL1)
    if delay >= ttl:
        raise CommandError(DELAY_NOT_BELOW_TTL)
    if extra_copies > node.reachable_peers:
        _refuse_replication(node, extra_copies, external)
    if q is not None:
        if maxlen and q.jobs.count >= maxlen:
            raise MaxlenError(MAXLEN_REACHED)
        if q.flags & PAUSED_IN:
            raise PausedError(PAUSED_INPUT)
    if node._maxmemory and keep_copy(external, async_) and \
            node.used_memory + JOB_MEMORY_OVERHEAD + body_len > node._maxmemory:
        # maxmemory is a hard cap: what is held now plus this job (its
        # body may be large) must fit, after freeing what can be freed.
        if not node.hooks.free_memory() or \
                node.used_memory + JOB_MEMORY_OVERHEAD + body_len > node._maxmemory:
            raise OutOfMemoryError(OOM_MESSAGE)
    return 0


cdef int _fill_body(Job job, const char* body, Py_ssize_t body_len) except -1:
    """The job's own copy of its body (last: a refused ADDJOB copies none)."""
    job.body_ = <char*>PyMem_Malloc(body_len if body_len else 1)
    if job.body_ == NULL:
        raise MemoryError()
    memcpy(job.body_, body, body_len)
    job.body_len = <uint32_t>body_len
    return 0
