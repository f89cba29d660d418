# NodeCore: one node's job state and the job lifecycle that changes it.
#
# It holds every job the node knows (any state), the queues, the awake
# schedule, the IDs it makes, and the counters the memory policy reads.
# Methods read the node's clock, change state, and append effects to
# `self.effects` for the server layer: no I/O. What reaches beyond one job
# on this node (other nodes, parked clients, the memory policy) belongs to
# the node layer above (disque_py/node/), which the paths here reach only
# through `self.hooks` (hooks.pxi), and only when a job concerns other
# nodes or a waiting client.
#
# The class holds the state and the lifecycle every path shares; the
# commands' paths are functions in the parts beside it, each taking the
# node: addjob.pxi (ADDJOB), delivery.pxi (GETJOB, ENQUEUE, DEQUEUE, NACK,
# WORKING), acks.pxi (ACKJOB, FASTACK, DELJOB), dead_letters.pxi (dead
# letters, QREQUEUE, BACKOFF), outbox.pxi (messages to peers), copies.pxi
# (copies between nodes), dedup.pxi (DEDUP keys). NodeCore's def methods
# are their Python entry points.
#
# Lifecycle of a job on this node (Disque's state machine):
#
#     ADDJOB ----> wait-repl --(copies confirmed)--> active <--> queued
#                                                      |  GETJOB: queued -> active
#                                                      |  RETRY timer: active -> queued
#                                                      v
#                                    ACKJOB/SETACK -> acked --(GC)--> gone
#     TTL reached in any state ----------------------------------> gone
#
# Rules kept here:
#   * a registered job is in the jobs table and in the awake schedule;
#   * a queued job is in exactly one queue, the one it names;
#   * a wait-repl job is never queued: only copies_achieved (or
#     abandon_replication) moves it on;
#   * at-most-once jobs (retry 0) are queued at most once: enqueue() sets
#     qtime to 0 and refuses them afterwards;
#   * nothing here raises on a job in an unexpected state: callers get False.

from libc.time cimport time_t

from disque_py.base.errors import NoReplError
from disque_py.base.replies import REMOVED_BEFORE_COPIES
from disque_py.formats.bus import MSG_DEAD, MSG_INCR_DELIV, MSG_INCR_NACKS

cdef extern from "<time.h>" nogil:
    ctypedef int clockid_t
    cdef struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(clockid_t clock, timespec* now)
    clockid_t CLOCK_REALTIME

cdef int64_t UNLIMITED_MEMORY = 1LL << 62


cdef inline int64_t _wall_ms() noexcept nogil:
    cdef timespec now
    clock_gettime(CLOCK_REALTIME, &now)
    return <int64_t>now.tv_sec * 1000 + now.tv_nsec // 1000000


cdef class NodeCore:

    def __cinit__(self, *args, **kwargs):
        self.jobs = JobTable.__new__(JobTable)
        self.schedule = AwakeSchedule.__new__(AwakeSchedule)
        self.effects = []
        self.aof = AofLog.__new__(AofLog)
        self.extras = {}
        self.ready = {}
        self.options_readers = {}
        self.abandoned = {}
        self.repl_rtt_by_peer = {}
        self.heal_marks = {}
        self.replicating = {}
        self.confirming = {}
        self.heal_watch = {}
        self.dedup = DedupTable()
        self.hooks = NodeHooks.unwired()
        self.known_peers = set()
        self.reachable = []
        self.cluster_size = 1
        self.evict_jobs = True
        self.maxmemory = 0

    def init_core(self, bytes node_id, clock, bytes id_seed, queues):
        """Wire the clock (a real one is read in C; a fake one is called),
        the queue table, and this node's ID (id_seed: None for random job
        IDs, or a seed that makes them replay)."""
        self.clock = clock
        self.rng = clock.random
        self._real_clock = clock.REAL
        self._rng_state = clock.random.getrandbits(64) | 1
        self.queues = queues
        self.set_identity(node_id, id_seed)

    def set_identity(self, bytes node_id, bytes id_seed):
        self.id = node_id
        self.ids = IdGenerator(node_id, id_seed)
        self._only_me = (node_id,)


    # --------------------------------------------------------- time, random

    cdef inline int64_t now_ms(self) except? -1:
        if self._real_clock:
            return _wall_ms()
        return self.clock.now_ms()

    cdef inline int64_t jitter(self, int64_t spread_ms) noexcept:
        """A random error in [-spread/2, spread/2), as Disque's randomTimeError."""
        # xorshift64*: fast, and seeded from the clock's random (a seeded
        # clock makes a whole node deterministic).
        cdef uint64_t x = self._rng_state
        x ^= x >> 12
        x ^= x << 25
        x ^= x >> 27
        self._rng_state = x
        return <int64_t>(((x * 2685821657736338717ULL) >> 11) % <uint64_t>spread_ms) \
            - spread_ms // 2

    # --------------------------------------------------------------- memory

    @property
    def maxmemory(self):
        return self._maxmemory

    @maxmemory.setter
    def maxmemory(self, int64_t limit):
        """0 means no limit."""
        cdef int64_t effective = limit if limit else UNLIMITED_MEMORY
        self._maxmemory = limit
        self.memory_warn_at = effective // 100 * 75     # keep no local copy above this
        self.memory_evict_at = effective // 100 * 95    # evict, then refuse, above this

    # -------------------------------------------------------------- lookups

    def lookup(self, job_id):
        return self.jobs.get(job_id)

    cpdef Queue queue(self, bytes name):
        """The queue called `name`, created on first use."""
        q = self.queues.get(name)
        if q is None:
            q = Queue(name, self.now_ms())
            self.queues.add(name, q)
            self.queues_version += 1
            self.used_memory += QUEUE_MEMORY_OVERHEAD
        return <Queue>q

    cdef bytes queue_name(self, bytes name):
        """`name` as its queue, if there is one, holds it: the jobs of a
        queue share one name object."""
        q = self.queues.get(name)
        return (<Queue>q).name if q is not None else name

    def queue_length(self, bytes name):
        q = self.queues.get(name)
        return (<Queue>q).jobs.count if q is not None else 0

    # ----------------------------------------------------- registry, timers

    cpdef int64_t next_ctime(self, int64_t now_ms):
        """Creation time: ms * 1e6, strictly increasing on this node."""
        cdef int64_t ctime = now_ms * 1000000
        if ctime <= self._last_ctime:
            ctime = self._last_ctime + 1
        self._last_ctime = ctime
        return ctime

    cpdef bint register(self, Job job) except -1:
        """Add to the jobs table. The caller then schedules it (update_awake
        or enqueue), so a new job is placed in the schedule once."""
        if not self.jobs.insert(job):
            return False
        self.used_memory += JOB_MEMORY_OVERHEAD + job.body_len
        if self.watch_queues and job.state != ACKED:
            self.hooks.job_live(job)
        return True

    cpdef bint unregister(self, Job job, int reason=GONE_DELETED) except -1:
        """Forget a job completely (any state). False if it was not known.
        `reason` tells WAITJOB and QWAIT why a job still open is gone."""
        if job.state == WAIT_REPL and self.jobs.find(job.id_) is job:
            # Its producer still waits: answer it, and delete the copies.
            self.hooks.abandon_replication(job, NoReplError(REMOVED_BEFORE_COPIES))
            return True
        if not self.jobs.remove(job):
            return False
        if (self.watch_jobs or self.watch_queues) and job.state != ACKED:
            self.hooks.job_done(job, reason)
        if self.extras:
            self.extras.pop(job, None)
        if self.aof_enabled and (job.state == ACTIVE or job.state == QUEUED):
            self.aof.note(AOF_GONE, job)
        self.used_memory -= JOB_MEMORY_OVERHEAD + job.body_len
        self.schedule.unschedule(job)
        if job.state == QUEUED:
            self.dequeue(job)
        return True


    cpdef update_awake(self, Job job, int64_t gc_at=0):
        """Place the job at its next event: TTL, (WILL)QUEUE time, or GC."""
        cdef int64_t at = <int64_t>job.etime * 1000 + 1000, qtime
        cdef int state = job.state
        if state == ACKED:
            if gc_at and gc_at < at:
                at = gc_at
        elif state != WAIT_REPL and job.qtime:
            qtime = job.qtime
            if job.flags & FLAG_BCAST_WILLQUEUE:
                qtime -= WILLQUEUE_ADVANCE_MS
            if qtime < at:
                at = qtime
        self.schedule.schedule(job, at)

    cpdef persist_job(self, Job job):
        """The job's state becomes durable (when the AOF is on)."""
        if self.aof_enabled:
            self.aof.note(AOF_JOB, job)

    cpdef set_requeue_time(self, Job job, int64_t qtime):
        """Move the next re-queue; never revives an at-most-once job."""
        if job.retry == 0 or job.qtime == 0:
            return
        job.qtime = qtime
        self.update_awake(job)

    cpdef int64_t retry_time(self, Job job, int64_t now_ms):
        return now_ms + job.retry * 1000 + self.jitter(TIME_ERROR_MS)

    # --------------------------------------------------------------- queues

    cpdef bint enqueue(self, Job job, bint nack=False, int64_t now=0, Queue q=None) except -1:
        """Put an active job in its queue. False if it cannot be queued now
        (already queued, acknowledged, at-most-once and delivered, or still
        waiting for its copies: copies_achieved queues it, and a
        wait-repl job queued by a peer's YOURJOBS or ENQUEUE would leave its
        replication loop running on a job that may be acked meanwhile).

        `now` and `q` (the job's queue) may be passed by a caller that has
        them at hand, to spare the lookups on the ADDJOB path."""
        cdef uint32_t retry = job.retry
        cdef int flags = job.flags
        cdef int64_t at, qtime
        if job.state != ACTIVE or job.qtime == 0:
            return False
        if retry == 0 and flags & FLAG_DELIVERED:
            return False
        if not now:
            now = self.now_ms()
        job.state = QUEUED
        if flags & FLAG_COUNTED and not nack:
            # A delayed NACK, counted and announced when it was asked for
            # (a new NACK meanwhile is one more delivery: counted below).
            flags &= ~(FLAG_COUNTED | FLAG_BACKED_OFF)
        elif flags & FLAG_BCAST_QUEUED or nack:
            flags &= ~FLAG_COUNTED
            # A re-queue: count it (one too many: dead-letter it), and tell
            # the other holders (they count, and mark it dead, too).
            mflags = MSG_INCR_NACKS if nack else MSG_INCR_DELIV
            if job.options_ != NULL:
                flags &= ~FLAG_BACKED_OFF
                options = <JobOptions>job.options_
                if options.dead_letter_due(job):
                    dead_letter(self, job, options)
                    q = None
                    mflags |= MSG_DEAD
            if nack:
                job.nacks += 1
                self.stats_nacked += 1
            else:
                job.deliveries += 1
                self.stats_requeued += 1
            if job.delivered_ != <PyObject*>self._only_me:
                announce_queued(self, job, mflags, 0)
        at = <int64_t>job.etime * 1000 + 1000
        if retry:
            job.flags = flags | FLAG_BCAST_WILLQUEUE | FLAG_BCAST_QUEUED
            qtime = job.qtime = now + retry * 1000 + self.jitter(TIME_ERROR_MS)
            if qtime - WILLQUEUE_ADVANCE_MS < at:
                at = qtime - WILLQUEUE_ADVANCE_MS
        else:
            job.flags = flags | FLAG_BCAST_QUEUED
            job.qtime = 0
        self.schedule.schedule(job, at)
        if q is None:
            q = self.queue(<bytes>job.queue_)
        q.jobs.add(job)
        q.atime = now // 1000
        q.jobs_in += 1
        if (q.waiters is not None or q.interested is not None or
                self.pattern_waiting) and not q.flags & PAUSED_OUT:
            self.ready[q.name] = None    # someone here or elsewhere awaits it
        return True

    cpdef bint dequeue(self, Job job) except -1:
        if job.state != QUEUED:
            return False
        q = self.queues.get(<object>job.queue_)
        if q is None:
            return False
        (<Queue>q).jobs.discard(job)
        job.state = ACTIVE
        return True

    cpdef Job fetch(self, Queue q, bint delivery=True):
        """Take the oldest job out of a queue, for delivery to a consumer
        (or, not a delivery, to move it to another node)."""
        job = q.jobs.pop_first()
        if job is None:
            return None
        if delivery:
            self.stats_delivered += 1
        job.state = ACTIVE
        job.flags |= FLAG_DELIVERED
        q.atime = self.now_ms() // 1000
        q.jobs_out += 1
        return job

    cpdef set_paused(self, Queue q, int flags):
        cdef int was_paused_out = q.flags & PAUSED_OUT
        q.flags = (q.flags & ~(PAUSED_IN | PAUSED_OUT)) | flags
        if was_paused_out and not q.flags & PAUSED_OUT and \
                (q.waiters is not None or self.pattern_waiting):
            self.ready[q.name] = None


    cpdef acknowledge(self, Job job):
        if job.state == ACKED:
            return
        if job.state == WAIT_REPL and not copies_achieved(self, job):
            return
        self.dequeue(job)
        job.state = ACKED
        self.jobs.acked += 1           # acknowledge() is only ever given a job of the table
        if self.watch_jobs or self.watch_queues:
            self.hooks.job_done(job, GONE_ACKED)
        if self.aof_enabled:
            self.aof.note(AOF_GONE, job)    # acks are not persisted: the job is gone
        if self.extras:
            extra = self.extras.get(job)
            if extra is not None:
                extra.confirmed = None
        self.update_awake(job, self._next_gc_time(0))

    # ------------------------------------------------- options (options.pxi)

    cpdef JobOptions options_of(self, Job job):
        return <JobOptions>job.options_ if job.options_ != NULL else None

    cdef int readable_by(self, object peer):
        """The newest options block `peer` reads (None: this node's AOF)."""
        if peer is None:
            return OPTIONS_LATEST
        version = self.options_readers.get(peer)
        return OPTIONS_LATEST if version is None else <int>version

    def promise_copy(self, Job job):
        """Keep this copy if its first ADDJOB fails (dedup.pxi)."""
        dedup_promise(self, job)

    def replication_achieved(self, Job job):
        """Enough copies: answer the producer, queue the job (copies.pxi).
        False if the job left this node (every copy was external)."""
        return copies_achieved(self, job)

    def log_dedup(self, Job job):
        """A job made here externally reached its copies: its DEDUP record."""
        dedup_log(self, job)

    def forget_dedup(self, Job job):
        """The ADDJOB that made `job` failed: its DEDUP key is free again."""
        dedup_forget(self, job)

    def job_bytes(self, Job job, now_s=None, bytes peer=None):
        """A job's bytes with its options: for the AOF (now_s None) or for a
        message to `peer` (in the newest block version it reads)."""
        return serialize(job, -1 if now_s is None else now_s,
                         self.readable_by(peer)
                         if job.options_ != NULL or job.dedup_ != NULL else 0)

    # --------------------------------------------------------- extra state

    def more(self, Job job):
        """The job's extra record (created on first use; dropped when the
        job leaves this node): its replication or ack collection."""
        return node_extra(self, job)

    def extra_of(self, Job job):
        return self.extras.get(job)

    # ---------------------------------------------------- commands, in C
    # The Python entry points of the parts beside this file.

    def add_job(self, bytes queue, bytes body, repl, int64_t delay, retry, int64_t ttl,
                int64_t maxlen, bint async_, client=None, int64_t timeout_ms=0,
                JobOptions options=None, bytes dedup_key=None, int64_t dedup_until_ms=0):
        """ADDJOB (addjob.pxi: add_job_bytes)."""
        return add_job_bytes(self, queue, body, -1 if repl is None else repl, delay,
                             -1 if retry is None else retry, ttl, maxlen, async_, client,
                             timeout_ms, options, dedup_key, dedup_until_ms)

    def working(self, job_id):
        """WORKING: postpone the next delivery by the job's retry time."""
        return job_working(self, job_id)

    def fast_ack(self, job_ids):
        """FASTACK: delete at once, and ask every node that may have a copy
        (all of them, for an unknown job) to delete it too, best effort."""
        return sum([fast_ack_one(self, PyBytes_AS_STRING(job_id))
                    for job_id in well_formed_ids(job_ids)])

    def delete_jobs(self, job_ids):
        """DELJOB: forget jobs on this node only, whatever their state."""
        return delete_jobs(self, job_ids)

    cpdef mark_dead(self, Job job):
        """A holder dead-lettered the job (dead_letters.pxi). cpdef: the
        simulation's checker overrides it to see every MSG_DEAD heard."""
        mark_copy_dead(self, job)

    def revive_dead(self, bytes dead_queue, to_queue, int64_t count):
        """QREQUEUE (dead_letters.pxi): the jobs moved."""
        return revive_dead(self, dead_queue, to_queue, count)

    def revise(self, Job job, bytes queue, uint32_t nacks, uint32_t deliveries,
               JobOptions options):
        """A newer state of a job this node holds (dead_letters.pxi)."""
        return revise_job(self, job, queue, nacks, deliveries, options)

    def back_off(self, Job job, int64_t now):
        """A RETRY timeout is due: with BACKOFF, push it back once (True)."""
        return back_off(self, job, now)

    def restore_dedup(self, bytes queue, bytes key, bytes job_id, int64_t until_ms,
                      bint forget=False):
        """A DEDUP (or, with `forget`, UNDEDUP) record read from the AOF."""
        dedup_restore(self, queue, PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key),
                      _checked_id(job_id), until_ms, forget)

    # ------------------------------------------------------------- outbox

    def send(self, bytes node_id, int kind, item, int mflags=0):
        """One job-protocol item for a peer (outbox.pxi)."""
        send_to_peer(self, node_id, kind, item, mflags)

    def send_to(self, nodes, int kind, item, int mflags=0):
        """The same item to every node listed, except this one; returns
        how many were addressed."""
        return send_to_peers(self, nodes, kind, item, mflags)

    # -------------------------------------------------------------- copies
    # The bodies are in copies.pxi; node/replication.py keeps the policy.

    def replicate(self, Job job, int64_t count, bint noreply, bint promised=False,
                  tuple only=None):
        return copies_replicate(self, job, count, noreply, promised, only)

    def on_repljob(self, bytes sender, int mflags, list jobs):
        copies_on_repljob(self, sender, mflags, jobs)

    def on_gotjob(self, bytes sender, int mflags, bytes job_id, aux):
        copies_on_gotjob(self, sender, job_id)

    def try_gc(self, Job job, bint from_timer=False):
        """An acked job's collection: delete it, or (re)send SETACK (acks.pxi)."""
        acks_try_gc(self, job, from_timer)

    def on_setack(self, bytes sender, int mflags, bytes job_id, int64_t may_have):
        if PyBytes_GET_SIZE(job_id) == JOB_ID_LEN:
            acks_on_setack(self, sender, PyBytes_AS_STRING(job_id), may_have)

    def on_gotack(self, bytes sender, int mflags, bytes job_id, int64_t known):
        if PyBytes_GET_SIZE(job_id) == JOB_ID_LEN:
            acks_on_gotack(self, sender, PyBytes_AS_STRING(job_id), known)

    def adopt_record(self, record, int64_t now, int state=ACTIVE, bint persist=True):
        """A parsed job (a JobRecord, records.py: from YOURJOBS) becomes a
        local job."""
        cdef WireJob wire
        cdef DedupFields dedup
        data, options = _parse_record(record, &wire, &dedup)
        return copies_adopt(self, &wire, options, &dedup, self.queue_name(record.queue), now,
                            state, persist)

    def load_job(self, record, bint enqueue):
        """A job's record from an AOF of an older format (a JobRecord,
        records.py: the LOADJOB command), loaded by the version-2 loader's
        rule (load.pxi: aof_load_job). True if it made or changed a job."""
        cdef WireJob wire
        cdef DedupFields dedup
        data, options = _parse_record(record, &wire, &dedup)
        return aof_load_job(self, &wire, options, &dedup, self.queue_name(record.queue),
                            enqueue, self.now_ms())

    def learn_holders(self, Job job, tuple delivered):
        """Add the holders a peer names that this node knows and `job` lacks."""
        nodes = b"".join(delivered)
        copies_learn_holders(self, job, PyBytes_AS_STRING(nodes), PyTuple_GET_SIZE(delivered))

    cpdef int64_t _next_gc_time(self, int64_t attempts):
        cdef int64_t period = GC_RETRY_MIN_PERIOD_MS << attempts
        if period > GC_RETRY_MAX_PERIOD_MS:
            period = GC_RETRY_MAX_PERIOD_MS
        return self.now_ms() + period + self.jitter(GC_JITTER_MS)

    # ------------------------------------------------------------- effects

    def take_effects(self):
        effects = self.effects
        self.effects = []
        return effects


cdef tuple _parse_record(record, WireJob* wire, DedupFields* dedup):
    """A JobRecord's wire fields: (its bytes, which `wire` points into and
    the caller keeps while it reads them; its options, or None)."""
    data = pack_job(*record)
    parse_wire(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), wire)
    dedup.key = NULL
    options = None if wire.options == NULL else \
        parse_options(wire.options, wire.options_len, dedup)
    return data, options


cdef JobExtra node_extra(NodeCore node, Job job):
    """The job's extra record, made on first use (NodeCore.more)."""
    extra = node.extras.get(job)
    if extra is None:
        extra = node.extras[job] = JobExtra.__new__(JobExtra)
    return <JobExtra>extra
