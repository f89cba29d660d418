"""The test seam for a full or failing disk.

DEBUG AOF-FAULT and DEBUG NODES-CONF-FAULT (commands/admin.py) make the
next operations of the AOF writer, or the next saves of nodes.conf, fail
with a chosen errno, as a write or an fsync that hits a full or broken disk
would. The code under test calls check() where such an error can happen.
"""

from __future__ import annotations

import errno
import os

# DEBUG ...-FAULT's first argument: the error, or none to clear.
FAULT_CODES = {b"enospc": errno.ENOSPC, b"eio": errno.EIO, b"none": 0}


class DiskFaults:
    def __init__(self) -> None:
        self.pending: list[int] = []         # errno of the next failing operations

    def inject(self, error_number: int, count: int) -> None:
        self.pending = [error_number] * count if error_number else []

    def check(self) -> None:
        if self.pending:
            code = self.pending.pop()
            raise OSError(code, os.strerror(code))
