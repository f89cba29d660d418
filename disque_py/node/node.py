"""One Disque node: the compiled job core, and the components around it
that react to the cluster and to parked clients.

NodeCore (engine/node/) holds the jobs, the queues, the awake schedule and
the job lifecycle (engine/node/core.pxi has the state machine and the rules
it keeps). Node is that core plus components, each with the state it owns
and the others it needs given when it is made:

    parking      (waiters.py)      parked clients: their count, deadlines, answers
    healing      (healing.py)      copies made again when holders are lost
    memory       (memory.py)       the memory policy, idle queues forgotten
    replication  (replication.py)  producers waiting for copies; promise rounds
    acks         (acks.py)         ack collections: SETACK, GOTACK, DELJOB
    requeue      (requeue.py)      re-queue messages between holders; QREQUEUE
    federation   (federation.py)   jobs moved to where consumers wait
    consumers    (consumers.py)    parked GETJOBs (FROM and PATTERN), PAUSE
    waits        (waits.py)        parked WAITJOBs and QWAITs

The engine calls them only through the NodeHooks wired below. Here: the
cluster view, the dispatch of peers' job messages, the timers (tick() runs
what the awake schedule says is due, the parked clients' deadlines, and
each component's paced work) and FLUSHALL; the AOF's jobs are loaded by
the engine (engine/aof/load.pxi). The node is
pure: no asyncio, sockets or files; effects go to `self.effects`.
"""

from __future__ import annotations

from disque_py.base.clock import Clock
from disque_py.base.errors import LeavingError, NoReplError
from disque_py.base.replies import LEAVING_MESSAGE, REMOVED_BEFORE_COPIES
from disque_py.base.scantable import ScanTable
from disque_py.config.directives import DEFAULT_MAXMEMORY
from disque_py.engine import (ACKED, ACTIVE, FLAG_BCAST_WILLQUEUE, GONE_EXPIRED, PAUSED_IN,
                              QUEUED, WILLQUEUE_ADVANCE_MS, Job, JobTable, NodeCore, NodeHooks)
from disque_py.formats import bus as msg
from disque_py.node.acks import Acks
from disque_py.node.consumers import Consumers
from disque_py.node.federation import Federation
from disque_py.node.healing import Healing
from disque_py.node.memory import MemoryPolicy
from disque_py.node.replication import REPLICATION_RETRY_MS, Replication
from disque_py.node.requeue import Requeue
from disque_py.node.waiters import DUPLICATE_ADD, JOB_REPLICATION, TIMED_OUT, Parking
from disque_py.node.waits import Waits

AWAKE_BATCH = 2000            # jobs handled per timer slice, so clients interleave
FREE_SLICE_JOBS = 20_000      # flushed jobs released per timer slice (a few ms)
QUEUE_TABLE_PARTITIONS = 256


class Node(NodeCore):
    def __init__(self, node_id: bytes, clock: Clock | None = None,
                 id_seed: bytes | None = None) -> None:
        clock = clock or Clock()
        self.init_core(node_id, clock, id_seed, ScanTable(QUEUE_TABLE_PARTITIONS))
        self.maxmemory = DEFAULT_MAXMEMORY
        self._graveyard: list = []               # flushed job tables, freed in slices
        self.parking = Parking(self)
        self.healing = Healing(self)
        self.memory = MemoryPolicy(self)
        self.replication = Replication(self, self.parking, self.healing)
        self.acks = Acks(self, self.replication)
        self.requeue = Requeue(self, self.acks)
        self.federation = Federation(self, self.acks, self._queues_with_waiters)
        self.consumers = Consumers(self, self.parking, self.federation)
        self.waits = Waits(self, self.parking)
        self.index_node_ids()
        self.hooks = self._wire_hooks()
        self._peer_handlers = self._message_handlers()

    def _wire_hooks(self) -> NodeHooks:
        """Every call the engine makes into this layer (engine/node/hooks.pxi)."""
        replication, consumers, waits = self.replication, self.consumers, self.waits
        return NodeHooks(
            wait_for_copies=replication.wait_for_copies,
            abandon_replication=replication.abandon,
            follow_replication=replication.follow,
            confirm_copies=replication.confirm_copies,
            promise_progress=replication.promise_progress,
            end_promise_round=replication.end_promise_round,
            serve_ready=consumers.serve_ready,
            block=consumers.block,
            block_pattern=consumers.block_pattern,
            pattern_queues=consumers.pattern_queues,
            pattern_served=consumers.pattern_served,
            need_jobs=self.federation.need_jobs,
            job_live=waits.job_live,
            job_done=waits.job_done,
            job_moved=waits.job_moved,
            free_memory=self.memory.free)

    def _message_handlers(self) -> dict:
        """The component that answers each job-protocol message."""
        acks, requeue, federation = self.acks, self.requeue, self.federation
        return {
            msg.REPLJOB: self.healing.on_repljob,     # on_repljob, then healing's marks
            msg.GOTJOB: self.on_gotjob,
            msg.ENQUEUE: self.replication.on_enqueue_message,
            msg.QUEUED: requeue.on_queued,
            msg.WORKING: requeue.on_working,
            msg.WILLQUEUE: requeue.on_willqueue,
            msg.SETACK: acks.on_setack,
            msg.GOTACK: acks.on_gotack,
            msg.DELJOB: acks.on_deljob,
            msg.PAUSE: self.consumers.on_pause,
            msg.NEEDJOBS: federation.on_needjobs,
            msg.YOURJOBS: federation.on_yourjobs,
        }

    def _queues_with_waiters(self):
        return self.consumers.queues_with_waiters()

    def set_node_id(self, node_id: bytes, id_seed: bytes | None = None) -> None:
        self.set_identity(node_id, id_seed)
        self.index_node_ids()

    # ------------------------------------------------------- cluster view

    def set_cluster_view(self, size: int, known: set[bytes], reachable: int,
                         linked: list[bytes], leaving: bool, failed=None, epochs=None) -> None:
        """The membership layer's view, pushed after every change.

        `reachable` counts peers not flagged failing (what ADDJOB checks its
        REPLICATE against, as Disque does); `linked` are those we can send
        to right now (where copies are asked for). `failed` (the peers
        flagged FAIL) and `epochs` ({peer: start epoch}) tell healing.py
        which holders were lost; None from a caller that does not know."""
        self.cluster_size = size
        self.known_peers = known
        self.has_peers = bool(known)
        self.index_node_ids()
        self.reachable = linked
        self.reachable_peers = reachable
        was_leaving, self.leaving = self.leaving, leaving
        if leaving and not was_leaving:
            leaving_error = LeavingError(LEAVING_MESSAGE)
            self.replication.abandon_all(leaving_error)
            self.consumers.release_all(leaving_error)
        self.healing.view(failed, epochs)

    def index_node_ids(self) -> None:
        """node_ids: each known node's ID and this node's, ID -> the same
        object, so that the holders of the jobs copied here share them."""
        node_ids = self.node_ids = {node_id: node_id for node_id in self.known_peers}
        node_ids[self.id] = self.id

    def on_peer_message(self, sender: bytes, kind: int, mflags: int, body) -> None:
        """A job-protocol message from a known node. The peers' messages
        arrive decoded and from a known sender; every handler tolerates
        duplicates, reordering, unknown jobs and jobs in any state."""
        handler = self._peer_handlers.get(kind)
        if handler is None:
            return
        if kind in (msg.REPLJOB, msg.YOURJOBS):
            handler(sender, mflags, body.jobs)
        elif kind in (msg.NEEDJOBS, msg.PAUSE):
            handler(sender, body.queue, body.aux)
        else:
            for job_id, aux in body.items:
                handler(sender, mflags, job_id, aux)
        if self.ready:
            self.consumers.serve_ready()

    # ------------------------------------------------------------- timers

    def next_wakeup(self) -> int | None:
        """The earliest time the node has something to do, or None."""
        now = self.clock.now_ms()
        if self._graveyard:
            return now
        replication = self.replication
        candidates = [self.schedule.next_due(), self.parking.deadlines.next_due(),
                      self.dedup.next_due(), self.healing.next_due()]
        if replication.replicating or replication.confirming:
            candidates.append(now + REPLICATION_RETRY_MS)
        due = [at for at in candidates if at is not None]
        return min(due) if due else None

    def tick(self, limit: int = AWAKE_BATCH) -> bool:
        """Run due timers (up to `limit` jobs). True if more are already due."""
        now = self.clock.now_ms()
        replication, consumers = self.replication, self.consumers
        for waiter in self.parking.deadlines.pop_expired(now):
            if waiter.kind in (JOB_REPLICATION, DUPLICATE_ADD):
                replication.timed_out(waiter)
            else:
                self.parking.release(waiter, TIMED_OUT)
        if replication.replicating:
            replication.tick(now)
        if replication.confirming:
            replication.tick_promises(now)
        if self.abandoned:
            replication.expire_abandoned(now)
        dedup_due = self.dedup.next_due()
        if dedup_due is not None and dedup_due <= now:
            self.used_memory -= self.dedup.expire(now, limit)
        if consumers.waiting_queues or consumers.pattern_waiters is not None:
            self.federation.tick(now)
        if self.healing.due(now):
            self.healing.tick(now)
        due = self.schedule.pop_due(now, limit)
        for job in due:
            self.process_job(job, now)
        if self.ready:
            consumers.serve_ready()      # jobs the timers queued may be awaited
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
                    self.requeue.announce_willqueue(job)
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

    # ---------------------------------------------------------- flushing

    def flush_all(self) -> None:
        """Forget every job and queue; the jobs themselves are freed in slices.

        Parked GETJOB clients (PATTERN ones too) get the timeout reply
        first, as in Disque; parked WAITJOBs and QWAITs are answered: every
        job is deleted. The schedule and the queue lists are cleared at once
        (that only drops references: the jobs table still holds every job);
        the old table then releases its jobs a slice per tick, so freeing a
        million jobs never stalls the server.
        """
        replication = self.replication
        self.consumers.flushed()
        self.waits.flushed()
        for job in list(replication.replicating):      # producers waiting for copies
            replication.abandon(job, NoReplError(REMOVED_BEFORE_COPIES))
        self.extras.clear()
        replication.tick_promises(self.clock.now_ms())   # duplicates awaiting a promise round
        old_jobs, old_queues = self.jobs, self.queues
        self.schedule.clear()
        for q in old_queues.values():
            q.jobs.clear()
            q.live = False
        self.jobs = JobTable()
        self.queues = ScanTable(QUEUE_TABLE_PARTITIONS)
        self.queues_version += 1
        self.ready.clear()
        self.dedup.clear()
        self.used_memory = 0
        self.healing.reset()
        self._graveyard.append(old_jobs)

    def _free_some(self, budget_jobs: int = FREE_SLICE_JOBS) -> None:
        """Release about `budget_jobs` jobs of the flushed tables."""
        graveyard = self._graveyard
        if graveyard and graveyard[-1].release_some(budget_jobs):
            graveyard.pop()

    @property
    def freeing(self) -> bool:
        return bool(self._graveyard)
