"""A deterministic in-memory network of Node cores, for cluster unit tests.

N disque_py.node.node.Node cores share one seeded FakeClock. What a core
says to a peer (ToPeer effects) is grouped per peer and per run of one kind,
as server/cluster_service.py batches it, encoded to a real bus frame with
disque_py.formats.bus, carried with a latency, decoded and handed to
the receiver's on_peer_message: the wire format is exercised on every hop.
Unblock effects (answers to parked clients) are collected per client.

Faults, all drawn from one seeded RNG so a run replays exactly:
  * drop (probability) and drop_rule(msg) -> bool, for targeted losses;
  * latency_ms plus a uniform jitter_ms (jitter reorders frames on a link);
  * dup (probability) with dup_delay_ms: a frame is delivered twice;
  * partition(*groups) / heal(): frames between groups are lost, and the
    nodes' cluster views say so (as membership would after failure detection);
  * crash(i) / restart(i): a node loses every job and queue, and comes back
    empty with the same node ID; frames to or from a down node, or sent to
    or by an earlier incarnation of it, are lost (its TCP links died);
  * failure_detection (off unless asked): the views pushed to the cores
    also say which peers are FAIL (down, or cut off from a majority on the
    other side of a partition; after fail_delay_ms, when set) and each
    node's start epoch, which changes when a node restarts without an AOF
    (membership's job in production; node/healing.py acts on them);
  * with_aof(i): the node keeps an append-only file. The records its
    core notes in its AofLog (engine/aof/log.pxi) are taken after each
    event, as the server takes them at the end of a loop turn, and
    appended (format version 2, persistence/aof_format.py) to an
    in-memory file that survives crashes; restart(i) replays it into the
    fresh core the way the server's loader does (read as LOADJOB, DELJOB,
    DEDUP, UNDEDUP: LOADJOB -> Node.load_job, DELJOB -> Node.delete_jobs,
    DEDUP and UNDEDUP -> Node.restore_dedup), after the node learned its
    peers (nodes.conf is read before the AOF).

`observer` (optional) sees what a checker needs, in order, after that
event's frames are in flight: observe_record(i, argv) for each AOF record
node i's core noted (in version 1's form: aof_format.v2_records), then
observe(i, effect) for its Unblock effects (the server writes a turn's
records before its replies); frame_done(trace) once a frame carrying whole
jobs (REPLJOB, YOURJOBS) was delivered or lost; and, if it has the method,
booted(i, node) each time node i's core is made (start or restart). With
`track_copies`, every core notes its AOF records (changing nothing else),
so an observer sees each copy appear and go on every node. `node_class`
(Node by default) makes the cores: a checker may pass a Node subclass
that watches what the core does (it must change nothing).

Time moves only in run_until / run_for (or advance, for a caller running
its own loop), in steps of at most max_step_ms (STEP_MS by default, the
production runtime's longest timer sleep), jumping straight to the next
frame or timer when that is sooner. Each step delivers the due frames,
calls tick() on every node and carries out the resulting effects.
"""

from __future__ import annotations

import functools

import hashlib
import heapq
import random
from collections import Counter
from typing import Callable, NamedTuple

from disque_py.formats import bus as msg
from disque_py.base.clock import FakeClock
from disque_py.base.effects import ToPeer, Unblock
from disque_py.engine import STATE_NAMES, deserialize_job
from disque_py.node.node import Node
from disque_py.persistence import aof_format
from tests.engine.commands import get_jobs

START_MS = 1_700_000_000_000
STEP_MS = 10                      # server/runtime.py TIMER_MAX_SLEEP_MS
SETTLE_LIMIT = 100_000            # deliveries + ticks at one instant before we call it a loop
BASE_PORT = 7711


class Msg(NamedTuple):
    """One frame, as traced: keys are job IDs (or the queue name)."""

    at: int
    src: int
    dst: int
    kind: int
    mflags: int
    keys: tuple

    @property
    def name(self) -> str:
        return msg.TYPE_NAMES[self.kind]


COPY_KINDS = (msg.REPLJOB, msg.YOURJOBS)      # frames that carry whole jobs


def node_id_for(seed: int, index: int) -> bytes:
    return hashlib.sha1(b"simnet:%d:%d" % (seed, index)).hexdigest().encode()


class SimNet:
    def __init__(self, size: int, seed: int = 0, start_ms: int = START_MS,
                 track_copies: bool = False, failure_detection: bool = False,
                 fail_delay_ms: int = 0, node_class: type = Node) -> None:
        self.seed = seed
        self.node_class = node_class
        self.start_ms = start_ms
        self.clock = FakeClock(start_ms, seed=seed)
        self.rng = random.Random(seed ^ 0x5EED)
        self.ids = [node_id_for(seed, i) for i in range(size)]
        self.index = {node_id: i for i, node_id in enumerate(self.ids)}
        self.incarnation = [0] * size
        self.epoch = [1] * size            # start epochs: new at each restart without an AOF
        self.failure_detection = failure_detection
        self.fail_delay_ms = fail_delay_ms
        self.down_since = [0] * size
        self.split_since = 0               # when the current partition began
        self._failed_views: list = [None] * size     # what each node was last told
        self.track_copies = track_copies
        self.aof: list[bytearray | None] = [None] * size     # the AOF of each node that has one
        self.aof_jobs: list[set] = [set() for _ in range(size)]   # jobs its AOF would load
        self.aof_torn = [False] * size     # its AOF ends inside a record (cut_aof)
        self.observer = None
        self.nodes: list[Node] = [self._boot(i) for i in range(size)]
        self.up = [True] * size
        self.leaving = [False] * size
        self.group = [0] * size            # partition group of each node
        # Faults (change them at any time).
        self.drop = 0.0
        self.dup = 0.0
        self.dup_delay_ms = 5
        self.latency_ms = 1
        self.jitter_ms = 0
        self.drop_rule: Callable[[Msg], bool] | None = None
        self.max_step_ms = STEP_MS
        # Observations.
        self.sent: list[Msg] = []          # every frame a node emitted
        self.delivered: list[Msg] = []
        self.dropped: list[Msg] = []
        self.duplicated: list[Msg] = []
        self.copies_in_flight: Counter = Counter()   # job ID -> REPLJOB/YOURJOBS frames
        self.unblocked: dict = {}          # client -> [outcome, ...]
        self.unblocks: list = []           # (time, node index, client, outcome)
        self.delivering: Msg | None = None   # the frame its receiver is handling, if any
        self._inflight: list = []          # heap of (due, seq, Msg, frame, incarnations)
        self._seq = 0
        self.refresh_views()

    def _boot(self, i: int) -> Node:
        seed = b"simnet-%d-%d-%d" % (self.seed, i, self.incarnation[i])
        node = self.node_class(self.ids[i], self.clock, id_seed=seed)
        node.aof_enabled = self.track_copies or self.aof[i] is not None
        booted = getattr(self.observer, "booted", None)
        if booted is not None:
            booted(i, node)
        return node

    # ------------------------------------------------------------ topology

    def linked(self, i: int, j: int) -> bool:
        return i != j and self.up[i] and self.up[j] and self.group[i] == self.group[j]

    def refresh_views(self) -> None:
        """Push every live node's cluster view (membership's job in production)."""
        size = len(self.ids)
        for i in self.live():
            # An insertion-ordered set: the core iterates it, and a set's
            # order would change with PYTHONHASHSEED, so would the run.
            known = dict.fromkeys(node_id for j, node_id in enumerate(self.ids) if j != i)
            linked = [self.ids[j] for j in range(size) if self.linked(i, j) and not self.leaving[j]]
            if self.failure_detection:
                failed = self.failed_seen_by(i)
                self._failed_views[i] = failed
                epochs = {self.ids[j]: self.epoch[j] for j in range(size) if j != i}
                self.nodes[i].set_cluster_view(size, known, len(linked), linked, self.leaving[i],
                                               [self.ids[j] for j in failed], epochs)
            else:
                self.nodes[i].set_cluster_view(size, known, len(linked), linked, self.leaving[i])
            self._drain(i)

    def failed_seen_by(self, i: int) -> tuple:
        """The nodes i's membership would flag FAIL: down for fail_delay_ms,
        or on the other side of a partition when i's side is a majority."""
        size, now = len(self.ids), self.clock.now_ms()
        majority = sum(1 for j in range(size) if self.group[j] == self.group[i]) > size // 2 \
            and now - self.split_since >= self.fail_delay_ms
        return tuple(j for j in range(size) if j != i and (
            (not self.up[j] and now - self.down_since[j] >= self.fail_delay_ms)
            or (majority and self.group[j] != self.group[i])))

    def _failure_views_due(self) -> bool:
        """A down node's fail delay just ran out for someone."""
        return any(self._failed_views[i] != self.failed_seen_by(i) for i in self.live())

    def _next_fail_detection(self) -> int | None:
        now = self.clock.now_ms()
        due = [self.down_since[j] + self.fail_delay_ms for j in range(len(self.ids))
               if not self.up[j] and self.down_since[j] + self.fail_delay_ms > now]
        if any(self.group) and self.split_since + self.fail_delay_ms > now:
            due.append(self.split_since + self.fail_delay_ms)
        return min(due) if due else None

    def live(self) -> list[int]:
        return [i for i in range(len(self.ids)) if self.up[i]]

    def partition(self, *groups) -> None:
        """Split the nodes into groups (node indexes); unlisted nodes form one more."""
        self.split_since = self.clock.now_ms()
        listed = {i for group in groups for i in group}
        for number, group in enumerate(groups, 1):
            for i in group:
                self.group[i] = number
        for i in range(len(self.ids)):
            if i not in listed:
                self.group[i] = 0
        self.refresh_views()

    def heal(self) -> None:
        self.group = [0] * len(self.ids)
        self.refresh_views()

    def set_leaving(self, i: int, leaving: bool = True) -> None:
        self.leaving[i] = leaving
        self.refresh_views()

    def crash(self, i: int) -> None:
        """The node's process dies: its state is gone, it stays known to others."""
        self.up[i] = False
        self.down_since[i] = self.clock.now_ms()
        self.nodes[i].take_effects()
        self.nodes[i].aof.drop()        # noted, never written: lost with the process
        self.refresh_views()

    def restart(self, i: int) -> Node:
        """Back with the same ID, and the jobs of its AOF if it has one."""
        self.incarnation[i] += 1
        if self.aof[i] is None or self.aof_torn[i]:
            # Back empty, or its AOF's last record was dropped (the server
            # then takes a new epoch: server/persistence_service.py): its
            # copies, or some of them, are gone.
            self.epoch[i] += 1
        self.nodes[i] = node = self._boot(i)
        self.up[i] = True
        self.refresh_views()
        if self.aof[i] is not None:
            self._load_aof(i, node)
        return node

    # ------------------------------------------------------------ the AOF

    def with_aof(self, i: int) -> None:
        """Node i keeps an append-only file from now on (start it early)."""
        self.aof[i] = bytearray(aof_format.HEADER)
        self.nodes[i].aof_enabled = True

    def cut_aof(self, i: int, keep: int) -> None:
        """Node i's AOF (while it is down) loses every byte from `keep` on:
        a damaged file, or a power cut. It loads what stands before."""
        self.aof[i] = self.aof[i][:keep]
        self.aof_torn[i] = True
        self.aof_jobs[i] = set()
        for argv in self.aof_records(i):
            if argv[0].upper() == b"LOADJOB":
                self.aof_jobs[i].add(deserialize_job(argv[1]).id)
            elif argv[0].upper() == b"DELJOB":
                self.aof_jobs[i].difference_update(argv[1:])

    def aof_records(self, i: int) -> list[list[bytes]]:
        """The records of node i's AOF before a torn one, which is cut off
        (as the loader does with aof-load-truncated yes)."""
        found, end = [], 0
        try:
            for record in aof_format.records(bytes(self.aof[i])):
                found.append(record.argv)
                end = record.end
        except aof_format.AofDamage as damage:
            assert damage.torn, damage
            self.aof[i] = self.aof[i][:end] if end else bytearray(aof_format.HEADER)
        return found[1:]

    def _take_aof(self, i: int) -> list[list[bytes]]:
        """The records node i's core noted since the last take (encoded
        then, as the server's writer does at the turn's end), appended to
        its AOF if it has one; returned as aof_format.v2_records reads them."""
        data = self.nodes[i].aof.take()
        if not data:
            return []
        records = [record.argv for record in aof_format.v2_records(data, 0, len(data))]
        if self.aof[i] is not None:
            self.aof[i] += data
            on_disk = self.aof_jobs[i]
            for argv in records:
                if argv[0] == b"LOADJOB":
                    on_disk.add(argv[1][:40])        # the wire bytes start with the ID
                elif argv[0] == b"DELJOB":
                    on_disk.discard(argv[1])
        return records

    def _load_aof(self, i: int, node: Node) -> None:
        """Replay as PersistenceService._replay does (the core emits no
        records while loading; appending resumes after)."""
        node.aof_enabled = False
        self.aof_torn[i] = False
        for argv in self.aof_records(i):
            command = argv[0].upper()
            if command == b"LOADJOB":
                assert aof_format.check_crc(argv[1], argv[2])
                node.load_job(deserialize_job(argv[1]), False)
            elif command == b"DELJOB":
                node.delete_jobs(argv[1:])
            elif command == aof_format.DEDUP:       # PersistenceService._load_dedup
                node.restore_dedup(argv[1], argv[2], argv[3], int(argv[4]), False)
            elif command == aof_format.UNDEDUP:
                node.restore_dedup(argv[1], argv[2], argv[3], 0, True)
        node.aof_enabled = True
        self.aof_jobs[i] = {job.id for job in node.jobs.values()}
        self._drain(i)

    # ------------------------------------------------------------ clients

    def call(self, i: int, method, *args, **kwargs):
        """Run a command on node i, then carry out its effects: `method` is
        a Node method's name (or a component's: "consumers.block"), or a
        function of the node (tests/engine/commands.py: the hot commands)."""
        if callable(method):
            target = functools.partial(method, self.nodes[i])
        else:
            target = self.nodes[i]
            for name in method.split("."):
                target = getattr(target, name)
        try:
            return target(*args, **kwargs)
        finally:
            self._drain(i)

    def add_job(self, i: int, queue: bytes = b"q", body: bytes = b"body", *, repl=None,
                delay: int = 0, retry=None, ttl: int = 3600, maxlen: int = 0,
                async_: bool = False, client=None, timeout_ms: int = 0, options=None,
                dedup_key=None, dedup_until_ms: int = 0):
        """ADDJOB; `options`: a JobOptions (BACKOFF, MAXDELIVERIES, DEADLETTER,
        PRIORITY); `dedup_key`: DEDUP's key, its window ending at dedup_until_ms
        (0: with the TTL)."""
        return self.call(i, "add_job", queue, body, repl, delay, retry, ttl, maxlen, async_,
                         client=client, timeout_ms=timeout_ms, options=options,
                         dedup_key=dedup_key, dedup_until_ms=dedup_until_ms)

    def get_jobs(self, i: int, *queues: bytes, count: int = 1, client=None,
                 timeout_ms: int = 0) -> list:
        """GETJOB: the jobs at hand; with `client`, park it when there are none."""
        jobs = self.call(i, get_jobs, list(queues), count)
        if not jobs and client is not None:
            deadline = self.clock.now_ms() + timeout_ms if timeout_ms else 0
            self.call(i, "consumers.block", client, list(queues), deadline, False)
        return jobs

    # ------------------------------------------------------------ the wire

    def _drain(self, i: int) -> None:
        """Carry out node i's effects: frames per peer, answers per client,
        AOF records; then show the observer what happened."""
        runs: dict[bytes, list] = {}
        seen = []
        for effect in self.nodes[i].take_effects():
            kind = type(effect)
            if kind is ToPeer:
                peer_runs = runs.setdefault(effect.node_id, [])
                last = peer_runs[-1] if peer_runs else None
                if last and last[0] == effect.kind and last[1] == effect.mflags \
                        and effect.kind not in (msg.NEEDJOBS, msg.PAUSE):
                    last[2].append(effect.item)
                else:
                    peer_runs.append([effect.kind, effect.mflags, [effect.item]])
                continue
            if kind is Unblock:
                client = effect.waiter.client
                self.unblocked.setdefault(client, []).append(effect.outcome)
                self.unblocks.append((self.clock.now_ms(), i, client, effect.outcome))
                seen.append(effect)
        records = self._take_aof(i)
        for node_id, peer_runs in runs.items():
            for kind, mflags, items in peer_runs:
                self._send(i, self.index[node_id], kind, mflags, items)
        if self.observer is not None:
            # After the sends: a job that left in a frame is still somewhere.
            for argv in records:
                self.observer.observe_record(i, argv)
            for effect in seen:
                self.observer.observe(i, effect)

    def _send(self, src: int, dst: int, kind: int, mflags: int, items: list) -> None:
        if msg.BODY_KIND[kind] is msg.Jobs:
            body, keys = msg.Jobs(items), tuple(data[:40] for data in items)
        elif msg.BODY_KIND[kind] is msg.QueueOp:
            body, keys = items[0], (items[0].queue,)
        else:
            body, keys = msg.JobIds(items), tuple(job_id for job_id, _ in items)
        header = msg.Header(kind, self.ids[src], BASE_PORT + src, 0, mflags)
        frame = msg.encode(header, body)
        now = self.clock.now_ms()
        trace = Msg(now, src, dst, kind, mflags, keys)
        self.sent.append(trace)
        rng = self.rng
        if not self.linked(src, dst) or (self.drop and rng.random() < self.drop) \
                or (self.drop_rule is not None and self.drop_rule(trace)):
            self.dropped.append(trace)
            if kind in COPY_KINDS and self.observer is not None:
                self.observer.frame_done(trace)
            return
        due = now + self.latency_ms + (rng.randint(0, self.jitter_ms) if self.jitter_ms else 0)
        self._push(due, trace, frame)
        if self.dup and rng.random() < self.dup:
            self.duplicated.append(trace)
            self._push(due + rng.randint(0, self.dup_delay_ms), trace, frame)

    def _push(self, due: int, trace: Msg, frame: bytes) -> None:
        self._seq += 1
        links = (self.incarnation[trace.src], self.incarnation[trace.dst])
        heapq.heappush(self._inflight, (due, self._seq, trace, frame, links))
        if trace.kind in COPY_KINDS:
            self.copies_in_flight.update(trace.keys)

    def _deliver(self, trace: Msg, frame: bytes, links: tuple) -> None:
        if trace.kind in COPY_KINDS:
            self.copies_in_flight.subtract(trace.keys)
        if not self.linked(trace.src, trace.dst) \
                or links != (self.incarnation[trace.src], self.incarnation[trace.dst]):
            self.dropped.append(trace)      # the link broke while it was in flight
        else:
            assert msg.frame_length(frame[:4]) == len(frame) - 4
            header, body = msg.decode(frame[4:])
            self.delivered.append(trace._replace(at=self.clock.now_ms()))
            self.delivering = trace
            try:
                self.nodes[trace.dst].on_peer_message(header.sender, header.type, header.mflags,
                                                      body)
                self._drain(trace.dst)
            finally:
                self.delivering = None
        if trace.kind in COPY_KINDS and self.observer is not None:
            self.observer.frame_done(trace)

    # ------------------------------------------------------------ time

    def settle(self) -> None:
        """Do everything due at this instant: frames, then timers, until quiet."""
        now = self.clock.now_ms()
        for _ in range(SETTLE_LIMIT):
            if self._inflight and self._inflight[0][0] <= now:
                _, _, trace, frame, links = heapq.heappop(self._inflight)
                self._deliver(trace, frame, links)
                continue
            busy = False
            if self.failure_detection and self.fail_delay_ms and self._failure_views_due():
                self.refresh_views()
            for i in self.live():
                busy |= self.nodes[i].tick()
                self._drain(i)
            if not busy and not (self._inflight and self._inflight[0][0] <= now):
                return
        raise AssertionError("the network never went quiet (a message loop?)")

    def _next_event(self, limit: int) -> int:
        now = self.clock.now_ms()
        candidates = [limit, now + self.max_step_ms]
        if self._inflight:
            candidates.append(self._inflight[0][0])
        if self.failure_detection and self.fail_delay_ms:
            detection = self._next_fail_detection()
            if detection is not None:
                candidates.append(detection)
        for i in self.live():
            wake = self.nodes[i].next_wakeup()
            if wake is not None:
                candidates.append(wake)
        return max(min(candidates), now + 1)

    def advance(self, limit: int) -> None:
        """Move time to the next frame, timer or step, but not past `limit`."""
        self.clock.set(min(self._next_event(limit), limit))

    def run_until(self, condition: Callable[[], bool], max_ms: int) -> bool:
        """Advance time until condition() holds (True) or max_ms passed (False)."""
        deadline = self.clock.now_ms() + max_ms
        while True:
            self.settle()
            if condition():
                return True
            now = self.clock.now_ms()
            if now >= deadline:
                return False
            self.clock.set(min(self._next_event(deadline), deadline))

    def run_for(self, ms: int) -> None:
        self.run_until(lambda: False, ms)

    def quiet(self) -> bool:
        """No frame in flight."""
        return not self._inflight

    @property
    def frames_in_flight(self) -> int:
        return len(self._inflight)

    # ------------------------------------------------------------ views

    def copies(self, job_id: bytes) -> dict[int, str]:
        """Node index -> state name, for every live node that has the job."""
        found = {}
        for i in self.live():
            job = self.nodes[i].lookup(job_id)
            if job is not None:
                found[i] = STATE_NAMES[job.state].decode()
        return found

    def count(self, kind: int, since: int = 0, delivered: bool = False) -> Counter:
        """Frames of one kind per (src, dst), sent (or delivered) at or after `since`."""
        source = self.delivered if delivered else self.sent
        return Counter((m.src, m.dst) for m in source if m.kind == kind and m.at >= since)
