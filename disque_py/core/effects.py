"""What the core asks the outside world to do.

Core methods change state and append effects to Node.effects; the runtime
drains that outbox after each batch of commands and after each timer tick,
and carries the effects out (answer a parked client, send a cluster message,
append to the AOF). The core itself never touches a socket or a file, so a
test can call a method and look at the effects it produced.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Unblock(NamedTuple):
    """Answer a parked client: `outcome` is a domain result (see waiters.py)."""

    waiter: Any
    outcome: Any
