"""The running server: the composition root, start-up and shutdown.

Runtime makes every part of a node from its configuration and hands each
the others it needs: the node (node/), the state command handlers see
(state.py), the services (cluster_service.py, persistence_service.py, the
HTTP endpoint: http.py), the effect interpreter (effects.py), the timers
(timers.py), MONITOR's feed (monitor.py), the listeners (listeners.py) and
their TLS contexts (tls.py). It owns nothing else: each part says what it
does in its own module.

Start-up: the listeners open, then the AOF loads (clients get -LOADING
meanwhile, INFO shows the load: persistence_service.py), then the cluster
bus starts and the timers run. Shutdown (SHUTDOWN, SIGTERM or SIGINT):
the AOF is made durable, listeners, bus, clients and timers are closed,
the pidfile removed, exit code 0.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import traceback

from disque_py import DISQUE_VERSION
from disque_py.base import log
from disque_py.base.errors import CommandError, StartupError
from disque_py.base.replies import SHUTDOWN_FAILED
from disque_py.node.node import Node
from disque_py.server.cluster_service import ClusterService, load_identity
from disque_py.server.effects import EffectInterpreter
from disque_py.server.http import HttpEndpoint
from disque_py.server.listeners import Listeners
from disque_py.server.monitor import MonitorFeed
from disque_py.server.persistence_service import LoadStopped, PersistenceService
from disque_py.server.protocol import ClientConnection
from disque_py.server.state import ServerState
from disque_py.server.timers import Cron, JobTimer, tenure_survivors
from disque_py.server.tls import TlsContexts


class Runtime:
    def __init__(self, config, *, executable: str = "") -> None:
        self.config = config
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Future | None = None
        self.exit_code = 0
        self.listeners: Listeners | None = None
        self.timer: JobTimer | None = None
        self.cron: Cron | None = None
        self.tls = TlsContexts(config)
        announce_ip = _announce_ip(config.bind)
        node_id, records = load_identity(config.cluster_config_file, config.port, announce_ip)
        self.node = self._make_node(node_id)
        self.server = ServerState(self.node, config, executable=executable,
                                  config_file=config.config_file or "")
        self.server.feed_monitors = MonitorFeed(self.server).feed
        self.server.port = config.port
        self.server.set_requirepass(config.requirepass)
        self.server.announce_ip = announce_ip
        self.cluster = ClusterService(self.node, config, records, announce_ip, self.tls,
                                      self._apply_effects)
        self.persistence = PersistenceService(self.node, config, self.server,
                                              lambda: self.stopping)
        self.server.attach_services(self.cluster, self.persistence)
        self.node.bus_out.on_frames = self.server.output_due
        self.effects = EffectInterpreter(self.node, self.server, self.request_shutdown)
        self.http = HttpEndpoint(self.server, config)
        self._watch_config()

    def _make_node(self, node_id: bytes) -> Node:
        config = self.config
        node = Node(node_id)
        node.maxmemory = config.maxmemory
        node.evict_jobs = config.maxmemory_policy == "acks"
        node.healing.set_enabled(config.rereplicate)
        node.dedup.max_keys = config.dedup_max_keys
        return node

    def _watch_config(self) -> None:
        """The settings CONFIG SET may change that parts made here follow."""
        config, server, node = self.config, self.server, self.node
        config.on_change("loglevel", log.set_level)
        config.on_change("requirepass", server.set_requirepass)
        config.on_change("maxmemory", self._set_maxmemory)
        config.on_change("maxmemory-policy",
                         lambda value: setattr(node, "evict_jobs", value == "acks"))
        config.on_change("rereplicate", node.healing.set_enabled)
        config.on_change("dedup-max-keys", lambda value: setattr(node.dedup, "max_keys", value))
        for name in ("tls-cert-file", "tls-key-file", "tls-ca-cert-file"):
            config.on_change(name, self.tls.reload)

    def _set_maxmemory(self, limit: int) -> None:
        """A lower limit takes effect at once, as in Disque's CONFIG SET."""
        self.node.maxmemory = limit
        self.server.free_memory()

    def _apply_effects(self) -> None:
        """What the cluster service calls after a message or a view change
        (the interpreter is made after the services it drives)."""
        self.effects.apply()

    def _new_connection(self) -> ClientConnection:
        return ClientConnection(self.server, self.effects)

    # ------------------------------------------------------------ start-up

    async def start(self) -> None:
        loop = self.loop = asyncio.get_running_loop()
        loop.set_exception_handler(_log_loop_error)
        self.server.call_soon = loop.call_soon     # replies leave at the turn's end
        config = self.config
        if not (config.port or config.tls_port or config.unixsocket):
            raise StartupError("Configured to not listen anywhere, exiting.")
        self.cluster.check_port(config.port or config.tls_port)
        self.tls.load()              # before the AOF: a bad TLS file fails at once
        self._stopped = loop.create_future()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_shutdown, "signal")
        # Clients are served while the AOF loads, as by Disque: INFO shows
        # the load, most commands get -LOADING (persistence_service.py).
        self.persistence.begin_loading()
        try:
            self.listeners = Listeners(loop, config, self._new_connection, self.tls.listener)
            self.server.port = await self.listeners.open()
            await self.http.start()
            await self.persistence.load_and_open(loop)
        except LoadStopped:
            self.persistence.end_loading()
            log.warning("The AOF load was stopped by the shutdown: the file is as it was")
            return
        except BaseException:
            # A refused start (a damaged AOF): until the process exits, PING
            # still gets -LOADING, never the fast path's PONG, and no new
            # client connects; a health check must not see this node up.
            if self.listeners is not None:
                self.listeners.close()
            raise
        self.persistence.end_loading()
        self.cluster.choose_start_epoch(self.persistence.loaded_from_aof,
                                        whole=not self.persistence.dropped_torn_tail)
        await self.cluster.start(config.bind or [None], self.server.port)
        tenure_survivors()
        self.timer = JobTimer(loop, self.node, self.server, self.effects)
        self.timer.start()
        self.cron = Cron(loop, config, self.server, self.node, self.persistence)
        self.cron.start()
        log.notice("Server started, Disque version %s (disque-py)", DISQUE_VERSION)
        log.notice("The server is now ready to accept connections on port %d", self.server.port)
        if config.tls_port:
            log.notice("TLS clients are accepted on port %d", config.tls_port)

    async def run(self, on_ready=None) -> int:
        """Start, call on_ready() once listening (a daemon tells the process
        that started it), then serve until shutdown; the exit code."""
        try:
            await self.start()
        except StartupError as error:
            log.warning("%s", error)
            await self.http.stop()
            return 1
        if on_ready is not None and not self.stopping:
            on_ready()
        await self._stopped
        await self.http.stop()
        return self.exit_code

    # ------------------------------------------------------------ shutdown

    @property
    def stopping(self) -> bool:
        return self._stopped is not None and self._stopped.done()

    def request_shutdown(self, reason: str, session=None) -> None:
        """Stop: make the AOF durable (rewriting it for REWRITE-AOF), close
        everything, exit 0. If the AOF cannot be made durable, the client
        that asked is told and the server stays up."""
        if self._stopped is None or self._stopped.done():
            return
        log.warning("User requested shutdown... (%s)", reason)
        try:
            self.persistence.shutdown(rewrite=reason == "rewrite-aof")
        except OSError as error:
            log.warning("Error trying to shut down: the AOF could not be written: %s",
                        error.strerror)
            if session is not None and session.conn is not None:
                session.conn.send(CommandError(SHUTDOWN_FAILED).wire())
            return
        if self.listeners is not None:
            self.listeners.close()
        self.cluster.stop()
        for client in list(self.server.clients.values()):
            if client.conn is not None:
                client.conn.close()
        for clock in (self.timer, self.cron):
            if clock is not None:
                clock.stop()
        self._remove_pidfile()
        log.warning("Disque is now ready to exit, bye bye...")
        self._stopped.set_result(None)

    def _remove_pidfile(self) -> None:
        pidfile = self.config.pidfile
        if self.config.daemonize and pidfile:
            try:
                os.unlink(pidfile)
            except OSError:
                pass


def _log_loop_error(loop, context: dict) -> None:
    """Errors escaping callbacks go to the server log, with their traceback."""
    error = context.get("exception")
    detail = "".join(traceback.format_exception(error)) if error else ""
    log.warning("Unexpected error: %s\n%s", context.get("message", ""), detail)


def _announce_ip(binds: list[str]) -> str:
    for address in binds or []:
        if address not in ("0.0.0.0", "::", "*", ""):
            return address
    return ""


def run_server(config, executable: str = "", on_ready=None) -> int:
    """Run until shutdown; the process exit code. on_ready() is called once
    the node listens."""
    import uvloop
    try:
        runtime = Runtime(config, executable=executable or sys.argv[0])
    except StartupError as error:       # a damaged nodes.conf: before anything listens
        log.warning("%s", error)
        return 1
    return uvloop.run(runtime.run(on_ready))
