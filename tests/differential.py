"""Differential check: the same random commands to Disque and to disque-py.

    python -m tests.differential --disque PATH [--seeds 0:300] [--commands 200]

Starts the original disque-server (PATH; Debian does not package it, so
this is not part of make test) and a disque-py node, both alone on
loopback, and sends each seed's commands (tests/integration/
test_fuzz_commands.py's generator) to both, one at a time. Replies must be
byte-identical once what legitimately differs is masked: job IDs (mapped
in order of appearance, so the same job must be named in the same place),
node IDs, and the time fields of SHOW and QSTAT. IDs the generator picks
from Disque's replies are translated to ours before sending.

Left out on purpose: commands whose replies describe the process or the
hash layout (INFO, TIME, COMMAND, HELLO, CONFIG, CLUSTER, CLIENT, DEBUG,
QSCAN and JSCAN cursors, LOADJOB), malformed job IDs, which disque-py
refuses with -BADID everywhere (a documented difference), and NACK with a
DELAY word, an option of ours (docs/beyond-disque.md) that Disque reads as
a malformed ID. Prints each kind
of difference once with an example; exits 1 if there was any.
"""

from __future__ import annotations

import argparse
import collections
import random
import re
import subprocess
import sys
import tempfile

from tests.integration.test_fuzz_commands import job_ids_in, random_request
from tests.support import HOST, RawClient, ServerProcess, free_port

SKIPPED = {b"INFO", b"TIME", b"COMMAND", b"HELLO", b"CONFIG", b"CLUSTER", b"CLIENT",
           b"DEBUG", b"JSCAN", b"QSCAN", b"LOADJOB"}
JOB_ID = re.compile(rb"D-[0-9a-fA-F]{8}-[A-Za-z0-9+/]{24}-[0-9a-fA-F]{4}")
NODE_ID = re.compile(rb"\$40\r\n[0-9a-f]{40}\r\n")
TIME_FIELD = re.compile(rb"(\$\d+\r\n(?:ttl|ctime|next-requeue-within|next-awake-within"
                        rb"|age|idle)\r\n)(?::-?\d+|\$-1)\r\n")


class OriginalDisque(ServerProcess):
    def __init__(self, binary: str, directory) -> None:
        super().__init__(directory)
        self.binary = binary

    def command_line(self) -> list[str]:
        return [self.binary, "--port", str(self.port), "--bind", HOST, "--dir", str(self.dir),
                "--logfile", str(self.log_path)]


def masked(reply: bytes, job_names: dict) -> bytes:
    reply = JOB_ID.sub(lambda m: b"<job %d>" % job_names.setdefault(m.group(0),
                                                                   len(job_names)), reply)
    reply = TIME_FIELD.sub(lambda m: m.group(1) + b"<time>\r\n", reply)
    return NODE_ID.sub(b"<node>", reply)


def comparable(argv: list[bytes]) -> bool:
    if argv[0].upper() in SKIPPED:
        return False
    if argv[0].upper() == b"NACK" and any(arg.upper() == b"DELAY" for arg in argv[1:]):
        return False            # NACK ... DELAY is ours (Disque reads DELAY as a bad ID)
    return not any(arg.startswith(b"D-") and arg.endswith(b"?") for arg in argv)


def play(seed: int, commands: int, theirs: RawClient, ours: RawClient, found: dict) -> None:
    rng = random.Random(seed)
    for client in (theirs, ours):
        client.call("DEBUG", "FLUSHALL")
    their_names: dict = {}
    our_names: dict = {}
    their_ids: list[bytes] = []
    for _ in range(commands):
        argv = random_request(rng, their_ids)
        if not comparable(argv):
            continue
        by_number = {number: job_id for job_id, number in our_names.items()}
        our_argv = [by_number.get(their_names.get(arg), arg) for arg in argv]
        their_reply = theirs.call(*argv)
        our_reply = ours.call(*our_argv)
        their_ids = (their_ids + job_ids_in(their_reply))[-100:]
        expected, got = masked(their_reply, their_names), masked(our_reply, our_names)
        if expected != got:
            kind = (argv[0].upper(), expected[:60], got[:60])
            found.setdefault(kind, (seed, argv, their_reply[:200], our_reply[:200], 0))
            first = found[kind]
            found[kind] = first[:4] + (first[4] + 1,)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--disque", required=True, help="the original disque-server binary")
    parser.add_argument("--seeds", default="0:300", help="first:last (exclusive)")
    parser.add_argument("--commands", type=int, default=200, help="commands per seed")
    args = parser.parse_args(argv)
    first, last = (int(part) for part in args.seeds.split(":"))
    with tempfile.TemporaryDirectory(prefix="differential-") as base:
        theirs = OriginalDisque(args.disque, f"{base}/disque").start()
        ours = ServerProcess(f"{base}/disque-py", port=free_port()).start()
        found: dict = collections.OrderedDict()
        try:
            their_client, our_client = theirs.raw(), ours.raw()
            for seed in range(first, last):
                play(seed, args.commands, their_client, our_client, found)
        except (OSError, subprocess.SubprocessError) as error:
            print(f"a server went away: {error}", file=sys.stderr)
            return 2
        finally:
            theirs.stop()
            ours.stop()
    for (name, _, _), (seed, request, their_reply, our_reply, count) in found.items():
        print(f"{count}x {name.decode()} (first at seed {seed}): {request!r}\n"
              f"  disque:    {their_reply!r}\n  disque-py: {our_reply!r}")
    print(f"seeds {first}..{last - 1}: {len(found)} kind(s) of difference")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
