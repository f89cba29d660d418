"""Where clients connect: the plain port, the TLS port and the Unix socket.

`port` (plain; 0 for none, as in Disque), `tls-port` (TLS, with the
context of server/tls.py's TlsContexts) and `unixsocket`, on every `bind`
address (all interfaces when there is none). The plain port runs no TLS
code: a TLS client's connection is the same ClientConnection behind the
TLS adapter (tls_connection.py).
"""

from __future__ import annotations

import os
from typing import Callable

from disque_py.server.tls_connection import TlsClientProtocol


class Listeners:
    """The listening sockets of one server."""

    def __init__(self, loop, config, new_connection: Callable, tls_context) -> None:
        """`new_connection()`: a ClientConnection for an accepted client."""
        self.loop = loop
        self.config = config
        self.new_connection = new_connection
        self.tls_context = tls_context
        self.servers: list = []

    async def open(self) -> int:
        """Listen everywhere the configuration says; the client port INFO
        and the cluster show (the plain one, else the TLS one)."""
        config, new_connection = self.config, self.new_connection
        # `port 0` listens on no TCP port, as in Disque; `tls-port` adds a TLS one.
        for port, context, factory in (
                (config.port, None, new_connection),
                (config.tls_port, self.tls_context,
                 lambda: TlsClientProtocol(new_connection()))):
            for address in (config.bind or [None]) if port else ():
                server = await self.loop.create_server(
                    factory, host=address, port=port,
                    backlog=config.tcp_backlog, reuse_address=True, ssl=context)
                self.servers.append(server)
        if config.unixsocket:
            await self._open_unix(config.unixsocket, config.unixsocketperm)
        return config.port or config.tls_port

    async def _open_unix(self, path: str, permissions: int) -> None:
        if os.path.exists(path):
            os.unlink(path)
        server = await self.loop.create_unix_server(self.new_connection, path=path)
        if permissions:
            os.chmod(path, permissions)
        self.servers.append(server)

    def close(self) -> None:
        for server in self.servers:
            server.close()
