"""The typed keys the node's web application is shared through.

SERVER_KEY holds the node's ServerState (server/state.py): the same object
every RESP command handler gets, and the way in to the rest of the node
(server.node, server.config, server.persistence, server.cluster). Every
route, this package's and the dashboard's, reads it from the application:
`request.app[SERVER_KEY]`.
"""

from __future__ import annotations

from aiohttp import web

from disque_py.server.state import ServerState

SERVER_KEY = web.AppKey("disque_server", ServerState)
