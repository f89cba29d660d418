"""The client matrix the client's tests run over, and the view that lets
one test body drive the blocking and the asyncio client alike.

A flavour is (client kind, RESP version, reply parser): the blocking
`Client` or the `AsyncClient`, RESP2 or RESP3, redis-py's pure-Python
parser or hiredis. redis-py 8 picks hiredis by default when it is
installed, and reads RESP3 with its Python parser only when given the
RESP3 class (the blocking connection swaps a RESP2 parser for RESP3 by
itself, the asyncio one both ways); the parser is passed explicitly so
every cell is the one its name says.

`Blocking` wraps an AsyncClient (or its pipeline): each coroutine a
method answers is run to its end on the test's event loop, each async
iterator read into a list, so a test calls `dq.add(...)` whatever the
kind. A blocking Client is used as it is.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from dataclasses import dataclass
from typing import Any

from redis._parsers import (
    _AsyncHiredisParser, _AsyncRESP2Parser, _AsyncRESP3Parser, _HiredisParser, _RESP2Parser,
    _RESP3Parser,
)

from disque_py.client import AsyncClient, AsyncPipeline, Client

# (kind, protocol, hiredis) -> redis-py's parser class for that cell.
_PARSERS = {
    ("sync", 2, False): _RESP2Parser, ("sync", 3, False): _RESP3Parser,
    ("sync", 2, True): _HiredisParser, ("sync", 3, True): _HiredisParser,
    ("async", 2, False): _AsyncRESP2Parser, ("async", 3, False): _AsyncRESP3Parser,
    ("async", 2, True): _AsyncHiredisParser, ("async", 3, True): _AsyncHiredisParser,
}


@dataclass(frozen=True)
class Flavour:
    kind: str          # "sync" or "async"
    protocol: int      # 2 or 3
    hiredis: bool

    @property
    def id(self) -> str:
        return f"{self.kind}-resp{self.protocol}-{'hiredis' if self.hiredis else 'python'}"

    @property
    def parser(self) -> type:
        return _PARSERS[(self.kind, self.protocol, self.hiredis)]

    def options(self) -> dict[str, Any]:
        return {"protocol": self.protocol, "parser_class": self.parser}


FLAVOURS = [Flavour(kind, protocol, hiredis) for kind in ("sync", "async")
            for protocol in (2, 3) for hiredis in (False, True)]
KINDS = [Flavour("sync", 3, True), Flavour("async", 3, True)]     # redis-py's defaults


def unique(prefix: str = "q") -> str:
    """A queue name no other test uses (tests share one server)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class Blocking:
    """An AsyncClient or AsyncPipeline, driven from blocking test code."""

    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._target = target
        self._loop = loop

    def run(self, awaitable: Any) -> Any:
        return self._loop.run_until_complete(awaitable)

    def _settled(self, result: Any) -> Any:
        if inspect.isawaitable(result):
            result = self.run(result)
        if hasattr(result, "__aiter__"):
            return self.run(_collect(result))
        if isinstance(result, AsyncPipeline):
            return Blocking(result, self._loop)
        return result

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._target, name)
        if not callable(attribute):
            return attribute
        return lambda *args, **kwargs: self._settled(attribute(*args, **kwargs))

    def __enter__(self) -> Blocking:
        self.run(self._target.__aenter__())
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.run(self._target.__aexit__(*exc_info))


async def _collect(iterator: Any) -> list[Any]:
    return [item async for item in iterator]


def connection_in_use(client: Any) -> Any:
    """A connection of the client's pool to its current node (given back)."""
    pool = client._pools[client.routes.current]
    if isinstance(client, Blocking):
        connection = client.run(pool.get_connection())
        client.run(pool.release(connection))
    else:
        connection = pool.get_connection()
        pool.release(connection)
    return connection


class ClientMaker:
    """Makes the clients of one flavour for a test, and closes them after."""

    def __init__(self, flavour: Flavour) -> None:
        self.flavour = flavour
        self.made: list[Any] = []
        self.loops: list[asyncio.AbstractEventLoop] = []

    def __call__(self, url: str | None = None, **kwargs: Any) -> Any:
        """A client; an asyncio one on an event loop of its own, so that
        clients may be driven from several threads at once."""
        options = {**self.flavour.options(), **kwargs}
        if self.flavour.kind == "sync":
            client = Client(url, **options)
        else:
            self.loops.append(asyncio.new_event_loop())
            client = Blocking(AsyncClient(url, **options), self.loops[-1])
        self.made.append(client)
        return client

    def from_settings(self, settings: Any, **kwargs: Any) -> Any:
        """A client made by the flavour's class from another's settings."""
        if self.flavour.kind == "sync":
            client = Client.from_settings(settings, **kwargs)
        else:
            self.loops.append(asyncio.new_event_loop())
            client = Blocking(AsyncClient.from_settings(settings, **kwargs), self.loops[-1])
        self.made.append(client)
        return client

    def close(self) -> None:
        for client in self.made:
            try:
                client.close()
            except Exception:
                pass
        for loop in self.loops:
            loop.close()
