"""Reply markers a handler returns when it cannot answer yet."""

from __future__ import annotations

from typing import NamedTuple

from disque_py.resp import Raw


class Park(NamedTuple):
    """The client waits; the core will answer it through an Unblock effect.

    Until then the connection runs none of the client's later commands, as
    a blocked Disque client would not, with one exception: when `overlaps`
    (ADDJOB waiting for its copies), the ADDJOBs right behind it in the
    pipeline run too, so a pipelined producer waits for one replication
    round trip per batch instead of one per job. Replies keep their order.
    """

    waiter: object
    overlaps: bool = False



# Nothing to write now: SHUTDOWN (answered by the runtime only if it fails),
# MONITOR sent twice (Disque stays silent).
NO_REPLY = Raw(b"")
