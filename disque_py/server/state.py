"""What command handlers see of the server: plain state, no I/O.

ServerState bundles the node core, the configuration, the client registry
and the statistics INFO reports. Session is one client's state (name, auth,
flags). Handlers read and change these; when a handler needs the outside
world to act (close another client, shut down, feed monitors) it records a
request here and the runtime carries it out after the command. That keeps
every handler testable by direct dispatch, without a socket.

It also holds the slow log and the latency monitor, follows their CONFIG
SET directives, and keeps slow_after: the shortest command run either of
them wants to see. Connections time each command whose handler ran
(Disque times only the commands it calls), add the time to the command's
INFO commandstats, and call command_took only for runs that long.
"""

from __future__ import annotations

import os
import time

from disque_py.commands.table import CommandTable
from disque_py.commands.services import ClusterControl, PersistenceControl
from disque_py.node.node import Node
from disque_py.engine import ServerCore, SessionCore, StatsCore
from disque_py.monitoring.histogram import DurationHistogram
from disque_py.monitoring.latency import (COMMAND, EVICTION_CYCLE, FAST_COMMAND, LatencyMonitor)
from disque_py.monitoring.slowlog import SlowLog

NEVER_SLOW = float("inf")
RATE_SAMPLES = 16
# INFO persistence of a node whose AOF is off and never ran (Disque's fields).
AOF_OFF_INFO = (
    ("loading", 0),
    ("aof_enabled", 0),
    ("aof_state", "off"),
    ("aof_rewrite_in_progress", 0),
    ("aof_rewrite_scheduled", 0),
    ("aof_last_rewrite_time_sec", -1),
    ("aof_current_rewrite_time_sec", -1),
    ("aof_last_bgrewrite_status", "ok"),
    ("aof_last_write_status", "ok"),
)


class Stats(StatsCore):
    """Counters for INFO stats (C fields: the fast path counts them), and
    the instantaneous rates Disque shows: each the mean of the last
    RATE_SAMPLES cron samples."""

    __slots__ = ("_samples", "_sample_time", "_sampled_totals")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.connections_received = 0
        self.commands_processed = 0
        self.net_input_bytes = 0
        self.net_output_bytes = 0
        self.rejected_connections = 0
        # per second: (commands, input bytes, output bytes)
        self._samples: list[tuple[float, float, float]] = []
        self._sample_time = time.monotonic()
        self._sampled_totals = (0, 0, 0)

    def _totals(self) -> tuple[int, int, int]:
        return self.commands_processed, self.net_input_bytes, self.net_output_bytes

    def sample_ops(self) -> None:
        """Called from the cron: one sample of each instantaneous rate."""
        now = time.monotonic()
        elapsed = now - self._sample_time
        if elapsed <= 0:
            return
        totals = self._totals()
        self._samples.append(tuple((total - before) / elapsed for total, before
                                   in zip(totals, self._sampled_totals)))
        del self._samples[:-RATE_SAMPLES]
        self._sample_time = now
        self._sampled_totals = totals

    def _mean_rate(self, index: int) -> float:
        samples = self._samples
        return sum(sample[index] for sample in samples) / len(samples) if samples else 0.0

    @property
    def instantaneous_ops(self) -> int:
        return int(self._mean_rate(0))

    @property
    def instantaneous_input_kbps(self) -> float:
        return self._mean_rate(1) / 1024

    @property
    def instantaneous_output_kbps(self) -> float:
        return self._mean_rate(2) / 1024


class Session(SessionCore):
    """One client connection's state, as commands see it (what the fast
    path reads on every command is in SessionCore's C fields)."""

    __slots__ = ("id", "addr", "laddr", "fd", "name", "created", "monitor", "lib_name",
                 "lib_ver", "waiting", "conn", "aof_loader", "enqueue_loaded", "refused")

    def __init__(self, client_id: int, addr: str = "", laddr: str = "", fd: int = -1,
                 conn=None) -> None:
        self.id = client_id
        self.addr = addr
        self.laddr = laddr
        self.fd = fd
        self.name = b""
        self.authenticated = False
        self.created = time.monotonic()
        self.last_interaction = self.created
        self.last_command = None    # the Command last run (CLIENT LIST, commandstats)
        self.monitor = False
        self.lib_name = b""
        self.lib_ver = b""
        self.kill_requested = False
        self.waiting: dict = {}     # Waiter of each parked command -> its reply slot
        self.conn = conn            # the transport adapter, opaque here
        self.resp3 = False
        self.aof_loader = False     # the session replaying the AOF (may LOADJOB)
        self.enqueue_loaded = False
        self.refused = None         # argv of the last command refused before its handler
        self.reply_flags = 0        # CLIENT REPLY: REPLY_OFF, REPLY_SKIP_NEXT, REPLY_SKIP


class ServerState(ServerCore):
    def __init__(self, node: Node, config, *, executable: str = "",
                 config_file: str = "") -> None:
        self.node = node
        node.aof.on_records = self.output_due
        self.config = config
        self._requirepass = b""
        self.stats = Stats()
        self.clients: dict[int, Session] = {}
        self.monitors: list[Session] = []
        self.next_client_id = 1
        self.started = time.time()
        self.run_id = os.urandom(20).hex()
        self.executable = executable
        self.config_file = config_file
        self.port = 0
        self.announce_ip = ""
        self.peak_memory = 0
        self.commands = CommandTable(config.rename_command)
        self.set_hot_commands(self.commands.hot_entries())
        self.loading = False        # the AOF is loading: -LOADING (see set_loading)
        # (mode, session) once SHUTDOWN is asked: "save", "nosave", "rewrite-aof"
        self.shutdown_request: tuple[str, Session] | None = None
        self.extra_info_sections: dict = {}          # later layers add INFO sections
        # The services handlers reach, as commands/services.py declares
        # them (None until the runtime attaches them: attach_services).
        self.cluster: ClusterControl | None = None
        self.persistence: PersistenceControl | None = None
        self.call_soon = None                        # the event loop's, once it runs
        self.kills: list[Session] = []               # clients CLIENT KILL asked to close
        # CLIENT PAUSE: no client command runs before this (time.monotonic());
        # the connections that stopped for it and the timer that wakes them
        # belong to the connections (server/protocol.py).
        self.paused_until = 0.0
        self.paused_conns: set = set()
        self.unpause_timer = None
        self.feed_monitors = lambda session, argv: None   # the runtime installs the real one
        self.slowlog = SlowLog(config.slowlog_log_slower_than, config.slowlog_max_len)
        self.latency = LatencyMonitor(config.latency_monitor_threshold)
        self.timer_lateness = DurationHistogram()   # the runtime's job timer (/metrics)
        self.slow_after = NEVER_SLOW     # seconds: commands this long reach command_took
        self._watch_diagnostics(config)

    def attach_services(self, cluster: ClusterControl, persistence: PersistenceControl) -> None:
        """The running server's cluster and persistence services."""
        self.cluster = cluster
        self.persistence = persistence
        self.extra_info_sections["cluster"] = ("Cluster", lambda srv: cluster.info_fields())

    # ------------------------------------------- the engine's hooks (server.pxd)

    def schedule_flush(self) -> None:
        """The turn's replies leave once every socket ready was read."""
        self.call_soon(self.flush_replies)

    def write_aof(self) -> None:
        """The turn's AOF records, written before its replies leave."""
        self.persistence.write_turn()

    def write_bus(self) -> None:
        """The turn's frames to peers, after its AOF records."""
        self.cluster.write_frames()

    def aof_accepts(self) -> bool:
        persistence = self.persistence
        return persistence is None or persistence.accepting

    def free_memory(self) -> bool:
        """The node's eviction pass, timed as Disque's eviction-cycle event."""
        began = self.latency.begin()
        fits = self.node.memory.free()
        self.latency.observe_since(EVICTION_CYCLE, began)
        return fits

    # ------------------------------------------------------- command timing

    def _watch_diagnostics(self, config) -> None:
        def follow(setter):
            def changed(value) -> None:
                setter(value)
                self._update_slow_after()
            return changed
        config.on_change("slowlog-log-slower-than", follow(self.slowlog.set_slower_than))
        config.on_change("slowlog-max-len", follow(self.slowlog.set_max_len))
        config.on_change("latency-monitor-threshold",
                         follow(lambda ms: setattr(self.latency, "threshold_ms", ms)))
        self._update_slow_after()

    def _update_slow_after(self) -> None:
        """The shortest run either the slow log or the latency monitor wants
        to see; a connection checks each command's time against it alone."""
        bounds = [NEVER_SLOW]
        if self.slowlog.enabled:
            bounds.append(self.slowlog.slower_than_us / 1_000_000)
        if self.latency.threshold_ms:
            bounds.append(self.latency.threshold_ms / 1000)
        self.slow_after = min(bounds)

    def command_took(self, command, argv: list[bytes], seconds: float) -> None:
        """A command's handler ran for at least slow_after seconds (the
        slow path; commands refused before their handler never get here)."""
        duration_us = round(seconds * 1_000_000)
        self.latency.observe(FAST_COMMAND if command.fast else COMMAND, duration_us // 1000)
        self.slowlog.offer(argv, duration_us)

    def pause_clients(self, milliseconds: int) -> None:
        """CLIENT PAUSE: a later end extends a pause; an earlier one does not
        shorten it; 0 pauses nothing."""
        if milliseconds > 0:
            self.paused_until = max(self.paused_until, time.monotonic() + milliseconds / 1000)

    def clients_paused(self) -> bool:
        """Whether client commands must wait now (a pause that is over is cleared)."""
        if self.paused_until and time.monotonic() >= self.paused_until:
            self.paused_until = 0.0
        return self.paused_until != 0.0

    def set_loading(self, loading: bool) -> None:
        """While the AOF loads, commands not flagged for it get -LOADING from
        the dispatcher; the fast path, which never answers it, owns none."""
        self.loading = loading
        self.set_hot_commands([] if loading else self.commands.hot_entries())

    def new_session(self, addr: str = "", laddr: str = "", fd: int = -1, conn=None) -> Session:
        session = Session(self.next_client_id, addr, laddr, fd, conn)
        self.next_client_id += 1
        self.clients[session.id] = session
        self.stats.connections_received += 1
        return session

    def detached_session(self, addr: str) -> Session:
        """An authenticated session of no connection, not registered as a
        client: the dashboard's actions run their commands in one (their
        own login was checked)."""
        session = Session(0, addr=addr)
        session.authenticated = True
        return session

    def drop_session(self, session: Session) -> None:
        self.clients.pop(session.id, None)
        if session.monitor:
            session.monitor = False
            self.monitors.remove(session)
        waiting, session.waiting = session.waiting, {}
        for waiter in waiting:
            self.node.parking.cancel(waiter)

    @property
    def requirepass(self) -> bytes:
        return self._requirepass

    def set_requirepass(self, password: str) -> None:
        self._requirepass = password.encode("latin-1") if password else b""

    def request_kill(self, session: Session) -> None:
        session.kill_requested = True
        self.kills.append(session)

    def uptime(self) -> float:
        return time.time() - self.started

    def persistence_info(self) -> list[tuple[str, object]]:
        """INFO persistence: the service's, or Disque's fields of an AOF that
        is off and never ran (no service attached, as in unit tests)."""
        if self.persistence is None:
            return list(AOF_OFF_INFO)
        return self.persistence.info()
