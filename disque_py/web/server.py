"""The node's HTTP endpoint: aiohttp, served in the node's own event loop.

This module owns the aiohttp application and its listeners; server/http.py
starts them (listen()) when `http-port` is set and stops them at shutdown.
`http-bind` gives the addresses, and when unset the node's `bind` ones are
used (every interface when those are unset too). No thread serves HTTP: a
request runs on the loop between two batches of RESP commands, so every
route must be quick or yield to the loop.

Routes here: /metrics (web/metrics.py), /healthz and /readyz
(web/health.py). Protected mode does not refuse them: they change nothing,
and scrapers and orchestrators probe from other hosts (docs/monitoring.md:
"HTTP endpoint").

Contract with the dashboard (disque_py/web/dashboard/, optional): when
that package can be imported, build_app() calls
`disque_py.web.dashboard.setup(app: web.Application, server) -> None` once,
after this module's routes are added and before the application starts.
`server` is the node's ServerState (server/state.py), the object every RESP
command handler gets; it is also stored as app[SERVER_KEY] (web/keys.py),
where every route reads it. setup() may add routes, middlewares and
on_startup/on_cleanup hooks; the cleanup hooks run when the node stops.
It returns the path of the dashboard's first page ("/dashboard/"), which
the start-up log line names as a URL a browser on this host can open.
"""

from __future__ import annotations

import importlib.util

from aiohttp import web

from disque_py.base import log
from disque_py.base.errors import StartupError
from disque_py.web import health, metrics
from disque_py.web.keys import SERVER_KEY

DASHBOARD_MODULE = "disque_py.web.dashboard"
DASHBOARD_PATH_KEY = web.AppKey("dashboard_path", str)
# Seconds a request still running at shutdown may take to finish.
SHUTDOWN_GRACE_S = 1.0
# What a browser on this host connects to for a listener on every address.
EVERY_ADDRESS_HOSTS = {None: "localhost", "0.0.0.0": "127.0.0.1", "::": "[::1]"}


def build_app(server) -> web.Application:
    """The application: our routes, then the dashboard's if it is installed
    (its path in app[DASHBOARD_PATH_KEY])."""
    app = web.Application()
    app[SERVER_KEY] = server
    metrics.setup(app, server)
    health.setup(app)
    spec = importlib.util.find_spec(DASHBOARD_MODULE)
    if spec is not None and spec.origin is not None:      # a package, not a bare directory
        app[DASHBOARD_PATH_KEY] = importlib.import_module(DASHBOARD_MODULE).setup(app, server)
    return app


def local_url(address: str | None, port: int, path: str) -> str:
    """The URL of `path` on a listener at address:port, as a browser on this
    host would open it (None is every address)."""
    host = EVERY_ADDRESS_HOSTS.get(address)
    if host is None:
        host = f"[{address}]" if ":" in address else address
    return f"http://{host}:{port}{path}"


def http_addresses(config) -> list[str | None]:
    """Where to listen: http-bind, else the node's bind, else everywhere (None)."""
    return list(config.http_bind or config.bind) or [None]


async def listen(server, config) -> web.AppRunner:
    """Serve the application on every address; StartupError (the runner
    cleaned up) if one cannot be had."""
    port = config.http_port
    app = build_app(server)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_GRACE_S)
    await runner.setup()
    addresses = http_addresses(config)
    for address in addresses:
        site = web.TCPSite(runner, address, port, reuse_address=True,
                           backlog=config.tcp_backlog)
        try:
            await site.start()
        except OSError as error:
            await runner.cleanup()
            raise StartupError(f"Could not listen for HTTP on {address or '*'}:{port}: "
                               f"{error.strerror or error} "
                               "(choose another with --http-port N, 0 for none)") from None
    dashboard = ""
    if DASHBOARD_PATH_KEY in app:
        url = local_url(addresses[0], port, app[DASHBOARD_PATH_KEY])
        dashboard = f"; the dashboard is at {url}"
    log.notice("HTTP (/metrics, /healthz, /readyz) is served on port %d%s", port, dashboard)
    return runner
