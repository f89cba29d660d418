"""A full or failing disk (DEBUG AOF-FAULT): an error to the client and a
log line, never a crash or a half-written job.

What the product does, measured: with appendfsync always the ADDJOB whose
write fails is never answered; its connection is closed (the reply was held
for the fsync, and it cannot claim success). Write commands and PING then
get -MISCONF, as in Disque, until the writer's once-a-second retry finds
the disk writable again; reads are answered. The records of the failed
write are not dropped, under any policy: the retry writes them, so the
file holds every job the server holds. The tests below hold the
server to the rest of the promise: it keeps serving, recovers by itself,
and the file stays whole.
"""

from __future__ import annotations

import pytest

from tests.persistence.helpers import (ALWAYS, add_jobs, aof_path, call, check_aof, info,
                                       loadjob_records, raw_client, raw_info, show_all)
from tests.support import encode_command, wait_for

FAULTS = [("enospc", "No space left on device"), ("eio", "Input/output error")]
MISCONF = b"-MISCONF Errors writing to the AOF file: %s\r\n"
SHUTDOWN_FAILED = b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n"


def _fail_one_addjob(server, fault: str, count: int = 1) -> None:
    """Arm the fault and send one ADDJOB on its own connection: that
    connection must be closed without any reply."""
    client = raw_client(server)
    assert call(client, "DEBUG", "AOF-FAULT", fault, count) == b"+OK\r\n"
    client.send(encode_command("ADDJOB", "q", "doomed", 0))
    assert client.is_closed(5), "the in-flight ADDJOB got a reply or the connection hung"
    client.close()


def _addjob_when_accepted(server) -> bytes:
    """ADDJOB on fresh connections until one is accepted (not MISCONF)."""
    def attempt():
        client = raw_client(server, timeout=2)
        try:
            reply = client.call("ADDJOB", "q", "after", 0)
        finally:
            client.close()
        return reply if reply.startswith(b"+") else None
    return wait_for(attempt, 15, message="ADDJOB to be accepted again")[1:-2]


@pytest.mark.parametrize("fault,reason", FAULTS)
def test_failed_write_closes_in_flight_client_and_logs_it(make_server, fault, reason):
    server = make_server(args=ALWAYS).start()
    _fail_one_addjob(server, fault)
    wait_for(lambda: f"Error writing to the AOF ({reason})" in server.log_text(), 5,
             message="the write error in the log")
    assert "Closing client" in server.log_text()
    assert server.alive()


@pytest.mark.parametrize("fault,reason", FAULTS)
def test_while_the_disk_fails_writes_and_ping_get_misconf_and_reads_are_answered(
        make_server, fault, reason):
    # Disque's rule: every write command, and PING (so health checks notice),
    # is refused while the AOF cannot be written; reads go on.
    server = make_server(args=ALWAYS).start()
    [before] = add_jobs(server, 1, "q")
    _fail_one_addjob(server, fault, count=1000)      # stays failing until cleared
    client = raw_client(server)
    refused = MISCONF % reason.encode()
    for command in (("PING",), ("GETJOB", "NOHANG", "FROM", "q"), ("ACKJOB", before),
                    ("NACK", before), ("WORKING", before), ("DEQUEUE", before)):
        assert call(client, *command) == refused, command
    assert call(client, "QLEN", "q") == b":2\r\n"            # the doomed one too
    assert call(client, "SHOW", before).startswith(b"*")
    assert call(client, "DEBUG", "AOF-FAULT", "none") == b"+OK\r\n"
    wait_for(lambda: call(client, "PING") == b"+PONG\r\n", 15,
             message="the writer's retry to clear the fault")
    got = call(client, "GETJOB", "NOHANG", "COUNT", "2", "FROM", "q")
    assert before in got, got
    assert call(client, "ACKJOB", before) == b":1\r\n"
    assert server.alive()


@pytest.mark.parametrize("fault,reason", FAULTS)
def test_addjob_refused_with_misconf_while_the_disk_fails(make_server, fault, reason):
    server = make_server(args=ALWAYS).start()
    _fail_one_addjob(server, fault, count=1000)      # stays failing until cleared
    client = raw_client(server)
    assert call(client, "ADDJOB", "q", "refused", 0) == MISCONF % reason.encode()
    assert call(client, "DEBUG", "AOF-FAULT", "none") == b"+OK\r\n"
    _addjob_when_accepted(server)


@pytest.mark.parametrize("fault,reason", FAULTS)
def test_addjob_works_again_and_aof_is_whole_after_the_fault_clears(make_server, fault, reason):
    server = make_server(args=ALWAYS).start()
    before = add_jobs(server, 5, "q")
    _fail_one_addjob(server, fault)
    after = [_addjob_when_accepted(server) for _ in range(5)]
    assert raw_info(server, "persistence")["aof_last_write_status"] == "ok"
    # The doomed ADDJOB's client was never answered, but the job exists.
    in_memory = info(server, "jobs")["registered_jobs"]
    assert in_memory == len(before) + len(after) + 1
    server.kill()
    report = check_aof(aof_path(server))
    assert report.returncode == 0 and "AOF is valid" in report.stdout, report.stdout
    # The failed batch was written by the retry: once, whole, no half record.
    doomed = [r for r in loadjob_records(aof_path(server).read_bytes())
              if b"doomed" in r.argv[1]]
    assert len(doomed) == 1, doomed
    server.start()
    shown = show_all(server, before + after)
    assert all(fields is not None for fields in shown.values()), shown
    assert info(server, "jobs")["registered_jobs"] == in_memory


@pytest.mark.parametrize("policy", ["everysec", "no"])
@pytest.mark.parametrize("fault,reason", FAULTS)
def test_with_any_policy_a_failed_write_is_never_acknowledged_and_is_written_later(
        make_server, fault, reason, policy):
    """Replies wait for the write of their records under every policy (only
    always also waits for the fsync), so kill -9 never loses an acknowledged
    job. A failed write closes the waiting client (no reply: outcome
    unknown); its record is kept and written once the disk works, so a
    clean SHUTDOWN afterwards keeps the job that is in memory."""
    server = make_server(args=["--appendonly", "yes", "--appendfsync", policy]).start()
    _fail_one_addjob(server, fault)
    wait_for(lambda: f"Error writing to the AOF ({reason})" in server.log_text(), 5)
    later = _addjob_when_accepted(server)
    assert server.stop() == 0
    server.start()
    assert show_all(server, [later])[later] is not None
    bodies = [job[-1] for job in server.client().execute_command(
        "JSCAN", "QUEUE", "q", "BUSYLOOP", "REPLY", "all")[1]]
    assert sorted(bodies) == [b"after", b"doomed"]


def test_shutdown_is_refused_when_the_final_fsync_fails(make_server):
    """SHUTDOWN must not exit 0 when it could not make the AOF durable: it
    answers Disque's error and the server goes on; once the disk works a
    SHUTDOWN exits cleanly and nothing is lost."""
    server = make_server(args=ALWAYS).start()
    ids = add_jobs(server, 5, "q")    # answered once fsynced: no fsync is due meanwhile
    client = raw_client(server)
    assert call(client, "DEBUG", "AOF-FAULT", "eio", 1) == b"+OK\r\n"
    assert call(client, "SHUTDOWN") == SHUTDOWN_FAILED
    assert server.alive()
    assert "Error trying to shut down" in server.log_text()
    client.send(encode_command("SHUTDOWN"))
    assert client.is_closed(10)
    assert server.proc.wait(10) == 0
    server.start()
    assert all(fields is not None for fields in show_all(server, ids).values())

