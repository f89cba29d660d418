"""Random commands over a real socket: nothing a client sends crashes the server.

A seeded generator builds requests from the command table's names, their
option keywords, IDs the server handed out (and broken ones), numbers at
the edges of every range and random bytes. Each request must get exactly
one well-formed reply, the connection must stay usable, and the server log
must show no unexpected error (an exception escaping a handler is logged
as "Unexpected error" and drops the client: that is a bug here).
Commands that end the connection or the process (QUIT, SHUTDOWN, DEBUG
SEGFAULT-style requests, MONITOR, CLIENT KILL, CLIENT PAUSE and CLIENT REPLY)
are left out on purpose.
"""

from __future__ import annotations

import random

import pytest

from tests.support import RawClient, encode_command

SEEDS = (1, 2, 3)
REQUESTS_PER_SEED = 1500
PIPELINE = 10

COMMANDS = [b"ADDJOB", b"GETJOB", b"ACKJOB", b"FASTACK", b"DELJOB", b"SHOW", b"QLEN",
            b"QPEEK", b"QSTAT", b"QSCAN", b"JSCAN", b"ENQUEUE", b"NACK", b"DEQUEUE",
            b"WORKING", b"PAUSE", b"PING", b"INFO", b"TIME", b"COMMAND", b"HELLO",
            b"CONFIG", b"CLUSTER", b"CLIENT", b"DEBUG", b"LOADJOB", b"AUTH", b"NOSUCH"]
KEYWORDS = [b"REPLICATE", b"DELAY", b"RETRY", b"TTL", b"MAXLEN", b"ASYNC", b"NOHANG",
            b"TIMEOUT", b"COUNT", b"WITHCOUNTERS", b"FROM", b"BUSYLOOP", b"MINLEN",
            b"IMPORTRATE", b"QUEUE", b"STATE", b"REPLY", b"ALL", b"ID", b"IN", b"OUT",
            b"NONE", b"BCAST", b"GET", b"SET", b"RESETSTAT", b"INFO", b"NODES", b"LEAVING",
            b"YES", b"NO", b"queued", b"active", b"acked", b"wait-repl", b"LIST",
            b"SETNAME", b"GETNAME", b"FLUSHALL", b"maxmemory", b"hz", b"loglevel"]
NUMBERS = [b"0", b"1", b"-1", b"2", b"16", b"100", b"65535", b"65536", b"3600",
           b"9223372036854775807", b"9223372036854775808", b"-9223372036854775808",
           b"1e3", b"0x10", b" 1", b"", b"00", b"+5"]
QUEUES = [b"q", b"fuzz", b"", b"\x00\xff", b"q" * 300]
# Commands whose random arguments could stop the server or this client, or
# silence replies the fuzzer counts on.
UNSAFE = {(b"DEBUG", b"SLEEP"), (b"CLUSTER", b"RESET"), (b"CONFIG", b"SET"),
          (b"CONFIG", b"REWRITE"), (b"CLIENT", b"KILL"), (b"CLUSTER", b"MEET"),
          (b"CLIENT", b"PAUSE"), (b"CLIENT", b"REPLY")}


def random_token(rng: random.Random, ids: list[bytes]) -> bytes:
    roll = rng.random()
    if roll < 0.25:
        return rng.choice(KEYWORDS)
    if roll < 0.45:
        return rng.choice(NUMBERS)
    if roll < 0.65 and ids:
        job_id = rng.choice(ids)
        return job_id if rng.random() < 0.8 else job_id[:-1] + b"?"
    if roll < 0.8:
        return rng.choice(QUEUES)
    return rng.randbytes(rng.randrange(0, 12))


# RESP2's reply types, and RESP3's map, null, verbatim text and set (after HELLO 3)
REPLY_TYPES = (b"+", b"-", b":", b"$", b"*", b"%", b"_", b"=", b"~")


def random_request(rng: random.Random, ids: list[bytes]) -> list[bytes]:
    """A command whose first arguments usually have the right shape (so the
    handler gets past arity and subcommand checks), then random tokens."""
    while True:
        name = rng.choice(COMMANDS)
        shape = SHAPES.get(name)
        argv = [name if rng.random() < 0.8 else name.lower()]
        if shape is not None and rng.random() < 0.85:
            argv += [pick(rng, ids) for pick in shape]
        extra = rng.choice((0, 0, 1, 2, 4, 6))
        argv += [random_token(rng, ids) for _ in range(extra)]
        upper = [arg.upper() for arg in argv]
        if name == b"GETJOB" and (b"NOHANG" not in upper or b"TIMEOUT" in upper):
            continue                 # never block the fuzzing connection
        if len(argv) > 1 and (name, upper[1]) in UNSAFE:
            continue
        return argv


def _one_of(*choices):
    return lambda rng, ids: rng.choice(choices)


def _queue(rng, ids):
    return rng.choice(QUEUES)


def _number(rng, ids):
    return rng.choice(NUMBERS)


def _job_id(rng, ids):
    return rng.choice(ids) if ids and rng.random() < 0.9 else random_token(rng, ids)


def _body(rng, ids):
    return rng.randbytes(rng.randrange(0, 40))


SHAPES = {
    b"ADDJOB": (_queue, _body, _one_of(b"0", b"0", b"1", b"-1", b"x")),
    b"GETJOB": (_one_of(b"NOHANG"), _one_of(b"COUNT", b"WITHCOUNTERS", b"FROM"), _number,
                _one_of(b"FROM"), _queue),
    b"QPEEK": (_queue, _number),
    b"SHOW": (_job_id,), b"WORKING": (_job_id,), b"QLEN": (_queue,), b"QSTAT": (_queue,),
    b"ACKJOB": (_job_id, _job_id), b"FASTACK": (_job_id,), b"DELJOB": (_job_id,),
    b"ENQUEUE": (_job_id,), b"NACK": (_job_id,), b"DEQUEUE": (_job_id,),
    b"QSCAN": (_number,), b"JSCAN": (_number,),
    b"PAUSE": (_queue, _one_of(b"in", b"out", b"all", b"none", b"state", b"bcast")),
    b"CONFIG": (_one_of(b"GET", b"RESETSTAT"), _one_of(b"*", b"maxmemory", b"hz", b"port")),
    b"CLUSTER": (_one_of(b"NODES", b"INFO", b"MYID", b"FORGET", b"LEAVING", b"SAVECONFIG"),
                 _one_of(b"no", b"yes", b"maybe")),
    b"CLIENT": (_one_of(b"LIST", b"GETNAME", b"SETNAME", b"SETINFO"), _body),
    b"DEBUG": (_one_of(b"FLUSHALL", b"ERROR", b"AOF-FAULT"), _body),
    b"HELLO": (_one_of(b"2", b"3", b"4", b"x"),),
}


def job_ids_in(reply: bytes) -> list[bytes]:
    found, start = [], 0
    while (start := reply.find(b"D-", start)) >= 0:
        candidate = reply[start:start + 40]
        if len(candidate) == 40 and candidate[10:11] == b"-" and candidate[35:36] == b"-":
            found.append(candidate)
        start += 2
    return found


@pytest.mark.parametrize("seed", SEEDS)
def test_random_commands_get_one_reply_each_and_never_break_the_server(fresh_server, seed):
    rng = random.Random(seed)
    raw = RawClient(fresh_server.port)
    ids: list[bytes] = []
    sent = 0
    while sent < REQUESTS_PER_SEED:
        batch = [random_request(rng, ids) for _ in range(PIPELINE)]
        raw.send(b"".join(encode_command(*argv) for argv in batch))
        for argv in batch:
            reply = raw.read_reply()
            assert reply[:1] in REPLY_TYPES, (argv, reply)
            ids.extend(job_ids_in(reply))
        del ids[:-200]
        sent += len(batch)
    assert raw.call("PING") == b"+PONG\r\n"
    fresh_server.client().execute_command("DEBUG", "FLUSHALL")
    assert fresh_server.alive()
    log = fresh_server.log_text()
    assert "Unexpected error" not in log, log[-4000:]
