"""Reply markers a handler returns when it cannot answer yet."""

from __future__ import annotations

from disque_py.resp import Raw


class Park:
    """The client waits; the core will answer it through an Unblock effect.

    Until then the connection runs none of the client's later commands, as
    a blocked Disque client would not, with one exception: when `overlaps`
    (ADDJOB waiting for its copies), the ADDJOBs right behind it in the
    pipeline run too, so a pipelined producer waits for one replication
    round trip per batch instead of one per job. Replies keep their order.
    (A plain slotted class: one is made per replicated ADDJOB, and a
    NamedTuple's constructor costs a Python-level call more.)
    """

    __slots__ = ("waiter", "overlaps")

    def __init__(self, waiter, overlaps: bool = False) -> None:
        self.waiter = waiter
        self.overlaps = overlaps



# Nothing to write now: SHUTDOWN (answered by the runtime only if it fails),
# MONITOR sent twice (Disque stays silent).
NO_REPLY = Raw(b"")
