"""One chaos run from start to report: the phases and their deadlines.

Owns the order of things. Start N nodes and join them; make the workload
(workloads/: `--workload`) and let it load what it adds before the faults
(the backlog's jobs), if anything; run its threads (producers, consumers,
observers) and the fault injector for `duration` seconds; stop the faults,
the producers and the observers and bring every node back (restart,
SIGCONT: that moment is the heal the delays are measured from) until the
mesh is whole again; let the consumers drain until every job acknowledged
by ADDJOB was delivered (or the drain deadline passes), and keep them
consuming while the nodes let go of what they still hold; question the
nodes about any lost job; stop the nodes with SIGTERM; read their logs for
tracebacks and sanitizer reports; build the report, with the workload's
own findings. Nodes live in network namespaces of the run's own (netns.py)
when a kind of fault needs them or --netns asks; they run Disque C's
server instead of ours with --disque-c (disque_c.py). Whatever happens (an
error, Ctrl-C, SIGTERM) every node this run started is killed by PID, and
every namespace, link, relay and rule it made is removed, before run()
returns or raises.
"""

from __future__ import annotations

import random
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from disque_py.tools.chaos import disque_c
from disque_py.tools.chaos.cluster import Fleet, node_dir
from disque_py.tools.chaos.explain import Explainer
from disque_py.tools.chaos.faults import DEFAULT_KINDS, KINDS, FaultInjector, FaultPlan
from disque_py.tools.chaos.ledger import Ledger
from disque_py.tools.chaos.netns import NetworkLab
from disque_py.tools.chaos.nodes import Crash, Launch
from disque_py.tools.chaos.report import Report, verdict_counts
from disque_py.tools.chaos.workloads import (DEFAULT_WORKLOAD, WORKLOADS, CheckContext, Setup,
                                             Workload)
from disque_py.tools.chaos.workloads.clients import CONSUMER, JobSpec

MESH_TIMEOUT_S = 60.0
RECOVER_TIMEOUT_S = 60.0
PROGRESS_EVERY_S = 30.0
POLL_S = 0.5
TTL_MARGIN_S = 3600
THREAD_JOIN_TIMEOUT_S = 60.0
# An ACKJOB answered by one node reaches the other holders a message later:
# a delivery this soon after it raced the ack itself.
AFTER_ACK_GRACE_S = 1.0
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
MEMBERSHIP_SPARES = 1        # spare slots a run with membership faults keeps


@dataclass
class ChaosOptions:
    nodes: int = 5
    duration: float = 600.0
    seed: int | None = None
    replicate: int = 3
    max_down: int | None = None        # default: replicate - 1
    appendonly: bool = True
    appendfsync: str = "always"        # the nodes' appendfsync: always, everysec or no
    directory: str | None = None
    keep: bool = False
    producers: int = 2
    consumers: int = 3
    rate: float = 20.0                 # ADDJOBs per second, all producers together
    retry: int = 5                     # the jobs' RETRY, seconds
    node_timeout_ms: int = 3000
    fault_interval: float = 4.0        # mean seconds between faults
    drain_timeout: float = 180.0
    settle_timeout: float = 30.0
    backlog: int = 0                   # the backlog workload's size (0: its default)
    rereplicate: bool | None = None    # the nodes' `rereplicate` (None: yes; Disque C has none)
    faults: tuple[str, ...] = DEFAULT_KINDS   # the kinds of fault (faults/)
    workload: str = DEFAULT_WORKLOAD   # the load and its own promises (workloads/)
    netns: bool | None = None          # nodes in network namespaces (None: if a fault needs it)
    disque_c: str | None = None        # Disque C's disque-server to run instead of ours

    def fault_kinds(self) -> tuple[str, ...]:
        """The kinds asked for, and AOF rewrites when the AOF is on (so
        that the other faults land during rewrites too)."""
        return self.faults + (("rewrite",) if self.appendonly else ())

    def uses_network(self) -> bool:
        """Nodes in namespaces: asked for, or needed by a kind of fault;
        ValueError if refused where a kind needs them."""
        needed = [kind for kind in self.faults if KINDS[kind].needs_network]
        if needed and self.netns is False:
            raise ValueError(f"{', '.join(needed)} need the nodes in network namespaces: "
                             "drop --no-netns")
        return bool(needed) if self.netns is None else self.netns

    def settings(self) -> dict:
        return {"server": disque_c.server_name(self),
                "nodes": self.nodes, "duration": f"{self.duration:g}s",
                "replicate": self.replicate, "max-down": self.max_down,
                "appendonly": f"yes (fsync {self.appendfsync})" if self.appendonly else "no",
                "rereplicate": "yes" if self.rereplicate else "no",
                "faults": ", ".join(self.fault_kinds()),
                "producers": self.producers, "consumers": self.consumers,
                "rate": f"{self.rate:g}/s", "retry": f"{self.retry}s",
                "node-timeout": f"{self.node_timeout_ms}ms",
                "network": "namespaces" if self.uses_network() else "loopback",
                "fault-interval": f"{self.fault_interval:g}s"}


def fault_kinds(names: str) -> tuple[str, ...]:
    """`--faults kill,pause`: the kinds named, in order, each once; ValueError
    naming the known ones for a word that is not one."""
    kinds = tuple(dict.fromkeys(word.strip() for word in names.split(",") if word.strip()))
    unknown = [kind for kind in kinds if kind not in KINDS]
    if unknown or not kinds:
        raise ValueError(f"unknown fault kind(s) {', '.join(unknown) or '(none given)'}; "
                         f"known: {', '.join(sorted(KINDS))}")
    return kinds


def workload_name(name: str | None, backlog: int) -> str:
    """`--workload NAME`, checked against the known ones; without it, `backlog`
    when a backlog size is given (as `--backlog N` alone always meant), else
    the default. ValueError for an unknown name, or a backlog size given to
    another workload."""
    if name is None:
        name = "backlog" if backlog else DEFAULT_WORKLOAD
    if name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r}; known: {', '.join(sorted(WORKLOADS))}")
    if backlog and name != "backlog":
        raise ValueError(f"--backlog is the backlog workload's size, not {name}'s")
    return name


class Run:
    def __init__(self, options: ChaosOptions, echo: Callable[[str], None]) -> None:
        if options.seed is None:
            options.seed = random.SystemRandom().randrange(1 << 32)
        if options.max_down is None:
            options.max_down = max(options.replicate - 1, 0)
        if options.rereplicate is None:
            options.rereplicate = options.disque_c is None
        disque_c.check(options)
        self.options = options
        self.echo = echo
        self.rng = random.Random(options.seed)
        self.base_dir = self._make_dir()
        spares = MEMBERSHIP_SPARES if "membership" in options.faults else 0
        self.network = self._claim_network(options.nodes + spares)
        try:
            launches = [self._launch(index) for index in range(options.nodes + spares)]
            self.fleet = Fleet(self.base_dir, launches, self._server_args(), spares)
        except BaseException:
            self._remove_network()
            raise
        self.ledger = Ledger()
        self.started = time.monotonic()
        self.elapsed: dict[str, float] = {}
        self.problems: list[str] = []
        self.threads: list = []     # workers and the injector, stopped before the nodes
        self.injector: FaultInjector | None = None
        self.workload: Workload | None = None
        self.healed_at: float | None = None     # every fault undone

    def _make_dir(self) -> Path:
        if self.options.directory is None:
            return Path(tempfile.mkdtemp(prefix=f"disque-chaos-{self.options.seed}-"))
        parent = Path(self.options.directory)
        parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f"chaos-{self.options.seed}-", dir=parent))

    def _launch(self, index: int) -> Launch:
        """A node's address and command prefix (its namespace, if any) and
        what the kinds of fault need in its environment (faults/)."""
        env: dict[str, str] = {}
        for name in self.options.fault_kinds():
            env.update(KINDS[name].launch_env(node_dir(self.base_dir, index)))
        launch = self.network.launch(index) if self.network else Launch()
        server = (self.options.disque_c,) if self.options.disque_c else ()
        return replace(launch, env=env, server=server)

    def _claim_network(self, count: int) -> NetworkLab | None:
        """The run's subnet and bridge, when its `count` nodes live in namespaces."""
        o = self.options
        if not o.uses_network():
            return None
        relays = any(KINDS[kind].needs_relays for kind in o.faults)
        network = NetworkLab(count, self.base_dir, relays, o.seed)
        try:
            network.claim()
        except BaseException:
            network.remove()
            raise
        return network

    def _server_args(self) -> list[str]:
        args = ["--cluster-node-timeout", str(self.options.node_timeout_ms)]
        if self.options.disque_c is None:
            args += ["--rereplicate", "yes" if self.options.rereplicate else "no"]
        if self.options.appendonly:
            args += ["--appendonly", "yes", "--appendfsync", self.options.appendfsync]
        return args

    # ---------------------------------------------------------- phases

    def execute(self) -> Report:
        self.echo(f"chaos: seed {self.options.seed}, {self.options.nodes} nodes in "
                  f"{self.base_dir}")
        if self.network is not None:
            self.network.create([node.port for node in self.fleet.nodes])
            self.echo(f"chaos: network: {self.network.describe()}")
        self.fleet.start(MESH_TIMEOUT_S)
        self.echo(f"chaos: cluster formed: {self._addresses_text()}")
        self.workload = self._make_workload()
        self._phase("setup")
        loaders = self.workload.loaders()
        if loaders:
            self._load(loaders)
            self._phase("load")
        workers = self.workload.threads()
        consumers = [w for w in workers if w.role == CONSUMER]
        others = [w for w in workers if w.role != CONSUMER]
        injector = FaultInjector(self.fleet.nodes, self._plan(), self._rng())
        self.injector = injector
        self.threads = [injector, *workers]
        injector.start()
        for worker in workers:
            worker.start()
        self._wait("faults", self.options.duration, lambda: False, injector, workers)
        self._stop(others)
        injector.stop()
        self._phase("faults")
        self._recover(injector)
        self._phase("recovery")
        for consumer in consumers:
            consumer.draining.set()
        self._wait("drain", self.options.drain_timeout, self._drained, None, consumers)
        self._phase("drain")
        self._settle()
        self._stop(consumers)
        self._check_errors(workers + [injector])
        self._phase("settle")
        return self._report(injector)

    def _phase(self, name: str) -> None:
        now = time.monotonic()
        self.elapsed[name] = now - self.started - sum(self.elapsed.values())

    def _rng(self) -> random.Random:
        return random.Random(self.rng.randrange(1 << 32))

    def _plan(self) -> FaultPlan:
        return FaultPlan(self.options.max_down, self.options.fault_interval,
                         self.options.fault_kinds(), replicate=self.options.replicate,
                         node_timeout_s=self.options.node_timeout_ms / 1000,
                         network=self.network)

    def _addresses_text(self) -> str:
        return " ".join(f"{host}:{port}" for host, port in self._client_addresses())

    def _client_addresses(self) -> list[tuple[str, int]]:
        """The run's first `nodes` slots (spares are met later, if ever)."""
        return self.fleet.addresses[:self.options.nodes]

    def _spec(self) -> JobSpec:
        o = self.options
        return JobSpec(o.replicate, o.retry, int(o.duration + o.drain_timeout) + TTL_MARGIN_S)

    def _make_workload(self) -> Workload:
        o = self.options
        setup = Setup(self._client_addresses(), self.ledger, o.seed, self._spec(), o.rate,
                      o.producers, o.consumers, backlog=o.backlog, rng=self._rng,
                      node_ids=self.fleet.node_ids())
        return WORKLOADS[o.workload](setup)

    def _load(self, loaders: list) -> None:
        """The workload's jobs before the faults (the backlog), as fast as
        the nodes take them; consumers leave them alone until the drain."""
        self.threads = list(loaders)
        for loader in loaders:
            loader.start()
        for loader in loaders:
            loader.join()
        self._check_errors(loaders)
        self.echo(f"chaos: {self.workload.loaded_text()}")

    def _wait(self, phase: str, seconds: float, done, injector, workers) -> bool:
        """Pace the main thread through a phase, printing progress; True if `done` came."""
        began = time.monotonic()
        next_report = began + PROGRESS_EVERY_S
        while time.monotonic() - began < seconds:
            if done():
                return True
            self._check_errors(workers + ([injector] if injector else []))
            if time.monotonic() >= next_report:
                self.echo(self._progress(phase, time.monotonic() - began, injector))
                next_report += PROGRESS_EVERY_S
            time.sleep(POLL_S)
        return done()

    def _progress(self, phase: str, elapsed: float, injector) -> str:
        counts = self.ledger.progress()
        line = (f"chaos: {phase} {elapsed:4.0f}s: " + ", ".join(f"{k} {v}" for k, v in
                                                             counts.items()))
        if injector is not None:
            line += "; " + ", ".join(f"{kind} {injector.count(kind)}"
                                     for kind in self.options.fault_kinds())
            line += f", down now {injector.down_text() or 'none'}"
        else:
            line += f"; undelivered {self.ledger.undelivered()}"
        return line

    def _drained(self) -> bool:
        return self.ledger.undelivered() == 0

    def _recover(self, injector: FaultInjector) -> None:
        still_down = injector.recover_all(RECOVER_TIMEOUT_S)
        self.healed_at = time.monotonic()
        if still_down:
            self.problems.append(f"nodes not back after {RECOVER_TIMEOUT_S:g}s: {still_down}")
        if not self.fleet.wait_mesh(MESH_TIMEOUT_S):
            self.problems.append(f"no full mesh {MESH_TIMEOUT_S:g}s after the faults stopped: "
                                 f"{self.fleet.mesh_problems()}")
        self.echo("chaos: faults stopped, every node back; draining")

    def _settle(self) -> None:
        """Consumers still running, give the nodes a moment to hand out what is
        left (jobs whose ACKJOB got no answer come back after RETRY) and to
        garbage-collect acked jobs; what they still hold is reported, not checked."""
        deadline = time.monotonic() + self.options.settle_timeout
        while time.monotonic() < deadline:
            if not any(self.fleet.jobs_held().values()):
                return
            time.sleep(POLL_S)

    @staticmethod
    def _stop(workers) -> None:
        for worker in workers:
            worker.stopping.set()
        for worker in workers:
            worker.join()

    @staticmethod
    def _check_errors(threads) -> None:
        for thread in threads:
            if thread.error is not None:
                raise RuntimeError(f"{thread.name} failed: {thread.error!r}") from thread.error

    # ---------------------------------------------------------- the report

    def _report(self, injector: FaultInjector) -> Report:
        workload = self.workload
        verdict = self.ledger.verdict(self.healed_at, workload.queues_of,
                                      workload.drain_queues())
        findings = workload.check(self.ledger.records(),
                                  CheckContext(injector, self.options.appendonly, self.healed_at))
        explain = Explainer(self.options, injector, self.fleet, self.started)
        lost = [explain.lost_job(record) for record in verdict.lost]
        held = self.fleet.jobs_held()
        crashes = self._stop_nodes()
        faults = {kind: injector.count(kind) for kind in
                  (*self.options.fault_kinds(), "resume", "crash", "start-failed")}
        faults.update(injector.event_counts())
        faults["restarts"] = self.fleet.restarts()
        faults.update(explain.faults_by_detail())
        (self.base_dir / "faults.txt").write_text(explain.timeline())
        counts = verdict_counts(verdict, self.ledger.add_errors())
        counts["unacked_at_end"] = self.ledger.unacked()
        counts["after_ack_within_grace"] = sum(
            1 for record, delivery in verdict.after_ack
            if delivery.asked_at - record.acks[delivery.job_id] <= AFTER_ACK_GRACE_S)
        counts["after_ack_node_down_at_ack"] = sum(
            1 for record, delivery in verdict.after_ack
            if injector.down_at(record.acks[delivery.job_id]))
        return Report(self.options.seed, {**self.options.settings(), **workload.settings()},
                      str(self.base_dir), dict(self.elapsed), counts,
                      faults, lost, [explain.after_ack_line(r, d) for r, d in verdict.after_ack],
                      verdict.unexpected, crashes, self.problems, held, injector.measures(),
                      workload=workload.name, findings=findings, delays=verdict.delays)

    def _stop_nodes(self) -> list[Crash]:
        crashes = []
        for name, status in self.fleet.stop().items():
            if status not in (0, None):
                crashes.append(Crash(name, "exit", f"SIGTERM ended it with status {status}"))
        return crashes + self.fleet.crashes()

    def cleanup(self, keep: bool) -> None:
        # The injector may be restarting a node: it must be gone before the nodes are killed.
        # A stop signal can land between a thread's creation and its start:
        # only started threads are joined, and the nodes are killed anyway.
        try:
            for thread in self.threads:
                thread.stopping.set()
            for thread in self.threads:
                if thread.is_alive():
                    thread.join(THREAD_JOIN_TIMEOUT_S)
        finally:
            self.fleet.force_kill()
            self._remove_network()
        if not keep:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def _remove_network(self) -> None:
        if self.network is not None:
            for problem in self.network.remove():
                self.echo(f"chaos: could not remove: {problem}")


def run(options: ChaosOptions, echo: Callable[[str], None] = print) -> Report:
    """Run the checker; the nodes are gone when this returns or raises."""
    in_main = threading.current_thread() is threading.main_thread()
    # Installed even where a shell left SIGINT ignored (a background job):
    # any of these must stop the nodes, not orphan them.
    previous = {signum: signal.signal(signum, _interrupt)
                for signum in STOP_SIGNALS} if in_main else {}
    chaos = Run(options, echo)
    report = None
    try:
        report = chaos.execute()
        return report
    finally:
        # A second Ctrl-C must not cut the cleanup short (namespaces, relays
        # and nodes would outlive the run): the cleanup's own waits are bounded.
        for signum in previous:
            signal.signal(signum, signal.SIG_IGN)
        keep = options.keep or report is None or not report.passed
        chaos.cleanup(keep)
        if keep:
            echo(f"chaos: nodes' directories and logs kept in {chaos.base_dir}")
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
