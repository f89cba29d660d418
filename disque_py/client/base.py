"""What the blocking and the asyncio client share, whatever their I/O:
how one is made (a URL, or another client's settings), its routing state,
and the rule for how long a blocked call's reply may take."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from typing_extensions import Self

from disque_py.client import commands
from disque_py.client.routing import RETRY_AFTER_S, SWITCH_AFTER_JOBS, Address, Routes
from disque_py.client.serializers import Serializer, serializer_for
from disque_py.client.settings import Settings, settings_from


class ClientBase:
    """A client's settings, serializer and routes; the I/O is the subclass's."""

    def __init__(self, url: str | None = None, *, nodes: Sequence[str | Address] | None = None,
                 serializer: str | Serializer | None = None,
                 retry_after: float = RETRY_AFTER_S, switch_after: int = SWITCH_AFTER_JOBS,
                 clock: Callable[[], float] = time.monotonic, **options: Any) -> None:
        settings = settings_from(url, nodes, options)
        settings.retry_after, settings.switch_after = retry_after, switch_after
        self._setup(settings, serializer_for(serializer), clock)

    @classmethod
    def from_settings(cls, settings: Settings, serializer: str | Serializer | None = None,
                      clock: Callable[[], float] = time.monotonic) -> Self:
        """A client of the nodes another client was made for."""
        client = cls.__new__(cls)
        client._setup(settings, serializer_for(serializer), clock)
        return client

    def _setup(self, settings: Settings, codec: Serializer, clock: Callable[[], float]) -> None:
        self.settings = settings
        self.codec = codec
        self.routes = Routes(settings.addresses, clock, settings.retry_after,
                             settings.switch_after)
        self._discovered = False


def blocking_wait_s(call: commands.Call[Any], socket_timeout: float | None) -> float | None:
    """The read timeout of a call the server may hold back: the socket
    timeout plus the call's own wait; None (no timeout) when it waits for
    ever or the socket has none."""
    if not call.blocks_ms or socket_timeout is None:
        return None
    return socket_timeout + call.blocks_ms / 1000
