"""The HTTP endpoint's life in the node: started with the listeners, stopped at shutdown.

The one module of the runtime that imports the web plug-in (disque_py.web:
the aiohttp application, /metrics, /healthz, /readyz, the dashboard), and
only when HTTP is on: a node with `http-port 0`, the default, opens nothing
and never even imports aiohttp or prometheus_client, so it starts as fast
as before. The runtime starts the endpoint before the AOF loads, so that
/healthz answers and /readyz says "loading" meanwhile.
"""

from __future__ import annotations

from disque_py.cluster.nodes import BUS_PORT_OFFSET
from disque_py.base.errors import StartupError


class HttpEndpoint:
    def __init__(self, server, config) -> None:
        self.server = server
        self.config = config
        self._runner = None           # aiohttp's AppRunner while serving

    async def start(self) -> None:
        """Listen as http-port and http-bind say (nothing for port 0); a port
        that cannot be had stops the start, as a client port would."""
        if not self.config.http_port:
            return
        refuse_port_clash(self.config)
        from disque_py.web.server import listen     # aiohttp: only when HTTP is on
        self._runner = await listen(self.server, self.config)

    async def stop(self) -> None:
        """Close the listeners and the open requests; cleanup hooks run."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


def refuse_port_clash(config) -> None:
    """The node's other ports would fail later, with a less clear error."""
    taken = {config.tls_port: "tls-port"}
    if config.port:
        taken.update({config.port: "port",
                      config.port + BUS_PORT_OFFSET: "the cluster bus port (port + 10000)"})
    other = taken.get(config.http_port)
    if other is not None:
        raise StartupError(f"http-port {config.http_port} is also {other}: "
                           "give HTTP a port of its own")
