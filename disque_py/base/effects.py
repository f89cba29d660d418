"""What the node asks the outside world to do.

The node's methods (the engine's and its components') change state and
append effects to node.effects; the server layer (server/effects.py)
drains that outbox after each batch of commands and after each timer tick,
and carries the effects out (answer a parked client, send a cluster
message). AOF records are not effects: the engine notes them in the
node's AofLog (engine/aof/log.pxi), which the server writes at the end of
each loop turn. The node itself never touches a socket or a file, so a
test can call a method and look at the effects it produced.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Unblock(NamedTuple):
    """Answer a parked client: `outcome` is a domain result (see waiters.py)."""

    waiter: Any
    outcome: Any


# ------------------------------------------------------------ cluster bus

class Send(NamedTuple):
    """Send a bus message to a node, over our link to it (dropped if none)."""

    node: Any            # cluster/nodes.py's ClusterNode
    kind: int            # a formats/bus.py message type
    body: Any
    mflags: int = 0


class ReplyOn(NamedTuple):
    """Answer on the link a message arrived on (PONG to a PING)."""

    link: Any
    kind: int
    body: Any


class Connect(NamedTuple):
    """Open our link to a node's bus port; report back with `generation`."""

    node: Any
    ip: str
    port: int
    generation: int = 0


class DropLink(NamedTuple):
    """Close our link to a node (it will be reconnected by the cron)."""

    node: Any


class SaveConfig(NamedTuple):
    """The cluster view changed: rewrite nodes.conf (once per loop turn)."""


class ToPeer(NamedTuple):
    """One job-protocol item for a peer, by node ID. The cluster service
    batches consecutive items of the same kind for a peer into one frame
    per loop turn, keeping their order, and drops them if there is no link.

    item: serialized job (REPLJOB, YOURJOBS), (job ID, aux) (the job-ID
    messages), or a formats/bus.py QueueOp (NEEDJOBS, PAUSE)."""

    node_id: bytes
    kind: int
    item: Any
    mflags: int = 0
