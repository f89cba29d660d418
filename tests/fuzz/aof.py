"""Fuzz target: an AOF file, read and replayed into a node as the server
loads it at start.

The bytes are the whole file: disque-py's format (persistence/aof_format.py)
or Disque 1.0's (disque_aof.py, converted on the way). aof_format.records
reads them; the persistence service's replay (server/persistence_service.py)
sends each record through the command table with the loader's session
(LOADJOB into the engine: records.py, wire.pxi and options.pxi parse the
job, the node adopts it; DELJOB) or restores a DEDUP key, as at start-up,
with aof-load-truncated at its default (a torn last record is dropped).

The contract: the reader yields records that follow each other from byte
0, or raises AofDamage at a record boundary within the written data;
the replay ends, or stops with the StartupError the server exits with;
nothing else is raised. What loaded, written again by the AOF rewrite
(persistence/rewrite.py) and loaded by a new node, is the same jobs and
DEDUP keys.
"""

from __future__ import annotations

import os
import tempfile

from disque_py.base.clock import FakeClock
from disque_py.base.errors import StartupError
from disque_py.config import Config
from disque_py.engine import serialize_job
from disque_py.node.node import Node
from disque_py.persistence import aof_format
from disque_py.persistence.aof import FileOps
from disque_py.persistence.rewrite import Rewrite
from disque_py.server.persistence_service import PersistenceService
from disque_py.server.state import ServerState

NODE_ID = b"9bfa56e329abf3577408e45419d642cac8154459"
START_MS = 1_700_000_000_000
SCRATCH = tempfile.TemporaryDirectory(prefix="fuzz-aof-")     # removed at exit


class RewriteInto:
    """What a Rewrite asks of the AOF writer: where to write, and how."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, "appendonly.aof")
        self.ops = FileOps()


def check_reader(data: bytes) -> None:
    end = aof_format.data_end(data)
    boundary = 0
    try:
        for record in aof_format.records(data):
            # A version-2 record may end past the data's end: its checksum's last
            # bytes may be zeros, like reserved space (records.pxi).
            assert record.offset == boundary < record.end <= len(data), record
            assert record.offset < end, record
            assert record.argv and all(type(arg) is bytes for arg in record.argv), record
            boundary = record.end
    except aof_format.AofDamage as damage:
        assert damage.offset == boundary, f"damage at {damage.offset}, not after the record " \
                                          f"ending at {boundary}"
        assert damage.offset < end or damage.offset == end == 0, damage


def load(data: bytes) -> Node | None:
    """A new node with the file's jobs; None if the start stops on it. The
    replay's coroutine is driven here: its turns of the loop have nothing
    to give way to."""
    node = Node(NODE_ID, FakeClock(START_MS, seed=7), id_seed=b"fuzz-aof")
    server = ServerState(node, Config())
    service = PersistenceService(node, server.config, server, stopping=lambda: False)
    server.attach_services(None, service)
    service.begin_loading()
    replay = service._replay(data, aof_format.data_end(data), False)
    try:
        while True:
            replay.send(None)
    except StopIteration:
        pass
    except StartupError:
        return None
    finally:
        replay.close()
        service.end_loading()
    return node


def rewritten(node: Node) -> bytes:
    """The AOF a rewrite of this node writes."""
    rewrite = Rewrite(RewriteInto(SCRATCH.name), node.jobs, node.dedup.items())
    try:
        while not rewrite.step():
            pass
        with open(rewrite.temp_path, "rb") as handle:
            return handle.read()
    finally:
        os.close(rewrite.fd)


def contents(node: Node) -> tuple[list, list]:
    return sorted(map(serialize_job, node.jobs.values())), sorted(node.dedup.items())


def check(data: bytes) -> None:
    check_reader(data)
    node = load(data)
    if node is None or not (len(node.jobs) or node.dedup.items()):
        return                         # nothing to write again
    again = load(rewritten(node))
    assert again is not None, "the rewritten AOF does not load"
    assert contents(again) == contents(node), "a rewrite changed the jobs or DEDUP keys"
