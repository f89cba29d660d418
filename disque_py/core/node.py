"""One Disque node's domain state, and the job lifecycle that changes it.

The node holds every job it knows (in any state), its queues, the awake
schedule that drives each job's timers, and the clients parked on it. It is
pure: no asyncio, sockets or files. Methods read the clock they were given,
change state, and append effects to `self.effects` for the runtime.

Lifecycle of a job on this node (Disque's state machine):

    ADDJOB ----> wait-repl --(copies confirmed)--> active <--> queued
                                                     |  GETJOB: queued -> active
                                                     |  RETRY timer: active -> queued
                                                     v
                                   ACKJOB/SETACK -> acked --(GC)--> gone
    TTL reached in any state ----------------------------------> gone

Rules kept here:
  * a registered job is in the jobs table and in the awake schedule, always;
  * a queued job is in exactly one queue, the one it names;
  * a wait-repl job is never queued: only replication_achieved (or
    abandon_replication) moves it on, so it leaves `replicating` with it;
  * at-most-once jobs (retry 0) are queued at most once: enqueue() sets
    qtime to 0 and refuses them afterwards;
  * nothing here raises on a job in an unexpected state: callers get False.

Command-level operations live in sibling modules (producer.py, consumer.py,
acks.py) as mixins over this state, to keep each file about one thing.
"""

from __future__ import annotations

import os

from disque_py.core.clock import Clock
from disque_py.core.effects import AofDelJob, AofLoadJob, Unblock
from disque_py.core.job import (ACKED, ACTIVE, FLAG_BCAST_QUEUED, FLAG_BCAST_WILLQUEUE,
                                FLAG_DELIVERED, QUEUED, TIME_ERROR_MS, WAIT_REPL,
                                WILLQUEUE_ADVANCE_MS, Job, JobExtra)
from disque_py.core.queue import PAUSED_IN, PAUSED_OUT, Queue
from disque_py.core.scantable import ScanTable
from disque_py.engine import AwakeSchedule, IdGenerator, JobTable
from disque_py.core.waiters import JOB_REPLICATION, TIMED_OUT, Deadlines
from disque_py.cluster import messages as msg
from disque_py.core.acks import AcksMixin
from disque_py.core.consumer import ConsumerMixin
from disque_py.core.federation import FederationMixin, FederationStats
from disque_py.core.peers import PeersMixin, new_tuple
from disque_py.core.producer import JOB_MEMORY_OVERHEAD, QUEUE_MEMORY_OVERHEAD, ProducerMixin
from disque_py.core.replication import (REMOVED_BEFORE_COPIES, REPLICATION_RETRY_MS,
                                        ReplicationMixin)
from disque_py.core.requeue import RequeueMixin
from disque_py.errors import NoReplError

QUEUE_MAX_IDLE_S = 5 * 60
AWAKE_BATCH = 2000            # jobs handled per timer slice, so clients interleave
FREE_SLICE_JOBS = 20_000      # flushed jobs released per timer slice (a few ms)
DEFAULT_MAXMEMORY = 1024 ** 3
UNLIMITED_MEMORY = 1 << 62


class Node(ProducerMixin, ConsumerMixin, AcksMixin, ReplicationMixin, RequeueMixin,
           FederationMixin, PeersMixin):
    def __init__(self, node_id: bytes, clock: Clock | None = None,
                 id_seed: bytes | None = None) -> None:
        self.clock = clock = clock or Clock()
        self._now_ms = clock.now_ms          # bound once: read on every hot path
        self._uniform = clock.random.random
        self.effects: list = []
        self.jobs = JobTable()
        self.extras: dict[Job, JobExtra] = {}    # see more()
        self.queues = ScanTable(256)
        self.schedule = AwakeSchedule()
        self.deadlines = Deadlines()
        self.ready: dict[bytes, None] = {}      # queues that got jobs while clients wait
        self.blocked_clients = 0
        self.used_memory = 0                     # estimate for jobs and queues, bytes
        self.maxmemory = DEFAULT_MAXMEMORY
        self.evict_jobs = True                   # maxmemory-policy acks (else noeviction)
        self._last_ctime = 0
        self._evict_cursor = 0
        self._graveyard: list = []               # flushed containers, freed in slices
        self.stats_jobs_created = 0
        self._rng = clock.random
        # Cluster view; the membership layer keeps it current (set_cluster_view).
        self.cluster_size = 1
        self.known_peers: set[bytes] = set()     # every other node past handshake
        self.reachable: list[bytes] = []         # peers we can talk to now
        self.reachable_peers = 0
        self.leaving = False
        self.replicating: dict[Job, None] = {}   # jobs whose producer awaits copies
        self.repl_rtt_ms = 0.0                   # recent REPLJOB -> GOTJOB round trip
        self.waiting_queues: dict[bytes, None] = {}   # queues with parked consumers
        self.federation = FederationStats()
        self.aof_enabled = False                 # emit AofLoadJob / AofDelJob effects
        self._needjobs_cron = 0
        self.set_node_id(node_id, id_seed)

    def set_node_id(self, node_id: bytes, id_seed: bytes | None = None) -> None:
        self.id = node_id
        self.ids = IdGenerator(node_id, id_seed or os.urandom(20))
        self._only_me = (node_id,)
        self.index_node_ids()

    @property
    def maxmemory(self) -> int:
        return self._maxmemory

    @maxmemory.setter
    def maxmemory(self, limit: int) -> None:
        """0 means no limit."""
        self._maxmemory = limit
        effective = limit or UNLIMITED_MEMORY
        self.memory_warn_at = effective // 100 * 75     # keep no local copy above this
        self.memory_evict_at = effective // 100 * 95    # evict, then refuse, above this

    # ------------------------------------------------------------ lookups

    def lookup(self, job_id: bytes) -> Job | None:
        return self.jobs.get(job_id)

    def more(self, job: Job) -> JobExtra:
        """The extra state of a job being replicated or collected (created
        on first use, dropped when the job leaves this node)."""
        extra = self.extras.get(job)
        if extra is None:
            extra = self.extras[job] = JobExtra()
        return extra

    def extra_of(self, job: Job) -> JobExtra | None:
        return self.extras.get(job)

    def queue(self, name: bytes) -> Queue:
        """The queue called `name`, created on first use."""
        q = self.queues.get(name)
        if q is None:
            q = Queue(name, self.clock.now_ms())
            self.queues.add(name, q)
            self.used_memory += QUEUE_MEMORY_OVERHEAD
        return q

    def queue_length(self, name: bytes) -> int:
        q = self.queues.get(name)
        return len(q.jobs) if q is not None else 0

    # ------------------------------------------------- registry and timers

    def next_ctime(self, now_ms: int) -> int:
        """Creation time: ms * 1e6, strictly increasing on this node."""
        ctime = now_ms * 1_000_000
        if ctime <= self._last_ctime:
            ctime = self._last_ctime + 1
        self._last_ctime = ctime
        return ctime

    def register(self, job: Job) -> bool:
        """Add to the jobs table. The caller then schedules it (update_awake
        or enqueue), so a new job is placed in the schedule once."""
        if not self.jobs.add(job):
            return False
        body = job.body
        self.used_memory += JOB_MEMORY_OVERHEAD + (len(body) if body else 0)
        return True

    def unregister(self, job: Job) -> bool:
        """Forget a job completely (any state). False if it was not known."""
        if job.state == WAIT_REPL and self.jobs.get(job.id) is job:
            # Its producer still waits: answer it, and delete the copies.
            self.abandon_replication(job, NoReplError(REMOVED_BEFORE_COPIES))
            return True
        if not self.jobs.discard(job):
            return False
        self.extras.pop(job, None)
        if self.aof_enabled and (job.state == ACTIVE or job.state == QUEUED):
            self.effects.append(AofDelJob(job.id))
        body = job.body
        self.used_memory -= JOB_MEMORY_OVERHEAD + (len(body) if body else 0)
        self.schedule.unschedule(job)
        if job.state == QUEUED:
            self.dequeue(job)
        return True

    def update_awake(self, job: Job, gc_at: int = 0) -> None:
        """Place the job at its next event: TTL, (WILL)QUEUE time, or GC."""
        at = job.etime * 1000 + 1000
        state = job.state
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

    def persist_job(self, job: Job) -> None:
        """The job's state becomes durable (when the AOF is on)."""
        if self.aof_enabled:
            self.effects.append(AofLoadJob(job))

    def load_job(self, record, enqueue: bool) -> bool:
        """A job from the AOF: back as active (re-queued by its retry timer),
        or queued again when `enqueue` (a controlled restart) and it was."""
        now = self.clock.now_ms()
        if record.etime * 1000 <= now or record.id in self.jobs:
            return False
        was_queued = record.state == QUEUED
        job = self._adopt(record, now, ACTIVE, persist=False)
        job.flags = record.flags
        if job.retry:
            job.flags |= FLAG_BCAST_WILLQUEUE
        if enqueue and was_queued:
            if job.retry == 0:
                job.qtime = now          # queued once more: it never was delivered
            self.enqueue(job)
        return True

    def set_requeue_time(self, job: Job, qtime: int) -> None:
        """Move the next re-queue; never revives an at-most-once job."""
        if job.retry == 0 or job.qtime == 0:
            return
        job.qtime = qtime
        self.update_awake(job)

    def retry_time(self, job: Job, now_ms: int) -> int:
        return now_ms + job.retry * 1000 + self.clock.jitter(TIME_ERROR_MS)

    # ------------------------------------------------------------- queues

    def enqueue(self, job: Job, nack: bool = False, now: int = 0, q: Queue | None = None) -> bool:
        """Put an active job in its queue. False if it cannot be queued now
        (already queued, acknowledged, at-most-once and delivered, or still
        waiting for its copies: replication_achieved queues it, and a
        wait-repl job queued by a peer's YOURJOBS or ENQUEUE would leave its
        replication loop running on a job that may be acked meanwhile).

        `now` and `q` (the job's queue) may be passed by a caller that has
        them at hand, to spare the lookups on the ADDJOB path."""
        if job.state != ACTIVE or job.qtime == 0:
            return False
        retry = job.retry
        flags = job.flags
        if retry == 0 and flags & FLAG_DELIVERED:
            return False
        if not now:
            now = self._now_ms()
        job.state = QUEUED
        if flags & FLAG_BCAST_QUEUED or nack:
            # A re-queue: count it, and tell the other holders (they count too).
            if nack:
                job.nacks += 1
            else:
                job.deliveries += 1
            if job.delivered is not self._only_me:
                self.announce_queued(job, nack)
        if retry:
            job.flags = flags | FLAG_BCAST_WILLQUEUE | FLAG_BCAST_QUEUED
            # now + retry + Clock.jitter(TIME_ERROR_MS), inlined
            qtime = job.qtime = now + retry * 1000 + int(self._uniform() * TIME_ERROR_MS) \
                - TIME_ERROR_MS // 2
            at = job.etime * 1000 + 1000
            if qtime - WILLQUEUE_ADVANCE_MS < at:
                at = qtime - WILLQUEUE_ADVANCE_MS
        else:
            job.flags = flags | FLAG_BCAST_QUEUED
            job.qtime = 0
            at = job.etime * 1000 + 1000
        self.schedule.schedule(job, at)
        if q is None:
            q = self.queues.get(job.queue) or self.queue(job.queue)
        q.jobs.add(job)
        q.atime = now // 1000
        q.jobs_in += 1
        if (q.waiters is not None or q.interested is not None) and not q.flags & PAUSED_OUT:
            self.ready[q.name] = None    # someone here or elsewhere awaits it
        return True

    def dequeue(self, job: Job) -> bool:
        if job.state != QUEUED:
            return False
        q = self.queues.get(job.queue)
        if q is None:
            return False
        q.jobs.remove(job)
        job.state = ACTIVE
        return True

    def fetch(self, q: Queue) -> Job | None:
        """Take the oldest job out of a queue, for delivery to a consumer."""
        jobs = q.jobs
        if not jobs:
            return None
        job = jobs.pop(0)
        job.state = ACTIVE
        job.flags |= FLAG_DELIVERED
        q.atime = self.clock.now_ms() // 1000
        q.jobs_out += 1
        return job

    def set_paused(self, q: Queue, flags: int) -> None:
        was_paused_out = q.flags & PAUSED_OUT
        q.flags = (q.flags & ~(PAUSED_IN | PAUSED_OUT)) | flags
        if was_paused_out and not q.flags & PAUSED_OUT and q.waiters is not None:
            self.ready[q.name] = None

    # ------------------------------------------------------------- timers

    def next_wakeup(self) -> int | None:
        """The earliest time the node has something to do, or None."""
        now = self.clock.now_ms()
        if self._graveyard:
            return now
        candidates = [self.schedule.next_due(), self.deadlines.next_due()]
        if self.replicating:
            candidates.append(now + REPLICATION_RETRY_MS)
        due = [at for at in candidates if at is not None]
        return min(due) if due else None

    def tick(self, limit: int = AWAKE_BATCH) -> bool:
        """Run due timers (up to `limit` jobs). True if more are already due."""
        now = self.clock.now_ms()
        for waiter in self.deadlines.pop_expired(now):
            if waiter.kind == JOB_REPLICATION:
                self.replication_timed_out(waiter)
            else:
                self.release(waiter, TIMED_OUT)
        if self.replicating:
            self.tick_replication(now)
        if self.waiting_queues:
            self.tick_federation(now)
        due = self.schedule.pop_due(now, limit)
        for job in due:
            self.process_job(job, now)
        if self.ready:
            self.serve_ready()      # jobs the timers queued may be awaited
        if self._graveyard:
            self._free_some()
        return len(due) >= limit

    def process_job(self, job: Job, now: int) -> None:
        """A job's awake time came: expire, announce, re-queue or collect it."""
        if job.etime * 1000 <= now:
            self.unregister(job)
            return
        state = job.state
        if state == ACTIVE or state == QUEUED:
            if job.flags & FLAG_BCAST_WILLQUEUE and job.qtime - WILLQUEUE_ADVANCE_MS <= now:
                if state != QUEUED and job.delivered is not self._only_me:
                    self.announce_willqueue(job)
                job.flags &= ~FLAG_BCAST_WILLQUEUE
            if state == ACTIVE and job.qtime <= now:
                q = self.queues.get(job.queue)
                if job.retry and q is not None and q.flags & PAUSED_IN:
                    job.qtime = self.retry_time(job, now)
                else:
                    self.enqueue(job)
            elif state == QUEUED and job.qtime <= now and job.retry:
                job.flags |= FLAG_BCAST_WILLQUEUE
                job.qtime = self.retry_time(job, now)
        elif state == ACKED:
            self.try_gc(job, from_timer=True)
            return
        if job.awake_due is None:
            self.update_awake(job)

    def evict_idle_queues(self, budget: int = 64) -> int:
        """Forget empty, idle, unpaused queues nobody waits on (a slice per call).

        Idle means 5 minutes, 10 s above 75% of maxmemory, 2 s above 95%."""
        now_s = self.clock.now_ms() // 1000
        max_idle = (QUEUE_MAX_IDLE_S, QUEUE_MAX_IDLE_S // 30, 2)[self.memory_warning_level()]
        parts = self.queues.partitions()
        evicted = 0
        for _ in range(budget):
            part = parts[self._evict_cursor]
            self._evict_cursor = (self._evict_cursor + 1) % len(parts)
            for name, q in list(part.items()):
                if q.is_evictable(now_s, max_idle):
                    self.queues.pop(name)
                    self.used_memory -= QUEUE_MEMORY_OVERHEAD
                    evicted += 1
        return evicted

    # ---------------------------------------------------------- flushing

    def flush_all(self) -> None:
        """Forget every job and queue; the jobs themselves are freed in slices.

        Parked GETJOB clients get the timeout reply first, as in Disque.
        The schedule and the queue lists are cleared at once (that only
        drops references: the jobs table still holds every job); the old
        table then releases its jobs a slice per tick, so freeing a million
        jobs never stalls the server.
        """
        for q in list(self.queues.values()):
            for waiter in list(q.waiters or ()):
                self.release(waiter, TIMED_OUT)
        for job in list(self.replicating):      # producers waiting for copies
            self.abandon_replication(job, NoReplError(REMOVED_BEFORE_COPIES))
        old_jobs, old_queues = self.jobs, self.queues
        self.schedule.clear()
        for q in old_queues.values():
            q.jobs.clear()
        self.jobs = JobTable()
        self.extras.clear()
        self.queues = ScanTable(256)
        self.ready.clear()
        self.used_memory = 0
        self._graveyard.append(old_jobs)

    def _free_some(self, budget_jobs: int = FREE_SLICE_JOBS) -> None:
        """Release about `budget_jobs` jobs of the flushed tables."""
        graveyard = self._graveyard
        if graveyard and graveyard[-1].release_some(budget_jobs):
            graveyard.pop()

    @property
    def freeing(self) -> bool:
        return bool(self._graveyard)

    # ------------------------------------------------------------ effects

    def release(self, waiter, outcome) -> None:
        """Unpark a client with an outcome (see waiters.py)."""
        if not waiter.active:
            return
        self.forget_waiter(waiter)
        self.effects.append(new_tuple(Unblock, (waiter, outcome)))

    def take_effects(self) -> list:
        effects = self.effects
        self.effects = []
        return effects


Node._PEER_HANDLERS = {
    msg.REPLJOB: Node.on_repljob,
    msg.GOTJOB: Node.on_gotjob,
    msg.ENQUEUE: Node.on_enqueue_message,
    msg.QUEUED: Node.on_queued,
    msg.WORKING: Node.on_working,
    msg.WILLQUEUE: Node.on_willqueue,
    msg.SETACK: Node.on_setack,
    msg.GOTACK: Node.on_gotack,
    msg.DELJOB: Node.on_deljob,
    msg.PAUSE: Node.on_pause,
    msg.NEEDJOBS: Node.on_needjobs,
    msg.YOURJOBS: Node.on_yourjobs,
}
