"""/metrics: the node's figures in Prometheus's text format, read at scrape time.

A scrape builds a CollectorRegistry of its own (never prometheus_client's
global one) holding a NodeCollector over the node's state, and renders it
with generate_latest. Nothing is counted for the scrape on the command
path: every figure is one the node already keeps (INFO's).
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from disque_py.web.keys import SERVER_KEY

METRICS_PATH = "/metrics"


def setup(app: web.Application, server) -> None:
    app.router.add_get(METRICS_PATH, serve_metrics)


async def serve_metrics(request: web.Request) -> web.Response:
    registry = CollectorRegistry()
    registry.register(NodeCollector(request.app[SERVER_KEY]))
    return web.Response(body=generate_latest(registry),
                        headers={"Content-Type": CONTENT_TYPE_LATEST})


class NodeCollector(Collector):
    def __init__(self, server) -> None:
        self.server = server

    def collect(self):
        yield GaugeMetricFamily("disque_registered_jobs", "Jobs this node holds",
                                value=len(self.server.node.jobs))
