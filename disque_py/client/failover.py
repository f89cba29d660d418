"""What a failed call does next: the one rule both clients follow.

A call tries the nodes in turn, each at most once (Routes.known()):
- a connection that cannot be made: the next node (nothing was sent);
  once every node was tried, NoNodeError;
- an answer that refuses the command because of the node (-LEAVING,
  -LOADING: it did nothing): the next node; any other error answer is
  the caller's, as its Disque class;
- a connection lost after the call was sent: the next node only when the
  call is safe to send twice (Call.retry_safe); else the loss is raised.

Each method answers None to go on with the next node, or the exception to
raise (the caller raises it from the error it caught). No I/O here.
"""

from __future__ import annotations

from redis.exceptions import RedisError

from disque_py.client.errors import MOVE_ON, translate
from disque_py.client.routing import Routes


class Failover:
    """One call's failures so far, and what the next one means."""

    def __init__(self, routes: Routes, retry_safe: bool) -> None:
        self.routes = routes
        self.retry_safe = retry_safe
        self.failures = 0

    def unreachable(self, error: BaseException) -> BaseException | None:
        """No connection could be made to the node."""
        return self._next_node()

    def refused(self, error: RedisError) -> BaseException | None:
        """The node answered with an error."""
        failure = translate(error)
        if isinstance(failure, MOVE_ON) and self._next_node() is None:
            return None
        return failure

    def lost(self, error: BaseException) -> BaseException | None:
        """The connection dropped after the call was sent."""
        if not self.retry_safe:
            return error
        return self._next_node()

    def _next_node(self) -> BaseException | None:
        self.failures += 1
        if self.failures >= self.routes.known():
            return self.routes.no_node_error()
        return None
