"""Files of the previous release (AOF format version 1: RESP records) after
an upgrade: the node loads them, keeps the original beside the AOF
(`.v1`), rewrites the file in version 2 before appending to it, and from
then on it is an ordinary version-2 AOF, which check-aof reads and --fix
cuts.

The version-1 file is made here as that release wrote it: its header, then
LOADJOB, DELJOB and DEDUP records (persistence/aof_format.py keeps their
writers), of jobs a real node made with this node's ID.
"""

from __future__ import annotations

import time

from disque_py.base.clock import FakeClock
from disque_py.node.node import Node
from disque_py.persistence import aof_format
from tests.persistence.helpers import (ALWAYS, add_jobs, aof_path, check_aof, data_end,
                                       loadjob_records, parse_records, show_all)

BACKUP_SUFFIX = ".v1"


def _version_1_file(node_id: bytes) -> tuple[bytes, list, bytes]:
    """(the file, the jobs it keeps, the ID of the job it deletes)."""
    node = Node(node_id, FakeClock(int(time.time() * 1000), seed=1), id_seed=b"upgrade")
    kept = [node.add_job(b"q", b"body-%d" % n, 1, 0, 300, 3600, 0, False) for n in range(3)]
    kept.append(node.add_job(b"q", b"keyed", 1, 0, 300, 3600, 0, False,
                             dedup_key=b"order-1"))
    gone = node.add_job(b"q", b"gone", 1, 0, 300, 3600, 0, False)
    until_ms = int(time.time() * 1000) + 3_600_000
    data = aof_format.V1_HEADER + b"".join(
        aof_format.load_job_record(node.job_bytes(job)) for job in [*kept, gone])
    data += aof_format.del_job_record(gone.id)
    data += aof_format.dedup_record(b"q", b"order-2", gone.id, until_ms)   # outlives its job
    return data, kept, gone.id


def test_a_version_1_aof_is_loaded_kept_and_rewritten_in_version_2(make_server):
    server = make_server(args=ALWAYS).start()
    node_id = server.client().execute_command("CLUSTER", "MYID")
    assert server.stop() == 0
    old, kept, gone = _version_1_file(node_id)
    aof_path(server).write_bytes(old)

    server.start()
    assert "in format version 1" in server.log_text()
    assert (server.dir / (aof_path(server).name + BACKUP_SUFFIX)).read_bytes() == old
    shown = show_all(server, [job.id for job in kept] + [gone])
    assert [fields[b"body"] for fields in list(shown.values())[:-1]] == \
        [job.body for job in kept]
    assert shown[gone] is None
    client = server.client()
    # Both DEDUP keys came through: the job's (its options) and the one
    # that outlived its job (a DEDUP record).
    assert client.execute_command("ADDJOB", "q", "again", 0, "DEDUP", "order-1") == kept[-1].id
    assert client.execute_command("ADDJOB", "q", "again", 0, "DEDUP", "order-2") == gone

    # The AOF is version 2 now, and what comes next is appended to it.
    [new] = add_jobs(server, 1, "q")
    server.kill()
    data = aof_path(server).read_bytes()
    assert data.startswith(aof_format.HEADER)
    assert parse_records(data)[0].argv == [b"DQPAOF", b"2"]
    assert [r.argv[1][:40] for r in loadjob_records(data)][-1] == new
    checked = check_aof(aof_path(server))
    assert checked.returncode == 0 and "AOF is valid" in checked.stdout, checked.stdout
    server.start()
    assert all(show_all(server, [job.id for job in kept] + [new]).values())
    assert "format version 1" not in server.log_text().split("DB loaded")[-1]


def test_check_aof_reads_a_version_2_aof_and_fix_cuts_its_torn_tail(make_server, tmp_path):
    server = make_server(args=ALWAYS).start()
    ids = add_jobs(server, 3, "q")
    assert server.stop() == 0
    data = aof_path(server).read_bytes()
    records = loadjob_records(data)
    assert [r.argv[1][:40] for r in records] == ids
    valid = check_aof(aof_path(server))
    assert valid.returncode == 0
    assert valid.stdout.startswith(f"AOF is valid: 4 records, {data_end(data)} bytes"), \
        valid.stdout
    last = records[-1]
    path = tmp_path / "torn.aof"
    path.write_bytes(data[:last.end - 3] + bytes(4096))     # cut in its checksum, then reserved space
    torn = check_aof(path)
    assert torn.returncode == 1
    assert torn.stdout.startswith("AOF is not valid: torn last record: ") and \
        f"at byte offset {last.offset} (3 whole records before it" in torn.stdout, torn.stdout
    fixed = check_aof(path, fix=True)
    assert fixed.returncode == 0 and f"truncated the AOF to {last.offset} bytes" in fixed.stdout
    assert path.read_bytes() == data[:last.offset]
    assert check_aof(path).stdout.startswith("AOF is valid: 3 records")
