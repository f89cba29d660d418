"""/metrics over a real socket: the format, the figures, the directives.

A real disque-server with its HTTP endpoint on a free loopback port; a
scripted workload over RESP (redis-py); the scrape parsed with
prometheus_client's parser and checked by `promtool check metrics`; every
figure INFO also shows compared with INFO. Then the directives: http-port 0
(the default) opens no port, CONFIG GET shows both, bad values stop the
start as any directive's do.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from disque_py.web.census import MAX_EXPORTED_QUEUES
from tests.support import HOST, ServerProcess, free_port, wait_for
from tests.web_support import (http_cluster, http_get, http_server, listening_ports, metrics_text,
                               parse_metrics, scrape, value)

SERVER_BIN = str(Path(sys.executable).with_name("disque-server"))
PROMTOOL = shutil.which("promtool", path=str(Path(sys.executable).parent)) or \
    shutil.which("promtool")
RUN_TIMEOUT_S = 30
LOOPBACK_HEX = "0100007F"          # 127.0.0.1 as /proc/net/tcp writes it
CONTENT_TYPE = "text/plain"


@pytest.fixture
def node(tmp_path):
    proc, http_port = http_server(tmp_path / "node")
    proc.start()
    proc.http_port = http_port
    yield proc
    proc.stop()


def info_fields(client, section: str = "all") -> dict:
    return client.info(section)


def run_workload(client) -> dict[str, list[bytes]]:
    """ADDJOB, GETJOB, ACKJOB, FASTACK, NACK; the IDs, by queue."""
    ids = {queue: [client.execute_command("ADDJOB", queue, f"body{n}", 0) for n in range(count)]
           for queue, count in (("q1", 5), ("q2", 3))}
    taken = client.execute_command("GETJOB", "COUNT", 3, "FROM", "q1")
    first, second, third = (job[1] for job in taken)
    assert client.execute_command("ACKJOB", first) == 1
    assert client.execute_command("FASTACK", second) == 1
    assert client.execute_command("NACK", third) == 1
    return ids


def test_metrics_is_prometheus_text_that_promtool_accepts(node):
    run_workload(node.client())
    status, headers, body = http_get(node.http_port, "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith(CONTENT_TYPE)
    families = parse_metrics(body.decode())
    assert all(name.startswith(("disque_", "process_")) for name, _ in families)
    assert PROMTOOL, "promtool is missing: `make system-deps` installs it"
    checked = subprocess.run([PROMTOOL, "check", "metrics"], input=body,
                             capture_output=True, timeout=RUN_TIMEOUT_S)
    assert checked.returncode == 0 and not checked.stdout and not checked.stderr, \
        checked.stdout + checked.stderr


def test_job_figures_match_the_workload_and_info(node):
    client = node.client()
    run_workload(node.client())
    fields = info_fields(client)
    samples = scrape(node.http_port)
    assert value(samples, "disque_jobs_created_total") == fields["total_jobs_created"] == 8
    assert value(samples, "disque_jobs_delivered_total") == 3
    assert value(samples, "disque_jobs_acked_total") == 2
    assert value(samples, "disque_jobs_nacked_total") == 1
    assert value(samples, "disque_jobs_requeued_total") == 0
    by_state = {state: value(samples, "disque_jobs", state=state)
                for state in ("wait-repl", "active", "queued", "acked")}
    assert by_state == {"wait-repl": 0, "active": 0, "queued": 6, "acked": 0}
    assert sum(by_state.values()) == fields["registered_jobs"]
    assert value(samples, "disque_queues") == fields["registered_queues"] == 2
    for queue in ("q1", "q2"):
        assert value(samples, "disque_queue_jobs", queue=queue) == \
            client.execute_command("QLEN", queue) == 3
        assert value(samples, "disque_queue_oldest_job_age_seconds", queue=queue) >= 0
    assert value(samples, "disque_other_queues") == value(samples, "disque_other_queues_jobs") == 0


def test_node_figures_match_info(node):
    client = node.client()
    run_workload(client)
    fields = info_fields(client)
    samples = scrape(node.http_port)
    for metric, field in (("disque_connected_clients", "connected_clients"),
                          ("disque_blocked_clients", "blocked_clients"),
                          ("disque_memory_used_bytes", "used_memory_dataset"),
                          ("disque_memory_max_bytes", "maxmemory"),
                          ("disque_aof_enabled", "aof_enabled"),
                          ("disque_loading", "loading"),
                          ("disque_cluster_size", "cluster_size")):
        assert value(samples, metric) == fields[field], metric
    assert value(samples, "disque_cluster_nodes", state="ok") == 1
    for name, stats in fields.items():
        if name.startswith("cmdstat_") and name != "cmdstat_info":
            command = name[len("cmdstat_"):]
            assert value(samples, "disque_command_calls_total", command=command) == \
                stats["calls"], command
            assert value(samples, "disque_command_duration_seconds_total",
                         command=command) == pytest.approx(stats["usec"] / 1e6, abs=1e-6)
    assert value(samples, "disque_timer_lateness_seconds_count") > 0


def test_timers_count_requeues_and_expiries(node):
    client = node.client()
    client.execute_command("ADDJOB", "retried", "x", 0, "RETRY", 1)
    client.execute_command("GETJOB", "FROM", "retried")
    client.execute_command("ADDJOB", "short", "x", 0, "TTL", 1, "RETRY", 0, "REPLICATE", 1)
    wait_for(lambda: value(scrape(node.http_port), "disque_jobs_requeued_total") == 1, 10,
             message="the RETRY timer's re-queue")
    wait_for(lambda: value(scrape(node.http_port), "disque_jobs_expired_total") == 1, 10,
             message="the TTL's expiry")
    assert client.execute_command("QLEN", "retried") == 1


def test_only_the_longest_queues_are_exported_the_rest_summed(node):
    client = node.client()
    pipe = client.pipeline(transaction=False)
    extra = 10
    for index in range(MAX_EXPORTED_QUEUES):
        pipe.execute_command("ADDJOB", f"small{index}", "x", 0)
    for index in range(extra):
        for _ in range(3):
            pipe.execute_command("ADDJOB", f"big{index}", "x", 0)
    pipe.execute()
    samples = scrape(node.http_port)
    exported = {labels[0][1]: jobs for (name, labels), jobs in samples.items()
                if name == "disque_queue_jobs"}
    assert len(exported) == MAX_EXPORTED_QUEUES
    assert all(exported[f"big{index}"] == 3 for index in range(extra))
    assert value(samples, "disque_other_queues") == extra
    assert value(samples, "disque_other_queues_jobs") == extra
    assert value(samples, "disque_queues") == MAX_EXPORTED_QUEUES + extra


def test_metrics_of_a_cluster_name_each_peer(tmp_path):
    cluster, http_ports = http_cluster(tmp_path, 2)
    try:
        cluster.start()
        cluster.meet_chain()
        cluster[0].client().execute_command("ADDJOB", "q", "x", 0, "REPLICATE", 2)
        samples = scrape(http_ports[0])
        peer = cluster.ids[1]
        assert value(samples, "disque_peer_reachable", peer=peer) == 1
        assert value(samples, "disque_bus_sent_frames_total", peer=peer) > 0
        assert value(samples, "disque_bus_received_bytes_total", peer=peer) > 0
        assert value(samples, "disque_peer_replication_round_trip_seconds", peer=peer) >= 0
        assert value(samples, "disque_cluster_nodes", state="ok") == 2
        checked = subprocess.run([PROMTOOL, "check", "metrics"],
                                 input=metrics_text(http_ports[0]).encode(),
                                 capture_output=True, timeout=RUN_TIMEOUT_S)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    finally:
        cluster.stop()


# ---------------------------------------------------------------- directives


def test_http_port_0_is_the_default_and_opens_nothing(tmp_path):
    proc = ServerProcess(tmp_path / "node").start()
    try:
        client = proc.client()
        assert client.config_get("http-*") == {"http-port": "0", "http-bind": ""}
        # The bus may start listening a moment after the client port answers.
        wait_for(lambda: {port for _, port in listening_ports(proc.pid)}
                 == {proc.port, proc.port + 10000}, message="the client and bus ports only")
        # Not even aiohttp's compiled parser is loaded: HTTP off costs nothing.
        assert "aiohttp" not in Path(f"/proc/{proc.pid}/maps").read_text()
    finally:
        proc.stop()


def test_config_get_shows_the_directives_and_http_follows_bind(node):
    assert node.client().config_get("http-*") == {"http-port": str(node.http_port),
                                                  "http-bind": ""}
    assert (LOOPBACK_HEX, node.http_port) in listening_ports(node.pid)   # bind's address


def test_http_bind_gives_the_address(tmp_path):
    proc, http_port = http_server(tmp_path / "node", "--http-bind", HOST)
    proc.start()
    try:
        assert proc.client().config_get("http-bind") == {"http-bind": HOST}
        assert http_get(http_port, "/healthz")[0] == 200
    finally:
        proc.stop()


def test_http_directives_are_not_set_at_run_time(node):
    with pytest.raises(redis.ResponseError, match="Unsupported CONFIG parameter: http-port"):
        node.client().config_set("http-port", 0)


@pytest.mark.parametrize("word", ["70000", "-1", "http", ""])
def test_a_bad_http_port_stops_the_start_naming_the_directive(tmp_path, word):
    result = subprocess.run([SERVER_BIN, "--port", str(free_port()), "--bind", HOST,
                             "--dir", str(tmp_path), "--http-port", word],
                            capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 1
    assert "directive 'http-port'" in result.stderr


@pytest.mark.parametrize("clash", ["port", "bus"])
def test_an_http_port_that_is_another_of_the_nodes_ports_is_refused(tmp_path, clash):
    port = free_port()
    http_port = port if clash == "port" else port + 10000
    result = subprocess.run([SERVER_BIN, "--port", str(port), "--bind", HOST,
                             "--dir", str(tmp_path), "--http-port", str(http_port)],
                            capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 1
    assert f"http-port {http_port} is also" in result.stdout + result.stderr


def test_a_taken_http_port_stops_the_start_saying_so(tmp_path):
    port, http_port = free_port(), free_port()
    with socket.socket() as taken:
        taken.bind((HOST, http_port))
        taken.listen()
        result = subprocess.run([SERVER_BIN, "--port", str(port), "--bind", HOST,
                                 "--dir", str(tmp_path), "--http-port", str(http_port)],
                                capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 1
    assert f"Could not listen for HTTP on {HOST}:{http_port}" in result.stdout + result.stderr


@pytest.mark.parametrize("through", ["options", "environment"])
def test_disque_py_server_takes_the_http_directives(tmp_path, through):
    port, http_port = free_port(), free_port()
    command = [str(Path(sys.executable).with_name("disque-py")), "server", "--port", str(port),
               "--bind", HOST, "--dir", str(tmp_path)]
    env = dict(os.environ)
    if through == "options":
        command += ["--http-port", str(http_port), "--http-bind", HOST]
    else:
        env.update(DISQUE_HTTP_PORT=str(http_port), DISQUE_HTTP_BIND=HOST)
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: http_get(http_port, "/healthz")[0] == 200, 20,
                 message="the HTTP port of `disque-py server`")
        client = redis.Redis(host=HOST, port=port)
        assert client.config_get("http-*") == {"http-port": str(http_port), "http-bind": HOST}
        client.close()
    finally:
        proc.terminate()
        proc.wait(RUN_TIMEOUT_S)


def documented_metric_names() -> set[str]:
    """The metric names of docs/monitoring.md's table (a row may name several)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "monitoring.md").read_text()
    section = page.split("## HTTP endpoint", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `disque_")]
    return {name for row in rows for name in re.findall(r"`(disque_\w+)`", row.split("|")[1])}


def test_the_docs_list_every_metric_and_no_other(tmp_path):
    proc, http_port = http_server(tmp_path / "node", "--appendonly", "yes")  # AOF sizes too
    proc.start()
    try:
        text = metrics_text(http_port)
    finally:
        proc.stop()
    exported = set()
    for family in text_string_to_metric_families(text):
        if family.name.startswith("disque_"):
            exported.add(family.name + ("_total" if family.type == "counter" else ""))
    listed = documented_metric_names()
    assert exported - listed == set(), "missing from docs/monitoring.md's table"
    assert listed - exported == set(), "in docs/monitoring.md's table, not exported"
