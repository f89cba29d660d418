# Delivery: GETJOB's take from the queues, and the commands that queue a
# job again or take it out (ENQUEUE, DEQUEUE, NACK, WORKING).
#
# Each takes IDs already checked for shape (hot.pxi answers BADID first);
# an ID of no job here, or of a job in a state the command does not apply
# to, counts 0. Queueing itself (the counters, the re-queue messages, the
# dead letter due) is NodeCore.enqueue's.

from disque_py.base.errors import AckedError, NoJobError, TooLateError
from disque_py.base.replies import HALF_TTL_ELAPSED, JOB_ACKED, JOB_UNKNOWN
from disque_py.formats.bus import MSG_INCR_NACKS


cdef list take_jobs(NodeCore node, list names, list queues, Py_ssize_t count):
    """GETJOB's take: up to `count` jobs from the queues, left to right,
    pass after pass, until `count` or a pass that finds nothing; `queues`
    are those the caller found (None where it found none: the queue is
    made when the loop reaches it, as in Disque)."""
    cdef list taken = []
    cdef Py_ssize_t before, i
    cdef Queue q
    while True:
        before = len(taken)
        for i in range(len(names)):
            found = queues[i]
            if found is None:
                found = queues[i] = node.queue(names[i])
            q = <Queue>found
            if q.flags & PAUSED_OUT or q.jobs.count == 0:
                if node.has_peers:
                    node.hooks.need_jobs(q, False)
                continue
            taken.append(take_one(node, q))
            if len(taken) == count:
                return taken
        if len(taken) == before:
            return taken


cdef Job take_one(NodeCore node, Queue q):
    """GETJOB's take from a queue with jobs: the oldest, and a NEEDJOBS
    to the cluster when that emptied the queue (federation)."""
    cdef Job job = node.fetch(q)
    if q.jobs.count == 0 and node.has_peers:
        node.hooks.need_jobs(q, True)
    return job


cdef int64_t enqueue_views(NodeCore node, ArgView* ids, Py_ssize_t count,
                           bint nack) except -1:
    cdef int64_t queued = 0
    cdef Py_ssize_t i
    for i in range(count):
        queued += enqueue_one(node, ids[i].data, nack)
    return queued


cdef int64_t dequeue_views(NodeCore node, ArgView* ids, Py_ssize_t count) except -1:
    cdef int64_t dequeued = 0
    cdef Py_ssize_t i
    for i in range(count):
        dequeued += dequeue_one(node, ids[i].data)
    return dequeued


cdef int enqueue_one(NodeCore node, const char* job_id, bint nack) except -1:
    job = node.jobs.find(job_id)
    if job is None or job.state != ACTIVE:
        return 0
    return 1 if node.enqueue(job, nack) else 0


cdef int dequeue_one(NodeCore node, const char* job_id) except -1:
    job = node.jobs.find(job_id)
    if job is None:
        return 0
    return 1 if node.dequeue(job) else 0


cdef object job_working(NodeCore node, object job_id):
    """WORKING: postpone the next delivery by the job's retry time; returns it."""
    cdef int64_t now, born_ms, ttl_ms
    found = node.jobs.get(job_id)
    if found is None:
        raise NoJobError(JOB_UNKNOWN)
    cdef Job job = <Job>found
    if job.state == ACKED:
        raise AckedError(JOB_ACKED)
    now = node.now_ms()
    born_ms = job.ctime // 1000000
    ttl_ms = <int64_t>job.etime * 1000 - born_ms
    if ttl_ms > 0 and now - born_ms > ttl_ms // 2:
        raise TooLateError(HALF_TTL_ELAPSED)
    if job.state == QUEUED:
        node.dequeue(job)
    job.flags |= FLAG_BCAST_WILLQUEUE
    node.set_requeue_time(job, node.retry_time(job, now))
    if job.delivered_ != <PyObject*>node._only_me:
        announce_working(node, job)
    return job.retry


cdef int _delay_requeue(NodeCore node, Job job, int64_t delay_ms) except -1:
    """NACK with a delay: counted and announced now, queued later (the
    awake timer queues it at qtime, FLAG_COUNTED saying it is counted)."""
    if job.qtime == 0 or (job.retry == 0 and job.flags & FLAG_DELIVERED):
        return 0
    job.nacks += 1
    node.stats_nacked += 1
    job.flags |= FLAG_COUNTED | FLAG_BCAST_WILLQUEUE
    job.qtime = node.now_ms() + delay_ms
    node.update_awake(job)
    if job.delivered_ != <PyObject*>node._only_me:
        announce_queued(node, job, MSG_INCR_NACKS, delay_ms)
    return 1


cdef int nack_one(NodeCore node, const char* job_id, int64_t delay_ms) except -1:
    """NACK one job: queued again now, or after `delay_ms` (< 0: no
    DELAY given, BACKOFF decides); dead-lettered if that is due."""
    job = node.jobs.find(job_id)
    if job is None or job.state != ACTIVE:
        return 0
    if job.options_ != NULL:
        options = <JobOptions>job.options_
        if options.dead_letter_due(job):
            delay_ms = 0
        elif delay_ms < 0:
            delay_ms = options.backoff_ms(job, node.jitter(1000) + 500)
    if delay_ms > 0:
        return _delay_requeue(node, job, delay_ms)
    return 1 if node.enqueue(job, True) else 0


cdef int64_t nack_views(NodeCore node, ArgView* ids, Py_ssize_t count,
                        int64_t delay_ms) except -1:
    cdef int64_t queued = 0
    cdef Py_ssize_t i
    for i in range(count):
        queued += nack_one(node, ids[i].data, delay_ms)
    return queued
