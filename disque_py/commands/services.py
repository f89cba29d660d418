"""What command handlers (and the web plug-in) may ask of the server's
services, declared: ClusterControl and PersistenceControl.

A handler gets the ServerState (server/state.py), whose `cluster` and
`persistence` are the server layer's ClusterService and PersistenceService
(None until the runtime attaches them, as in unit tests). This module is
the whole of what a handler may use of them: the commands layer sits below
the server layer and imports none of it, so the interface is written here,
and tests/unit/test_layers.py checks that both services provide every
member. A new need is a new member here first.
"""

from __future__ import annotations

from typing import Any, Protocol


class ClusterControl(Protocol):
    """CLUSTER MEET, FORGET, RESET, LEAVING, SAVECONFIG, INFO and NODES;
    HELLO; DEBUG NODES-CONF-FAULT."""

    membership: Any          # cluster/membership.py's Membership: the nodes as seen here
    save_faults: Any         # base/disk_faults.py's DiskFaults of nodes.conf (the test seam)

    def meet(self, host: str, port: int) -> bool:
        """Start a handshake with the node at host:port; False for a bad address."""

    def forget(self, node) -> None:
        """Forget a node (CLUSTER FORGET)."""

    def reset(self, hard: bool) -> None:
        """CLUSTER RESET SOFT or HARD."""

    def set_leaving(self, leaving: bool) -> None:
        """CLUSTER LEAVING yes|no."""

    def save_config(self) -> None:
        """Write nodes.conf now; OSError if it cannot be written."""

    def info_fields(self) -> list[tuple[str, object]]:
        """CLUSTER INFO's (and INFO cluster's) fields."""


class PersistenceControl(Protocol):
    """LOADJOB, BGREWRITEAOF, -MISCONF, DEBUG AOF-FAULT; INFO persistence;
    /readyz and /metrics."""

    writer: Any              # persistence/aof.py's AofWriter while the AOF is on, else None
    accepting: bool          # False while the AOF cannot take records (-MISCONF)
    load_progress: Any       # persistence/progress.py's ProgressMeter while the AOF loads

    def load_job(self, session, argv: list[bytes]):
        """LOADJOB, from the AOF loader's session only; its reply value."""

    def start_rewrite(self) -> bool:
        """Start a background AOF rewrite; False if it cannot start."""

    def info(self) -> list[tuple[str, object]]:
        """INFO persistence's fields."""
