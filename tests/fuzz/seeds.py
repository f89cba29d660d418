"""`python -m tests.fuzz.seeds`: (re)writes the seed corpora, corpus/TARGET/.

Seeds are what the entry points really get, made by the project's own
writers: requests as clients encode them (and inline ones as telnet sends
them); pipelines a client sends, with the job IDs the fuzzed node will
give (its ID generator is seeded); bus frames encoded by formats/bus.py
around jobs serialized by the engine; AOF files written by a real
disque-server (appended to, then rewritten), the same files in format
version 1 (as the previous release wrote them), and the AOFs Disque
1.0-rc1 itself wrote (tests/persistence/data). A seed that once broke a contract
is kept beside them, named crash-*, and is never rewritten here.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from pathlib import Path

import redis

from disque_py.formats import bus
from disque_py.formats.resp import encode_command
from disque_py.persistence import aof_format
from disque_py.tools.loopback import ServerProcess
from tests.fuzz import connection
from tests.fuzz.bus import PEER_ID

HERE = Path(__file__).resolve().parent
REWRITE_TIMEOUT_S = 20
AOF_NAME = "disque.aof"            # appendfilename's default
DISQUE_AOFS = HERE.parent / "persistence" / "data"
ADDJOB_OPTIONS = [
    (), ("REPLICATE", "1", "RETRY", "5", "TTL", "3600"), ("DELAY", "10", "MAXLEN", "100"),
    ("ASYNC",), ("PRIORITY", "9", "BACKOFF", "100", "1000"),
    ("MAXDELIVERIES", "3", "DEADLETTER", "dead"), ("DEDUP", "order-17", "WINDOW", "600"),
]


def mb(*args) -> bytes:
    return encode_command(*[a if isinstance(a, bytes) else str(a).encode() for a in args])


def resp_seeds() -> list[bytes]:
    streams = [mb("PING"), b"PING\r\n", b'ADDJOB q "hello world" 0\r\n',
               b"*2\r\n$4\r\nQLEN\r\n$1\r\nq\r\n*1\r\n$4\r\nPI", b"*1\r\nx4\r\n",
               b"*3\r\n$4\r\nPING\r\n", b"*0\r\n*-1\r\n" + mb("PING"),
               b"GETJOB NOHANG FROM 'a b' \"\\x41\\n\"\n"]
    streams += [mb("ADDJOB", "q", "body", 0, *options) for options in ADDJOB_OPTIONS]
    streams.append(b"".join(mb("GETJOB", "NOHANG", "COUNT", n, "WITHCOUNTERS", "FROM", "q")
                            for n in (1, 2)))
    return streams


def job_ids(count: int) -> list[bytes]:
    """The IDs the fuzzed node gives its first ADDJOBs (its IDs are seeded)."""
    _, written = connection.serve([mb("ADDJOB", "q", f"job {i}", 0) for i in range(count)])
    return [line[1:] for line in written.split(b"\r\n") if line.startswith(b"+D-")]


def connection_seeds() -> list[bytes]:
    first, second = job_ids(2)
    add = mb("ADDJOB", "q", "job 0", 0) + mb("ADDJOB", "q", "job 1", 0)
    sessions = [add + mb("GETJOB", "NOHANG", "COUNT", 2, "FROM", "q") + mb("ACKJOB", first),
                add + mb("GETJOB", "FROM", "q") + mb("NACK", first) + mb("WORKING", second),
                add + mb("DEQUEUE", first) + mb("ENQUEUE", first) + mb("FASTACK", second) +
                mb("QLEN", "q"),
                add + mb("SHOW", first) + mb("QPEEK", "q", 2) + mb("JSCAN", "BUSYLOOP") +
                mb("QSTAT", "q") + mb("DELJOB", second),
                add + mb("HELLO", 3) + mb("GETJOB", "NOHANG", "WITHCOUNTERS", "FROM", "q") +
                mb("QSCAN", "COUNT", 10),
                add + mb("PAUSE", "q", "out") + mb("GETJOB", "NOHANG", "FROM", "q") +
                mb("QREQUEUE", "q") + mb("WAITJOB", first, 0)]
    sessions += [mb("ADDJOB", "q", "body", 0, *options) + mb("GETJOB", "NOHANG", "FROM", "q")
                 for options in ADDJOB_OPTIONS]
    return sessions + [b"PING\r\n" + mb("ADDJOB", "q", "x", 0) + b"*1\r\n$x\r\n"]


def serialized_jobs() -> list[bytes]:
    """Jobs as REPLJOB carries them, made by a node from real ADDJOBs."""
    conn, written = connection.serve([mb("ADDJOB", "q", "body", 0, *options)
                                      for options in ADDJOB_OPTIONS])
    node = conn.server.node
    ids = [line[1:] for line in written.split(b"\r\n") if line.startswith(b"+D-")]
    now_s = node.clock.now_ms() // 1000
    return [node.job_bytes(node.lookup(job_id), now_s, PEER_ID) for job_id in ids]


def bus_seeds() -> list[bytes]:
    jobs = serialized_jobs()
    ids = [job[:40] for job in jobs]
    header = bus.Header(0, PEER_ID, 7711, 0)
    bodies = {
        bus.PING: bus.Heartbeat([bus.Gossip(b"1" * 40, "127.0.0.1", 7712, 0)]),
        bus.MEET: bus.Heartbeat(), bus.FAIL: bus.Fail(b"2" * 40),
        bus.REPLJOB: bus.Jobs(jobs), bus.YOURJOBS: bus.Jobs(jobs[:2]),
        bus.NEEDJOBS: bus.QueueOp(b"q", 10), bus.PAUSE: bus.QueueOp(b"q", 1),
        bus.EPOCH: bus.Epoch(1234, [(b"3" * 40, 99)]),
    }
    for kind in (bus.GOTJOB, bus.ENQUEUE, bus.QUEUED, bus.WORKING, bus.SETACK, bus.WILLQUEUE,
                 bus.GOTACK, bus.DELJOB):
        bodies[kind] = bus.JobIds([(job_id, 2) for job_id in ids[:3]])
    frames = []
    for kind, body in bodies.items():
        header.type = kind
        frames.append(bus.encode(header, body)[bus.LENGTH.size:])
    return frames


def server_aofs() -> list[bytes]:
    """The AOF a real disque-server appended to, and the one its rewrite
    wrote: jobs with and without options, acked, NACKed, dead-lettered,
    re-queued, deleted, and DEDUP keys."""
    with tempfile.TemporaryDirectory(prefix="fuzz-seeds-") as directory:
        server = ServerProcess(Path(directory), args=["--appendonly", "yes"]).start()
        try:
            client = redis.Redis(port=server.port)
            ids = [client.execute_command("ADDJOB", "q", f"body {i}", 0, *options)
                   for i, options in enumerate(ADDJOB_OPTIONS)]
            client.execute_command("GETJOB", "NOHANG", "COUNT", 3, "FROM", "q")
            client.execute_command("NACK", ids[5])
            client.execute_command("ACKJOB", ids[0])
            client.execute_command("DELJOB", ids[1])
            client.execute_command("QREQUEUE", "q")
            client.execute_command("ADDJOB", "q", "again", 0, "DEDUP", "order-17")
            appended = (server.dir / AOF_NAME).read_bytes()
            client.execute_command("BGREWRITEAOF")
            rewritten = _wait_for_rewrite(server.dir / AOF_NAME, appended)
        finally:
            server.stop()
    return [_whole(appended), _whole(rewritten)]


def _whole(data: bytes) -> bytes:
    """The file up to the end of its last record: without the space the
    writer reserved (a record's checksum may end in zero bytes, like it)."""
    return data[:list(aof_format.records(data))[-1].end]


def _version_1(data: bytes) -> bytes:
    """The same records in format version 1 (RESP), as the previous
    release wrote them."""
    return aof_format.V1_HEADER + b"".join(
        aof_format.encode(*record.argv) for record in list(aof_format.records(data))[1:])


def _wait_for_rewrite(path: Path, before: bytes) -> bytes:
    deadline = time.monotonic() + REWRITE_TIMEOUT_S
    while time.monotonic() < deadline:
        now = path.read_bytes()
        if now.rstrip(b"\0") != before.rstrip(b"\0"):
            return now
        time.sleep(0.05)
    raise AssertionError("the AOF was not rewritten")


def aof_seeds() -> list[bytes]:
    written = server_aofs()
    return written + [_version_1(data) for data in written] + \
        [path.read_bytes() for path in sorted(DISQUE_AOFS.glob("*.aof"))]


SEEDS = {"resp": resp_seeds, "connection": connection_seeds, "bus": bus_seeds,
         "aof": aof_seeds}


def write(target: str, seeds: list[bytes]) -> None:
    """corpus/TARGET/ holds these seeds (named by their SHA-1) and the
    crash-* inputs kept there, nothing else."""
    directory = HERE / "corpus" / target
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("seed-*"):
        old.unlink()
    for seed in seeds:
        (directory / f"seed-{hashlib.sha1(seed).hexdigest()[:16]}").write_bytes(seed)


def main() -> None:
    for target, make in SEEDS.items():
        write(target, make())


if __name__ == "__main__":
    main()
