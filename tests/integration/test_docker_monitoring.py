"""docker/: the Prometheus and Grafana of the compose file, checked without Docker.

The YAML files parse (PyYAML) and Prometheus's config passes `promtool
check config`; its targets are the three nodes at the HTTP port the image's
disque.conf sets. Grafana's provisioning points at that Prometheus and at
the mounted dashboard directory. The dashboard JSON parses, every panel
queries something, every query is valid PromQL (`promtool check rules` on a
rule file made of them), and every disque_ metric a query names is one that
/metrics of a real node exports.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.web_support import http_server, metrics_text

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
COMPOSE_FILE = DOCKER / "docker-compose.yml"
PROMETHEUS_CONF = DOCKER / "prometheus.yml"
GRAFANA = DOCKER / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "disque.json"
SAMPLE_CONF = DOCKER / "disque.conf"
NODES = ("node1", "node2", "node3")
PROMETHEUS_PORT = 9090
PROMTOOL = shutil.which("promtool", path=str(Path(sys.executable).parent)) or \
    shutil.which("promtool")
# Grafana's interval variables, which PromQL itself does not know.
GRAFANA_VARIABLES = re.compile(r"\$__(rate_)?interval|\$__range")
METRIC_NAME = re.compile(r"\b(disque_[a-zA-Z0-9_]+)")
PINNED_IMAGE = re.compile(r"^[\w./-]+:v?\d+\.\d+\.\d+$")
RUN_TIMEOUT_S = 30


def load_yaml(path: Path):
    with path.open() as handle:
        return yaml.safe_load(handle)


@pytest.fixture(scope="module")
def services() -> dict:
    return load_yaml(COMPOSE_FILE)["services"]


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def mounts(service: dict) -> dict[str, Path]:
    """In-container target -> host path (relative to the compose file) of bind mounts."""
    found = {}
    for mount in service["volumes"]:
        source, target, *_ = mount.split(":")
        if source.startswith("."):
            found[target] = (COMPOSE_FILE.parent / source).resolve()
    return found


def http_port_of_the_image() -> int:
    return int(re.search(r"(?m)^http-port\s+(\d+)\s*$", SAMPLE_CONF.read_text()).group(1))


def test_monitoring_images_are_pinned_and_published_on_loopback(services):
    for name in ("prometheus", "grafana"):
        assert PINNED_IMAGE.match(services[name]["image"]), services[name]["image"]
        assert all(port.startswith("127.0.0.1:") for port in services[name]["ports"])


def test_prometheus_scrapes_the_three_nodes_at_their_http_port(services):
    conf_mount = mounts(services["prometheus"])
    assert conf_mount["/etc/prometheus/prometheus.yml"] == PROMETHEUS_CONF
    assert "--config.file=/etc/prometheus/prometheus.yml" in services["prometheus"]["command"]
    [job] = load_yaml(PROMETHEUS_CONF)["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    [static] = job["static_configs"]
    assert static["targets"] == [f"{node}:{http_port_of_the_image()}" for node in NODES]


def test_promtool_accepts_the_prometheus_config():
    assert PROMTOOL, "promtool is missing: `make system-deps` installs it"
    checked = subprocess.run([PROMTOOL, "check", "config", str(PROMETHEUS_CONF)],
                             capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_grafana_provisions_prometheus_and_the_mounted_dashboards(services):
    grafana_mounts = mounts(services["grafana"])
    assert grafana_mounts["/etc/grafana/provisioning"] == GRAFANA / "provisioning"
    [source] = load_yaml(GRAFANA / "provisioning" / "datasources" / "prometheus.yml")[
        "datasources"]
    assert source["type"] == "prometheus"
    assert source["url"] == f"http://prometheus:{PROMETHEUS_PORT}"
    [provider] = load_yaml(GRAFANA / "provisioning" / "dashboards" / "disque.yml")["providers"]
    assert grafana_mounts[provider["options"]["path"]] == DASHBOARD.parent
    home = services["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{provider['options']['path']}/{DASHBOARD.name}"


def expressions(dashboard: dict) -> list[str]:
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_every_panel_queries_the_provisioned_prometheus(dashboard):
    source = load_yaml(GRAFANA / "provisioning" / "datasources" / "prometheus.yml")[
        "datasources"][0]
    assert dashboard["panels"]
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        assert panel["datasource"]["uid"] == source["uid"]
        assert all(target["expr"].strip() for target in panel["targets"]), panel["title"]


def test_every_query_is_valid_promql(dashboard, tmp_path):
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query{index}", "expr": GRAFANA_VARIABLES.sub("5m", expr)}
        for index, expr in enumerate(expressions(dashboard))]}]}
    rule_file = tmp_path / "rules.yml"
    rule_file.write_text(yaml.safe_dump(rules))
    checked = subprocess.run([PROMTOOL, "check", "rules", str(rule_file)],
                             capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def exported_names(text: str) -> set[str]:
    """Every series name a scrape can hold, samples or not: a counter's
    _total, a histogram's _bucket, _sum and _count."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
                "gauge": ("",)}
    return {family.name + suffix for family in text_string_to_metric_families(text)
            for suffix in suffixes.get(family.type, ("",))}


def test_every_metric_the_dashboard_names_is_exported(dashboard, tmp_path):
    proc, http_port = http_server(tmp_path / "node", "--appendonly", "yes")
    proc.start()
    try:
        exported = exported_names(metrics_text(http_port))
    finally:
        proc.stop()
    named = {name for expr in expressions(dashboard) for name in METRIC_NAME.findall(expr)}
    assert named, "the dashboard names no metric"
    assert named <= exported, f"not exported: {sorted(named - exported)}"
