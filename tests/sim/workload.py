"""The workload: one random small scenario per seed, played on a SimNet.

A seed picks a cluster (3 to 5 nodes, each with or without an AOF), a
network (latency, reordering jitter, drop and duplication rates) and how
often each fault strikes. Then, for a fault phase of one to four
simulated seconds, clients act at random moments against random nodes:
producers ADDJOB (REPLICATE 1..N, RETRY 0 at most once, some ASYNC, some
DELAY, short timeouts; some with the failed-job options: MAXDELIVERIES 1
to 4, with or without a DEADLETTER queue, and BACKOFF); consumers GETJOB
(blocking or not; now and then from a dead-letter queue too) and, after a
think time, ACKJOB, FASTACK, NACK (with or without DELAY), WORKING then
ACKJOB, or forget the job (as a consumer that died); consumers NACK jobs
with MAXDELIVERIES more often, so that many reach their limit; some ACKJOB
IDs nobody ever made (dummy acks); now and then a QREQUEUE moves dead jobs
back to work. Some producers are idempotent (ADDJOB ... DEDUP key, with or
without WINDOW, keys from a small pool per seed, so that producers collide
too): after NOREPL, or an answer lost with its node, and now and then after
an ID (the answer lost on the way back) or while still waiting (a client
timeout shorter than the ADDJOB's), the producer sends the same ADDJOB
again, with the same arguments, to the same node or another one. Nodes
crash and come back (a node with an AOF now and then with its file cut
inside a record: it loads what stands before the cut and takes a new start
epoch, as the server does, so its peers copy back what it lost), partitions form and heal, links fail one way for a
while (frames lost, nodes' views unchanged: what a half-broken connection
does before failure detection notices), and nodes leave the cluster for a
while (CLUSTER LEAVING: ADDJOB there keeps no copy, GETJOB there is
refused).

The nodes' views carry failure detection (SimNet.failure_detection: a
node down, or cut off from a majority, is FAIL after a delay the seed
picks) and start epochs, so the cores re-replicate (node/healing.py).

One seed in REPLACE_ONE_IN plays "holders replaced one by one" instead of
random faults: no drops, no AOF (or, one such seed in two, an AOF on every
node that is cut inside its first job's record when its node is killed:
it comes back as good as empty, and only the new start epoch a torn AOF
gives tells its peers); while clients work, each node in turn is
killed (a third of the jobs wait in a queue no consumer reads before the
drain), and brought back empty once its jobs are back at their level (or
before it is even flagged FAIL, now and then: then its restart is what
shows the copies are gone), and the next node waits until every job is
back at its level again. Every original holder of the first jobs is gone
by the end, and nothing acknowledged may be lost: the checker is strict
(a job with REPLICATE 2 or more is never excused, whatever the crashes).

Then the faults stop: partitions heal, every node comes back, no more drops
or duplicates (reordering stays), and consumers on every node take and
acknowledge whatever is queued (dead-letter queues included: a dead job is
not a lost one, and is owed its delivery there) until nothing is left
anywhere, or until DRAIN_LIMIT_MS of simulated time (long enough for Disque's GC backoff, 3
minutes at most between tries, and the TTL of stranded at-most-once jobs).

Everything random comes from the seed (the network has its own generator
seeded from it), so a seed replays exactly. Time only jumps from event to
event: no sleeps, no sockets.
"""

from __future__ import annotations

import heapq
import itertools
import random
from typing import NamedTuple

from disque_py.engine import WAIT_REPL, JobOptions
from disque_py.persistence import aof_format
from disque_py.node.waiters import Waiter
from disque_py.base.errors import DisqueError
from tests.sim.checker import OK, WAITING, Checker, TracedNode
from tests.unit.simnet import SimNet
from tests.engine.commands import ack_jobs, get_jobs, nack_jobs

TTL_S = 3600                      # at-least-once jobs outlive the run
AT_MOST_ONCE_TTL_S = 300          # may be stranded (delivered, unacked): they expire
DRAIN_LIMIT_MS = 20 * 60_000
DRAIN_STEP_MS = 60_000            # consumers poll after every event: timers drive time
FAULT = "fault"                   # trace lines about the network and the nodes
FAULT_MAX_MS = 3000               # the longest a partition, cut link or leave lasts
ACTION_GAPS_MS = (0, 0, 1, 2, 5, 10, 20, 50, 100)
BOOKS_EVERY = 10                  # actions between two checks of every node's books
THINK_MS = (0, 0, 1, 5, 50, 300, 1500)
FAIL_DELAYS_MS = (0, 200, 1000)   # how long after a crash or split a node is FAIL
REPLACE_ONE_IN = 8                # seeds that play "holders replaced one by one"
REPLACE_POLL_MS = 50
REPLACE_WAIT_MS = 20_000          # for every job to be back at its level
REPLACE_MIN_NODES = 4
BACKLOG = b"backlog"              # replaced holders: a queue nobody reads until the drain
# Failed jobs (issue 19).
DLQ = b"dlq"                      # the DEADLETTER queue some jobs name
DEAD_SUFFIX = b":dead"            # the others': "<queue>:dead"
OPTIONS_RATE = 0.35               # jobs with BACKOFF and/or MAXDELIVERIES
MAX_DELIVERIES = (1, 2, 2, 3, 4)
BACKOFF_MS = ((50, 200), (200, 1000), (500, 500), (1000, 4000))
PRIORITIES = (0, 1, 5, 8, 9)         # drawn for half the jobs with options
NACK_DELAYS_S = (None, None, 0, 1, 2)   # None: NACK without DELAY (BACKOFF decides)
DEAD_READ_RATE = 0.2              # GETJOBs that also read a dead-letter queue
QREQUEUE_RATE = 0.03              # per client action
# Idempotent producers (ADDJOB ... DEDUP key [WINDOW s]). Drawn from a
# generator of their own (Workload.dedup_rng): every other choice a seed
# makes stays what it was without them.
DEDUP_RATE = 0.3                  # ADDJOBs with a DEDUP key
DEDUP_POOL = (1, 2, 3, 5)         # keys per seed (b"k0"...): producers share them
WINDOWS_S = (0, 0, 1, 2, 30)      # WINDOW (0: none, the key lasts the job's TTL)
PRODUCER_PATIENCE_MS = (0, 5, 50, 300, 1500)   # when the producer looks at its answer
RETRY_CHANCE = {"norepl": 0.8, "lost": 0.8, "waiting": 0.25, "answered": 0.15}
MAX_ATTEMPTS = 4                  # ADDJOBs per request, the first included
# Damaged AOFs (issue 33): a crashed node's AOF now and then loses its tail
# from inside a record on (a damaged file, a power cut), drawn from a
# generator of its own (Workload.disk_rng) so other choices stay as they were.
DAMAGED_AOF_RATE = 0.25           # of the crashes of a node with an AOF
CUT_AOFS_SHARE = 0.5              # "replaced one by one" seeds whose nodes keep an AOF
                                  # that loses its tail from inside the first job on


class Scenario(NamedTuple):
    size: int
    aof: tuple                    # nodes that keep an AOF
    latency_ms: int
    jitter_ms: int
    drop: float
    dup: float
    dup_delay_ms: int
    fault_ms: int
    crash_rate: float             # per client action
    partition_rate: float
    cut_rate: float               # one-way link failures
    leave_rate: float             # CLUSTER LEAVING yes, then no
    queues: tuple
    fail_delay_ms: int = 0        # FAIL this long after a crash or a split
    replace: bool = False         # holders replaced one by one (no random faults)
    cut_aofs: bool = False        # ...each with an AOF, restarted with its tail cut off

    def describe(self) -> str:
        if self.replace:
            how = ("AOFs cut inside their first job, no drops" if self.cut_aofs
                   else "no AOF, no drops")
            return (f"{self.size} nodes, holders replaced one by one ({how}), "
                    f"latency {self.latency_ms}+{self.jitter_ms} ms, dup {self.dup} "
                    f"(+{self.dup_delay_ms} ms), FAIL after {self.fail_delay_ms} ms, queues "
                    f"{[q.decode() for q in self.queues]}")
        return (f"{self.size} nodes (AOF on {list(self.aof)}), latency {self.latency_ms}+"
                f"{self.jitter_ms} ms, drop {self.drop}, dup {self.dup} (+{self.dup_delay_ms}"
                f" ms), faults for {self.fault_ms} ms, crash {self.crash_rate}, partition "
                f"{self.partition_rate}, cut {self.cut_rate}, leave {self.leave_rate}, queues "
                f"{[q.decode() for q in self.queues]}, FAIL after {self.fail_delay_ms} ms")


def make_scenario(rng: random.Random) -> Scenario:
    size = rng.randint(3, 5)
    scenario = Scenario(
        size=size,
        aof=tuple(i for i in range(size) if rng.random() < 0.5),
        latency_ms=rng.choice((1, 1, 2, 5)),
        jitter_ms=rng.choice((0, 0, 2, 10, 30, 100)),
        drop=rng.choice((0.0, 0.0, 0.01, 0.05, 0.2)),
        dup=rng.choice((0.0, 0.0, 0.02, 0.1)),
        dup_delay_ms=rng.choice((1, 5, 50, 500)),
        fault_ms=rng.randint(1000, 4000),
        crash_rate=rng.choice((0.0, 0.02, 0.05)),
        partition_rate=rng.choice((0.0, 0.02, 0.05)),
        cut_rate=rng.choice((0.0, 0.0, 0.03)),
        leave_rate=rng.choice((0.0, 0.0, 0.01)),
        queues=(b"q1", b"q2")[:rng.randint(1, 2)],
    )
    # Drawn last: a seed's other choices are what they were before these.
    scenario = scenario._replace(fail_delay_ms=rng.choice(FAIL_DELAYS_MS))
    if size >= REPLACE_MIN_NODES and rng.randrange(REPLACE_ONE_IN) == 0:
        scenario = scenario._replace(replace=True, aof=(), drop=0.0, crash_rate=0.0,
                                     partition_rate=0.0, cut_rate=0.0, leave_rate=0.0)
    return scenario


class AddRequest(NamedTuple):
    """What a producer asks ADDJOB, kept to send it again (a retry)."""
    queue: bytes
    body: bytes
    repl: int
    retry: int
    ttl: int
    delay: int
    async_: bool
    timeout: int
    options: tuple | None         # BACKOFF, MAXDELIVERIES, DEADLETTER, PRIORITY (JobOptions)
    text: str                     # the options as ADDJOB's words
    key: bytes | None = None      # DEDUP
    window: int = 0               # WINDOW seconds (0: none)
    attempt: int = 1

    def words(self) -> str:
        return (f"REPLICATE {self.repl} RETRY {self.retry} DELAY {self.delay} TIMEOUT "
                f"{self.timeout}" + (" ASYNC" if self.async_ else "") + self.text
                + (f" DEDUP {self.key.decode()}" if self.key is not None else "")
                + (f" WINDOW {self.window}" if self.window else ""))


class Client:
    """A producer (waiting for one job's ID) or a consumer, as the core's
    opaque `client`. A producer whose DEDUP key named an earlier job, and
    that the node parked (for that job's first ADDJOB, or a promise round),
    `follows` it: job_id is that job's."""

    __slots__ = ("producer", "number", "job_id", "follows", "node", "incarnation", "answer")

    def __init__(self, producer: bool, number: int) -> None:
        self.producer = producer
        self.number = number
        self.job_id = b""
        self.follows = False
        self.node = -1                # where its ADDJOB went, and that node's incarnation
        self.incarnation = 0
        self.answer = None            # an answer given at once (ID, or the error)

    def __repr__(self) -> str:
        return ("p%d" if self.producer else "c%d") % self.number


class Workload:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = rng = random.Random(seed)
        self.dedup_rng = random.Random(seed ^ 0xDED0)     # idempotent producers' choices
        self.disk_rng = random.Random(seed ^ 0xD15C)      # damaged AOFs
        self.scenario = sc = make_scenario(rng)
        if sc.replace and self.disk_rng.random() < CUT_AOFS_SHARE:
            self.scenario = sc = sc._replace(aof=tuple(range(sc.size)), cut_aofs=True)
        self.dedup_keys = tuple(b"k%d" % n for n in range(self.dedup_rng.choice(DEDUP_POOL)))
        self.net = net = SimNet(sc.size, seed=seed, track_copies=True, failure_detection=True,
                                fail_delay_ms=sc.fail_delay_ms, node_class=TracedNode)
        for i in sc.aof:
            net.with_aof(i)
        net.latency_ms, net.jitter_ms = sc.latency_ms, sc.jitter_ms
        net.drop, net.dup, net.dup_delay_ms = sc.drop, sc.dup, sc.dup_delay_ms
        self.trace: list[tuple] = []          # (time, what it is about, text)
        self.checker = Checker(net, self.log)
        self.checker.strict = sc.replace
        self.live_queues = sc.queues + ((BACKLOG,) if sc.replace else ())
        self.dead_queues = tuple(q + DEAD_SUFFIX for q in self.live_queues) + (DLQ,)
        self.checker.dead_queue_names = set(self.dead_queues)
        self.agenda: list = []                # heap of (time, seq, method, args)
        self._seq = itertools.count()
        self._clients = itertools.count()
        self._unblocks_seen = 0
        self._actions = 0
        self.draining = False
        self.cut: set = set()                 # (src, dst) links losing every frame
        net.drop_rule = lambda m: (m.src, m.dst) in self.cut
        self.fault_end = net.start_ms + sc.fault_ms

    # ------------------------------------------------------------ the run

    def run(self) -> list[str]:
        net = self.net
        self.log("scenario: " + self.scenario.describe()
                 + f", DEDUP keys {[key.decode() for key in self.dedup_keys]}")
        self.later(0, self.random_action)
        if self.scenario.replace:
            self.replaced: list[int] = []
            self.later(self.scenario.fault_ms // 2, self.replace_next)
            self.fault_end = float("inf")          # until every node was replaced
            self.run_until(net.start_ms + DRAIN_LIMIT_MS, lambda: self.fault_end < float("inf"))
        else:
            self.run_until(self.fault_end)
        self.stop_faults()
        if not self.run_until(net.clock.now_ms() + DRAIN_LIMIT_MS, self.quiet):
            self.checker.violations.append(
                f"(4) not quiet {DRAIN_LIMIT_MS // 1000} s after the faults stopped: "
                f"{net.frames_in_flight} frames in flight, jobs held "
                f"{[len(node.jobs) for node in net.nodes]}")
        return self.checker.finish()

    def run_until(self, limit: int, done=None) -> bool:
        """Play the network and the clients up to `limit` (or until done())."""
        net = self.net
        while True:
            net.settle()
            if self.client_step():
                continue                  # what the clients did may be due at once
            if done is not None and done():
                return True
            if net.clock.now_ms() >= limit:
                return False
            net.advance(min(limit, self.agenda[0][0]) if self.agenda else limit)

    def client_step(self) -> bool:
        """Clients react to answers and do what is due. True if any acted."""
        net = self.net
        acted = False
        unblocks = net.unblocks
        while self._unblocks_seen < len(unblocks):
            _, i, client, outcome = unblocks[self._unblocks_seen]
            self._unblocks_seen += 1
            if not client.producer and type(outcome) is list:
                self.log(f"n{i} GETJOB (was blocked) -> {client} got "
                         f"{[self.name(job.id) for job in outcome]}",
                         tuple(job.id for job in outcome))
                for job in outcome:       # the checker saw the delivery as it happened
                    self.consume(client, i, job)
                acted = True
        now = net.clock.now_ms()
        agenda = self.agenda
        while agenda and agenda[0][0] <= now:
            _, _, method, args = heapq.heappop(agenda)
            method(*args)
            acted = True
        if self.draining:
            acted |= self.poll_everywhere()
        return acted

    def stop_faults(self) -> None:
        net = self.net
        self.log("faults stop: heal, restart every node, no drops or duplicates", FAULT)
        net.drop = net.dup = 0.0
        self.cut.clear()
        net.heal()
        for i in range(len(net.nodes)):
            self.come_back(i)
        for i in range(len(net.nodes)):
            if not net.up[i]:
                self.restart(i)
        self.draining = True
        net.max_step_ms = DRAIN_STEP_MS

    def quiet(self) -> bool:
        net = self.net
        return net.quiet() and not self.agenda \
            and not any(len(node.jobs) or node.parking.blocked_clients for node in net.nodes) \
            and not any(facts.outcome == WAITING for facts in self.checker.jobs.values())

    # ------------------------------------------------------------ helpers

    def later(self, delay_ms: int, method, *args) -> None:
        heapq.heappush(self.agenda, (self.net.clock.now_ms() + delay_ms, next(self._seq),
                                     method, args))

    def log(self, text: str, about=None) -> None:
        """A trace line; `about`: a job ID, a tuple of them, or FAULT."""
        self.trace.append((self.net.clock.now_ms() - self.net.start_ms, about, text))

    def name(self, job_id: bytes) -> str:
        facts = self.checker.jobs.get(job_id)
        return facts.name if facts is not None else job_id.decode()

    def names(self, job_ids) -> list[str]:
        """Sorted: a job table's order depends on PYTHONHASHSEED."""
        return sorted((self.name(job_id) for job_id in job_ids), key=lambda n: (len(n), n))

    def live_node(self, prefer: int | None = None) -> int | None:
        net = self.net
        if prefer is not None and net.up[prefer] and self.rng.random() < 0.5:
            return prefer
        live = net.live()
        return self.rng.choice(live) if live else None

    # ------------------------------------------------------------ random actions

    def random_action(self) -> None:
        net, rng, sc = self.net, self.rng, self.scenario
        if net.clock.now_ms() >= self.fault_end:
            return
        roll = rng.random()
        if roll < 0.45:
            self.add_job()
        elif roll < 0.8:
            self.get_job()
        elif roll < 0.8 + sc.crash_rate:
            self.crash()
        elif roll < 0.8 + sc.crash_rate + sc.partition_rate:
            self.partition()
        elif roll < 0.8 + sc.crash_rate + sc.partition_rate + sc.cut_rate:
            self.cut_link()
        elif roll < 0.8 + sc.crash_rate + sc.partition_rate + sc.cut_rate + sc.leave_rate:
            self.leave()
        elif roll < 0.83 + sc.crash_rate + sc.partition_rate + sc.cut_rate + sc.leave_rate:
            self.dummy_ack()
        elif roll < 0.83 + QREQUEUE_RATE + sc.crash_rate + sc.partition_rate + sc.cut_rate \
                + sc.leave_rate:
            self.qrequeue()
        self._actions += 1
        if self._actions % BOOKS_EVERY == 0:
            self.checker.check_books()
        self.later(rng.choice(ACTION_GAPS_MS), self.random_action)

    def add_job(self) -> None:
        net, rng = self.net, self.rng
        i = self.live_node()
        if i is None:
            return
        at_most_once = rng.random() < 0.15
        if at_most_once:
            repl, retry, ttl = 1, 0, AT_MOST_ONCE_TTL_S
        else:
            repl, retry, ttl = rng.randint(1, len(net.nodes)), rng.choice((1, 1, 2, 3, 5)), TTL_S
        delay = rng.choice((0, 0, 0, 0, 1, 2))
        async_ = not at_most_once and rng.random() < 0.2
        timeout = rng.choice((0, 100, 1000, 5000))
        number = next(self._clients)
        queue = rng.choice(self.live_queues)
        options, text = self.failed_job_options()
        request = AddRequest(queue, b"%d" % number, repl, retry, ttl, delay, async_, timeout,
                             options, text)
        drng = self.dedup_rng
        if drng.random() < DEDUP_RATE:
            request = request._replace(key=drng.choice(self.dedup_keys),
                                       window=drng.choice(WINDOWS_S))
        self.send_addjob(i, request, Client(True, number))

    def send_addjob(self, i: int, request: AddRequest, client: Client) -> None:
        """ADDJOB on node i: a new job, or (DEDUP) an earlier job's ID, at
        once or once that job's copies are made."""
        net = self.net
        client.node, client.incarnation = i, net.incarnation[i]
        job_options = None if request.options is None else JobOptions(*request.options)
        until = 0                     # the key's window's end, as the checker expects it
        if request.key is not None:
            until = net.clock.now_ms() + (request.window or request.ttl) * 1000
        what = f"n{i} ADDJOB {request.queue.decode()} {request.words()}" + \
            (f" (attempt {request.attempt})" if request.attempt > 1 else "")
        ask = self.checker.dedup_before(i, request.queue, request.key, request.repl,
                                        request.retry) if request.key is not None else None
        try:
            answer = net.add_job(i, request.queue, request.body, repl=request.repl,
                                 delay=request.delay, retry=request.retry, ttl=request.ttl,
                                 async_=request.async_, client=client,
                                 timeout_ms=request.timeout, options=job_options,
                                 dedup_key=request.key, dedup_until_ms=until)
        except DisqueError as error:
            client.answer = error
            self.log(f"{what} -> {error}")
            if ask is not None:
                self.checker.duplicate(ask, client, error)
            self.producer_later(client, request)
            return
        if type(answer) is bytes or type(answer) is Waiter:
            parked = type(answer) is Waiter
            first = answer.job.id if parked else answer
            client.job_id, client.follows = first, parked
            if not parked:
                client.answer = first
            self.log(f"{what} -> {self.name(first)} "
                     f"{'(a duplicate: parked)' if parked else '(a duplicate)'}", first)
            self.checker.duplicate(ask, client, answer)
            self.producer_later(client, request)
            return
        job = answer
        client.job_id = job.id
        parked = job.state == WAIT_REPL
        if not parked:
            client.answer = job.id
        facts = self.checker.added(job.id, i, request.repl, request.retry, request.async_,
                                   parked, external=net.leaving[i], body=request.body,
                                   max_deliveries=job_options.max_deliveries
                                   if job_options is not None else 0,
                                   queue=request.queue, key=request.key, until=until, job=job,
                                   ask=ask)
        self.log(f"{what} -> {facts.name} {'waits for copies' if parked else 'answered'}",
                 job.id)
        self.producer_later(client, request)

    def producer_later(self, client: Client, request: AddRequest) -> None:
        """An idempotent producer looks at its answer after a while, and may
        send its ADDJOB again."""
        if request.key is not None and request.attempt < MAX_ATTEMPTS:
            self.later(self.dedup_rng.choice(PRODUCER_PATIENCE_MS), self.producer_retries,
                       client, request)

    def producer_retries(self, client: Client, request: AddRequest) -> None:
        net, drng = self.net, self.dedup_rng
        answers = net.unblocked.get(client)
        answer = client.answer if client.answer is not None else \
            answers[0] if answers else None
        if answer is None:
            lost = not net.up[client.node] or net.incarnation[client.node] != client.incarnation
            why = "lost" if lost else "waiting"
        else:
            why = "answered" if type(answer) is bytes else "norepl"
        if drng.random() >= RETRY_CHANCE[why]:
            return
        live = net.live()
        if not live:
            return
        i = client.node if net.up[client.node] and drng.random() < 0.5 else drng.choice(live)
        retry = Client(True, next(self._clients))
        self.log(f"{client} sends its ADDJOB again as {retry} ({why}"
                 f"{'' if answer is None else ': ' + str(answer)})")
        self.send_addjob(i, request._replace(attempt=request.attempt + 1), retry)

    def failed_job_options(self) -> tuple:
        """ADDJOB's options beyond Disque but DEDUP, drawn: (JobOptions'
        fields or None, as text)."""
        rng = self.rng
        if rng.random() >= OPTIONS_RATE:
            return None, ""
        max_deliveries = rng.choice(MAX_DELIVERIES) if rng.random() < 0.85 else 0
        deadletter = DLQ if max_deliveries and rng.random() < 0.4 else None
        base, top = rng.choice(BACKOFF_MS) if not max_deliveries or rng.random() < 0.4 \
            else (0, 0)
        priority = rng.choice(PRIORITIES) if rng.random() < 0.5 else 5
        text = (f" BACKOFF {base} {top}" if base else "") \
            + (f" MAXDELIVERIES {max_deliveries}" if max_deliveries else "") \
            + (f" DEADLETTER {deadletter.decode()}" if deadletter else "") \
            + (f" PRIORITY {priority}" if priority != 5 else "")
        return (base, top, max_deliveries, deadletter, priority), text

    def get_job(self) -> None:
        net, rng = self.net, self.rng
        i = self.live_node()
        if i is None:
            return
        queues = rng.sample(self.scenario.queues, rng.randint(1, len(self.scenario.queues)))
        if rng.random() < DEAD_READ_RATE:
            queues.append(rng.choice(self.dead_queues))
        client = Client(False, next(self._clients))
        blocking = rng.random() < 0.5 and not net.leaving[i]    # else -LEAVING
        jobs = net.get_jobs(i, *queues, count=rng.randint(1, 3),
                            client=client if blocking else None,
                            timeout_ms=rng.randint(100, 2000))
        self.log(f"n{i} GETJOB {'' if blocking else 'NOHANG '}"
                 f"{' '.join(q.decode() for q in queues)} -> {client} got "
                 f"{[self.name(job.id) for job in jobs]}", tuple(job.id for job in jobs))
        for job in jobs:
            self.checker.delivered(job.id, i, job)
            self.consume(client, i, job)

    def crash(self) -> None:
        net = self.net
        up = net.live()
        if not up:
            return
        i = self.rng.choice(up)
        damaged = self.damage_aof(i)
        lost = self.checker.crashing(i)
        net.crash(i)
        kept = f" (AOF kept{damaged})" if net.aof[i] is not None else ""
        self.log(f"n{i} CRASH{kept}, lost {self.names(lost)}", FAULT)
        self.checker.crashed(lost)
        self.later(self.rng.randint(10, 2000), self.restart, i)

    def damage_aof(self, i: int) -> str:
        """Now and then, cut a crashing node's AOF inside one of its records
        (every byte after is lost): what it then loads is what stands
        before, and it comes back with a new start epoch. A cut exactly
        between two records is not drawn: nothing in the file can tell it."""
        net = self.net
        if net.aof[i] is None or self.disk_rng.random() >= DAMAGED_AOF_RATE:
            return ""
        records = list(aof_format.records(bytes(net.aof[i])))[1:]
        if not records:
            return ""
        record = self.disk_rng.choice(records)
        keep = self.disk_rng.randrange(record.offset + 1, record.end)
        size = len(net.aof[i])
        net.cut_aof(i, keep)
        self.checker.aof_cut(i)
        return f", cut at byte {keep} of {size}"

    def cut_first_job(self, i: int) -> str:
        """Node i's AOF cut inside its first job's record: it comes back
        with (nearly) nothing, and only its new start epoch tells its peers."""
        net = self.net
        records = list(aof_format.records(bytes(net.aof[i])))[1:]
        if not records:
            return "replaced, its AOF empty"
        size = len(net.aof[i])
        net.cut_aof(i, records[0].offset + 1)
        self.checker.aof_cut(i)
        return f"replaced, AOF cut at byte {records[0].offset + 1} of {size}"

    def restart(self, i: int) -> None:
        net = self.net
        if net.up[i]:
            return
        node = net.restart(i)
        self.checker.restarted(i)
        self.log(f"n{i} RESTART with {self.names(job.id for job in node.jobs.values())}",
                 FAULT)

    def partition(self) -> None:
        net, rng = self.net, self.rng
        if any(net.group):
            return
        nodes = list(range(len(net.nodes)))
        rng.shuffle(nodes)
        cuts = sorted(rng.sample(range(1, len(nodes)), rng.choice((1, 1, 2))))
        groups = [nodes[a:b] for a, b in zip([0] + cuts, cuts + [len(nodes)])]
        net.partition(*map(set, groups))
        self.log("PARTITION " + " | ".join(str(sorted(group)) for group in groups), FAULT)
        self.later(rng.randint(50, FAULT_MAX_MS), self.heal)

    def heal(self) -> None:
        if any(self.net.group):
            self.net.heal()
            self.log("HEAL", FAULT)

    def cut_link(self) -> None:
        src, dst = self.rng.sample(range(len(self.net.nodes)), 2)
        if (src, dst) not in self.cut:
            self.cut.add((src, dst))
            self.log(f"CUT n{src} -> n{dst}", FAULT)
            self.later(self.rng.randint(50, FAULT_MAX_MS), self.mend_link, src, dst)

    def mend_link(self, src: int, dst: int) -> None:
        if (src, dst) in self.cut:
            self.cut.discard((src, dst))
            self.log(f"MEND n{src} -> n{dst}", FAULT)

    def leave(self) -> None:
        i = self.rng.randrange(len(self.net.nodes))
        if not self.net.leaving[i]:
            self.net.set_leaving(i, True)
            self.log(f"n{i} LEAVING", FAULT)
            self.later(self.rng.randint(50, 2000), self.come_back, i)

    def come_back(self, i: int) -> None:
        if self.net.leaving[i]:
            self.net.set_leaving(i, False)
            self.log(f"n{i} no longer LEAVING", FAULT)

    def dummy_ack(self) -> None:
        i = self.live_node()
        if i is not None:
            job_id = b"D-deadbeef-%024d-003d" % self.rng.randrange(10 ** 24)
            self.net.call(i, ack_jobs, [job_id])
            self.log(f"n{i} ACKJOB of an ID nobody made")

    def qrequeue(self) -> None:
        """QREQUEUE dead-queue [TO queue] [COUNT n] on a random node, or on
        every node (as an operator sweeping a dead-letter queue would)."""
        rng = self.rng
        nodes = self.net.live()
        if not nodes:
            return
        if rng.random() < 0.5:
            nodes = [rng.choice(nodes)]
        dead = rng.choice(self.dead_queues)
        to = rng.choice(self.live_queues) if rng.random() < 0.3 else None
        count = rng.choice((-1, -1, 1, 2))
        for i in nodes:
            moved = self.net.call(i, "requeue.requeue_dead", dead, to, count)
            self.log(f"n{i} QREQUEUE {dead.decode()}{' TO ' + to.decode() if to else ''}"
                     f"{f' COUNT {count}' if count > 0 else ''} -> {moved}")

    # ------------------------------------------------------------ holders replaced

    def below_level(self) -> list[str]:
        """The jobs a client was promised that have fewer copies than the
        promise could have now (every live node, at most): its ADDJOB's
        REPLICATE, or the copies an ID answered to a duplicate stood for
        (a job whose own ADDJOB failed is owed that level too)."""
        checker, live = self.checker, len(self.net.live())
        return [facts.name for facts in checker.jobs.values()
                if facts.retry and not facts.acked and facts.closed_at is None
                and (owed := facts.promised_copies()) >= 2
                and len(checker.holders(facts.id)) < min(owed, live)]

    def replace_next(self) -> None:
        """Kill the next node; bring it back empty once its jobs are healed
        (or at once, before it is FAIL, one time in three)."""
        net = self.net
        if len(self.replaced) == len(net.nodes):
            self.fault_end = net.clock.now_ms()
            self.log("every node was replaced", FAULT)
            return
        i = len(self.replaced)
        self.replaced.append(i)
        how = self.cut_first_job(i) if self.scenario.cut_aofs else "replaced"
        lost = self.checker.crashing(i)
        net.crash(i)
        self.log(f"n{i} CRASH ({how}), lost {self.names(lost)}", FAULT)
        self.checker.crashed(lost)
        early = self.scenario.fail_delay_ms > REPLACE_POLL_MS and self.rng.random() < 1 / 3
        if early:
            self.later(self.rng.randint(1, self.scenario.fail_delay_ms - 1), self.replace_back, i,
                       net.clock.now_ms())
        else:
            self.later(REPLACE_POLL_MS, self.replace_wait, i, net.clock.now_ms(), True)

    def replace_wait(self, i: int, since: int, down: bool) -> None:
        net = self.net
        late = net.clock.now_ms() - since >= REPLACE_WAIT_MS + self.scenario.fail_delay_ms
        below = self.below_level()
        if below and not late:
            self.later(REPLACE_POLL_MS, self.replace_wait, i, since, down)
            return
        if below:
            self.log(f"still below their level after {REPLACE_WAIT_MS} ms: {below[:10]}", FAULT)
        if down:
            self.replace_back(i, net.clock.now_ms())
        else:
            self.later(self.rng.choice(ACTION_GAPS_MS), self.replace_next)

    def replace_back(self, i: int, since: int) -> None:
        self.restart(i)
        self.later(REPLACE_POLL_MS, self.replace_wait, i, self.net.clock.now_ms(), False)

    # ------------------------------------------------------------ consumers

    def consume(self, client: Client, node: int, job) -> None:
        """A consumer got a job: decide what it will do with it, and when.
        One with MAXDELIVERIES is NACKed more often (a poison message), so
        that many reach their limit; one from a dead-letter queue is mostly
        acknowledged (looked at and dropped)."""
        job_id = job.id
        if self.draining:
            self.later(0, self.follow_up, "ACKJOB", job_id, node)
            return
        rng = self.rng
        roll = rng.random()
        facts = self.checker.jobs.get(job_id)
        if job.queue in self.dead_queues:
            action = "ACKJOB" if roll < 0.6 else "NACK" if roll < 0.75 else \
                "WORKING" if roll < 0.8 else None
        elif facts is not None and facts.max_deliveries:
            action = "ACKJOB" if roll < 0.3 else "FASTACK" if roll < 0.35 else \
                "NACK" if roll < 0.75 else "WORKING" if roll < 0.8 else None
        else:
            action = "ACKJOB" if roll < 0.55 else "FASTACK" if roll < 0.65 else \
                "NACK" if roll < 0.75 else "WORKING" if roll < 0.85 else None
        if action is None:
            self.log(f"{client} forgets {self.name(job_id)}", job_id)
            return
        delay = rng.choice(NACK_DELAYS_S) if action == "NACK" else None
        self.later(rng.choice(THINK_MS), self.follow_up, action, job_id, node, delay)

    def follow_up(self, action: str, job_id: bytes, origin: int, delay=None) -> None:
        net = self.net
        i = self.live_node(origin)
        if i is None:
            self.later(100, self.follow_up, action, job_id, origin, delay)
            return
        if action == "ACKJOB":
            self.checker.acked(job_id)      # before: the call deletes copies at once
            result = net.call(i, ack_jobs, [job_id])
        elif action == "FASTACK":
            self.checker.acked(job_id)
            result = net.call(i, "fast_ack", [job_id])
        elif action == "NACK":
            delay_ms = -1 if delay is None else delay * 1000
            before = self.checker.before_nack(i, job_id)
            facts = self.checker.nacking(job_id)
            result = net.call(i, nack_jobs, [job_id], delay_ms)
            self.checker.nacked(i, facts, before, delay_ms, result)
            if delay is not None:
                action = f"NACK DELAY {delay}"
        else:
            try:
                result = net.call(i, "working", job_id)
            except DisqueError as error:
                result = error
            self.later(self.rng.choice(THINK_MS) * 2, self.follow_up, "ACKJOB", job_id, origin)
        self.log(f"n{i} {action} {self.name(job_id)} -> {result}", job_id)

    def poll_everywhere(self) -> bool:
        """Quiescence: a consumer on every node takes whatever is queued."""
        net = self.net
        got = False
        queues = list(self.scenario.queues) + [BACKLOG] + list(self.dead_queues)
        for i in net.live():
            for job in net.call(i, get_jobs, queues, 100):
                self.log(f"n{i} GETJOB (drain) {job.queue.decode()} -> {self.name(job.id)}",
                         job.id)
                self.checker.delivered(job.id, i, job)
                self.consume(None, i, job)
                got = True
        return got
