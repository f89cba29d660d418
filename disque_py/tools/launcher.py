"""`disque`: Disque's command-line client, which is redis-cli with 7711 as
its default port.

  disque [redis-cli options] [command ...]

This runs redis-cli so (a -p, -u or -s given overrides the port, as
redis-cli reads its options in order). It imports nothing of the server:
a node's build, broken or stale, never stops the client from starting.
"""

from __future__ import annotations

import os
import sys

DEFAULT_PORT = "7711"
REDIS_CLI = "redis-cli"


def client_main(argv: list[str] | None = None) -> None:
    """The `disque` command-line client."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        os.execvp(REDIS_CLI, [REDIS_CLI, "-p", DEFAULT_PORT, *args])
    except FileNotFoundError:
        print("disque: redis-cli is needed (Debian/Ubuntu: apt install redis-tools)",
              file=sys.stderr)
        sys.exit(127)
