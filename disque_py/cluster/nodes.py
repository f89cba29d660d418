"""The cluster's nodes as this node knows them: ClusterNode, its flags, and
the bits a peer's headers say its version understands.

Flags are Disque's (PFAIL, FAIL, MYSELF, HANDSHAKE, NOADDR, MEET in gossip
and nodes.conf, LEAVING in headers); the SPEAKS_* header bits are ours,
never stored in a node's flags (so never gossiped nor written to
nodes.conf), and older nodes ignore them. membership.py keeps the table of
ClusterNodes and every rule about them.
"""

from __future__ import annotations

import ipaddress
import os

# Node flags (LEAVING travels in message headers, the rest in gossip).
PFAIL, FAIL, MYSELF, HANDSHAKE, NOADDR, MEET, LEAVING = 1, 2, 4, 8, 16, 32, 128
# Header-only bits: what the sender's version understands (never stored in a
# node's flags, so never gossiped nor written to nodes.conf). Nodes before
# these bits ignore them (on_heartbeat reads only LEAVING).
SPEAKS_EPOCH = 256    # answer my PINGs with EPOCH
SPEAKS_JOB_OPTIONS = 512   # my jobs may carry the options block (engine/model/options.pxi)
SPEAKS_PRIORITY = 1024     # ... in its version 2, with the job's PRIORITY
SPEAKS_DEDUP = 2048        # ... in its version 3, with the job's DEDUP key
HEADER_CAPABILITIES = SPEAKS_EPOCH | SPEAKS_JOB_OPTIONS | SPEAKS_PRIORITY | SPEAKS_DEDUP
# The options block's version each capability adds, newest first.
_OPTIONS_VERSIONS = ((SPEAKS_DEDUP, 3), (SPEAKS_PRIORITY, 2), (SPEAKS_JOB_OPTIONS, 1))


def options_version_read(capabilities: int) -> int:
    """The newest job options block a peer with these header bits reads
    (0: none). Each version includes the ones before it."""
    for bit, version in _OPTIONS_VERSIONS:
        if capabilities & bit:
            return version
    return 0


FLAG_NAMES = ((MYSELF, "myself"), (PFAIL, "fail?"), (FAIL, "fail"), (HANDSHAKE, "handshake"),
              (NOADDR, "noaddr"), (LEAVING, "leaving"))
FLAGS_BY_NAME = {name: flag for flag, name in FLAG_NAMES}

BUS_PORT_OFFSET = 10000
MAX_CLIENT_PORT = 65535 - BUS_PORT_OFFSET
RECONNECT_MIN_MS = 100
RECONNECT_MAX_MS = 500


class ClusterNode:
    __slots__ = ("id", "ip", "port", "flags", "ctime", "ping_sent", "pong_received",
                 "data_received", "fail_time", "fail_reports", "linked", "link_since",
                 "connecting", "next_connect", "backoff", "link_generation", "epoch",
                 "epoch_hint", "epochs_asked", "capabilities")

    def __init__(self, node_id: bytes, ip: str, port: int, flags: int, now: int) -> None:
        self.id = node_id
        self.ip = ip
        self.port = port
        self.flags = flags
        self.ctime = now
        self.ping_sent = 0
        self.pong_received = 0
        self.data_received = 0       # last time anything came from it
        self.fail_time = 0
        self.fail_reports: dict[bytes, int] = {}   # reporter id -> ms
        self.linked = False          # our outgoing link is up
        self.link_since = 0
        self.connecting = False
        self.next_connect = 0
        self.backoff = RECONNECT_MIN_MS
        # Bumped whenever our link is dropped or re-requested: the outcome of
        # a connect started before that (to an old address, for a node since
        # forgotten) is stale and ignored.
        self.link_generation = 0
        self.epoch = 0               # its start epoch, from its EPOCH (0: not known)
        self.epoch_hint = 0          # ... as another node heard it (until we hear it)
        self.epochs_asked = False    # it answered our MSG_WANT_EPOCHS
        # The header bits of its last heartbeat (0 until heard: assume an
        # older version, which is the safe side).
        self.capabilities = 0

    @property
    def flag_names(self) -> str:
        names = [name for flag, name in FLAG_NAMES if self.flags & flag]
        return ",".join(names) or "noflags"

    @property
    def priority(self) -> int:
        """HELLO's priority: lower is better."""
        if self.flags & (FAIL | LEAVING):
            return 100
        if self.flags & PFAIL:
            return 10
        if not self.linked and not self.flags & MYSELF:
            return 5
        return 1

    def __repr__(self) -> str:
        return f"<ClusterNode {self.id[:8].decode()} {self.ip}:{self.port} {self.flag_names}>"


def random_node_id() -> bytes:
    return os.urandom(20).hex().encode()


def normalize_ip(ip: str) -> str | None:
    try:
        return str(ipaddress.ip_address(ip))
    except ValueError:
        return None
