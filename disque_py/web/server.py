"""The node's HTTP endpoint: aiohttp, served in the node's own event loop.

HttpEndpoint owns the aiohttp application and its listeners: the runtime
starts it with the client listeners (before the AOF loads, so that /healthz
answers and /readyz says "loading" meanwhile) and stops it at shutdown.
`http-port 0` (the default) opens nothing and imports no route; `http-bind`
gives the addresses, and when unset the node's `bind` ones are used (every
interface when those are unset too). No thread serves HTTP: a request runs
on the loop between two batches of RESP commands, so every route must be
quick or yield to the loop.

Routes here: /metrics (web/metrics.py), /healthz and /readyz
(web/health.py). Protected mode does not refuse them: they change nothing,
and scrapers and orchestrators probe from other hosts (README: "HTTP
endpoint").

Contract with the dashboard (disque_py/web/dashboard/, optional): when
that package can be imported, build_app() calls
`disque_py.web.dashboard.setup(app: web.Application, server) -> None` once,
after this module's routes are added and before the application starts.
`server` is the node's ServerState (server/state.py), the object every RESP
command handler gets; it is also stored as app[SERVER_KEY] (web/keys.py),
where every route reads it. setup() may add routes, middlewares and
on_startup/on_cleanup hooks; the cleanup hooks run when the node stops.
"""

from __future__ import annotations

import importlib.util

from aiohttp import web

from disque_py import log
from disque_py.cluster.membership import BUS_PORT_OFFSET
from disque_py.server.persistence_service import StartupError
from disque_py.web import health, metrics
from disque_py.web.keys import SERVER_KEY

DASHBOARD_MODULE = "disque_py.web.dashboard"
# Seconds a request still running at shutdown may take to finish.
SHUTDOWN_GRACE_S = 1.0


def build_app(server) -> web.Application:
    """The application: our routes, then the dashboard's if it is installed."""
    app = web.Application()
    app[SERVER_KEY] = server
    metrics.setup(app, server)
    health.setup(app)
    spec = importlib.util.find_spec(DASHBOARD_MODULE)
    if spec is not None and spec.origin is not None:      # a package, not a bare directory
        importlib.import_module(DASHBOARD_MODULE).setup(app, server)
    return app


def http_addresses(config) -> list[str | None]:
    """Where to listen: http-bind, else the node's bind, else everywhere (None)."""
    return list(config["http-bind"] or config["bind"]) or [None]


def _refuse_port_clash(config) -> None:
    """The node's other ports would fail later, with a less clear error."""
    taken = {config["tls-port"]: "tls-port"}
    if config["port"]:
        taken.update({config["port"]: "port",
                      config["port"] + BUS_PORT_OFFSET: "the cluster bus port (port + 10000)"})
    other = taken.get(config["http-port"])
    if other is not None:
        raise StartupError(f"http-port {config['http-port']} is also {other}: "
                           "give HTTP a port of its own")


class HttpEndpoint:
    def __init__(self, server, config) -> None:
        self.server = server
        self.config = config
        self._runner: web.AppRunner | None = None

    @property
    def port(self) -> int:
        return self.config["http-port"]

    async def start(self) -> None:
        """Listen on every address (nothing when http-port is 0); a port
        that cannot be had stops the start, as a client port would."""
        if not self.port:
            return
        _refuse_port_clash(self.config)
        runner = web.AppRunner(build_app(self.server), access_log=None,
                               shutdown_timeout=SHUTDOWN_GRACE_S)
        await runner.setup()
        self._runner = runner
        for address in http_addresses(self.config):
            site = web.TCPSite(runner, address, self.port, reuse_address=True,
                               backlog=self.config["tcp-backlog"])
            try:
                await site.start()
            except OSError as error:
                raise StartupError(f"Could not listen for HTTP on {address or '*'}:"
                                   f"{self.port}: {error.strerror or error} "
                                   "(choose another with --http-port N, 0 for none)") from None
        log.notice("HTTP (/metrics, /healthz, /readyz) is served on port %d", self.port)

    async def stop(self) -> None:
        """Close the listeners and the open requests; cleanup hooks run."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
