# NodeCore: one node's job state and the job lifecycle that changes it.
#
# It holds every job the node knows (any state), the queues, the awake
# schedule, the IDs it makes, and the counters the memory policy reads.
# Methods read the node's clock, change state, and append effects to
# `self.effects` for the runtime: no I/O. core/node.py's Node subclasses
# it and adds, in Python, what reacts to the cluster (replication, ack
# collection, federation, re-queue messages) and the parked clients; the
# paths here call those Python methods only when a job concerns other
# nodes or a waiting client.
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
#   * a wait-repl job is never queued: only replication_achieved (or
#     abandon_replication) moves it on;
#   * at-most-once jobs (retry 0) are queued at most once: enqueue() sets
#     qtime to 0 and refuses them afterwards;
#   * nothing here raises on a job in an unexpected state: callers get False.

from libc.time cimport time_t

from disque_py.formats.bus import (DELJOB, ENQUEUE as MSG_ENQUEUE, MSG_DEAD, MSG_INCR_DELIV,
                                   MSG_INCR_NACKS, MSG_NOREPLY)
from disque_py.base.effects import AofDelJob, AofLoadJob
from disque_py.base.errors import (OOM_MESSAGE, AckedError, CommandError, MaxlenError, NoJobError,
                                   NoReplError, OutOfMemoryError, PausedError, TooLateError)

cdef extern from "<time.h>" nogil:
    ctypedef int clockid_t
    cdef struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(clockid_t clock, timespec* now)
    clockid_t CLOCK_REALTIME

cdef int64_t UNLIMITED_MEMORY = 1LL << 62
cdef tuple _NO_NODES = ()

RETRY0_NEEDS_REPL1 = ("With RETRY set to 0 please explicitly set  REPLICATE to 1 "
                      "(at-most-once delivery)")
DELAY_NOT_BELOW_TTL = ("The specified DELAY is greater than TTL. Job refused since "
                       "would never be delivered")
NOT_ENOUGH_NODES = "Not enough reachable nodes for the requested replication level"
CANNOT_HOLD_COPY = (NOT_ENOUGH_NODES + ", since I'm unable to hold a copy of the "
                    "message for the following reason: %s")
REASON_LEAVING = "I'm leaving the cluster"
REASON_MEMORY = "I'm out of memory"
MAXLEN_REACHED = "Queue is already longer than the specified MAXLEN count"
PAUSED_INPUT = "Queue paused in input, try later"
ID_COLLISION = "Internal error creating the job, check server logs"
REMOVED_BEFORE_COPIES = ("job removed (expired?) before the requested replication "
                         "level was achieved")
JOB_UNKNOWN = "Job not known in the context of this node."
JOB_ACKED = "The job is already acknowledged."
HALF_TTL_ELAPSED = ("Half of job TTL already elapsed, you are no longer allowed "
                    "to postpone the next delivery.")


cdef inline int64_t _wall_ms() noexcept nogil:
    cdef timespec now
    clock_gettime(CLOCK_REALTIME, &now)
    return <int64_t>now.tv_sec * 1000 + now.tv_nsec // 1000000


cdef class NodeCore:

    def __cinit__(self, *args, **kwargs):
        self.jobs = JobTable.__new__(JobTable)
        self.schedule = AwakeSchedule.__new__(AwakeSchedule)
        self.effects = []
        self.extras = {}
        self.ready = {}
        self.replicating = {}
        self.waiting_queues = {}
        self.options_readers = {}
        self.repl_rtt_by_peer = {}
        self.dedup = DedupTable()
        self.job_waits = {}
        self.queue_waits = {}
        self.cluster_size = 1
        self.evict_jobs = True
        self.maxmemory = 0

    def init_core(self, bytes node_id, clock, bytes id_seed, queues):
        """Wire the clock (a real one is read in C; a fake one is called),
        the queue table, and this node's ID (id_seed: None for random job
        IDs, or a seed that makes them replay)."""
        self.clock = clock
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

    def _now_ms(self):
        return self.now_ms()

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
        if self.queue_waits and job.state != ACKED:
            self.on_job_live(job)
        return True

    cpdef bint unregister(self, Job job, int reason=GONE_DELETED) except -1:
        """Forget a job completely (any state). False if it was not known.
        `reason` tells WAITJOB and QWAIT why a job still open is gone."""
        if job.state == WAIT_REPL and self.jobs.find(job.id_) is job:
            # Its producer still waits: answer it, and delete the copies.
            self.abandon_replication(job, NoReplError(REMOVED_BEFORE_COPIES))
            return True
        if not self.jobs.remove(job):
            return False
        if (self.job_waits or self.queue_waits) and job.state != ACKED:
            self.on_job_done(job, reason)
        if self.extras:
            self.extras.pop(job, None)
        if self.aof_enabled and (job.state == ACTIVE or job.state == QUEUED):
            self.effects.append(AofDelJob(job.id))
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
            self.effects.append(AofLoadJob(job))

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
        waiting for its copies: replication_achieved queues it, and a
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
                    self._dead_letter(job, options)
                    q = None
                    mflags |= MSG_DEAD
            if nack:
                job.nacks += 1
                self.stats_nacked += 1
            else:
                job.deliveries += 1
                self.stats_requeued += 1
            if job.delivered_ != <PyObject*>self._only_me:
                self.announce_queued(job, mflags, 0)
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
                self.pattern_waiters is not None) and not q.flags & PAUSED_OUT:
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
                (q.waiters is not None or self.pattern_waiters is not None):
            self.ready[q.name] = None

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

    def log_dedup(self, Job job):
        """A job made here externally reached its copies: its DEDUP record."""
        dedup_log(self, job)

    def forget_dedup(self, Job job):
        """The ADDJOB that made `job` failed: its DEDUP key is free again."""
        dedup_forget(self, job)

    def restore_dedup(self, bytes queue, bytes key, bytes job_id, int64_t until_ms,
                      bint forget=False):
        """A DEDUP (or, with `forget`, UNDEDUP) record read from the AOF."""
        cdef DedupTable table = self.dedup
        cdef int64_t before = table.memory
        cdef DedupSlot* slot
        cdef Py_ssize_t size = PyBytes_GET_SIZE(key)
        if not id_is_valid(PyBytes_AS_STRING(job_id), PyBytes_GET_SIZE(job_id)):
            raise ValueError("not a job ID")
        h = dedup_hash(queue, PyBytes_AS_STRING(key), size)
        if forget:
            slot = table._find_job(queue, PyBytes_AS_STRING(key), size, h,
                                   PyBytes_AS_STRING(job_id))
            if slot != NULL:
                table.unlink(slot)
        elif until_ms > self.now_ms():
            dedup_add(table, queue, PyBytes_AS_STRING(key), size, h, PyBytes_AS_STRING(job_id),
                      until_ms, False)
        self.used_memory += table.memory - before

    def job_bytes(self, Job job, now_s=None, bytes peer=None):
        """A job's bytes with its options: for the AOF (now_s None) or for a
        message to `peer` (in the newest block version it reads)."""
        return serialize(job, -1 if now_s is None else now_s,
                         self.readable_by(peer)
                         if job.options_ != NULL or job.dedup_ != NULL else 0)

    cdef int _dead_letter(self, Job job, JobOptions options) except -1:
        """Move a job that is not queued to its dead-letter queue."""
        old = <bytes>job.queue_
        dead = options.dead_queue(job)
        found = self.queues.get(dead)
        set_job_queue(job, (<Queue>found).name if found is not None else dead)
        options.origin = old
        options.dead_reason = DEAD_MAX_DELIVERIES
        self.stats_dead_lettered += 1
        if self.queue_waits:
            self.waits_queue_moved(job, old)
        self.persist_job(job)          # a restart must find it dead, in its new queue
        return 0

    def mark_dead(self, Job job):
        """A holder dead-lettered the job (QUEUED with MSG_DEAD): this copy
        belongs to the dead-letter queue too, and leaves the old queue."""
        options = self.options_of(job)
        if options is None or options.max_deliveries == 0 or \
                options.dead_reason != DEAD_NONE or job.state == ACKED:
            return                 # (no limit: shared PRIORITY options, never dead)
        self.dequeue(job)
        self._dead_letter(job, options)

    def revive_dead(self, bytes dead_queue, to_queue, int64_t count):
        """QREQUEUE: up to `count` dead-lettered jobs queued in `dead_queue`
        go back to `to_queue` (None: the queue each came from), queued at
        once with their counters at 0, for another MAXDELIVERIES tries.
        Returns the jobs moved (their other holders are to be told)."""
        found = self.queues.get(dead_queue)
        moved = []
        if found is None:
            return moved
        for job in (<Queue>found).jobs.peek((<Queue>found).jobs.count):
            options = self.options_of(job)
            if options is None or options.dead_reason == DEAD_NONE:
                continue
            if len(moved) == count:
                break
            self.dequeue(job)
            target = to_queue if to_queue is not None else options.origin
            existing = self.queues.get(target)
            set_job_queue(job, (<Queue>existing).name if existing is not None else target)
            options.dead_reason, options.origin = DEAD_NONE, None
            job.nacks = job.deliveries = 0
            job.flags |= FLAG_COUNTED          # not a re-delivery: nothing to count
            if self.queue_waits:
                self.waits_queue_moved(job, dead_queue)
            self.enqueue(job)
            self.persist_job(job)
            moved.append(job)
        return moved

    def revise(self, Job job, bytes queue, uint32_t nacks, uint32_t deliveries,
               JobOptions options):
        """A newer state of a job this node holds (a holder's QREQUEUE, or a
        later AOF record of it): its queue, counters and options, taken out
        of its queue (its timers queue it again). False if acked."""
        if job.state == ACKED:
            return False
        self.dequeue(job)
        old = <bytes>job.queue_
        if old != queue:
            found = self.queues.get(queue)
            set_job_queue(job, (<Queue>found).name if found is not None else queue)
            if self.queue_waits:
                self.waits_queue_moved(job, old)
        job.nacks, job.deliveries = nacks, deliveries
        set_options(job, options)
        return True

    def back_off(self, Job job, int64_t now):
        """A RETRY timeout is due: with BACKOFF, push it back once (True)."""
        options = self.options_of(job)
        if options is None or job.flags & (FLAG_BACKED_OFF | FLAG_COUNTED) or \
                options.dead_letter_due(job):
            return False
        wait = options.backoff_ms(job, self.jitter(1000) + 500)
        if wait <= 0:
            return False
        job.flags |= FLAG_BACKED_OFF | FLAG_BCAST_WILLQUEUE
        job.qtime = now + wait
        return True

    cdef int _delay_requeue(self, Job job, int64_t delay_ms) except -1:
        """NACK with a delay: counted and announced now, queued later (the
        awake timer queues it at qtime, FLAG_COUNTED saying it is counted)."""
        if job.qtime == 0 or (job.retry == 0 and job.flags & FLAG_DELIVERED):
            return 0
        job.nacks += 1
        self.stats_nacked += 1
        job.flags |= FLAG_COUNTED | FLAG_BCAST_WILLQUEUE
        job.qtime = self.now_ms() + delay_ms
        self.update_awake(job)
        if job.delivered_ != <PyObject*>self._only_me:
            self.announce_queued(job, MSG_INCR_NACKS, delay_ms)
        return 1

    cdef int _nack_one(self, const char* job_id, int64_t delay_ms) except -1:
        """NACK one job: queued again now, or after `delay_ms` (< 0: no
        DELAY given, BACKOFF decides); dead-lettered if that is due."""
        job = self.jobs.find(job_id)
        if job is None or job.state != ACTIVE:
            return 0
        if job.options_ != NULL:
            options = <JobOptions>job.options_
            if options.dead_letter_due(job):
                delay_ms = 0
            elif delay_ms < 0:
                delay_ms = options.backoff_ms(job, self.jitter(1000) + 500)
        if delay_ms > 0:
            return self._delay_requeue(job, delay_ms)
        return 1 if self.enqueue(job, True) else 0

    cdef int64_t _nack_views(self, ArgView* ids, Py_ssize_t count, int64_t delay_ms) except -1:
        cdef int64_t queued = 0
        cdef Py_ssize_t i
        for i in range(count):
            queued += self._nack_one(ids[i].data, delay_ms)
        return queued

    def nack_jobs(self, job_ids, int64_t delay_ms=-1):
        """NACK [DELAY]: how many were queued again (or will be)."""
        return sum([self._nack_one(PyBytes_AS_STRING(job_id), delay_ms)
                    for job_id in _well_formed(job_ids)])

    # --------------------------------------------------------------- ADDJOB

    def add_job(self, bytes queue, bytes body, repl, int64_t delay, retry, int64_t ttl,
                int64_t maxlen, bint async_, client=None, int64_t timeout_ms=0,
                JobOptions options=None, bytes dedup_key=None, int64_t dedup_until_ms=0):
        """Create a job (repl and retry None: the defaults). It comes back
        queued (or active, when delayed), or in wait-repl state with
        self.more(job).waiter parked for `client` when the producer must
        wait for its copies (timeout 0: no deadline). With a `dedup_key`
        (its window ending at dedup_until_ms, or with the TTL when 0) that
        names an earlier job, no job is made: the answer is that job's ID,
        or a Waiter for its outcome (dedup.pxi)."""
        cdef int64_t now = self.now_ms()
        cdef int64_t repl_n = -1 if repl is None else repl
        cdef DedupFields dedup
        if dedup_key is not None:
            dedup.key, dedup.key_len = PyBytes_AS_STRING(dedup_key), PyBytes_GET_SIZE(dedup_key)
            dedup.until_ms = dedup_until_ms or now + ttl * 1000
            dedup.queue, dedup.hash = NULL, 0
        job = self.create_job(queue, None, PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body),
                              repl_n, delay, -1 if retry is None else retry, ttl, maxlen,
                              async_, client, timeout_ms, options, now,
                              NULL if dedup_key is None else &dedup)
        if job is not None:
            return job
        waiter = dedup_duplicate(self, dedup.earlier, client, timeout_ms, repl_n, now)
        return PyBytes_FromStringAndSize(dedup.earlier.id, JOB_ID_LEN) if waiter is None \
            else waiter

    cdef Job create_job(self, bytes queue, Queue q, const char* body, Py_ssize_t body_len,
                        int64_t repl, int64_t delay, int64_t retry, int64_t ttl,
                        int64_t maxlen, bint async_, object client, int64_t timeout_ms,
                        JobOptions options, int64_t now, DedupFields* dedup):
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
        duplicate costs the same whatever the body's size.

        Replication policy: the node keeps a copy and asks repl-1 peers for
        the rest, or, when it is leaving the cluster or short of memory,
        keeps no copy and asks repl peers ("external replication"). On a
        node that has met no peer, REPLICATE defaults to 1."""
        cdef bint external, wait
        cdef int64_t extra_copies
        cdef Job job
        if repl < 0:
            repl = self.cluster_size if self.cluster_size < MAX_DEFAULT_REPLICATION \
                else MAX_DEFAULT_REPLICATION
        if retry < 0:
            retry = ttl // 10 if ttl < 10 * DEFAULT_RETRY_MAX_S else DEFAULT_RETRY_MAX_S
            if retry == 0:
                retry = 1
        external = self.leaving or self.used_memory > self.memory_warn_at
        extra_copies = repl if external else repl - 1
        # A producer that waits for copies waits in wait-repl; otherwise the
        # job is active at once and enqueue() (or the awake timer) takes it.
        wait = extra_copies and not async_
        if q is None:
            found = self.queues.get(queue)
            if found is not None:
                q = <Queue>found
        if q is not None:
            queue = q.name                # every job of a queue shares its name
        job = _build_job(self, queue, repl, delay, retry, ttl, wait, external, async_, options,
                         now)
        if dedup != NULL:
            dedup.earlier = dedup_lookup(self, queue, dedup, now)
            if dedup.earlier != NULL:
                return None
        _check_new_job(self, q, body_len, repl, delay, retry, ttl, maxlen, extra_copies, external,
                       async_)
        _fill_body(job, body, body_len)
        if keep_copy(external, async_):
            if not self.jobs.insert(job):
                raise CommandError(ID_COLLISION)
            self.used_memory += JOB_MEMORY_OVERHEAD + body_len
            if self.queue_waits:
                self.on_job_live(job)
        if dedup != NULL:
            if dedup_remember(self, job, queue, dedup, True, now) and external and not wait:
                dedup_log(self, job)       # no LOADJOB record here carries its key
        if not wait:
            job.flags |= FLAG_CONFIRMED    # nothing (more) to wait for
        self.stats_jobs_created += 1
        if wait:
            self.wait_for_copies(job, client, now + timeout_ms if timeout_ms else 0,
                                 extra_copies, external, now)
            return job
        if delay == 0 and not external:
            self.enqueue(job, False, now, q)
        elif keep_copy(external, async_):    # delayed, or external: a holder will queue it
            self.update_awake(job)
        if self.aof_enabled and not external:
            self.effects.append(AofLoadJob(job))
        if extra_copies:
            copies_replicate(self, job, extra_copies, True)
        if not keep_copy(external, async_) and PyTuple_GET_SIZE(<object>job.delivered_):
            # No copy here: ask one holder to queue it first.
            self.send(self._rng.choice(job.delivered), MSG_ENQUEUE, (job.id, delay))
        return job

    cdef _refuse_replication(self, int64_t extra_copies, bint external):
        if external and extra_copies - 1 == self.reachable_peers:
            reason = REASON_LEAVING if self.leaving else REASON_MEMORY
            raise NoReplError(CANNOT_HOLD_COPY % reason)
        raise NoReplError(NOT_ENOUGH_NODES)

    # --------------------------------------------------------------- GETJOB

    def get_jobs(self, list queue_names, Py_ssize_t count):
        """Up to `count` jobs from the queues, left to right, pass after
        pass, until `count` or a pass that finds nothing; [] if none."""
        return self.take_jobs(queue_names, [None] * len(queue_names), count)

    cdef list take_jobs(self, list names, list queues, Py_ssize_t count):
        """get_jobs, with the queues the caller found (None where it found
        none: the queue is made when the loop reaches it, as in Disque)."""
        cdef list taken = []
        cdef Py_ssize_t before, i
        cdef Queue q
        while True:
            before = len(taken)
            for i in range(len(names)):
                found = queues[i]
                if found is None:
                    found = queues[i] = self.queue(names[i])
                q = <Queue>found
                if q.flags & PAUSED_OUT or q.jobs.count == 0:
                    if self.has_peers:
                        self.need_jobs(q, False)
                    continue
                taken.append(self.take_one(q))
                if len(taken) == count:
                    return taken
            if len(taken) == before:
                return taken

    cdef Job take_one(self, Queue q):
        """GETJOB's take from a queue with jobs: the oldest, and a NEEDJOBS
        to the cluster when that emptied the queue (federation)."""
        cdef Job job = self.fetch(q)
        if q.jobs.count == 0 and self.has_peers:
            self.need_jobs(q, True)
        return job

    # --------------------------------------------------------- re-delivery

    def enqueue_jobs(self, job_ids, bint nack):
        """ENQUEUE / NACK: queue the active ones; returns how many were queued."""
        return sum([self._enqueue_one(PyBytes_AS_STRING(job_id), nack)
                    for job_id in _well_formed(job_ids)])

    def dequeue_jobs(self, job_ids):
        return sum([self._dequeue_one(PyBytes_AS_STRING(job_id))
                    for job_id in _well_formed(job_ids)])

    cdef int64_t _enqueue_views(self, ArgView* ids, Py_ssize_t count, bint nack) except -1:
        cdef int64_t queued = 0
        cdef Py_ssize_t i
        for i in range(count):
            queued += self._enqueue_one(ids[i].data, nack)
        return queued

    cdef int64_t _dequeue_views(self, ArgView* ids, Py_ssize_t count) except -1:
        cdef int64_t dequeued = 0
        cdef Py_ssize_t i
        for i in range(count):
            dequeued += self._dequeue_one(ids[i].data)
        return dequeued

    cdef int _enqueue_one(self, const char* job_id, bint nack) except -1:
        job = self.jobs.find(job_id)
        if job is None or job.state != ACTIVE:
            return 0
        return 1 if self.enqueue(job, nack) else 0

    cdef int _dequeue_one(self, const char* job_id) except -1:
        job = self.jobs.find(job_id)
        if job is None:
            return 0
        return 1 if self.dequeue(job) else 0

    def working(self, job_id):
        """Postpone the next delivery by the job's retry time; returns it."""
        cdef int64_t now, born_ms, ttl_ms
        found = self.jobs.get(job_id)
        if found is None:
            raise NoJobError(JOB_UNKNOWN)
        cdef Job job = <Job>found
        if job.state == ACKED:
            raise AckedError(JOB_ACKED)
        now = self.now_ms()
        born_ms = job.ctime // 1000000
        ttl_ms = <int64_t>job.etime * 1000 - born_ms
        if ttl_ms > 0 and now - born_ms > ttl_ms // 2:
            raise TooLateError(HALF_TTL_ELAPSED)
        if job.state == QUEUED:
            self.dequeue(job)
        job.flags |= FLAG_BCAST_WILLQUEUE
        self.set_requeue_time(job, self.retry_time(job, now))
        if job.delivered_ != <PyObject*>self._only_me:
            self.announce_working(job)
        return job.retry

    # ----------------------------------------------------------------- acks

    def ack_jobs(self, job_ids):
        """ACKJOB: returns how many known jobs moved to the acked state."""
        return sum([self._ack_one(PyBytes_AS_STRING(job_id)) for job_id in _well_formed(job_ids)])

    cdef int64_t _ack_views(self, ArgView* ids, Py_ssize_t count) except -1:
        cdef int64_t known = 0
        cdef Py_ssize_t i
        for i in range(count):
            known += self._ack_one(ids[i].data)
        return known

    cdef int _ack_one(self, const char* job_id) except -1:
        """1 if a known job moved to the acked state."""
        cdef int newly = 0
        job = self.jobs.find(job_id)
        if job is None:
            if self.cluster_size > 1 and not self.leaving and not _at_most_once(job_id):
                self.try_gc(self._dummy_ack(PyBytes_FromStringAndSize(job_id, JOB_ID_LEN)))
            return 0
        if job.delivered_ == <PyObject*>self._only_me and job.state != WAIT_REPL:
            # The only copy is ours: acked and collected at once, as the
            # longer way below would (it is not scheduled for a GC first).
            newly = job.state != ACKED
            self.stats_acked += newly
            self.unregister(job, GONE_ACKED)
            return newly
        if job.state != ACKED:
            self.acknowledge(job)
            newly = 1
            self.stats_acked += 1
        if job.state != ACKED:
            return newly
        if job.delivered_ == <PyObject*>self._only_me:
            self.unregister(job, GONE_ACKED)   # the only copy is ours: nobody else to tell
        else:
            self.try_gc(job)
        return newly

    cpdef acknowledge(self, Job job):
        if job.state == ACKED:
            return
        if job.state == WAIT_REPL and not self.replication_achieved(job):
            return
        self.dequeue(job)
        job.state = ACKED
        self.jobs.acked += 1           # acknowledge() is only ever given a job of the table
        if self.job_waits or self.queue_waits:
            self.on_job_done(job, GONE_ACKED)
        if self.aof_enabled:
            self.effects.append(AofDelJob(job.id))   # acks are not persisted: the job is gone
        if self.extras:
            extra = self.extras.get(job)
            if extra is not None:
                extra.confirmed = None
        self.update_awake(job, self._next_gc_time(0))

    def fast_ack(self, job_ids):
        """FASTACK: delete at once, and ask every node that may have a copy
        (all of them, for an unknown job) to delete it too, best effort."""
        return sum([self._fast_ack_one(PyBytes_AS_STRING(job_id))
                    for job_id in _well_formed(job_ids)])

    cdef int64_t _fast_ack_views(self, ArgView* ids, Py_ssize_t count) except -1:
        cdef int64_t deleted = 0
        cdef Py_ssize_t i
        for i in range(count):
            deleted += self._fast_ack_one(ids[i].data)
        return deleted

    cdef int _fast_ack_one(self, const char* job_id) except -1:
        job = self.jobs.find(job_id)
        if job is None:
            if self.has_peers:
                self.send_to(self.known_peers, DELJOB,
                             (PyBytes_FromStringAndSize(job_id, JOB_ID_LEN), 0))
            return 0
        if job.delivered_ != <PyObject*>self._only_me:
            self.send_to(job.delivered, DELJOB, (job.id, 0))
        self.stats_acked += 1
        self.unregister(job, GONE_ACKED)
        return 1

    def delete_jobs(self, job_ids):
        """DELJOB: forget jobs on this node only, whatever their state."""
        cdef int64_t deleted = 0
        for job_id in job_ids:
            found = self.jobs.get(job_id)
            if found is not None:
                self.unregister(found)
                deleted += 1
        return deleted

    # -------------------------------------------------------------- copies
    # The bodies are in copies.pxi; core/replication.py keeps the policy.

    def replicate(self, Job job, int64_t count, bint noreply, bint promised=False,
                  tuple only=None):
        return copies_replicate(self, job, count, noreply, promised, only)

    def on_repljob(self, bytes sender, int mflags, list jobs):
        copies_on_repljob(self, sender, mflags, jobs)

    def on_gotjob(self, bytes sender, int mflags, bytes job_id, aux):
        copies_on_gotjob(self, sender, job_id)

    def adopt_record(self, record, int64_t now, int state=ACTIVE, bint persist=True):
        """A parsed job (core/job.py's JobRecord: from YOURJOBS or the AOF)
        becomes a local job."""
        cdef WireJob wire
        cdef DedupFields dedup
        data = pack_job(*record)
        parse_wire(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), &wire)
        dedup.key = NULL
        options = None if wire.options == NULL else \
            parse_options(wire.options, wire.options_len, &dedup)
        return copies_adopt(self, &wire, options, &dedup, self.queues.get(record.queue), now,
                            state, persist)

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
        node._refuse_replication(extra_copies, external)
    if q is not None:
        if maxlen and q.jobs.count >= maxlen:
            raise MaxlenError(MAXLEN_REACHED)
        if q.flags & PAUSED_IN:
            raise PausedError(PAUSED_INPUT)
    if node._maxmemory and keep_copy(external, async_) and \
            node.used_memory + JOB_MEMORY_OVERHEAD + body_len > node._maxmemory:
        # maxmemory is a hard cap: what is held now plus this job (its
        # body may be large) must fit, after freeing what can be freed.
        if not node.free_memory() or \
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


cdef inline bint _at_most_once(const char* job_id) noexcept:
    """IDs of retry-0 jobs carry an even TTL field (its last hex digit)."""
    cdef unsigned char last = (<const unsigned char*>job_id)[39]
    cdef int value = last - 48 if last <= 57 else (last | 32) - 87
    return value & 1 == 0


def is_at_most_once_id(bytes job_id):
    return _at_most_once(PyBytes_AS_STRING(job_id))


cdef list _well_formed(job_ids):
    """The IDs that can name a job (callers check them first; this keeps
    the per-ID code to 40-byte IDs whatever a Python caller passes)."""
    return [job_id for job_id in job_ids
            if type(job_id) is bytes and PyBytes_GET_SIZE(job_id) == JOB_ID_LEN]
