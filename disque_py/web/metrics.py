"""/metrics: the node's figures in Prometheus's text format, read at scrape time.

A scrape first takes the census of jobs and queues in slices (census.py),
giving the loop a turn between slices. It then renders the metric families
in parts, a loop turn between two: each part is a CollectorRegistry of its
own (never prometheus_client's global one) holding one collector, rendered
by generate_latest; no family spans two parts, so the parts joined are one
valid exposition. The parts: the node's figures (NodeCollector), the
queues' lengths, their oldest jobs (the two largest families, ~2 ms each
for MAX_EXPORTED_QUEUES queues), and prometheus_client's ProcessCollector
(process_* metrics: CPU, resident memory, file descriptors).

Rules kept:
  * Nothing is counted for /metrics on the command path. Every figure is
    one the node keeps anyway (INFO's, through info_metrics.py; commandstats;
    the engine's job counters, one C increment per event), or is counted
    off that path (timer lateness, fsync durations, bus traffic per peer).
  * Names follow Prometheus's conventions: the disque_ prefix, base units
    (seconds, bytes) in the name, counters ending in _total.
  * Labels whose values clients choose are bounded: queues (MAX_EXPORTED_QUEUES
    longest, the rest in disque_other_queues*), commands (the command table's
    names); peers are the cluster's nodes.
docs/monitoring.md ("HTTP endpoint") lists every metric.
"""

from __future__ import annotations

import asyncio

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client import ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from disque_py.cluster.nodes import FAIL, HANDSHAKE, LEAVING, NOADDR, PFAIL
from disque_py.engine import STATE_NAMES
from disque_py.web.census import Census, take_census
from disque_py.web.info_metrics import info_families
from disque_py.web.keys import SERVER_KEY

METRICS_PATH = "/metrics"
PREFIX = "disque_"
# The engine's job event counters: NodeCore attribute -> (metric, help).
JOB_EVENTS = (
    ("stats_delivered", "jobs_delivered", "Jobs taken from a queue here by a consumer (GETJOB)"),
    ("stats_acked", "jobs_acked", "Jobs acknowledged here by ACKJOB or FASTACK"),
    ("stats_nacked", "jobs_nacked", "NACKs applied here (the job queued again, now or later)"),
    ("stats_requeued", "jobs_requeued", "Jobs queued again here by their RETRY timer "
                                        "(or ENQUEUE), not by a NACK"),
    ("stats_expired", "jobs_expired", "Jobs whose TTL ended here"),
)
# A cluster node's state, first matching flag wins; none of them: "ok".
NODE_STATES = ((HANDSHAKE, "handshake"), (FAIL, "fail"), (PFAIL, "pfail"),
               (LEAVING, "leaving"), (NOADDR, "noaddr"))
ALL_NODE_STATES = ("ok",) + tuple(name for _, name in NODE_STATES)
TRAFFIC = (("received_frames", 0, "Cluster bus messages received from the peer"),
           ("received_bytes", 1, "Bytes of cluster bus messages received from the peer"),
           ("sent_frames", 2, "Cluster bus messages sent to the peer"),
           ("sent_bytes", 3, "Bytes of cluster bus messages sent to the peer"))


def setup(app: web.Application, server) -> None:
    app.router.add_get(METRICS_PATH, serve_metrics)


async def serve_metrics(request: web.Request) -> web.Response:
    server = request.app[SERVER_KEY]
    census = await take_census(server.node)
    parts = []
    for collector in collectors(server, census):
        registry = CollectorRegistry()
        registry.register(collector)
        parts.append(generate_latest(registry))
        await asyncio.sleep(0)
    return web.Response(body=b"".join(parts), headers={"Content-Type": CONTENT_TYPE_LATEST})


def collectors(server, census: Census) -> list[Collector]:
    """The parts of a scrape, in the order they are rendered and served."""
    return [NodeCollector(server, census), Families(queue_length_families, census),
            Families(queue_age_families, census),
            ProcessCollector(namespace="", registry=None)]


class Families(Collector):
    """A collector of what one function of the census yields."""

    def __init__(self, families, census: Census) -> None:
        self.families = families
        self.census = census

    def collect(self):
        return self.families(self.census)


class NodeCollector(Collector):
    def __init__(self, server, census: Census) -> None:
        self.server = server
        self.census = census

    def collect(self):
        server = self.server
        yield from info_families(server, PREFIX)
        yield from job_families(server.node, self.census)
        yield from command_families(server.commands)
        yield histogram(PREFIX + "timer_lateness_seconds",
                        "How much later than it was set for the job timer ran: the event "
                        "loop's lag, which jobs due meanwhile waited", server.timer_lateness)
        persistence = server.persistence
        if persistence is not None and persistence.writer is not None:
            yield histogram(PREFIX + "aof_fsync_duration_seconds",
                            "Duration of the AOF's fsyncs (appendfsync everysec or always)",
                            persistence.writer.fsync_durations)
        if server.cluster is not None:
            yield from cluster_families(server.node, server.cluster)


def job_families(node, census: Census):
    jobs = GaugeMetricFamily(PREFIX + "jobs", "Jobs this node holds, by state",
                             labels=["state"])
    for state, name in enumerate(STATE_NAMES):
        jobs.add_metric([name.decode()], census.jobs_by_state[state])
    yield jobs
    for attribute, name, doc in JOB_EVENTS:
        yield CounterMetricFamily(PREFIX + name, doc, value=getattr(node, attribute))
    yield GaugeMetricFamily(PREFIX + "queues", "Queues this node knows",
                            value=len(census.queues) + census.other_queues)


def queue_label(figures) -> list[str]:
    return [figures.name.decode("utf-8", "backslashreplace")]


def queue_length_families(census: Census):
    length = GaugeMetricFamily(PREFIX + "queue_jobs", "Jobs queued in the queue "
                               "(the longest queues only: see disque_other_queues)",
                               labels=["queue"])
    for figures in census.queues:
        length.add_metric(queue_label(figures), figures.jobs)
    yield length
    yield GaugeMetricFamily(PREFIX + "other_queues", "Queues not exported one by one "
                            "(past the longest exported)", value=census.other_queues)
    yield GaugeMetricFamily(PREFIX + "other_queues_jobs",
                            "Jobs queued in the queues not exported one by one",
                            value=census.other_jobs)


def queue_age_families(census: Census):
    age = GaugeMetricFamily(PREFIX + "queue_oldest_job_age_seconds",
                            "Age of the job at the head of the queue (the one GETJOB "
                            "gives next; the oldest, but for priorities)", labels=["queue"])
    for figures in census.queues:
        if figures.head_age_s is not None:
            age.add_metric(queue_label(figures), figures.head_age_s)
    yield age


def command_families(commands):
    calls = CounterMetricFamily(PREFIX + "command_calls", "Runs of the command's handler "
                                "(INFO commandstats)", labels=["command"])
    seconds = CounterMetricFamily(PREFIX + "command_duration_seconds",
                                  "Time spent in the command's handler (INFO commandstats)",
                                  labels=["command"])
    for name, command in commands.commands.items():
        if command.calls:
            label = [name.decode("latin-1")]
            calls.add_metric(label, command.calls)
            seconds.add_metric(label, command.seconds)
    yield calls
    yield seconds


def cluster_families(node, cluster):
    membership = cluster.membership
    states = dict.fromkeys(ALL_NODE_STATES, 0)
    for member in membership.nodes.values():
        states[_node_state(member.flags)] += 1
    by_state = GaugeMetricFamily(PREFIX + "cluster_nodes", "Nodes this node knows "
                                 "(itself included), by state", labels=["state"])
    for state, count in states.items():
        by_state.add_metric([state], count)
    yield by_state
    yield GaugeMetricFamily(PREFIX + "replicating_jobs",
                            "Jobs whose producer waits for their copies (ADDJOB ... REPLICATE)",
                            value=len(node.replication.replicating))
    yield GaugeMetricFamily(PREFIX + "replication_round_trip_seconds",
                            "Recent REPLJOB -> GOTJOB round trip, smoothed",
                            value=node.repl_rtt_ms / 1000)
    yield from peer_families(node, cluster, membership)


def peer_families(node, cluster, membership):
    peers = [member for member in membership.nodes.values() if member is not membership.myself]
    known = {member.id for member in peers}
    reachable = GaugeMetricFamily(PREFIX + "peer_reachable",
                                  "1 if the peer is reachable (not failing, not leaving)",
                                  labels=["peer"])
    reachable_ids = {member.id for member in membership.reachable}
    for member in peers:
        reachable.add_metric([member.id.decode()], 1 if member.id in reachable_ids else 0)
    yield reachable
    rtt = GaugeMetricFamily(PREFIX + "peer_replication_round_trip_seconds",
                            "Recent REPLJOB -> GOTJOB round trip with the peer, smoothed",
                            labels=["peer"])
    for peer_id, milliseconds in node.repl_rtt_by_peer.items():
        if peer_id in known:
            rtt.add_metric([peer_id.decode()], milliseconds / 1000)
    yield rtt
    traffic = cluster.bus.traffic_of(known)
    for name, index, doc in TRAFFIC:
        family = CounterMetricFamily(PREFIX + "bus_" + name, doc, labels=["peer"])
        for peer_id, counters in traffic.items():
            family.add_metric([peer_id.decode()], counters[index])
        yield family


def _node_state(flags: int) -> str:
    for flag, name in NODE_STATES:
        if flags & flag:
            return name
    return "ok"


def histogram(name: str, doc: str, durations) -> HistogramMetricFamily:
    return HistogramMetricFamily(name, doc, buckets=durations.cumulative(),
                                 sum_value=durations.sum)
