"""One Disque node: the compiled job core plus the Python that reacts to
the cluster and to parked clients.

NodeCore (engine/node.pxi) holds the jobs, the queues, the awake schedule
and the job lifecycle (its docstring has the state machine and the rules
it keeps). Node adds, as mixins over that state, what concerns other nodes
or waiting clients: replication.py (copies), acks.py (collecting acks),
requeue.py (re-queue messages), federation.py (moving jobs to consumers),
peers.py (the cluster view and the outbox), consumer.py (parked GETJOBs),
patterns.py (GETJOB PATTERN),
waits.py (parked WAITJOBs and QWAITs),
memory.py (the memory policy), healing.py (copies made again when holders
are lost); and here, the timers: tick() runs what the awake schedule says
is due, deadlines of parked clients, and healing's paced work. The node
is pure: no asyncio, sockets or files; effects go to `self.effects`.
"""

from __future__ import annotations


from disque_py.formats import bus as msg
from disque_py.node.acks import AcksMixin
from disque_py.base.clock import Clock
from disque_py.node.consumer import ConsumerMixin
from disque_py.base.effects import Unblock
from disque_py.node.federation import FederationMixin, FederationStats
from disque_py.node.healing import HealingMixin
from disque_py.engine import (ACKED, ACTIVE, DEDUP_KEY_FIELD, DEDUP_QUEUE_FIELD, DEDUP_UNTIL_FIELD, FLAG_BCAST_WILLQUEUE, GONE_EXPIRED, PAUSED_IN, QUEUED, QUEUE_MEMORY_OVERHEAD, WILLQUEUE_ADVANCE_MS, Job, JobTable, NodeCore, NodeHooks, job_options)
from disque_py.base.replies import (REMOVED_BEFORE_COPIES)
from disque_py.node.peers import PeersMixin, new_tuple
from disque_py.node.memory import MemoryPolicyMixin
from disque_py.node.patterns import PatternConsumerMixin
from disque_py.node.replication import REPLICATION_RETRY_MS, ReplicationMixin
from disque_py.node.requeue import RequeueMixin
from disque_py.base.scantable import ScanTable
from disque_py.node.waiters import DUPLICATE_ADD, JOB_REPLICATION, TIMED_OUT, Deadlines
from disque_py.node.waits import WaitsMixin
from disque_py.base.errors import NoReplError

QUEUE_MAX_IDLE_S = 5 * 60
AWAKE_BATCH = 2000            # jobs handled per timer slice, so clients interleave
FREE_SLICE_JOBS = 20_000      # flushed jobs released per timer slice (a few ms)
DEFAULT_MAXMEMORY = 1024 ** 3
QUEUE_TABLE_PARTITIONS = 256


class Node(NodeCore, MemoryPolicyMixin, ConsumerMixin, PatternConsumerMixin, AcksMixin,
           ReplicationMixin, RequeueMixin, FederationMixin, PeersMixin, HealingMixin, WaitsMixin):
    def __init__(self, node_id: bytes, clock: Clock | None = None,
                 id_seed: bytes | None = None) -> None:
        clock = clock or Clock()
        self.init_core(node_id, clock, id_seed, ScanTable(QUEUE_TABLE_PARTITIONS))
        self.deadlines = Deadlines()
        self.replicating: dict = {}               # jobs whose producer awaits copies
        self.waiting_queues: dict = {}            # queues with parked consumers
        self.blocked_clients = 0
        self.job_waits: dict = {}                 # WAITJOB: job ID -> its waiters
        self.queue_waits: dict = {}               # QWAIT: queue name -> its wait
        self.pattern_waiters: dict | None = None  # parked GETJOB PATTERNs
        self.maxmemory = DEFAULT_MAXMEMORY
        self._evict_cursor = 0
        self._graveyard: list = []               # flushed job tables, freed in slices
        self.confirming: dict = {}               # copies promised to duplicate ADDJOBs
        # Cluster view; the membership layer keeps it current (set_cluster_view).
        self.known_peers: set[bytes] = set()     # every other node past handshake
        self.reachable: list[bytes] = []         # peers we can talk to now
        self.federation = FederationStats()
        self._needjobs_cron = 0
        self.init_healing()
        self.index_node_ids()
        self.hooks = NodeHooks(
            wait_for_copies=self.wait_for_copies, replication_achieved=self.replication_achieved,
            abandon_replication=self.abandon_replication,
            follow_replication=self.follow_replication, confirm_copies=self.confirm_copies,
            promise_progress=self.promise_progress, try_gc=self.try_gc,
            serve_ready=self.serve_ready, block=self.block, block_pattern=self.block_pattern,
            pattern_queues=self.pattern_queues, pattern_served=self.pattern_served,
            need_jobs=self.need_jobs, job_live=self.on_job_live, job_done=self.on_job_done,
            job_moved=self.waits_queue_moved, free_memory=self.free_memory)

    def set_node_id(self, node_id: bytes, id_seed: bytes | None = None) -> None:
        self.set_identity(node_id, id_seed)
        self.index_node_ids()

    def load_job(self, record, enqueue: bool) -> bool:
        """A job from the AOF: back as active (re-queued by its retry timer),
        or queued again when `enqueue` (a controlled restart) and it was."""
        now = self.clock.now_ms()
        if record.etime * 1000 <= now:
            self._restore_key_of_expired(record)
            return False
        known = self.jobs.get(record.id)
        if known is not None:
            # A later record of a job with options: dead-lettered, or moved
            # back by QREQUEUE, since the first one was written.
            if record.options is None:
                return False
            return self.revise(known, record.queue, record.nacks, record.deliveries,
                               job_options(*record.options))
        was_queued = record.state == QUEUED
        job = self.adopt_record(record, now, ACTIVE, persist=False)
        job.flags = record.flags
        if job.retry:
            job.flags |= FLAG_BCAST_WILLQUEUE
        if enqueue and was_queued:
            if job.retry == 0:
                job.qtime = now          # queued once more: it never was delivered
            self.enqueue(job)
        return True

    def _restore_key_of_expired(self, record) -> None:
        """A job gone by TTL whose DEDUP window (WINDOW beyond its TTL) is
        still open: its key outlives it, here too."""
        options = record.options
        if options is not None and options[DEDUP_KEY_FIELD] is not None:
            queue = options[DEDUP_QUEUE_FIELD] or record.queue
            self.restore_dedup(queue, options[DEDUP_KEY_FIELD], record.id,
                               options[DEDUP_UNTIL_FIELD])

    # ------------------------------------------------------------- timers

    def next_wakeup(self) -> int | None:
        """The earliest time the node has something to do, or None."""
        now = self.clock.now_ms()
        if self._graveyard:
            return now
        candidates = [self.schedule.next_due(), self.deadlines.next_due(),
                      self.dedup.next_due()]
        if self.replicating or self.confirming:
            candidates.append(now + REPLICATION_RETRY_MS)
        if self._heal_left or self._heal_pending or self._heal_watch_heap:
            candidates.append(self.heal_next_due())
        due = [at for at in candidates if at is not None]
        return min(due) if due else None

    def tick(self, limit: int = AWAKE_BATCH) -> bool:
        """Run due timers (up to `limit` jobs). True if more are already due."""
        now = self.clock.now_ms()
        for waiter in self.deadlines.pop_expired(now):
            if waiter.kind in (JOB_REPLICATION, DUPLICATE_ADD):
                self.replication_timed_out(waiter)
            else:
                self.release(waiter, TIMED_OUT)
        if self.replicating:
            self.tick_replication(now)
        if self.confirming:
            self.tick_promises(now)
        dedup_due = self.dedup.next_due()
        if dedup_due is not None and dedup_due <= now:
            self.used_memory -= self.dedup.expire(now, limit)
        if self.waiting_queues or self.pattern_waiters is not None:
            self.tick_federation(now)
        if (self._heal_left or self._heal_pending or self._heal_watch_heap or self._heal_marks
                or self._heal_short) and now >= self._heal_next:
            self.tick_healing(now)
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
            self.stats_expired += 1
            self.unregister(job, GONE_EXPIRED)
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
                elif not (job.options is not None and self.back_off(job, now)):
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
                    self.queues_version += 1
                    q.live = False
                    self.used_memory -= QUEUE_MEMORY_OVERHEAD
                    evicted += 1
        return evicted

    # ---------------------------------------------------------- flushing

    def flush_all(self) -> None:
        """Forget every job and queue; the jobs themselves are freed in slices.

        Parked GETJOB clients (PATTERN ones too) get the timeout reply
        first, as in Disque;
        parked WAITJOBs and QWAITs are answered: every job is deleted.
        The schedule and the queue lists are cleared at once (that only
        drops references: the jobs table still holds every job); the old
        table then releases its jobs a slice per tick, so freeing a million
        jobs never stalls the server.
        """
        for q in list(self.queues.values()):
            for waiter in list(q.waiters or ()):
                self.release(waiter, TIMED_OUT)
        for waiter in list(self.pattern_waiters or ()):
            self.release(waiter, TIMED_OUT)
        self.release_completion_waits_flushed()
        for job in list(self.replicating):      # producers waiting for copies
            self.abandon_replication(job, NoReplError(REMOVED_BEFORE_COPIES))
        self.extras.clear()
        self.tick_promises(self.clock.now_ms())   # duplicates awaiting a promise round
        old_jobs, old_queues = self.jobs, self.queues
        self.schedule.clear()
        for q in old_queues.values():
            q.jobs.clear()
            q.live = False
        self.jobs = JobTable()
        self.queues = ScanTable(QUEUE_TABLE_PARTITIONS)
        self.queues_version += 1
        self.forget_patterns()
        self.ready.clear()
        self.dedup.clear()
        self.used_memory = 0
        self.heal_reset()
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


Node._PEER_HANDLERS = {
    msg.REPLJOB: Node.on_repljob_healing,     # on_repljob, then healing's marks
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
