"""The running server: wires config, core, listeners and timers together.

The runtime owns everything with a side effect. It carries out the core's
effects (answers parked clients; confirms copies and acks to peers only
once the AOF has them), runs the job timers, runs the cron at
`hz` (ops/sec samples, idle queues, idle clients, memory peak), closes
clients a command asked to kill, and shuts down cleanly on SHUTDOWN,
SIGTERM or SIGINT (listeners closed, pidfile removed, exit code 0).

Start-up: the listeners open, then the AOF loads (clients get -LOADING
meanwhile, INFO shows the load: persistence_service.py), then the cluster
bus starts and the timers run.

Listeners: `port` (plain; 0 for none, as in Disque), `tls-port` (TLS,
with the contexts server/tls.py builds from the tls-* directives, read
again on CONFIG SET of a TLS file) and `unixsocket`, on every `bind`
address. The plain port runs no TLS code.

Timers: the core reports its next due time; we sleep until then but never
more than TIMER_MAX_SLEEP_MS, so a deadline set by a command that arrives
meanwhile is honoured within that bound. When more jobs are due than one
slice handles, the next slice runs on the next loop turn, after I/O.

Garbage collection: jobs are acyclic by design (the one cycle, job <->
awake bucket, is cut whenever a job leaves the schedule), so the cron moves
survivors into gc's permanent generation; full collections then never walk
millions of jobs and stall the server. Frozen objects are never collected,
so each cron first collects what is not frozen yet (what was allocated
since the last cron, cheap): cyclic garbage made meanwhile, such as a
raised exception and its frames, is freed rather than kept for good.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
import time
import traceback

from disque_py import DISQUE_VERSION
from disque_py.base import log
from disque_py.formats.bus import DELJOB, GOTACK, GOTJOB
from disque_py.commands.queues import render_outcome
from disque_py.base.effects import AofDedup, AofDelJob, AofLoadJob, AofUndedup, ToPeer, Unblock
from disque_py.node.node import Node
from disque_py.base.errors import CommandError
from disque_py.server.cluster_service import ClusterService, load_identity
from disque_py.monitoring.latency import JOBS_PROCESSING
from disque_py.persistence.aof import ON as AOF_ON
from disque_py.server.persistence_service import LoadStopped, PersistenceService, StartupError
from disque_py.server import tls
from disque_py.server.protocol import ClientConnection
from disque_py.server.tls_connection import TlsClientProtocol
from disque_py.server.state import ServerState
from disque_py.web.endpoint import HttpEndpoint
from disque_py.base.replies import SHUTDOWN_FAILED

TIMER_MAX_SLEEP_MS = 10
# Messages telling peers what this node's AOF must already hold: its copy
# (GOTJOB), its copy's ack (GOTACK), or, ending a collection, that every
# copy is acked and may go (DELJOB; also sent best effort by FASTACK and
# abandoned ADDJOBs, which lose nothing by waiting). See confirm().
CONFIRMATIONS = (GOTJOB, GOTACK, DELJOB)
TIMER_MIN_SLEEP_MS = 1


class Runtime:
    def __init__(self, config, *, executable: str = "") -> None:
        self.config = config
        self.loop: asyncio.AbstractEventLoop | None = None
        self.listeners: list = []
        self._timer = None
        self._timer_due = 0.0          # loop time the timer was set for
        self._cron = None
        self._cron_runs = 0
        self._stopped: asyncio.Future | None = None
        self.exit_code = 0
        # TLS (see _load_tls): the client listener's context, the one new
        # TLS clients get (they differ after a CONFIG SET of a TLS file), and
        # (server, client) contexts for the cluster bus when tls-cluster is yes.
        self._tls_listener = None
        self._tls_current = None
        self.bus_tls = None
        announce_ip = _announce_ip(config["bind"])
        node_id, records = load_identity(config["cluster-config-file"], config["port"],
                                         announce_ip)
        self.node = Node(node_id)
        self.node.maxmemory = config["maxmemory"]
        self.node.evict_jobs = config["maxmemory-policy"] == "acks"
        self.node.set_rereplicate(config["rereplicate"])
        self.node.dedup.max_keys = config["dedup-max-keys"]
        self.server = ServerState(self.node, config, executable=executable,
                                  config_file=config.config_file or "")
        self.server.feed_monitors = self.feed_monitors
        self.server.port = config["port"]
        self.server.set_requirepass(config["requirepass"])
        self.server.announce_ip = announce_ip
        self.cluster = ClusterService(self, self.node, config, records, announce_ip)
        self.server.cluster = self.cluster
        self.persistence = PersistenceService(self, self.node, config, self.server)
        self.http = HttpEndpoint(self.server, config)
        self.server.persistence = self.persistence
        self.server.persistence_info = self.persistence.info
        self.server.extra_info_sections["cluster"] = (
            "Cluster", lambda srv: self.cluster.info_fields())
        self._watch_config()

    def _watch_config(self) -> None:
        config, server, node = self.config, self.server, self.node
        config.on_change("loglevel", log.set_level)
        config.on_change("requirepass", server.set_requirepass)
        config.on_change("maxmemory", self._set_maxmemory)
        config.on_change("maxmemory-policy",
                         lambda value: setattr(node, "evict_jobs", value == "acks"))
        config.on_change("rereplicate", node.set_rereplicate)
        config.on_change("dedup-max-keys", lambda value: setattr(node.dedup, "max_keys", value))
        for name in ("tls-cert-file", "tls-key-file", "tls-ca-cert-file"):
            config.on_change(name, self._reload_tls)

    def _set_maxmemory(self, limit: int) -> None:
        """A lower limit takes effect at once, as in Disque's CONFIG SET."""
        self.node.maxmemory = limit
        self.server.free_memory()

    # ------------------------------------------------------------ start-up

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.loop.set_exception_handler(_log_loop_error)
        self.server.call_soon = self.loop.call_soon     # replies leave at the turn's end
        config = self.config
        if not (config["port"] or config["tls-port"] or config["unixsocket"]):
            raise StartupError("Configured to not listen anywhere, exiting.")
        self.cluster.check_port(config["port"] or config["tls-port"])
        self._load_tls()             # before the AOF: a bad TLS file fails at once
        self._stopped = self.loop.create_future()
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.loop.add_signal_handler(sig, self.request_shutdown, "signal")
        # Clients are served while the AOF loads, as by Disque: INFO shows
        # the load, most commands get -LOADING (persistence_service.py).
        self.persistence.begin_loading()
        try:
            await self._listen(config)
            await self.persistence.load_and_open(self.loop)
        except LoadStopped:
            log.warning("The AOF load was stopped by the shutdown: the file is as it was")
            return
        finally:
            self.persistence.end_loading()
        self.cluster.choose_start_epoch(self.persistence.loaded_from_aof)
        await self.cluster.start(config["bind"] or [None], self.server.port)
        _tenure_survivors()
        self._schedule_timer(0)
        self._cron = self.loop.call_later(1 / config["hz"], self._run_cron)
        log.notice("Server started, Disque version %s (disque-py)", DISQUE_VERSION)
        log.notice("The server is now ready to accept connections on port %d", self.server.port)
        if config["tls-port"]:
            log.notice("TLS clients are accepted on port %d", config["tls-port"])

    async def _listen(self, config) -> None:
        # `port 0` listens on no TCP port, as in Disque; `tls-port` adds a TLS one.
        for port, context, factory in (
                (config["port"], None, lambda: ClientConnection(self)),
                (config["tls-port"], self._tls_listener,
                 lambda: TlsClientProtocol(ClientConnection(self)))):
            for address in (config["bind"] or [None]) if port else ():
                server = await self.loop.create_server(
                    factory, host=address, port=port,
                    backlog=config["tcp-backlog"], reuse_address=True, ssl=context)
                self.listeners.append(server)
        if config["unixsocket"]:
            await self._listen_unix(config["unixsocket"], config["unixsocketperm"])
        self.server.port = config["port"] or config["tls-port"]
        await self.http.start()

    def _load_tls(self) -> None:
        """Build the TLS contexts the configuration asks for; StartupError
        (naming the directive and file) if they cannot be."""
        config = self.config
        if config["tls-port"] and config["tls-port"] == config["port"]:
            raise StartupError(f"tls-port {config['tls-port']} is also the plain port: "
                               "give TLS clients a port of their own")
        try:
            self._build_tls()
        except tls.TlsConfigError as error:
            raise StartupError(f"Failed to configure TLS: {error}") from None
        listener = self._tls_listener = self._tls_current
        if listener is not None:
            # A context cannot be swapped under a listening server; instead,
            # each handshake is moved, before the certificate is chosen, to
            # the newest context (_reload_tls). Verification mode and
            # protocol versions stay the listener's: they cannot be SET.
            listener.sni_callback = self._use_current_tls

    def _build_tls(self) -> None:
        config = self.config
        client = tls.server_context(config) if config["tls-port"] else None
        bus = (tls.bus_server_context(config), tls.bus_client_context(config)) \
            if config["tls-cluster"] else None
        self._tls_current, self.bus_tls = client, bus

    def _reload_tls(self, _value) -> None:
        """CONFIG SET of a TLS file reads every TLS file again: new
        connections (clients and bus) get them, open ones keep theirs. If one
        cannot be loaded the SET is refused and the old contexts stay."""
        try:
            self._build_tls()
        except tls.TlsConfigError as error:
            raise CommandError(f"Unable to update the TLS configuration: {error}") from None

    def _use_current_tls(self, ssl_object, server_name, listener) -> None:
        current = self._tls_current
        if current is not listener:
            ssl_object.context = current

    async def _listen_unix(self, path: str, permissions: int) -> None:
        if os.path.exists(path):
            os.unlink(path)
        server = await self.loop.create_unix_server(lambda: ClientConnection(self), path=path)
        if permissions:
            os.chmod(path, permissions)
        self.listeners.append(server)

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

    # ------------------------------------------------------------- effects

    def after_commands(self) -> None:
        """Carry out what the last batch of commands asked for."""
        server = self.server
        # The load's effects wait until the node has started (its cluster with it).
        if self.node.effects and not server.loading:
            self.apply_effects()
        if server.kills:
            for session in server.kills:
                if session.conn is not None:
                    session.conn.close()
            server.kills.clear()
        if server.shutdown_request is not None:
            mode, session = server.shutdown_request
            server.shutdown_request = None
            self.request_shutdown(mode, session)

    def apply_effects(self) -> None:
        post = self.cluster.post
        writer = self.persistence.writer
        gated = writer is not None and writer.state == AOF_ON   # see confirm()
        unblocks = []
        confirmations = None
        for effect in self.node.take_effects():
            kind = type(effect)
            if kind is ToPeer:
                if gated and effect.kind in CONFIRMATIONS:
                    if confirmations is None:
                        confirmations = []
                    confirmations.append(effect)
                else:
                    post(effect)
            elif kind is AofLoadJob:
                self.persistence.append_job(effect.job)
            elif kind is AofDelJob:
                self.persistence.append_del(effect.job_id)
            elif kind is AofDedup or kind is AofUndedup:
                self.persistence.append_dedup(effect)
            elif kind is Unblock:
                unblocks.append(effect)
        if confirmations is not None:
            self.confirm(writer, confirmations)
        # Answers go out after the AOF records of the same batch are queued,
        # so that appendfsync always holds them until those are on disk; a
        # client's answers of one batch leave in one write.
        resumed = {}
        for effect in unblocks:
            waiter = effect.waiter
            session = waiter.client
            conn = session.conn
            if conn is not None:
                if conn.resume(waiter, render_outcome(waiter, effect.outcome)):
                    resumed[conn] = None
            else:
                session.waiting.pop(waiter, None)
        for conn in resumed:
            conn.flush_resumed()

    def confirm(self, writer, confirmations: list) -> None:
        """GOTJOB tells a producer that a copy is safe here (and the producer
        then tells its client); GOTACK tells the node collecting an ack that
        the copy here is gone for good, and DELJOB that every copy is (the
        others then forget the ack). Like a client's reply they leave only
        once the AOF records queued so far are written (appendfsync always:
        fsynced, as Disque fsyncs before it writes to any socket): a kill -9
        never takes a copy that was counted, nor brings back one whose ack
        was collected. While the AOF cannot be written none leaves: peers
        ask again, or ask another node (Disque exits on such an error under
        appendfsync always, so nothing it confirmed is undone either)."""
        post = self.cluster.post

        def send(ok: bool = True, reason: str = "") -> None:
            if ok and writer.accepting:
                for item in confirmations:
                    post(item)

        if writer.accepting and not writer.hold_reply(send):
            send()

    def feed_monitors(self, session, argv: list[bytes]) -> None:
        now = time.time()
        line = b"+%d.%06d [%s] %b\r\n" % (
            int(now), int(now * 1_000_000) % 1_000_000, session.addr.encode(),
            b" ".join(_quote(arg) for arg in argv))
        for monitor in self.server.monitors:
            if monitor.conn is not None:
                monitor.conn.send(line)

    # -------------------------------------------------------------- timers

    def _schedule_timer(self, delay_ms: float) -> None:
        self._timer_due = self.loop.time() + delay_ms / 1000
        self._timer = self.loop.call_later(delay_ms / 1000, self._on_timer)

    def _on_timer(self) -> None:
        # How much later than asked the loop ran us: due jobs wait that long.
        self.server.timer_lateness.observe(max(self.loop.time() - self._timer_due, 0.0))
        node = self.node
        monitor = self.server.latency
        began = monitor.begin()
        more = node.tick()
        monitor.observe_since(JOBS_PROCESSING, began)
        if node.effects:
            self.apply_effects()
        if more:
            self._timer_due = self.loop.time()
            self._timer = self.loop.call_soon(self._on_timer)
            return
        due = node.next_wakeup()
        if due is None:
            delay = TIMER_MAX_SLEEP_MS
        else:
            delay = min(max(due - node.clock.now_ms(), TIMER_MIN_SLEEP_MS), TIMER_MAX_SLEEP_MS)
        self._schedule_timer(delay)

    def _run_cron(self) -> None:
        server, config = self.server, self.config
        self._cron_runs += 1
        if self._cron_runs % max(config["hz"], 1) == 0:
            self.persistence.every_second()
        server.stats.sample_ops()
        self.node.evict_idle_queues()
        self._close_idle_clients(config["timeout"])
        _tenure_survivors()
        self._cron = self.loop.call_later(1 / max(config["hz"], 1), self._run_cron)

    def _close_idle_clients(self, max_idle_s: int) -> None:
        if not max_idle_s:
            return
        limit = time.monotonic() - max_idle_s
        for session in list(self.server.clients.values()):
            if session.last_interaction < limit and not session.waiting \
                    and not session.monitor and session.conn is not None:
                session.conn.close()

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
        for listener in self.listeners:
            listener.close()
        self.cluster.stop()
        for client in list(self.server.clients.values()):
            if client.conn is not None:
                client.conn.close()
        if self._timer is not None:
            self._timer.cancel()
        if self._cron is not None:
            self._cron.cancel()
        pidfile = self.config["pidfile"]
        if self.config["daemonize"] and pidfile:
            try:
                os.unlink(pidfile)
            except OSError:
                pass
        log.warning("Disque is now ready to exit, bye bye...")
        self._stopped.set_result(None)


def _tenure_survivors() -> None:
    """Free the cyclic garbage made since the last call (a collection walks
    only unfrozen objects), then freeze what survived."""
    gc.collect()
    gc.freeze()


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


def _quote(arg: bytes) -> bytes:
    """An argument as MONITOR shows it: quoted, with C-style escapes."""
    out = bytearray(b'"')
    for byte in arg:
        if byte in (0x5C, 0x22):
            out += b"\\" + bytes((byte,))
        elif byte == 10:
            out += b"\\n"
        elif byte == 13:
            out += b"\\r"
        elif byte == 9:
            out += b"\\t"
        elif byte == 7:
            out += b"\\a"
        elif byte == 8:
            out += b"\\b"
        elif 32 <= byte < 127:
            out.append(byte)
        else:
            out += b"\\x%02x" % byte
    out += b'"'
    return bytes(out)


def run_server(config, executable: str = "", on_ready=None) -> int:
    """Run until shutdown; the process exit code. on_ready() is called once
    the node listens."""
    import uvloop
    runtime = Runtime(config, executable=executable or sys.argv[0])
    return uvloop.run(runtime.run(on_ready))
