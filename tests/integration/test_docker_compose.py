"""docker/docker-compose.yml: a three-node cluster and its one-shot join.

No Docker engine runs here, so the file is loaded with PyYAML (the `test`
extra; a missing module fails these tests, it does not skip them) and checked against what
it refers to: the Dockerfile it builds, the image's config and data
directory, the console scripts pyproject.toml installs, and the `disque-py
cluster create` command line, parsed by the real click command. The health
check is run, as compose would run it, against a real server.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from disque_py.tools import cluster_cli
from disque_py.tools.cli import main
from tests.support import free_port

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker" / "docker-compose.yml"
DOCKERFILE = REPO / "docker" / "Dockerfile"
SAMPLE_CONF = REPO / "docker" / "disque.conf"
PYPROJECT = REPO / "pyproject.toml"
NODES = {"node1": 7711, "node2": 7712, "node3": 7713}   # service -> port on the host
HTTP_PORTS = {"node1": 9711, "node2": 9712, "node3": 9713}   # ... and its HTTP port there
JOIN = "cluster-join"
MONITORING = {"prometheus", "grafana"}     # their own images; monitoring.py checks them
DATA_DIR = "/data"
# The keys this file may use in a service: a typo is a failure, not ignored.
SERVICE_KEYS = {"image", "build", "entrypoint", "command", "restart", "healthcheck",
                "ports", "volumes", "environment", "depends_on"}
HTTP_PORT_LINE = re.compile(r"(?m)^http-port\s+(\d+)\s*$")


@pytest.fixture(scope="module")
def compose() -> dict:
    # Imported here so that a missing PyYAML fails these tests by name
    # instead of stopping the whole suite's collection.
    try:
        import yaml
    except ModuleNotFoundError:
        pytest.fail("PyYAML is missing: pip install pyyaml (part of the `test` extra)")
    with COMPOSE_FILE.open() as handle:
        return yaml.safe_load(handle)


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


def container_port() -> int:
    match = re.search(r"(?m)^port\s+(\d+)\s*$", SAMPLE_CONF.read_text())
    assert match, "docker/disque.conf must set the port"
    return int(match.group(1))


def console_scripts() -> set[str]:
    return set(tomllib.loads(PYPROJECT.read_text())["project"]["scripts"])


def dockerfile_instructions(keyword: str) -> list[str]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    return re.findall(rf"(?m)^{keyword}\s+(.+)$", text)


def argv(service: dict) -> list[str]:
    return list(service["entrypoint"]) + list(service["command"])


def http_container_port() -> int:
    match = HTTP_PORT_LINE.search(SAMPLE_CONF.read_text())
    assert match, "docker/disque.conf must set http-port (Prometheus scrapes it)"
    return int(match.group(1))


def test_only_known_services_and_keys(services):
    assert set(services) == {*NODES, JOIN, *MONITORING}
    for name, service in services.items():
        assert set(service) <= SERVICE_KEYS, f"{name}: {set(service) - SERVICE_KEYS}"


def test_every_service_builds_the_one_image_from_the_repository_root(services):
    ours = {name: service for name, service in services.items() if name not in MONITORING}
    images = {service["image"] for service in ours.values()}
    assert len(images) == 1, f"one image, built once: {images}"
    for name, service in ours.items():
        build = service["build"]
        context = (COMPOSE_FILE.parent / build["context"]).resolve()
        assert context == REPO, f"{name}: the build context must be the repository root"
        assert (context / build["dockerfile"]).resolve() == DOCKERFILE


def test_nodes_publish_their_client_and_http_ports_on_loopback_only(services):
    inside, http_inside = container_port(), http_container_port()
    for name, host_port in NODES.items():
        assert services[name]["ports"] == [f"127.0.0.1:{host_port}:{inside}",
                                           f"127.0.0.1:{HTTP_PORTS[name]}:{http_inside}"]
    assert "ports" not in services[JOIN]


def test_each_node_keeps_its_data_in_its_own_declared_volume(compose, services):
    assert json.loads(dockerfile_instructions("VOLUME")[0]) == [DATA_DIR]
    assert re.search(rf"(?m)^dir\s+{DATA_DIR}\s*$", SAMPLE_CONF.read_text())
    volumes = []
    for name in NODES:
        [mount] = services[name]["volumes"]
        volume, target = mount.split(":")
        assert target == DATA_DIR
        volumes.append(volume)
    assert len(set(volumes)) == len(NODES), "each node needs its own volume"
    monitoring = {mount.split(":")[0] for name in MONITORING
                  for mount in services[name]["volumes"] if not mount.startswith(".")}
    assert set(compose["volumes"]) == set(volumes) | monitoring, \
        "named volumes must be declared"
    assert "volumes" not in services[JOIN]


def test_nodes_run_the_server_with_the_image_config(services):
    copied = [line.split() for line in dockerfile_instructions("COPY")]
    for name in NODES:
        server, config_file, *directives = argv(services[name])
        assert server in console_scripts() and server == "disque-server"
        assert any(copy[-1] == config_file for copy in copied), \
            f"{name}: {config_file} is not put in the image by the Dockerfile"
        assert directives == []
        assert services[name]["restart"] == "unless-stopped"


def healthcheck_argv(service: dict, port: int) -> list[str]:
    test = service["healthcheck"]["test"]
    assert test[:2] == ["CMD", "python"], "exec form, with the image's python"
    assert str(container_port()) in test[-1]
    return [sys.executable, *test[2:-1], test[-1].replace(str(container_port()), str(port))]


def test_every_node_has_the_same_working_healthcheck(services, make_server):
    checks = [services[name]["healthcheck"] for name in NODES]
    assert all(check == checks[0] for check in checks)
    assert {"interval", "timeout", "retries"} <= set(checks[0])
    server = make_server().start()
    done = subprocess.run(healthcheck_argv(services["node1"], server.port),
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    done = subprocess.run(healthcheck_argv(services["node1"], free_port()),
                          capture_output=True, text=True, timeout=30)
    assert done.returncode != 0


def test_join_waits_for_three_healthy_nodes_and_runs_once(services):
    join = services[JOIN]
    assert join["depends_on"] == {name: {"condition": "service_healthy"} for name in NODES}
    assert join["restart"] == "no"
    assert join["healthcheck"] == {"disable": True}, "the image's check probes a server"


def test_join_runs_cluster_create_on_every_node(services):
    program, group, command, *args = argv(services[JOIN])
    assert program in console_scripts() and program == "disque-py"
    assert main.commands.get(group) is cluster_cli.cluster
    assert cluster_cli.cluster.commands.get(command) is cluster_cli.create
    # Parse the arguments as the container will, without running anything.
    context = cluster_cli.create.make_context(command, list(args))
    addresses = context.params["addresses"]
    assert addresses == tuple((name, container_port()) for name in NODES)
    assert context.params["timeout"] > 0
    assert services[JOIN]["environment"] == {"DISQUE_PASSWORD": "${DISQUE_PASSWORD:-}"}
