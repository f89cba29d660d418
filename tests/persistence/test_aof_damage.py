"""Damaged AOF files: a torn last record is dropped (or refused with
aof-load-truncated no); corruption before the end refuses the start with the
file and byte offset; check-aof reports the same offset and --fix cuts there.

Offsets are located with tests/persistence/helpers.parse_records, a reader
written for the tests, not with the product's own reader.
"""

from __future__ import annotations

import socket

import pytest

from tests.persistence.helpers import (ALWAYS, add_jobs, aof_path, check_aof, data_end,
                                       info, job_id_of, loadjob_records, parse_records,
                                       refused_start, show_all, wait_rewrite_done)
from tests.support import HOST, free_port

JOBS = 10


@pytest.fixture
def stopped(make_server):
    """A server stopped cleanly after JOBS ADDJOBs: (server, ids, file bytes)."""
    server = make_server(args=ALWAYS).start()
    ids = [add_jobs(server, 1, "q", body=b"payload-%03d" % i)[0] for i in range(JOBS)]
    assert server.stop() == 0
    data = aof_path(server).read_bytes()
    records = loadjob_records(data)
    assert [job_id_of(r) for r in records] == ids, "one LOADJOB per ADDJOB, in order"
    assert data_end(data) == len(data) == records[-1].end, "a clean stop leaves no spare bytes"
    return server, ids, data


def _present(server, ids) -> list[bytes]:
    return [job_id for job_id, fields in show_all(server, ids).items() if fields is not None]


def _write(server, data: bytes) -> None:
    aof_path(server).write_bytes(data)


# --------------------------------------------------------------- torn tail

def test_torn_last_record_is_dropped_logged_and_cut(stopped):
    server, ids, data = stopped
    last = loadjob_records(data)[-1]
    _write(server, data[:(last.offset + last.end) // 2])
    server.start()
    log = server.log_text()
    assert f"byte offset {last.offset}" in log and "cut short" in log, log[-1500:]
    assert _present(server, ids) == ids[:-1]
    assert info(server, "jobs")["registered_jobs"] == JOBS - 1
    # The file now ends at the last whole record (reserved zero bytes may follow).
    now = aof_path(server).read_bytes()
    assert now[:last.offset] == data[:last.offset]
    assert data_end(now) == last.offset
    # New records go right after it: they survive another restart.
    new_id = add_jobs(server, 1, "q")[0]
    server.kill()
    server.start()
    assert _present(server, ids + [new_id]) == ids[:-1] + [new_id]
    assert server.stop() == 0
    done = check_aof(aof_path(server))
    assert done.returncode == 0 and "AOF is valid" in done.stdout, done.stdout


def test_torn_last_record_refused_when_aof_load_truncated_is_no(stopped):
    server, ids, data = stopped
    last = loadjob_records(data)[-1]
    cut = data[:last.offset + 7]
    _write(server, cut)
    server.args += ["--aof-load-truncated", "no"]
    assert refused_start(server) != 0
    log = server.log_text()
    assert f"byte offset {last.offset}" in log, log[-1500:]
    assert aof_path(server).read_bytes() == cut, "a refused start leaves the file alone"


def test_torn_last_record_followed_by_reserved_space_is_dropped(make_server):
    """A crash inside a write leaves part of a record then the zero bytes
    fallocate reserved (the file is not cut short): still a torn tail."""
    server = make_server(args=ALWAYS).start()
    ids = add_jobs(server, JOBS, "q")
    server.kill()
    path = aof_path(server)
    data = path.read_bytes()
    assert len(data) > data_end(data), "the writer reserves space after the data"
    last = loadjob_records(data)[-1]
    middle = (last.offset + last.end) // 2
    torn = data[:middle] + b"\0" * (len(data) - middle)
    path.write_bytes(torn)
    report = check_aof(path)
    assert report.returncode == 1, report
    assert "torn last record" in report.stdout, report.stdout
    assert f"byte offset {last.offset}" in report.stdout, report.stdout
    server.start()
    assert _present(server, ids) == ids[:-1]
    log = server.log_text()
    assert f"byte offset {last.offset}" in log, log[-1500:]


# -------------------------------------------------------------- corruption

def _refused_then_fixed(server, ids, damaged: bytes, offset: int, kept: int) -> None:
    """The start is refused naming file and offset; check-aof agrees;
    --fix cuts there and the server starts with the records before it."""
    path = aof_path(server)
    _write(server, damaged)
    assert refused_start(server) != 0
    log = server.log_text()
    assert str(path) in log and f"byte offset {offset}" in log, log[-1500:]
    report = check_aof(path)
    assert report.returncode == 1, report
    assert f"byte offset {offset}" in report.stdout, report.stdout
    assert path.read_bytes() == damaged, "check-aof without --fix changes nothing"
    fixed = check_aof(path, fix=True)
    assert fixed.returncode == 0, fixed
    assert "delete the 'vars' line of the node's nodes.conf" in fixed.stdout, fixed.stdout
    assert path.read_bytes() == damaged[:offset]
    assert check_aof(path).returncode == 0
    server.start()
    assert _present(server, ids) == ids[:kept]
    assert info(server, "jobs")["registered_jobs"] == kept


def test_flipped_byte_in_early_loadjob_refuses_start_and_check_aof_fix_recovers(stopped):
    server, ids, data = stopped
    second = loadjob_records(data)[1]
    body_at = data.index(b"payload-001", second.offset)
    assert second.offset < body_at < second.end
    damaged = bytearray(data)
    damaged[body_at] ^= 0x20                      # 'p' -> 'P': the checksum no longer matches
    _refused_then_fixed(server, ids, bytes(damaged), second.offset, kept=1)


def test_garbage_between_records_refuses_start_and_check_aof_fix_recovers(stopped):
    server, ids, data = stopped
    boundary = loadjob_records(data)[5].end
    damaged = data[:boundary] + b"garbage, not a record\r\n" + data[boundary:]
    _refused_then_fixed(server, ids, damaged, boundary, kept=6)


def test_damaged_length_line_refuses_start(stopped):
    server, ids, data = stopped
    third = loadjob_records(data)[2]
    damaged = bytearray(data)
    damaged[third.offset + 1] = ord("x")          # its length's high byte: past the data
    _refused_then_fixed(server, ids, bytes(damaged), third.offset, kept=2)


def test_unknown_format_version_is_refused_naming_it(stopped):
    server, _, data = stopped
    header = parse_records(data)[0]
    assert header.argv == [b"DQPAOF", b"2"]
    version_at = header.arg_offsets[1]
    damaged = data[:version_at] + b"7" + data[version_at + 1:]
    _write(server, damaged)
    assert refused_start(server) != 0
    log = server.log_text()
    assert "version 7" in log and str(aof_path(server)) in log, log[-1500:]


def test_a_node_refusing_its_aof_never_answers_pong(stopped):
    """A health check (and the chaos checker) takes +PONG for a node that is
    up: one that refuses its AOF must answer -LOADING until it exits, never
    PONG. It did for a moment, once the failed load had turned the fast path
    (which answers PING) back on, before the process exited."""
    server, _, data = stopped
    second = loadjob_records(data)[1]
    damaged = bytearray(data)
    damaged[second.offset + len(b"*3\r\n$7\r\nLOADJOB\r\n") + 10] ^= 0x01
    _write(server, bytes(damaged))
    answers = set()
    server.start(wait=False)
    sock = None
    while server.proc.poll() is None:     # one connection, PING after PING, as fast as it goes
        try:
            sock = sock or socket.create_connection((HOST, server.port), timeout=1)
            sock.sendall(b"PING\r\n")
            answers.add(sock.recv(64)[:6])
        except OSError:
            sock = sock and sock.close()
    assert server.proc.returncode != 0
    assert b"+PONG\r" not in answers, answers


def test_a_refused_start_leaves_the_node_loading_with_its_listeners_closed(tmp_path,
                                                                           monkeypatch):
    """The same rule in-process, where the moment is not a race: once the
    load failed, PING still goes to the dispatcher (-LOADING), not to the
    fast path, and no new client can connect."""
    import asyncio

    from disque_py.base.errors import StartupError
    from disque_py.config import Config
    from disque_py.server.runtime import Runtime

    monkeypatch.chdir(tmp_path)     # --dir makes it the working directory: put it back after
    (tmp_path / "disque.aof").write_bytes(b"*1\r\n$7\r\nnot-aof\r\n")
    config = Config.load(None, ["--port", str(free_port()), "--bind", HOST, "--dir", str(tmp_path),
                                "--appendonly", "yes"])
    runtime = Runtime(config)

    async def start() -> None:
        with pytest.raises(StartupError, match="append only file"):
            await runtime.start()
        assert runtime.server.loading, "the fast path (PONG) is back on"
        assert not any(server.is_serving() for server in runtime.listeners.servers)
        runtime.cluster.stop()
        await runtime.http.stop()

    asyncio.run(start())


@pytest.mark.parametrize("record, flip", [
    (b"LOADJOB", 0x01),                   # 'J' -> 'K': a DEDUP record's kind
    (b"DELJOB", 0x02),                    # 'D' -> 'F': no such kind
], ids=["loadjob-name", "deljob-name"])
def test_a_flipped_record_name_is_damage_check_aof_finds_and_fix_cuts(stopped, record, flip):
    """In version 1 the loader refused such a file (an unknown command),
    while check-aof called it valid and --fix cut nothing: an operator
    following the runbook was stuck. In version 2 the name is the record's
    kind byte, which its checksum covers: the reader and the loader find
    the same damage."""
    server, ids, _ = stopped
    server.start()
    assert server.client().execute_command("ACKJOB", ids[-1]) == 1
    add_jobs(server, 1, "q")                      # the DELJOB is not the last record
    assert server.stop() == 0
    data = aof_path(server).read_bytes()
    records = parse_records(data)
    target = next(r for r in records[1:] if r.argv[0] == record)
    damaged = bytearray(data)
    damaged[target.offset] ^= flip
    kept = sum(1 for r in records[1:] if r.argv[0] == b"LOADJOB" and r.end <= target.offset)
    _refused_then_fixed(server, ids, bytes(damaged), target.offset, kept=kept)


def test_a_flipped_digit_in_a_dedup_time_is_damage_check_aof_finds_and_fix_cuts(stopped):
    """The other half of the reader's record check (d730e6f): a DEDUP record
    whose time is no longer a number ('1' -> 'q', one bit) was well framed
    and well named in version 1; the loader refused it (its time did not
    parse), and check-aof must find it there and --fix cut it, not call the
    file valid. In version 2 the time is binary, and the bit flipped fails
    the record's checksum: the same damage, found alike."""
    server, ids, _ = stopped
    server.start()
    # A key that outlives its job: the AOF rewrite keeps it in a DEDUP record.
    [deduped] = add_jobs(server, 1, "q", "DEDUP", "order-17", "WINDOW", 3600)
    assert server.client().execute_command("ACKJOB", deduped) == 1
    server.client().execute_command("BGREWRITEAOF")
    wait_rewrite_done(server)
    add_jobs(server, 1, "q")                      # the DEDUP is not the last record
    assert server.stop() == 0
    data = aof_path(server).read_bytes()
    records = parse_records(data)
    target = next(r for r in records[1:] if r.argv[0] == b"DEDUP")
    assert len(target.argv) == 5 and target.argv[4].isdigit(), target.argv
    damaged = bytearray(data)
    damaged[target.arg_offsets[4]] ^= 0x40        # a digit -> a letter
    assert not bytes(damaged[target.arg_offsets[4]:][:1]).isdigit()
    kept = sum(1 for r in records[1:] if r.argv[0] == b"LOADJOB" and r.end <= target.offset)
    _refused_then_fixed(server, ids, bytes(damaged), target.offset, kept=kept)
