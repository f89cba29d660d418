"""`disque`, Disque's command-line client: redis-cli with 7711 as its
default port. The installed script runs the real redis-cli against a real
server; the default port is checked on the argv handed to redis-cli, since
a test cannot count on 7711 being free."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from disque_py.tools import launcher

DISQUE = Path(sys.executable).with_name("disque")


def _disque(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(DISQUE), *args], capture_output=True, text=True,
                          timeout=30, env=env)


def test_disque_talks_to_the_port_it_is_given(server):
    added = _disque("-p", str(server.port), "ADDJOB", "q", "hello world", "0")
    job_id = added.stdout.strip()
    assert added.returncode == 0 and job_id.startswith("D-") and len(job_id) == 40
    assert _disque("-p", str(server.port), "QLEN", "q").stdout.strip() == "1"
    shown = _disque("-p", str(server.port), "SHOW", job_id).stdout
    assert "hello world" in shown


def test_disque_without_a_port_asks_redis_cli_for_7711(monkeypatch):
    called = []
    monkeypatch.setattr(os, "execvp", lambda file, argv: called.append((file, argv)))
    launcher.client_main(["-h", "127.0.0.1", "QLEN", "q"])
    assert called == [("redis-cli", ["redis-cli", "-p", "7711", "-h", "127.0.0.1",
                                     "QLEN", "q"])]


def test_disque_says_what_is_missing_without_redis_cli():
    finished = _disque("PING", env={**os.environ, "PATH": "/nonexistent"})
    assert finished.returncode == 127
    assert "redis-cli is needed" in finished.stderr
