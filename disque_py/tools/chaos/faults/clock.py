"""Clock faults: a node's wall clock jumps forward or back, or drifts, then is stepped right.

How: every node of a run with `clock` in its faults runs under Debian's
libfaketime (LD_PRELOAD), reading its offset from a file in its directory
(FAKETIME_TIMESTAMP_FILE, "+12.5" or "-30.0" seconds) that this module
rewrites (atomically: a new file renamed over the old) while the node runs.
libfaketime reads the file again at most once a second
(FAKETIME_CACHE_DURATION=1; FAKETIME_NO_CACHE would read it at every
clock call), so a change reaches the node within a second. Only
CLOCK_REALTIME is faked (FAKETIME_DONT_FAKE_MONOTONIC=1): an NTP step
moves the wall clock, never the monotonic one, and the node's event loop
and timeouts that read CLOCK_MONOTONIC must not jump backwards. Every time
that says when a job is due is wall-clock time (the engine reads
CLOCK_REALTIME in C, Python's Clock reads time.time_ns: job ctime, DELAY,
RETRY, TTL, the cluster's node timeouts), so the fault reaches all of them.

  jump   the offset becomes ±JUMP_S (seconds to minutes) at once, for
         HOLD_S, then 0 again (an NTP step putting it right);
  drift  the offset grows by DRIFT_RATE (1% to 10% fast or slow: far more
         than a real crystal, to be seen in a short run) for HOLD_S, then
         is stepped back to 0. The keeper thread writes the drifting
         offsets every KEEPER_TICK_S.

Measured: before each fault, a probe job (REPLICATE 1, DELAY PROBE_DELAY_S)
is added on the victim, and the keeper watches when the node queues it;
how much earlier or later than its DELAY that came is the fault's effect on
every wall-clock schedule of that node (RETRY and TTL use the same one).
What is not modelled: a drift of the monotonic clock (a node's own
timeouts run a few percent long or short), clocks jumping on several
nodes at once, leap seconds.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from disque_py.tools.chaos.cluster import query, text
from disque_py.tools.chaos.faults.base import FaultKind, Harm, register
from disque_py.tools.chaos.link import LinkError
from disque_py.tools.chaos.nodes import UP, Node

FAKETIME_LIBRARIES = ("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
                      "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
                      "/usr/lib/faketime/libfaketimeMT.so.1")
OFFSET_FILE = "faketime.rc"
SHARED_VARIABLE, SHARED_PLACEHOLDER = "FAKETIME_SHARED", "none none"
JUMP_S = (2.0, 120.0)
HOLD_S = (5.0, 30.0)
DRIFT_RATE = (0.01, 0.10)
DRIFT_SHARE = 0.3
KEEPER_TICK_S = 0.25
PROBE_QUEUE = "chaos-clock-probe"
PROBE_DELAY_S = 10
PROBE_TTL_S = 3600
PROBE_GIVE_UP_S = PROBE_DELAY_S + JUMP_S[1] + HOLD_S[1]
HEAL = "clock-fixed"


def faketime_library() -> str:
    for path in FAKETIME_LIBRARIES:
        if os.path.exists(path):
            return path
    raise RuntimeError("clock faults need Debian's libfaketime (apt-get install faketime)")


def offset_spec(offset_s: float) -> str:
    """libfaketime's relative offset: "+12.500" or "-3.250"."""
    return f"{offset_s:+.3f}\n"


def write_offset(directory: Path, offset_s: float) -> None:
    """Written whole (a new file renamed over the old one); the injector and
    the keeper may both write one node's file: each has its own temporary."""
    path = Path(directory) / OFFSET_FILE
    temp = path.with_name(f"{path.name}.{threading.get_ident()}.tmp")
    temp.write_text(offset_spec(offset_s))
    os.replace(temp, path)


@dataclass
class Skew:
    """A node's clock fault: a step now, plus a drift rate from `since`."""

    step_s: float
    rate: float = 0.0
    since: float = 0.0

    def offset_at(self, now: float) -> float:
        return self.step_s + self.rate * max(now - self.since, 0.0)

    def describe(self) -> str:
        if self.rate:
            return f"drift {self.rate:+.1%}"
        return f"jump {self.step_s:+.1f}s"


def draw_skew(rng, now: float) -> Skew:
    sign = rng.choice((-1, 1))
    if rng.random() < DRIFT_SHARE:
        return Skew(0.0, sign * rng.uniform(*DRIFT_RATE), now)
    return Skew(sign * rng.uniform(*JUMP_S))


@dataclass
class Probe:
    node: Node
    job_id: str
    added_at: float
    skew: str

    def error_s(self, queued_at: float) -> float:
        """How much later (+) or earlier (-) than its DELAY the node queued it."""
        return queued_at - self.added_at - PROBE_DELAY_S


@dataclass
class ProbeResults:
    errors: list[tuple[str, float]] = field(default_factory=list)     # (skew, seconds)
    unresolved: int = 0

    def measures(self) -> dict[str, float]:
        late = [e for _, e in self.errors]
        return {"clock_probes": len(late), "clock_probes_unresolved": self.unresolved,
                "clock_probe_most_early_s": round(-min(late + [0.0]), 1),
                "clock_probe_most_late_s": round(max(late + [0.0]), 1)}


@register
class Clock(FaultKind):
    name = "clock"
    heal_name = HEAL
    takes_down = False

    @classmethod
    def launch_env(cls, directory: Path) -> dict[str, str]:
        Path(directory).mkdir(parents=True, exist_ok=True)
        write_offset(directory, 0.0)
        return {"LD_PRELOAD": faketime_library(),
                "FAKETIME_TIMESTAMP_FILE": str(Path(directory) / OFFSET_FILE),
                "FAKETIME_CACHE_DURATION": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
                # Its "monotonic fix" rewrites the deadlines of timed waits on
                # condition variables as if they were on the wall clock: Python's
                # GIL waits on the monotonic clock, and ADDJOB under appendfsync
                # always (the fsync thread and the loop trading the GIL) took
                # 200 ms instead of 2. The monotonic clock is not faked here anyway.
                "FAKETIME_FORCE_MONOTONIC_FIX": "0",
                # libfaketime sets this at load (its shared memory's names); adding a
                # new variable grows the environment before main, which Disque C's
                # setproctitle cannot take (a segfault in spt_copyenv). Present
                # already, it is overwritten in place; what it names is not used.
                SHARED_VARIABLE: SHARED_PLACEHOLDER}

    def __init__(self, injector) -> None:
        super().__init__(injector)
        self.skews: dict[int, Skew] = {}
        self.probes: list[Probe] = []
        self.results = ProbeResults()
        self._lock = threading.Lock()
        self._keeper = threading.Thread(target=self._keep, name="clock-keeper", daemon=True)
        self.keeper_error: BaseException | None = None

    def inject(self, now: float) -> Harm | None:
        if self.keeper_error is not None:      # the run stops on it, as on its own errors
            raise RuntimeError(f"clock keeper failed: {self.keeper_error!r}")
        running = self.injector.running()
        if not running:
            return None
        node = self.injector.rng.choice(running)
        skew = draw_skew(self.injector.rng, now)
        probe = self._probe(node, skew.describe())
        with self._lock:
            self.skews[node.index] = skew
            if probe is not None:
                self.probes.append(probe)
        write_offset(node.dir, skew.offset_at(now))
        self.injector.record(self.name, node.index, skew.describe())
        if self._keeper.ident is None:
            self._keeper.start()
        return Harm(self.name, (node.index,), now + self.injector.rng.uniform(*HOLD_S),
                    lambda: self._fix(node), takes_down=False)

    def _fix(self, node: Node) -> bool:
        with self._lock:
            self.skews.pop(node.index, None)
        write_offset(node.dir, 0.0)
        self.injector.record(HEAL, node.index)
        return True

    def _probe(self, node: Node, skew: str) -> Probe | None:
        try:
            job_id = query(node, "ADDJOB", PROBE_QUEUE, f"probe:{skew}", 0, "REPLICATE", 1,
                           "DELAY", PROBE_DELAY_S, "TTL", PROBE_TTL_S)
        except LinkError:
            return None
        return Probe(node, text(job_id), time.monotonic(), skew)

    def _keep(self) -> None:
        try:
            self._keep_going()
        except BaseException as error:      # surfaced by the next inject
            self.keeper_error = error

    def _keep_going(self) -> None:
        """Drifting offsets written, probes watched, until the run ends."""
        while True:
            time.sleep(KEEPER_TICK_S)
            now = time.monotonic()
            with self._lock:
                drifting = [(self.injector.nodes[i], s) for i, s in self.skews.items() if s.rate]
                probes = list(self.probes)
            for node, skew in drifting:
                write_offset(node.dir, skew.offset_at(now))
            for probe in probes:
                self._check(probe, now)
            if self.injector.stopping.is_set() and (not probes or now > self._give_up_at()):
                return

    def _give_up_at(self) -> float:
        with self._lock:
            return max((p.added_at for p in self.probes), default=0.0) + PROBE_GIVE_UP_S

    def _check(self, probe: Probe, now: float) -> None:
        state = None
        if probe.node.state == UP:
            try:
                reply = query(probe.node, "SHOW", probe.job_id)
                fields = dict(zip(map(text, reply[::2]), reply[1::2])) if reply else {}
                state = text(fields.get("state", "gone"))
            except LinkError:
                pass
        if state == "queued":
            self.results.errors.append((probe.skew, probe.error_s(now)))
            _delete(probe)
        elif state is None and now - probe.added_at < PROBE_GIVE_UP_S:
            return                     # the node is down for now: look again later
        elif state == "active" and now - probe.added_at < PROBE_GIVE_UP_S:
            return
        else:
            self.results.unresolved += 1
        with self._lock:
            self.probes.remove(probe)

    def measures(self) -> dict[str, float]:
        with self._lock:
            pending = len(self.probes)
        found = self.results.measures()
        found["clock_probes_unresolved"] += pending
        return found


def _delete(probe: Probe) -> None:
    try:
        query(probe.node, "DELJOB", probe.job_id)
    except LinkError:
        pass
