"""nodes.conf: the node's identity and its view of the cluster, on disk.

Same layout as Disque's file (which is CLUSTER NODES' output): one line per
node, `id ip:port flags ping-sent pong-received link-state`, the line of
this node flagged `myself`. A node restarted with its file keeps its ID.
A `vars name value ...` line (Disque's own loader skips unknown names, and
ours skips the line) keeps what is not a node: here the node's start epoch
(`start-epoch`, see cluster/membership.py) and, last, the file's checksum
(`crc32`: of every byte before it), so that a bit flipped on disk is
refused rather than read as another node ID, address or epoch; a file
without one (Disque's, or an older disque-py's) is read unchecked.
Writes go to a temporary file, are fsynced and renamed over the old one, so
a crash leaves either the old file or the new one, never half of each; a
write that fails (a full disk) removes its temporary file and raises.
"""

from __future__ import annotations

import contextlib
import os
import re
import zlib
from dataclasses import dataclass, field

from disque_py.base.disk_faults import DiskFaults

NODE_ID_HEX_LEN = 40
_HEX = set("0123456789abcdef")
CHECKSUM_VAR = "crc32"
_CHECKSUM = re.compile(r" crc32 ([0-9a-f]{8})\n?\Z")


class NodesConfError(Exception):
    """nodes.conf exists but cannot be understood: refuse to start."""


@dataclass
class NodeRecord:
    node_id: str
    ip: str
    port: int
    flags: set[str] = field(default_factory=set)

    def line(self) -> str:
        flags = ",".join(sorted(self.flags)) or "noflags"
        return f"{self.node_id} {self.ip}:{self.port} {flags} 0 0 connected"


def new_node_id() -> str:
    return os.urandom(NODE_ID_HEX_LEN // 2).hex()


def is_node_id(text: str) -> bool:
    return len(text) == NODE_ID_HEX_LEN and set(text) <= _HEX


def load(path: str) -> list[NodeRecord] | None:
    """The records in the file, or None if there is no (or an empty) file."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    text = _checked_text(path, data)
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words or words[0] == "vars":
            continue
        if len(words) != 6 or not is_node_id(words[0]) or ":" not in words[1]:
            raise NodesConfError(f"{path}:{number}: corrupted cluster config line: {line!r}")
        ip, _, port = words[1].rpartition(":")
        if not port.isdigit():
            raise NodesConfError(f"{path}:{number}: corrupted cluster config line: bad port in "
                                 f"{words[1]!r}")
        flags = set(words[2].split(",")) - {"noflags"}
        records.append(NodeRecord(words[0], ip, int(port), flags))
    if not records:
        return None
    if sum("myself" in record.flags for record in records) != 1:
        raise NodesConfError(f"{path}: corrupted cluster config file: exactly one node "
                             f"must be flagged myself")
    return records


def _checked_text(path: str, data: bytes) -> str:
    """The file's text, once its checksum (if it has one) matches."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise NodesConfError(f"{path}: corrupted cluster config file: not UTF-8 text "
                             f"(byte {error.start})") from None
    found = _CHECKSUM.search(text)
    if found is not None and _crc(text[:found.start()]) != found.group(1):
        raise NodesConfError(f"{path}: corrupted cluster config file: its checksum does "
                             f"not match its content")
    return text


def _crc(text: str) -> str:
    return "%08x" % zlib.crc32(text.encode("utf-8"))


def load_vars(path: str) -> dict[str, str]:
    """The name/value pairs of the file's `vars` lines ({} without any)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (FileNotFoundError, UnicodeDecodeError):
        return {}
    found: dict[str, str] = {}
    for line in text.splitlines():
        words = line.split()
        if words and words[0] == "vars":
            found.update(zip(words[1::2], words[2::2]))
    found.pop(CHECKSUM_VAR, None)         # the file's, not a variable of the node
    return found


def save(path: str, records: list[NodeRecord], faults: DiskFaults | None = None,
         variables: dict[str, str] | None = None) -> None:
    """Write the records (and a `vars` line, if any) atomically (temp file,
    fsync, rename, fsync dir). Raises OSError if that fails; the temporary
    file is then removed and the old file, if any, is left as it was."""
    directory = os.path.dirname(os.path.abspath(path))
    temp = f"{path}.tmp-{os.getpid()}"
    text = "".join(record.line() + "\n" for record in records)
    text += "vars " + "".join(f"{name} {value} " for name, value in (variables or {}).items())
    text = text.rstrip(" ") + f" {CHECKSUM_VAR} {_crc(text.rstrip(' '))}\n"
    try:
        with open(temp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            if faults is not None:
                faults.check()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
