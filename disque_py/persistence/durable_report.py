"""An opt-in test seam: how much of the AOF is on disk, told to a side file.

With DISQUE_PY_DURABLE_REPORT=PATH in a node's environment, its AOF writer
writes one line to PATH, `<inode> <offset>`, each time it knows more of
the file is durable: after every fsync that worked (the offset the file
had reached when that fsync began), when it opens the file after loading
it (fsynced then), and after a rewrite once the directory fsync made the
rename durable (the new file's inode and size). The chaos checker's
`powerloss` fault reads it after a kill -9 and cuts the AOF there: what a
power cut leaves of a file (tools/chaos/faults/disk.py).

Rules kept: nothing a client sees changes, and without the variable
nothing is written; the line is written in place with one pwrite of a
fixed width, after the fsync it reports returned, so a reply released by
that fsync always follows its report; a report about a file a rewrite has
replaced (its fsync finished late) is ignored once the new file's was made.
"""

from __future__ import annotations

import os
import threading

ENVIRONMENT_VARIABLE = "DISQUE_PY_DURABLE_REPORT"
LINE = b"%20d %20d\n"


class DurableReport:
    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        self._lock = threading.Lock()     # fsyncs report from the writer's thread
        self._inode: int | None = None

    @classmethod
    def from_environment(cls) -> DurableReport | None:
        path = os.environ.get(ENVIRONMENT_VARIABLE)
        return cls(path) if path else None

    def durable(self, inode: int, offset: int, replaces: bool = False) -> None:
        """The file `inode` is on disk up to `offset`; `replaces`: it is a
        rewrite's file, which replaced the one reported until now."""
        with self._lock:
            if self._inode is not None and inode != self._inode and not replaces:
                return
            self._inode = inode
            os.pwrite(self._fd, LINE % (inode, offset), 0)


def read(path: str) -> tuple[int, int] | None:
    """(inode, offset) from a report file; None if there is none yet."""
    try:
        with open(path, "rb") as handle:
            words = handle.read().split()
    except FileNotFoundError:
        return None
    if len(words) != 2:
        return None
    return int(words[0]), int(words[1])
