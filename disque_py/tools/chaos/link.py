"""A client connection to one node that never hangs and says how it failed.

Owns the checker's view of a reply. redis-py's plain Connection (RESP2, no
response callbacks, no retries: a retried ADDJOB would add a second job the
ledger never heard of) with a socket timeout, so a paused node costs a
timeout, never a stuck thread. A failure is one of three kinds, because the
ledger treats them differently:
  NotSent   the connection could not be made: the command never left;
  NoAnswer  it was sent (or may have been) but no reply came: its effect is unknown;
  Refused   the node answered with an error reply (-NOREPL, -NOJOB, ...).
"""

from __future__ import annotations

import redis
import redis.backoff
import redis.exceptions
import redis.retry


class LinkError(Exception):
    """A command that did not get a normal reply."""


class NotSent(LinkError):
    pass


class NoAnswer(LinkError):
    pass


class Refused(LinkError):
    pass


class Link:
    """One connection to one node, reconnected on the next call after a failure."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.port = port
        self._conn = redis.Connection(
            host=host, port=port, socket_timeout=timeout, socket_connect_timeout=timeout,
            protocol=2, retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0),
            lib_name=None, lib_version=None)

    def call(self, *args):
        try:
            self._conn.connect()
        except redis.exceptions.RedisError as error:
            self._conn.disconnect()
            raise NotSent(str(error)) from None
        try:
            self._conn.send_command(*args)
            return self._conn.read_response()
        except redis.exceptions.ResponseError as error:
            raise Refused(str(error)) from None
        except (redis.exceptions.RedisError, OSError) as error:
            self._conn.disconnect()
            raise NoAnswer(f"{type(error).__name__}: {error}") from None

    def close(self) -> None:
        self._conn.disconnect()


class Links:
    """A thread's links to every node, by node index, made on first use."""

    def __init__(self, addresses: list[tuple[str, int]], timeout: float) -> None:
        self.addresses = addresses
        self.timeout = timeout
        self._links: dict[int, Link] = {}

    def __getitem__(self, index: int) -> Link:
        link = self._links.get(index)
        if link is None:
            link = self._links[index] = Link(*self.addresses[index], self.timeout)
        return link

    def call(self, index: int, *args):
        return self[index].call(*args)

    def close(self) -> None:
        for link in self._links.values():
            link.close()
        self._links.clear()
