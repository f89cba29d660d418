"""Every snippet of README.md and docs/*.md runs as written.

The fenced blocks tagged `python` or `sh` are run against real nodes; other
blocks (Disque's command syntax, config files, log lines) are text. What
"as written" allows, and nothing more:

- Ports. Snippets name the ports of `make run`'s node and its neighbours:
  client ports 7700-7799 (7711, 7712, ...) and HTTP ports 9700-9799. Each
  number gets a free loopback port (tests.support.free_port) and is
  rewritten everywhere in the block, paths such as `run/7711/` included,
  so a run never meets a node a developer keeps on 7711.
- Nodes. Unless a block starts its own (it runs `disque-server`,
  `disque-py server` or `python -m disque_py`), the test starts one node
  per client port the block names, from a config file (so CONFIG REWRITE
  works), with its files in `run/<port>/` as `make run` keeps them.
- The directory. Snippets run in a scratch directory made to look like
  the checkout (its top-level entries symlinked, `.venv` the venv running
  the tests), so `.venv/bin/...`, `spark_jobs/` and `python -m tests.sim`
  resolve while what the snippets write stays out of the repository.
  PATH leaves the venv out: a reader's venv is not activated either.
- python blocks run in a subprocess with the venv's python.
- sh blocks run command by command in one bash (variables carry over, as
  in a terminal). A command that starts a server in the foreground is run
  in the background instead, waited on until it answers (and its
  `--http-port`, if any, serves /healthz), and stopped at the next such
  command or at the block's end. Every command must exit 0.
- Output. `$ command` followed by lines shows a command and its output;
  they must match line for line, but for job IDs: a job ID the block shows
  stands for the one the node made, and later commands of the block that
  use it are given the real one. redis-cli prints the format the docs show
  only to a terminal, so redis-cli and `disque` get `--no-raw`; a line
  starting `(error)` fails the command unless the block shows it. `disque`
  with no `-p` talks to its default, 7711: it gets `-p` and the port 7711
  was given.

Markup, an HTML comment on the line before the fence (GitHub shows none):

- `<!-- not run: REASON -->`: the block needs what CI cannot run (Disque's
  own binary, a server left in the foreground, minutes of load). It is
  skipped with its reason, so `pytest -ra` lists every one, and
  test_not_run_blocks_are_few_and_justified keeps their number down.
- `<!-- run against: tls -->`: the block's client ports are TLS ports of
  nodes the test starts with certificates from disque_py/tools/pki.py; `ca.crt`,
  `client.crt` and `client.key` are in the working directory.
- `<!-- run against: aof -->`: the test's nodes run with `appendonly yes`.
"""

from __future__ import annotations

import os
import re
import secrets
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from disque_py.tools.pki import Pki
from tests.support import HOST, ServerProcess, free_port, wait_for

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
VENV = Path(sys.prefix)

# A new exemption should be rare: raise this only with a reason in its comment.
MAX_NOT_RUN = 8
RUN_AGAINST = {"tls", "aof"}

FENCE = re.compile(r"^```(\S*)\s*$")
DIRECTIVE = re.compile(r"^<!--\s*(not run|run against):\s*(.*?)\s*-->\s*$")
DOC_PORT = re.compile(r"(?<![\d.])(?:77|97)\d\d(?!\d)")
JOB_ID = re.compile(r"D-[0-9a-f]{8}-[A-Za-z0-9+/]{24}-[0-9a-f]{4}")
CLIENT = re.compile(r"(?<![\w./-])((?:\.venv/bin/)?(?:redis-cli|disque))(?=\s)")
SELF_SERVED = re.compile(r"disque-server|disque-py server|-m disque_py")
# What a block holds when it is a command to run, whatever its tag says.
LOOKS_RUNNABLE = re.compile(r"^(\$ |redis-cli |disque |\.venv/|make |python|curl |for |mkdir )")

COMMAND_TIMEOUT_S = 300  # a deadline for a hung command, not a speed budget
START_TIMEOUT_S = 60


@dataclass
class Block:
    page: Path
    line: int          # of the opening fence, 1-based
    lang: str
    text: str
    not_run: str | None = None
    run_against: set[str] = field(default_factory=set)

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def parse(page: Path) -> tuple[list[Block], list[str]]:
    """The fenced blocks of a page, and what is wrong with its markup."""
    lines = page.read_text().splitlines()
    blocks, problems = [], []
    where = page.relative_to(ROOT)
    index = 0
    while index < len(lines):
        directive = DIRECTIVE.match(lines[index])
        if directive and not (index + 1 < len(lines) and FENCE.match(lines[index + 1])):
            problems.append(f"{where}:{index + 1}: a snippet directive not right before a fence")
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = next((at for at in range(index + 1, len(lines)) if lines[at].strip() == "```"), None)
        if end is None:
            problems.append(f"{where}:{index + 1}: a fence that is never closed")
            break
        block = Block(page, index + 1, opening.group(1), "\n".join(lines[index + 1:end]) + "\n")
        before = DIRECTIVE.match(lines[index - 1]) if index else None
        if before and before.group(1) == "not run":
            block.not_run = before.group(2)
            if not block.not_run:
                problems.append(f"{block.name}: `not run` needs a reason")
        elif before:
            block.run_against = set(before.group(2).split())
            unknown = block.run_against - RUN_AGAINST
            if unknown:
                problems.append(f"{block.name}: unknown `run against` {sorted(unknown)}")
        if block.lang not in ("python", "sh"):
            if before:
                problems.append(f"{block.name}: a directive on a block that never runs")
            if any(LOOKS_RUNNABLE.match(line) for line in block.text.splitlines()):
                problems.append(f"{block.name}: holds commands but is not tagged sh or python")
        blocks.append(block)
        index = end + 1
    return blocks, problems


def all_blocks() -> tuple[list[Block], list[str]]:
    blocks, problems = [], []
    for page in PAGES:
        found, wrong = parse(page)
        blocks += found
        problems += wrong
    return blocks, problems


BLOCKS, MARKUP_PROBLEMS = all_blocks()
SNIPPETS = [block for block in BLOCKS if block.lang in ("python", "sh")]


def test_the_markup_is_sound():
    assert not MARKUP_PROBLEMS, "\n".join(MARKUP_PROBLEMS)
    assert SNIPPETS, "no snippets found: the pages moved?"


def test_not_run_blocks_are_few_and_justified():
    skipped = [f"{block.name}: {block.not_run}" for block in SNIPPETS if block.not_run]
    assert len(skipped) <= MAX_NOT_RUN, "\n".join(skipped)
    print(f"{len(skipped)} of {len(SNIPPETS)} snippets not run:", *skipped, sep="\n  ")


# -- ports, nodes and the scratch directory ----------------------------------------

def port_map(text: str) -> dict[str, int]:
    named = set(DOC_PORT.findall(text)) | set(client_ports(text))
    return {number: free_port() for number in sorted(named)}


def client_ports(text: str) -> list[str]:
    named = set(DOC_PORT.findall(text))
    if re.search(r"(?<![\w./-])(?:\.venv/bin/)?disque\s(?!.*\s-p\s)", text):
        named.add("7711")   # `disque` with no -p: its default port
    return sorted(number for number in named if number.startswith("77"))


def scratch_checkout(directory: Path) -> Path:
    """A directory that looks like the checkout to the snippets."""
    assert (VENV / "bin" / "disque-server").exists(), \
        f"run the tests with the venv's python (`make test`); {VENV} has no disque-server"
    directory.mkdir(parents=True, exist_ok=True)
    for entry in ROOT.iterdir():
        if entry.name not in (".git", ".venv", "run", ".pytest_cache"):
            (directory / entry.name).symlink_to(entry)
    (directory / ".venv").symlink_to(VENV)
    return directory


def snippet_env() -> dict[str, str]:
    """This environment as a shell that never activated the venv has it."""
    venv_bin = (VENV / "bin").resolve()
    env = {name: value for name, value in os.environ.items()
           if name not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(entry for entry in env.get("PATH", "").split(os.pathsep)
                                  if entry and Path(entry).resolve() != venv_bin)
    return env


def answers_ping(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def healthy(http_port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{http_port}/healthz", timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


def shut_down(port: int) -> None:
    """Stop whatever node a block left on `port` (daemonized ones included)."""
    try:
        with socket.create_connection((HOST, port), timeout=2) as sock:
            sock.sendall(b"SHUTDOWN NOSAVE\r\n")
            sock.recv(64)
    except OSError:
        return
    wait_for(lambda: not answers_ping(port), 30, message=f"the node on {port} to stop")


class Nodes:
    """The nodes the test starts for a block, and the ones the block starts."""

    def __init__(self, scratch: Path, ports: dict[str, int]) -> None:
        self.scratch = scratch
        self.ports = ports
        self.started: list[ServerProcess] = []
        self.foreground: subprocess.Popen | None = None
        self.log = scratch / "foreground.log"

    def start_for(self, block: Block, tmp_path: Path) -> None:
        args = ["--appendonly", "yes"] if "aof" in block.run_against else []
        pki = Pki(tmp_path / "pki") if "tls" in block.run_against else None
        if pki:
            server, client = pki.issue("node"), pki.issue("client")
            shutil.copy(pki.ca, self.scratch / "ca.crt")
            shutil.copy(client.cert, self.scratch / "client.crt")
            shutil.copy(client.key, self.scratch / "client.key")
        for number in client_ports(block.text):
            port = self.ports[number]
            node_args = list(args)
            if pki:   # the port the snippet names is the TLS one; the plain one is elsewhere
                node_args += ["--tls-port", str(port), "--tls-cert-file", str(server.cert),
                              "--tls-key-file", str(server.key), "--tls-ca-cert-file", str(pki.ca)]
                port = free_port()
            node = ServerProcess(self.scratch / "run" / str(port), port=port, args=node_args,
                                 config_text="")
            self.started.append(node)
            node.start()

    def start_foreground(self, command: str, block_ports: list[int]) -> None:
        """A server the snippet leaves in the foreground, run in the background."""
        self.stop_foreground()
        words = shlex.split(command, comments=True)
        port = int(option(words, "--port") or single(block_ports, command))
        http_port = option(words, "--http-port")
        with open(self.log, "ab") as log:
            self.foreground = subprocess.Popen(["bash", "-c", "exec " + command], cwd=self.scratch,
                                               env=snippet_env(), stdout=log, stderr=log,
                                               start_new_session=True)

        deadline = time.monotonic() + START_TIMEOUT_S
        while not (answers_ping(port) and (http_port is None or healthy(int(http_port)))):
            assert self.foreground.poll() is None, \
                f"`{command}` exited with {self.foreground.returncode}:\n" \
                f"{self.log.read_text(errors='replace')}"
            assert time.monotonic() < deadline, \
                f"`{command}` did not serve within {START_TIMEOUT_S}s:\n" \
                f"{self.log.read_text(errors='replace')}"
            time.sleep(0.05)

    def stop_foreground(self) -> None:
        if self.foreground is not None and self.foreground.poll() is None:
            self.foreground.send_signal(signal.SIGTERM)
            try:
                self.foreground.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.foreground.pid, signal.SIGKILL)
                self.foreground.wait()
        self.foreground = None

    def stop_all(self) -> None:
        self.stop_foreground()
        for node in self.started:
            node.stop()
        for number, port in self.ports.items():
            if number.startswith("77"):
                shut_down(port)


def option(words: list[str], name: str) -> str | None:
    return words[words.index(name) + 1] if name in words[:-1] else None


def single(ports: list[int], command: str) -> int:
    assert len(ports) == 1, f"`{command}` names no --port, and the block names {len(ports)}"
    return ports[0]


def starts_foreground_server(command: str) -> bool:
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return False
    if not words or "--daemonize" in words and option(words, "--daemonize") == "yes":
        return False
    program = Path(words[0]).name
    return (program == "disque-server"
            or program == "disque-py" and words[1:2] == ["server"]
            or program.startswith("python") and words[1:3] == ["-m", "disque_py"])


# -- the shell -----------------------------------------------------------------------

class Shell:
    """One bash for a block's commands, as a terminal would be."""

    def __init__(self, cwd: Path) -> None:
        self.proc = subprocess.Popen(["bash", "--noprofile", "--norc"], cwd=cwd,
                                     env=snippet_env(), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.run("set -o pipefail")

    def run(self, command: str) -> tuple[int, str]:
        """Run one command; its exit status and its output (stderr included).

        The command reads no input (its stdin would be the script), and a
        marker with its status ends its output: the shell stays for the next."""
        marker = f"snippet-done-{secrets.token_hex(8)}"
        script = f"{{\n{command}\n}} </dev/null 2>&1\nprintf '\\n{marker} %s\\n' \"$?\"\n"
        self.proc.stdin.write(script.encode())
        self.proc.stdin.flush()
        done = re.compile(rb"\n" + marker.encode() + rb" (\d+)\n")
        data = b""
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while not (found := done.search(data)):
            left = deadline - time.monotonic()
            assert left > 0, f"`{command}` still running after {COMMAND_TIMEOUT_S}s:\n{data!r}"
            if select.select([self.proc.stdout], [], [], min(left, 1.0))[0]:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                assert chunk, f"bash ended during `{command}`:\n{data.decode(errors='replace')}"
                data += chunk
        return int(found.group(1)), data[:found.start()].decode(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@dataclass
class Command:
    text: str
    shown: list[str] | None   # the output the block shows, if it shows one


HEREDOC = re.compile(r"<<-?\s*'?\"?(\w+)")


def commands_of(text: str) -> list[Command]:
    """A sh block's commands: `$ ` lines with the output under them, or
    lines joined until bash reads them as whole (a loop, a continuation, a
    heredoc)."""
    lines = text.splitlines()
    if any(line.startswith("$ ") for line in lines):
        commands: list[Command] = []
        for line in lines:
            if line.startswith("$ "):
                commands.append(Command(line[2:], []))
            else:
                assert commands, f"output before any `$ ` command: {line!r}"
                commands[-1].shown.append(line)
        for command in commands:
            while command.shown and not command.shown[-1].strip():
                command.shown.pop()
            if not command.shown:
                command.shown = None
        return commands
    commands, pending = [], []
    heredoc_end = None
    for line in lines:
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue   # a blank line or a comment between commands
        pending.append(line)
        if heredoc_end is None and (opened := HEREDOC.search(line)):
            heredoc_end = opened.group(1)
        if heredoc_end is not None:
            if line != heredoc_end:
                continue        # bash -n accepts a heredoc cut short: read to its end
            heredoc_end = None
        if line.endswith("\\"):
            continue
        joined = "\n".join(pending)
        if subprocess.run(["bash", "-n"], input=joined, text=True,
                          capture_output=True).returncode == 0:
            commands.append(Command(joined, None))
            pending = []
    assert not pending, f"an unfinished command at the end of the block: {pending}"
    return commands


def for_the_test(command: str, ports: dict[str, int], job_ids: dict[str, str]) -> str:
    """The command as the test runs it: real job IDs, terminal format, `disque`'s port."""
    for shown, real in job_ids.items():
        command = command.replace(shown, real)

    def client(match: re.Match) -> str:
        program = match.group(1)
        extra = " --no-raw"
        if Path(program).name == "disque" and not re.search(r"\s-p\s", command):
            extra += f" -p {ports['7711']}"
        return program + extra
    return CLIENT.sub(client, command)


def matches(shown: list[str], printed: list[str], job_ids: dict[str, str]) -> bool:
    """Whether the output matches what the block shows, binding the job IDs it shows."""
    if len(shown) != len(printed):
        return False
    bound = dict(job_ids)
    for want, got in zip(shown, printed):
        pattern, names = "", []
        last = 0
        for found in JOB_ID.finditer(want):
            pattern += re.escape(want[last:found.start()])
            if found.group() in bound:
                pattern += re.escape(bound[found.group()])
            else:
                pattern += f"({JOB_ID.pattern})"
                names.append(found.group())
            last = found.end()
        pattern += re.escape(want[last:])
        result = re.fullmatch(pattern, got.rstrip())
        if not result:
            return False
        for name, value in zip(names, result.groups()):
            if bound.setdefault(name, value) != value:
                return False
    job_ids.update(bound)
    return True


def run_sh(block: Block, text: str, scratch: Path, nodes: Nodes, ports: dict[str, int]) -> None:
    shell = Shell(scratch)
    job_ids: dict[str, str] = {}
    client_port_list = [ports[number] for number in client_ports(block.text)]
    try:
        for command in commands_of(text):
            if starts_foreground_server(command.text):
                nodes.start_foreground(command.text, client_port_list)
                continue
            status, output = shell.run(for_the_test(command.text, ports, job_ids))
            where = f"{block.name}: `{command.text}`"
            assert status == 0, f"{where} exited with {status}:\n{output}"
            printed = output.rstrip("\n").splitlines()
            if command.shown is None:
                errors = [line for line in printed if line.startswith("(error)")]
                assert not errors, f"{where} answered an error:\n{output}"
            else:
                assert matches(command.shown, printed, job_ids), \
                    f"{where} printed\n{output}\nwhere the block shows\n" + "\n".join(command.shown)
    finally:
        shell.close()


def run_python(block: Block, text: str, scratch: Path) -> None:
    script = scratch / "snippet.py"
    script.write_text(text)
    done = subprocess.run([sys.executable, script.name], cwd=scratch, env=snippet_env(),
                          capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    assert done.returncode == 0, f"{block.name} failed:\n{done.stdout}{done.stderr}"


@pytest.mark.timeout(900)
@pytest.mark.parametrize("block", SNIPPETS, ids=[block.name for block in SNIPPETS])
def test_snippet_runs_as_written(block, tmp_path):
    if block.not_run:
        pytest.skip(f"{block.name} not run: {block.not_run}")
    scratch = scratch_checkout(tmp_path / "checkout")
    ports = port_map(block.text)
    text = DOC_PORT.sub(lambda found: str(ports[found.group()]), block.text)
    nodes = Nodes(scratch, ports)
    try:
        if not SELF_SERVED.search(block.text):
            nodes.start_for(block, tmp_path)
        if block.lang == "python":
            run_python(block, text, scratch)
        else:
            run_sh(block, text, scratch, nodes, ports)
    finally:
        nodes.stop_all()
