# Copies of jobs between nodes: what every replicated job pays, compiled.
#
# The producer's REPLJOBs (replicate), a holder's copy made straight from
# the REPLJOB's bytes and its GOTJOB (on_repljob; take_frame, from a bus
# frame's bytes: net/link.pxi), and the producer's count of confirmed
# copies (on_gotjob, confirmed). NodeCore exposes them under the names
# and signatures node/replication.py calls and dispatches to; the policy
# around them (waiting for copies, asking one more node, giving up,
# queueing once the copies exist) stays in Python there.

from disque_py.formats.bus import (GOTJOB, MSG_KEPT, MSG_NOREPLY, MSG_PROMISED, MSG_RESENT,
                                   MSG_REVISED, REPLJOB)

cdef enum:
    RTT_SMOOTHING = 8              # the round trip is an average over about that many copies
    JOB_ID_AUX_SIZE = 44           # a (job ID, u32) item of a frame

cdef int64_t copies_replicate(NodeCore node, Job job, int64_t count, bint noreply,
                              bint promised=False, tuple only=None) except -1:
    """Add up to `count` new holders, chosen at random among the linked
    peers, and (re)send REPLJOB to every holder that has not confirmed
    (`promised`: flagged MSG_PROMISED; `only`: to those holders alone,
    flagged MSG_RESENT, so that its receivers do not take the frame for a
    copy sent to every holder it lists). A promised job's copies are
    flagged MSG_KEPT: it lives on where its ADDJOB failed. Returns how many
    holders were added."""
    cdef tuple delivered = <tuple>job.delivered_
    cdef int64_t added = 0
    cdef int mflags = (MSG_NOREPLY if noreply else 0) | (MSG_PROMISED if promised else 0) | \
        (MSG_RESENT if only is not None else 0) | (MSG_KEPT if job.flags & FLAG_PROMISED else 0)
    if count > 0:
        candidates = [peer for peer in node.reachable if peer not in delivered]
        if len(candidates) > count:
            candidates = node.rng.sample(candidates, count)
        added = len(candidates)
        if added:
            delivered = delivered + tuple(candidates)
            job.delivered = delivered
    cdef int64_t now_s = node.now_ms() // 1000
    cdef int readable
    payload = serialize(job, now_s, OPTIONS_LATEST)
    older = None                   # readable version -> bytes, for older peers
    extra = node.extras.get(job) if node.extras else None
    confirmed = extra.confirmed if extra is not None else None
    me = node.id
    for node_id in delivered:
        if node_id == me or (only is not None and node_id not in only):
            continue
        data = payload
        if job.options_ != NULL:
            readable = node.readable_by(node_id)
            if readable != OPTIONS_LATEST:
                if older is None:
                    older = {}
                data = older.get(readable)
                if data is None:
                    data = older[readable] = serialize(job, now_s, readable)
        if confirmed is not None and node_id in confirmed:
            # It has its copy: only new holders are worth telling it, unanswered.
            if added:
                send_to_peer(node, node_id, REPLJOB, data, MSG_NOREPLY)
            continue
        send_to_peer(node, node_id, REPLJOB, data, mflags)
    return added


cdef int copies_on_repljob(NodeCore node, bytes sender, int mflags, list jobs) except -1:
    """REPLJOB: keep a copy of each job and confirm it (copies_take_one).
    A malformed job ends the frame: nothing after it is trusted."""
    cdef bint take_new = not (node.leaving or node.used_memory > node.memory_warn_at)
    cdef int64_t now = node.now_ms()
    for data in jobs:
        if not copies_take_one(node, sender, mflags, PyBytes_AS_STRING(data),
                               PyBytes_GET_SIZE(data), take_new, now):
            return 0
    return 0


cdef bint copies_take_frame(NodeCore node, bytes sender, int mflags, const char* body,
                            Py_ssize_t size) except -1:
    """A REPLJOB frame's body straight from the bus (net/link.pxi): its
    shape checked whole first (a count, then each job's u32 length and
    bytes, nothing after), as formats/bus.py's decode does; False, nothing
    applied, if it is not well formed. Then as copies_on_repljob."""
    cdef Py_ssize_t pos = 4, length
    cdef uint32_t count, i
    cdef bint take_new
    cdef int64_t now
    if size < 4:
        return False
    count = get_u32(body)
    for i in range(count):
        if size - pos < 4:
            return False
        length = get_u32(body + pos)
        if size - pos - 4 < length:
            return False
        pos += 4 + length
    if pos != size:
        return False
    take_new = not (node.leaving or node.used_memory > node.memory_warn_at)
    now = node.now_ms()
    pos = 4
    for i in range(count):
        length = get_u32(body + pos)
        if not copies_take_one(node, sender, mflags, body + pos + 4, length, take_new, now):
            break
        pos += 4 + length
    return True


cdef bint copies_take_one(NodeCore node, bytes sender, int mflags, const char* data,
                          Py_ssize_t size, bint take_new, int64_t now) except -1:
    """One job of a REPLJOB: keep a copy and confirm it. A node that is
    leaving or short of memory (not take_new) takes no new copy, but still
    learns the holders of jobs it has (a job that moved tells its holders
    this way). False: the job is malformed."""
    cdef WireJob wire
    cdef DedupFields dedup
    cdef Job job
    cdef JobOptions options
    try:
        parse_wire(data, size, &wire)
        dedup.key = NULL
        options = None if wire.options == NULL else \
            parse_options(wire.options, wire.options_len, &dedup)
    except ValueError:
        return False
    wire.etime += now // 1000
    job = node.jobs.find(wire.id)
    if job is not None:
        copies_learn_holders(node, job, wire.nodes, wire.node_count)
        if dedup.key != NULL and job.state != ACKED and \
                (job.dedup_ == NULL or not job.dedup_.live):
            # A copy knows its key: this one may have forgotten it (its
            # first ADDJOB failed) before the job came back to life.
            if dedup_remember_copy(node, job, &dedup, now):
                dedup_log(node, job)
        if mflags & MSG_PROMISED:
            dedup_promise(node, job)
        if mflags & MSG_REVISED:
            copies_revise(node, job, &wire, options, now)
        elif options is not None and options.dead_reason != DEAD_NONE:
            node.mark_dead(job)        # its QUEUED flagged dead did not reach us
    elif not take_new or mflags & MSG_PROMISED:
        return True     # a promise round confirms copies; it never makes one:
                        # this node may have collected the job after its ack
    elif node.abandoned and not mflags & MSG_KEPT and \
            PyBytes_FromStringAndSize(wire.id, JOB_ID_LEN) in node.abandoned:
        return True     # its ADDJOB failed and this node deleted it: a copy
                        # sent before its sender heard so would outlive it
    else:
        name = PyBytes_FromStringAndSize(wire.queue, wire.queue_len)
        q = node.queues.get(name)
        if q is not None:
            if (<Queue>q).flags & PAUSED_IN:
                return True
            name = (<Queue>q).name
        job = copies_adopt(node, &wire, options, &dedup, name, now, ACTIVE, True)
    if not mflags & MSG_NOREPLY:
        send_to_peer(node, sender, GOTJOB, (job.id, 0), 0)
    return True


cdef Job copies_adopt(NodeCore node, WireJob* wire, JobOptions options, DedupFields* dedup,
                      bytes queue, int64_t now, int state, bint persist):
    """A copy received from a peer (or read from the AOF) becomes a local
    job, with `options` (parsed from the wire job's block) if not None, and
    the DEDUP key in `dedup` (key NULL: none). `queue`: the wire job's
    queue name, as the object the queue (if it exists) is named by, so
    that the jobs of a queue share one."""
    cdef Job job
    job = make_job(wire.id, queue, wire.body, wire.body_len, wire.body != NULL, state,
                   wire.repl, wire.delay, wire.retry, wire.ctime, wire.etime,
                   copies_known_holders(node, wire.nodes, wire.node_count))
    if wire.retry:
        job.flags = FLAG_BCAST_QUEUED | FLAG_BCAST_WILLQUEUE
        job.qtime = now + (wire.delay + wire.retry) * 1000 + node.jitter(TIME_ERROR_MS)
    else:
        job.flags = FLAG_BCAST_QUEUED
    job.nacks, job.deliveries = wire.nacks, wire.deliveries
    if options is not None:
        set_options(job, options)
    node.register(job)
    dedup_remember_copy(node, job, dedup, now)   # its LOADJOB record carries the key
    node.update_awake(job)
    if persist:
        node.persist_job(job)
    return job


cdef int copies_revise(NodeCore node, Job job, WireJob* wire, JobOptions options,
                       int64_t now) except -1:
    """A holder changed the job (QREQUEUE moved it out of its dead-letter
    queue): this copy takes its queue, counters and options, and waits a
    retry period for it to be acknowledged there."""
    if not revise_job(node, job, PyBytes_FromStringAndSize(wire.queue, wire.queue_len),
                       wire.nacks, wire.deliveries, options):
        return 0
    node.persist_job(job)
    if job.retry:
        node.set_requeue_time(job, node.retry_time(job, now))
    return 0


cdef tuple copies_known_holders(NodeCore node, const char* nodes, Py_ssize_t count):
    """The holders of a wire job that this node knows (itself included), as
    the shared ID objects of node_ids. Copies come in runs with the same
    holders: the last answer is kept for the next."""
    cdef Py_ssize_t i
    cdef dict known = node.node_ids
    cdef bytes last = node._holders_seen
    if known is node._holders_seen_in and last is not None and \
            PyBytes_GET_SIZE(last) == count * NODE_ID_LEN and \
            memcmp(PyBytes_AS_STRING(last), nodes, count * NODE_ID_LEN) == 0:
        return node._holders_known
    holders = []
    for i in range(count):
        found = known.get(PyBytes_FromStringAndSize(nodes + i * NODE_ID_LEN, NODE_ID_LEN))
        if found is not None:
            holders.append(found)
    node._holders_seen = PyBytes_FromStringAndSize(nodes, count * NODE_ID_LEN)
    node._holders_seen_in = known
    node._holders_known = tuple(holders)
    return node._holders_known


cdef int copies_learn_holders(NodeCore node, Job job, const char* nodes,
                              Py_ssize_t count) except -1:
    cdef tuple delivered = <tuple>job.delivered_
    if not delivered:
        return 0
    extra = [holder for holder in copies_known_holders(node, nodes, count)
             if holder not in delivered]
    if extra:
        job.delivered = delivered + tuple(extra)
    return 0


cdef int copies_on_gotjob(NodeCore node, bytes sender, bytes job_id) except -1:
    """GOTJOB: one more confirmed copy; enough of them answer the producer."""
    job = node.jobs.get(job_id)
    if job is not None:
        copies_confirmed(node, sender, <Job>job)
    return 0


cdef int copies_confirmed(NodeCore node, bytes sender, Job job) except -1:
    """`sender` confirmed its copy of `job`."""
    if job.state == ACKED:
        return 0
    extra = node.extras.get(job)
    if extra is None:
        return 0
    if job.state != WAIT_REPL:               # a promise round (dedup.pxi), or nothing
        if extra.followers and extra.confirmed is not None:
            extra.confirmed.add(sender)
            node.hooks.promise_progress(job, extra)
        return 0
    cdef double rtt = node.now_ms() - extra.repl_added_at
    node.repl_rtt_ms += (rtt - node.repl_rtt_ms) / RTT_SMOOTHING
    peer_rtt = node.repl_rtt_by_peer.get(sender)
    node.repl_rtt_by_peer[sender] = rtt if peer_rtt is None else \
        peer_rtt + (rtt - <double>peer_rtt) / RTT_SMOOTHING
    confirmed = extra.confirmed
    confirmed.add(sender)
    if len(confirmed) >= job.repl:
        copies_achieved(node, job)
    return 0


cdef bint copies_achieved(NodeCore node, Job job) except -1:
    """Enough copies (or an ack came first): answer the producer and the
    duplicate ADDJOBs that followed it, and queue the job here, unless
    every copy is external (then the job leaves this node, a holder is
    asked to queue it: ENQUEUE, and this returns False)."""
    cdef Parking parking = <Parking>node.parking
    cdef JobExtra extra = node_extra(node, job)
    job.state = ACTIVE
    job.flags |= FLAG_CONFIRMED
    node.replicating.pop(job, None)
    waiter, extra.waiter = extra.waiter, None
    if waiter is not None:
        parking.release(<Waiter>waiter, job.id)
    followers, extra.followers = extra.followers, None
    for waiter in followers or ():
        parking.release(<Waiter>waiter, job.id)
    if node.id not in <tuple>job.delivered_:
        dedup_log(node, job)                  # no copy here: its key's own record
        if extra.confirmed:
            holder = node.rng.choice(sorted(extra.confirmed))
            send_to_peer(node, holder, KIND_ENQUEUE, (job.id, job.delay), 0)
        node.unregister(job)
        return False
    extra.confirmed = None
    if job.delay == 0:
        node.enqueue(job)
    else:
        node.update_awake(job)
    node.persist_job(job)
    return True
