"""The typed keys the node's web application is shared through.

SERVER_KEY holds the node's ServerState (server/state.py): the same object
every RESP command handler gets, and the way in to the rest of the node
(server.node, server.config, and the services commands/services.py
declares: server.persistence, server.cluster). Every route, this package's
and the dashboard's, reads it from the application:
`request.app[SERVER_KEY]`. The web plug-in is above the commands layer and
below the server layer: it is handed the ServerState by the HTTP endpoint
(server/http.py) and never imports the server layer.
"""

from __future__ import annotations

from aiohttp import web

SERVER_KEY = web.AppKey("disque_server", object)
