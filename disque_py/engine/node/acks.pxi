# Acknowledgements on this node: ACKJOB, FASTACK, DELJOB, and the dummy ack
# an ACKJOB of an unknown ID leaves in a cluster.
#
# A job whose only copy is here is acked and deleted at once; a job with
# other holders moves to the acked state here and its collection starts
# (acks_try_gc: SETACK, GOTACK, DELJOB to every holder; node/acks.py says
# how it goes). An ACKJOB of an unknown at-least-once ID, in a cluster,
# leaves a dummy ack (an acked job with no body and no known holders, that
# expires when the TTL its ID encodes ends), so the ack can reach a copy on
# the other side of a partition.
#
# The collection's messages a node answers are here too (acks_on_setack,
# acks_on_gotack: node/acks.py's rules, which says why each step is so);
# the bus's fast path takes them straight from a frame (net/link.pxi),
# and node/acks.py routes the decoded ones here.

from disque_py.formats.bus import DELJOB, GOTACK as MSG_GOTACK, SETACK as MSG_SETACK


cdef int64_t ack_views(NodeCore node, ArgView* ids, Py_ssize_t count) except -1:
    cdef int64_t known = 0
    cdef Py_ssize_t i
    for i in range(count):
        known += ack_one(node, ids[i].data)
    return known


cdef int ack_one(NodeCore node, const char* job_id) except -1:
    """1 if a known job moved to the acked state."""
    cdef int newly = 0
    job = node.jobs.find(job_id)
    if job is None:
        if node.cluster_size > 1 and not node.leaving and not _at_most_once(job_id):
            acks_try_gc(node, dummy_ack(node, job_id), False)
        return 0
    if job.delivered_ == <PyObject*>node._only_me and job.state != WAIT_REPL:
        # The only copy is ours: acked and collected at once, as the
        # longer way below would (it is not scheduled for a GC first).
        newly = job.state != ACKED
        node.stats_acked += newly
        node.unregister(job, GONE_ACKED)
        return newly
    if job.state != ACKED:
        node.acknowledge(job)
        newly = 1
        node.stats_acked += 1
    if job.state != ACKED:
        return newly
    if job.delivered_ == <PyObject*>node._only_me:
        node.unregister(job, GONE_ACKED)   # the only copy is ours: nobody else to tell
    else:
        acks_try_gc(node, job, False)
    return newly


cdef Job dummy_ack(NodeCore node, const char* job_id):
    """An acked job with no queue, body or holders, registered and due for
    its first collection attempt; it expires with the TTL its ID encodes."""
    cdef int64_t now_s = node.now_ms() // 1000
    cdef Job job = make_job(job_id, None, NULL, 0, False, ACKED, 0, 0, 0, 0,
                            now_s + _id_ttl_minutes(job_id) * 60, _NO_NODES)
    node.register(job)
    node.update_awake(job, node._next_gc_time(0))
    return job


cdef int64_t fast_ack_views(NodeCore node, ArgView* ids, Py_ssize_t count) except -1:
    cdef int64_t deleted = 0
    cdef Py_ssize_t i
    for i in range(count):
        deleted += fast_ack_one(node, ids[i].data)
    return deleted


cdef int fast_ack_one(NodeCore node, const char* job_id) except -1:
    job = node.jobs.find(job_id)
    if job is None:
        if node.has_peers:
            send_to_peers(node, node.known_peers, DELJOB,
                          (PyBytes_FromStringAndSize(job_id, JOB_ID_LEN), 0), 0)
        return 0
    if job.delivered_ != <PyObject*>node._only_me:
        send_to_peers(node, job.delivered, DELJOB, (job.id, 0), 0)
    node.stats_acked += 1
    node.unregister(job, GONE_ACKED)
    return 1


cdef int64_t delete_jobs(NodeCore node, job_ids) except -1:
    """DELJOB: forget jobs on this node only, whatever their state."""
    cdef int64_t deleted = 0
    for job_id in job_ids:
        if type(job_id) is bytes and PyBytes_GET_SIZE(job_id) == JOB_ID_LEN:
            deleted += delete_job(node, PyBytes_AS_STRING(job_id))
    return deleted


cdef int delete_job(NodeCore node, const char* job_id) except -1:
    """DELJOB's rule for one job (and the AOF's 'D' record's): 1 if known."""
    found = node.jobs.find(job_id)
    if found is None:
        return 0
    node.unregister(found)
    return 1


cdef inline int _hex_value(unsigned char digit) noexcept:
    return digit - 48 if digit <= 57 else (digit | 32) - 87


cdef inline bint _at_most_once(const char* job_id) noexcept:
    """IDs of retry-0 jobs carry an even TTL field (its last hex digit)."""
    return _hex_value((<const unsigned char*>job_id)[39]) & 1 == 0


cdef inline int64_t _id_ttl_minutes(const char* job_id) noexcept:
    """The TTL an ID encodes, in minutes: its last 4 hex digits."""
    cdef const unsigned char* p = <const unsigned char*>job_id
    return (_hex_value(p[36]) << 12) | (_hex_value(p[37]) << 8) | \
        (_hex_value(p[38]) << 4) | _hex_value(p[39])


def is_at_most_once_id(bytes job_id):
    """Whether a job ID is an at-most-once job's (ValueError: not an ID)."""
    return _at_most_once(_checked_id(job_id))


def ttl_minutes_from_id(bytes job_id):
    """The TTL a job ID encodes, in minutes (ValueError: not an ID)."""
    return _id_ttl_minutes(_checked_id(job_id))


cdef const char* _checked_id(bytes job_id) except NULL:
    if not id_is_valid(PyBytes_AS_STRING(job_id), PyBytes_GET_SIZE(job_id)):
        raise ValueError("not a job ID: %r" % job_id)
    return PyBytes_AS_STRING(job_id)


cdef list well_formed_ids(job_ids):
    """The IDs that can name a job (callers check them first; this keeps
    the per-ID code to 40-byte IDs whatever a Python caller passes)."""
    return [job_id for job_id in job_ids
            if type(job_id) is bytes and PyBytes_GET_SIZE(job_id) == JOB_ID_LEN]


cdef int acks_on_setack(NodeCore node, bytes sender, const char* job_id,
                        int64_t may_have) except -1:
    """SETACK: mark acked; confirm (GOTACK, known: 1 if the job is here)
    unless this node knows more holders than the sender: then the
    collection is its to run (it confirms too when the sender knew none)."""
    job = node.jobs.find(job_id)
    if job is not None:
        node.acknowledge(job)
        if node.jobs.find(job_id) is not job:
            job = None             # it was external: gone from this node
    if job is None or len(job.delivered) <= may_have:
        send_to_peer(node, sender, MSG_GOTACK,
                     (PyBytes_FromStringAndSize(job_id, JOB_ID_LEN), 0 if job is None else 1), 0)
        return 0
    if may_have == 0:
        send_to_peer(node, sender, MSG_GOTACK, (job.id, 1), 0)
    acks_try_gc(node, job, False)
    return 0


cdef int acks_on_gotack(NodeCore node, bytes sender, const char* job_id,
                        int64_t known) except -1:
    """GOTACK: one more node has the ack; once every holder has, DELJOB.
    A dummy ack (no holders known) ends when a node knows the job (it runs
    the collection) or when every node said it does not."""
    cdef Job job = node.jobs.find(job_id)
    cdef tuple delivered
    if job is None or job.state != ACKED:
        return 0
    delivered = <tuple>job.delivered_
    if not delivered and known:
        node.unregister(job)
        return 0
    extra = node_extra(node, job)
    if known or sender in delivered:
        if sender not in delivered:
            job.delivered = delivered + (sender,)
        if extra.confirmed is not None:
            extra.confirmed.add(sender)
    if not delivered:
        if extra.confirmed is None:
            extra.confirmed = {node.id}
        extra.confirmed.add(sender)
        if len(extra.confirmed) >= node.cluster_size:
            node.unregister(job)
        return 0
    confirmed = extra.confirmed
    if confirmed is None:
        return 0
    for holder in <tuple>job.delivered_:
        if holder not in confirmed:
            return 0
    send_to_peers(node, job.delivered, DELJOB, (job.id, 0), 0)
    node.unregister(job)
    return 0


cdef int acks_try_gc(NodeCore node, Job job, bint from_timer) except -1:
    """Delete an acked job once every node that may have it confirmed;
    otherwise (re)send SETACK to those that have not. The next attempt is
    scheduled by the timer path (1 s after the ack, then 4, 8, ... up to 3
    minutes, as in Disque); a command's attempt keeps it."""
    cdef tuple delivered
    if job.state != ACKED:
        return 0
    if job.delivered_ == <PyObject*>node._only_me:
        node.unregister(job)           # the only copy is ours: nobody else to tell
        return 0
    extra = node_extra(node, job)
    if job.gc_retry < GC_RETRY_COUNT_MAX:
        job.gc_retry += 1
    if node.confirming and job in node.confirming:
        node.hooks.end_promise_round(job, extra)    # its GOTJOBs are not GOTACKs
    if extra.confirmed is None:
        extra.confirmed = {node.id}
    confirmed = extra.confirmed
    delivered = <tuple>job.delivered_
    if delivered:
        for holder in delivered:
            if holder not in confirmed:
                break
        else:
            node.unregister(job)
            return 0
    elif node.cluster_size == 1:
        node.unregister(job)
        return 0
    me = node.id
    for node_id in (delivered or node.known_peers):
        if node_id not in confirmed and node_id != me:
            send_to_peer(node, node_id, MSG_SETACK, (job.id, len(delivered)), 0)
    if from_timer or job.awake_bucket == NULL:
        node.update_awake(job, node._next_gc_time(job.gc_retry))
    return 0
