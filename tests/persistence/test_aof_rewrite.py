"""AOF rewrite: under load it loses nothing and resurrects nothing; it shrinks
the file to the live jobs; one at a time; automatic when the file doubles;
BGREWRITEAOF with the AOF off does not turn the AOF on; and no temporary
file outlives a rewrite that failed, was stopped, or died with its process.
"""

from __future__ import annotations

from tests.persistence.helpers import (ALWAYS, Consumers, Stream, add_jobs, aof_path, call,
                                       check_aof, info, loadjob_records, raw_client,
                                       show_all, wait_rewrite_done)
from tests.support import encode_command, wait_for

# More than one rewrite slice (2,000 jobs), so a rewrite spans loop turns
# and client commands run between its steps.
PREFILL = 20_000
STARTED = b"+Background append only file rewriting started\r\n"
IN_PROGRESS = b"-ERR Background append only file rewriting already in progress\r\n"
CANNOT_START = (b"-ERR Can't execute an AOF background rewriting. Please check the server "
                b"logs for more information.\r\n")


def _temporary_files(server) -> list:
    return sorted(server.dir.glob("*.tmp"))


def test_rewrite_under_load_loses_no_job_and_revives_no_acked_job(make_server):
    server = make_server(args=ALWAYS).start()
    prefilled = add_jobs(server, PREFILL, "q")
    producers = Stream(server.port, "q2", threads=2, pipelined=0).start()
    consumers = Consumers(server.port, ["q2", "q"], threads=2).start()
    wait_for(lambda: producers.count() >= 300 and len(consumers.acked) >= 100, 20,
             message="producers and consumers under way")
    base_before = info(server, "persistence")["aof_base_size"]
    assert call(raw_client(server), "BGREWRITEAOF") == STARTED
    done = wait_rewrite_done(server)
    assert done["aof_last_bgrewrite_status"] == "ok"
    assert done["aof_base_size"] != base_before, "the rewrite did not replace the file"
    at_done = producers.count(), len(consumers.acked)
    wait_for(lambda: producers.count() >= at_done[0] + 300
             and len(consumers.acked) >= at_done[1] + 100, 20,
             message="more load after the rewrite")
    consumers.stop()
    producers.stop()
    assert not producers.errors and not consumers.errors, (producers.errors[:3],
                                                           consumers.errors[:3])
    server.kill()
    server.start()
    acked = set(consumers.acked)
    unacked = [job_id for job_id in prefilled + producers.ids if job_id not in acked]
    shown = show_all(server, unacked + list(acked))
    missing = [job_id for job_id in unacked if shown[job_id] is None]
    revived = [job_id for job_id in acked if shown[job_id] is not None]
    assert not missing, f"{len(missing)} un-acked jobs lost, e.g. {missing[:3]}"
    assert not revived, f"{len(revived)} acked jobs came back, e.g. {revived[:3]}"
    assert info(server, "jobs")["registered_jobs"] >= len(unacked)


def test_rewrite_shrinks_the_file_to_the_live_jobs(make_server):
    server = make_server(args=ALWAYS).start()
    client = server.client()
    empty = info(server, "persistence")["aof_current_size"]
    ids = add_jobs(server, 200, "q")
    full = info(server, "persistence")["aof_current_size"]
    record, rest = divmod(full - empty, 200)
    assert rest == 0, "every LOADJOB record of these jobs has the same size"
    got = client.execute_command("GETJOB", "COUNT", 150, "FROM", "q")
    acked = [job[1] for job in got]
    assert client.execute_command("ACKJOB", *acked) == 150
    before = info(server, "persistence")["aof_current_size"]
    assert before > full, "acks are logged (DELJOB)"
    assert client.execute_command("BGREWRITEAOF")
    after = wait_rewrite_done(server)
    live = 200 - 150
    assert after["aof_current_size"] < before
    assert abs(after["aof_current_size"] - (empty + live * record)) <= 0.02 * live * record, (
        after["aof_current_size"], empty + live * record)
    assert after["aof_base_size"] == after["aof_current_size"]
    server.kill()
    server.start()
    shown = show_all(server, ids)
    assert [j for j in ids if shown[j] is not None] == [j for j in ids if j not in set(acked)]


def test_second_bgrewriteaof_while_one_runs_is_refused(make_server):
    server = make_server(args=ALWAYS).start()
    add_jobs(server, 5_000, "q")          # a rewrite of several slices
    client = raw_client(server)
    client.send(encode_command("BGREWRITEAOF") + encode_command("BGREWRITEAOF"))
    assert client.read_reply() == STARTED
    assert client.read_reply() == IN_PROGRESS
    wait_rewrite_done(server)
    assert call(client, "BGREWRITEAOF") == STARTED, "a new rewrite may start once it is done"
    wait_rewrite_done(server)


def test_automatic_rewrite_when_the_file_doubles(make_server):
    min_size = 32 * 1024
    server = make_server(args=ALWAYS + ["--auto-aof-rewrite-min-size", str(min_size),
                                        "--auto-aof-rewrite-percentage", "100"]).start()
    first = info(server, "persistence")
    assert first["aof_current_size"] < min_size

    def grow_until(size: int) -> None:
        while info(server, "persistence")["aof_current_size"] < size:
            add_jobs(server, 20, "q")

    def base_moved_from(base: int) -> int:
        def moved():
            now = info(server, "persistence")
            return now["aof_base_size"] if now["aof_base_size"] != base else None
        return wait_for(moved, 10, message="an automatic rewrite")

    grow_until(min_size)
    base1 = base_moved_from(first["aof_base_size"])
    assert base1 >= min_size
    grow_until(2 * base1)
    base2 = base_moved_from(base1)
    assert base2 >= 2 * base1, "rewritten before the file doubled"
    assert "Starting automatic rewriting" in server.log_text()


def test_bgrewriteaof_with_aof_off_writes_the_file_and_leaves_the_aof_off(make_server):
    server = make_server(args=["--appendonly", "no"]).start()
    ids = add_jobs(server, 10, "q")
    assert call(raw_client(server), "BGREWRITEAOF") == STARTED
    done = wait_rewrite_done(server)
    assert done["aof_last_bgrewrite_status"] == "ok"
    written = [r.argv[1][:40] for r in loadjob_records(aof_path(server).read_bytes())]
    assert sorted(written) == sorted(ids)
    assert check_aof(aof_path(server)).returncode == 0
    assert done["aof_enabled"] == 0 and done["aof_state"] == "off", (
        "BGREWRITEAOF turned the AOF on while appendonly is no")
    assert server.client().config_get("appendonly") == {"appendonly": "no"}


def test_bgrewriteaof_that_cannot_start_says_so_and_leaves_no_temporary_file(make_server):
    server = make_server(args=["--appendonly", "no"]).start()
    add_jobs(server, 10, "q")
    client = raw_client(server)
    assert call(client, "DEBUG", "AOF-FAULT", "enospc", 1) == b"+OK\r\n"
    assert call(client, "BGREWRITEAOF") == CANNOT_START
    assert "Cannot start the AOF rewrite: No space left on device" in server.log_text()
    assert _temporary_files(server) == []
    assert info(server, "persistence")["aof_last_bgrewrite_status"] == "err"
    assert call(client, "BGREWRITEAOF") == STARTED, "it works again with the disk"
    assert wait_rewrite_done(server)["aof_last_bgrewrite_status"] == "ok"


def test_shutdown_during_a_rewrite_leaves_no_temporary_file(make_server):
    server = make_server(args=ALWAYS).start()
    ids = add_jobs(server, 5_000, "q")    # several slices: still running at SHUTDOWN
    client = raw_client(server)
    client.send(encode_command("BGREWRITEAOF") + encode_command("SHUTDOWN"))
    assert client.read_reply() == STARTED
    assert client.is_closed(10)
    assert server.proc.wait(10) == 0
    assert _temporary_files(server) == []
    assert "AOF rewrite aborted: shutting down" in server.log_text()
    server.start()
    assert all(fields is not None for fields in show_all(server, ids).values())


def test_temporary_files_of_a_rewrite_that_died_are_removed_at_start(make_server):
    server = make_server(args=ALWAYS)
    leftover = server.dir / "disque.aof.rewrite-4242.tmp"
    leftover.write_bytes(b"*2\r\n$6\r\nDQPAOF\r\n$1\r\n1\r\n")
    unrelated = server.dir / "other.tmp"
    unrelated.write_bytes(b"not ours")
    server.start()
    assert _temporary_files(server) == [unrelated]
    assert "left behind by an interrupted AOF rewrite" in server.log_text()
