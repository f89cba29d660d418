"""The controlled restart of Disque's README ("Disque and disk persistence"):

    CONFIG SET aof-enqueue-jobs-once yes
    CONFIG REWRITE
    SHUTDOWN REWRITE-AOF

then start again: the full state comes back, queues included (queued jobs
queued, at-most-once RETRY 0 jobs too since they were never delivered;
delivered-but-unacked jobs active), and the option has turned itself off in
the config file. It works whether the AOF is on or off.
"""

from __future__ import annotations

import re

import pytest

from tests.persistence.helpers import add_jobs, aof_path, info, raw_client, show_all
from tests.support import encode_command

ENQUEUE_ONCE_ON = re.compile(r"^aof-enqueue-jobs-once yes$", re.M)
ENQUEUE_ONCE_OFF = re.compile(r"^aof-enqueue-jobs-once no$", re.M)


def _states(server, ids) -> list[bytes | None]:
    return [None if fields is None else fields[b"state"]
            for fields in show_all(server, ids).values()]


@pytest.mark.parametrize("appendonly", ["yes", "no"])
def test_controlled_restart_brings_back_queues_and_turns_the_option_off(make_server,
                                                                        appendonly):
    server = make_server(config_text=f"appendonly {appendonly}\nappendfsync always\n").start()
    client = server.client()
    queued = add_jobs(server, 4, "q", "RETRY", 30) + add_jobs(server, 3, "q", "RETRY", 0)
    delivered = add_jobs(server, 2, "work", "RETRY", 30) + add_jobs(server, 1, "work",
                                                                    "RETRY", 0)
    got = client.execute_command("GETJOB", "COUNT", 3, "FROM", "work")
    assert sorted(job[1] for job in got) == sorted(delivered)
    assert client.execute_command("QLEN", "q") == len(queued)

    assert client.execute_command("CONFIG", "SET", "aof-enqueue-jobs-once", "yes") == b"OK"
    assert client.execute_command("CONFIG", "REWRITE") == b"OK"
    assert ENQUEUE_ONCE_ON.search(server.config_path.read_text())
    shutdown = raw_client(server)
    shutdown.send(encode_command("SHUTDOWN", "REWRITE-AOF"))
    assert shutdown.is_closed(10)
    assert server.proc.wait(10) == 0
    assert aof_path(server).exists()

    server.start()
    client = server.client()
    assert client.execute_command("QLEN", "q") == len(queued)
    assert client.execute_command("QLEN", "work") == 0
    assert _states(server, queued) == [b"queued"] * len(queued)
    assert _states(server, delivered) == [b"active"] * len(delivered)
    assert ENQUEUE_ONCE_OFF.search(server.config_path.read_text()), (
        server.config_path.read_text())
    assert client.config_get("aof-enqueue-jobs-once") == {"aof-enqueue-jobs-once": "no"}
    assert info(server, "persistence")["aof_state"] == ("on" if appendonly == "yes" else "off")
