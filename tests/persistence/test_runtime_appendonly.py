"""CONFIG SET appendonly at run time, and LOADJOB from a client.

Turning the AOF on rewrites the file from memory (aof_state wait-rewrite,
then on); from then on every job change is logged, including the changes
made while that first rewrite runs. A rewrite already running (BGREWRITEAOF
with the AOF off) serves as that first rewrite; a SHUTDOWN before it is done
finishes it. Turning it off closes the file.
"""

from __future__ import annotations

from tests.persistence.helpers import (Consumers, Stream, add_jobs, aof_path, call,
                                       file_size, info, raw_client, show_all)
from tests.support import encode_command, wait_for

OFF = ["--appendonly", "no"]
ON = ["--appendonly", "yes"]
PREFILL = 30_000        # the enabling rewrite then takes many loop turns
SEVERAL_SLICES = 5_000  # a rewrite of a few loop turns
OK = b"+OK\r\n"


def _aof_state(server) -> str:
    return info(server, "persistence")["aof_state"]


def test_config_set_appendonly_yes_turns_on_and_writes_existing_jobs(make_server):
    server = make_server(args=OFF).start()
    ids = add_jobs(server, 100, "q")
    assert _aof_state(server) == "off"
    assert server.client().execute_command("CONFIG", "SET", "appendonly", "yes") == b"OK"
    wait_for(lambda: _aof_state(server) == "on", 15, message="aof_state on")
    assert server.client().config_get("appendonly") == {"appendonly": "yes"}
    server.kill()
    server.args = ON
    server.start()
    assert all(fields is not None for fields in show_all(server, ids).values())
    assert info(server, "jobs")["registered_jobs"] == len(ids)


def test_config_set_appendonly_yes_during_load_loses_nothing(make_server):
    """Jobs added and acked while the enabling rewrite runs are logged too:
    after kill -9 every acknowledged un-acked job is back, no acked one is."""
    server = make_server(args=OFF).start()
    prefilled = add_jobs(server, PREFILL, "q")
    producers = Stream(server.port, "q2", threads=2, pipelined=0).start()
    consumers = Consumers(server.port, ["q"], threads=1).start()     # acks old jobs only
    wait_for(lambda: producers.count() >= 200 and len(consumers.acked) >= 50, 20,
             message="load under way")
    assert server.client().execute_command("CONFIG", "SET", "appendonly", "yes") == b"OK"
    wait_for(lambda: _aof_state(server) == "on", 30, message="aof_state on")
    at_on = producers.count()
    wait_for(lambda: producers.count() >= at_on + 200, 20, message="more load")
    consumers.stop()
    producers.stop()
    server.kill()
    server.args = ON
    server.start()
    acked = set(consumers.acked)
    unacked = [job_id for job_id in prefilled + producers.ids if job_id not in acked]
    shown = show_all(server, unacked + list(acked))
    missing = [job_id for job_id in unacked if shown[job_id] is None]
    revived = [job_id for job_id in acked if shown[job_id] is not None]
    assert not missing and not revived, (
        f"{len(missing)} acknowledged un-acked jobs missing (e.g. {missing[:2]}) and "
        f"{len(revived)} acked jobs came back (e.g. {revived[:2]}): changes made while "
        f"appendonly was being turned on were not logged")


def _all_back(server, ids) -> bool:
    return all(fields is not None for fields in show_all(server, ids).values())


def test_config_set_appendonly_yes_while_bgrewriteaof_runs_turns_it_on(make_server):
    server = make_server(args=OFF).start()
    ids = add_jobs(server, SEVERAL_SLICES, "q")
    client = raw_client(server)
    client.send(encode_command("BGREWRITEAOF")
                + encode_command("CONFIG", "SET", "appendonly", "yes"))
    assert client.read_reply().startswith(b"+Background append only file rewriting")
    assert client.read_reply() == OK
    wait_for(lambda: _aof_state(server) == "on", 15, message="aof_state on")
    later = add_jobs(server, 10, "q")
    server.kill()
    server.args = ON
    server.start()
    assert _all_back(server, ids + later)
    assert info(server, "jobs")["registered_jobs"] == len(ids) + len(later)


def test_shutdown_while_the_aof_is_being_turned_on_finishes_it_first(make_server):
    server = make_server(args=OFF).start()
    ids = add_jobs(server, SEVERAL_SLICES, "q")
    client = raw_client(server)
    client.send(encode_command("CONFIG", "SET", "appendonly", "yes")
                + encode_command("SHUTDOWN"))
    assert client.read_reply() == OK
    assert client.is_closed(10)
    assert server.proc.wait(10) == 0
    log = server.log_text()
    assert log.index("AOF rewrite done") < log.index("ready to exit"), log[-1500:]
    server.args = ON
    server.start()
    assert _all_back(server, ids)


def test_config_set_appendonly_no_stops_logging(make_server):
    server = make_server(args=ON).start()
    kept = add_jobs(server, 20, "q")
    assert server.client().execute_command("CONFIG", "SET", "appendonly", "no") == b"OK"
    wait_for(lambda: _aof_state(server) == "off", 10, message="aof_state off")
    size = file_size(aof_path(server))
    not_logged = add_jobs(server, 20, "q")
    assert file_size(aof_path(server)) == size
    server.kill()
    server.start()                      # still appendonly yes on the command line
    shown = show_all(server, kept + not_logged)
    assert [j for j in kept + not_logged if shown[j] is not None] == kept


def test_loadjob_from_a_client_is_refused(make_server):
    server = make_server(args=ON).start()
    client = raw_client(server)
    assert call(client, "LOADJOB", "x" * 40, "00000000") == (
        b"-ERR LOADJOB is a special command only processed from AOF\r\n")
    assert call(client, "PING") == b"+PONG\r\n"
    assert info(server, "jobs")["registered_jobs"] == 0
