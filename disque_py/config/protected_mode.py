"""Protected mode, as Redis has it: a server nobody secured serves only its own host.

With `protected-mode yes` (the default), no `bind` directive and no
`requirepass`, the server listens on every interface with no password, so
any host that can reach the port could take and delete jobs. In that state
only loopback clients (127.0.0.0/8, ::1, IPv4-mapped 127.x) and Unix
socket clients are served; any other client gets DENIED, which says why
and how to open the server up, and is disconnected. The decision is made
once per connection, when it is accepted (so CONFIG SET protected-mode,
bind or requirepass apply to the next connections, as in Redis).
"""

from __future__ import annotations

import ipaddress

from disque_py.base.errors import DeniedError
from disque_py.base.replies import PROTECTED_MODE_DENIED

DENIED = DeniedError(PROTECTED_MODE_DENIED).wire()


def allows(peer, config) -> bool:
    """Whether a client whose address is peer (as the transport's
    get_extra_info('peername') gives it) is served under config."""
    if not config.protected_mode or config.bind or config.requirepass:
        return True
    return is_local(peer)


def is_local(peer) -> bool:
    """A Unix socket peer (a path, possibly empty) or a loopback address."""
    if isinstance(peer, (str, bytes)):
        return True
    if not isinstance(peer, tuple) or not peer:
        return False
    try:
        address = ipaddress.ip_address(peer[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback
