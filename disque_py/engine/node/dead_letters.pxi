# Options beyond Disque that change where a job is: dead letters (after
# MAXDELIVERIES, into DEADLETTER's queue, or "<queue>:dead"), QREQUEUE
# (back to work), a holder's newer state of a job (REPLJOB with
# MSG_REVISED, or a later AOF record), and BACKOFF's longer retry.
#
# A dead-lettered job keeps its ID, body and holders; only its queue, its
# options' dead reason and origin change, and the change is persisted (a
# restart must find it dead, in its new queue). WAITJOB and QWAIT follow a
# job that changes queue (NodeHooks.job_moved, while watch_queues).


cdef int dead_letter(NodeCore node, Job job, JobOptions options) except -1:
    """Move a job that is not queued to its dead-letter queue."""
    old = <bytes>job.queue_
    dead = options.dead_queue(job)
    found = node.queues.get(dead)
    set_job_queue(job, (<Queue>found).name if found is not None else dead)
    options.origin = old
    options.dead_reason = DEAD_MAX_DELIVERIES
    node.stats_dead_lettered += 1
    if node.watch_queues:
        node.hooks.job_moved(job, old)
    node.persist_job(job)          # a restart must find it dead, in its new queue
    return 0


cdef int mark_copy_dead(NodeCore node, Job job) except -1:
    """A holder dead-lettered the job (QUEUED with MSG_DEAD): this copy
    belongs to the dead-letter queue too, and leaves the old queue."""
    options = node.options_of(job)
    if options is None or options.max_deliveries == 0 or \
            options.dead_reason != DEAD_NONE or job.state == ACKED:
        return 0               # (no limit: shared PRIORITY options, never dead)
    node.dequeue(job)
    return dead_letter(node, job, options)


cdef list revive_dead(NodeCore node, bytes dead_queue, object to_queue, int64_t count):
    """QREQUEUE: up to `count` dead-lettered jobs queued in `dead_queue`
    go back to `to_queue` (None: the queue each came from), queued at
    once with their counters at 0, for another MAXDELIVERIES tries.
    Returns the jobs moved (their other holders are to be told)."""
    found = node.queues.get(dead_queue)
    moved = []
    if found is None:
        return moved
    for job in (<Queue>found).jobs.peek((<Queue>found).jobs.count):
        options = node.options_of(job)
        if options is None or options.dead_reason == DEAD_NONE:
            continue
        if len(moved) == count:
            break
        node.dequeue(job)
        target = to_queue if to_queue is not None else options.origin
        existing = node.queues.get(target)
        set_job_queue(job, (<Queue>existing).name if existing is not None else target)
        options.dead_reason, options.origin = DEAD_NONE, None
        job.nacks = job.deliveries = 0
        job.flags |= FLAG_COUNTED          # not a re-delivery: nothing to count
        if node.watch_queues:
            node.hooks.job_moved(job, dead_queue)
        node.enqueue(job)
        node.persist_job(job)
        moved.append(job)
    return moved


cdef bint revise_job(NodeCore node, Job job, bytes queue, uint32_t nacks, uint32_t deliveries,
                     JobOptions options) except -1:
    """A newer state of a job this node holds (a holder's QREQUEUE, or a
    later AOF record of it): its queue, counters and options, taken out
    of its queue (its timers queue it again). False if acked."""
    if job.state == ACKED:
        return False
    node.dequeue(job)
    old = <bytes>job.queue_
    if old != queue:
        set_job_queue(job, node.queue_name(queue))
        if node.watch_queues:
            node.hooks.job_moved(job, old)
    job.nacks, job.deliveries = nacks, deliveries
    set_options(job, options)
    return True


cdef bint back_off(NodeCore node, Job job, int64_t now) except -1:
    """A RETRY timeout is due: with BACKOFF, push it back once (True)."""
    options = node.options_of(job)
    if options is None or job.flags & (FLAG_BACKED_OFF | FLAG_COUNTED) or \
            options.dead_letter_due(job):
        return False
    wait = options.backoff_ms(job, node.jitter(1000) + 500)
    if wait <= 0:
        return False
    job.flags |= FLAG_BACKED_OFF | FLAG_BCAST_WILLQUEUE
    job.qtime = now + wait
    return True
