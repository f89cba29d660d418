"""INFO's figures as Prometheus metrics: one table, INFO's own renderers.

Each row names an INFO field and the metric it becomes. The values come
from the very functions INFO renders (commands/info.py's SECTIONS and the
sections later layers register, such as Cluster), so /metrics and INFO can
never disagree on a figure, and nothing is computed twice. Fields that are
statuses ("ok"/"err") become 1/0. A field a section does not show at the
moment (the AOF's sizes while the AOF is off) is left out of the scrape.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from disque_py.commands import info

GAUGE, COUNTER = "gauge", "counter"


class InfoMetric(NamedTuple):
    section: str
    field: str
    name: str           # without the disque_ prefix; a counter's without _total
    kind: str
    doc: str
    convert: Callable[[object], float] = float


def _ok(status) -> float:
    return 1.0 if status == "ok" else 0.0


def _rows(section: str, *rows: tuple) -> list[InfoMetric]:
    return [InfoMetric(section, *row) for row in rows]


INFO_METRICS = [
    *_rows("clients",
           ("connected_clients", "connected_clients", GAUGE, "Clients connected"),
           ("blocked_clients", "blocked_clients", GAUGE,
            "Clients waiting in a blocking command (GETJOB, ADDJOB's replication, ...)")),
    *_rows("memory",
           ("used_memory_rss", "memory_rss_bytes", GAUGE, "Resident set size of the process"),
           ("used_memory_peak", "memory_rss_peak_bytes", GAUGE,
            "Highest resident set size seen by INFO or a scrape"),
           ("used_memory_dataset", "memory_used_bytes", GAUGE,
            "Memory estimate of jobs, queues and DEDUP keys, the figure maxmemory limits"),
           ("maxmemory", "memory_max_bytes", GAUGE, "maxmemory; 0 means no limit")),
    *_rows("stats",
           ("total_connections_received", "connections_received", COUNTER,
            "Client connections accepted"),
           ("rejected_connections", "connections_rejected", COUNTER,
            "Client connections refused (maxclients, protected mode)"),
           ("total_commands_processed", "commands_processed", COUNTER,
            "Commands received, answered or refused"),
           ("total_net_input_bytes", "net_input_bytes", COUNTER, "Bytes read from clients"),
           ("total_net_output_bytes", "net_output_bytes", COUNTER, "Bytes written to clients"),
           ("total_jobs_created", "jobs_created", COUNTER, "Jobs created by ADDJOB here"),
           ("total_jobs_dead_lettered", "jobs_dead_lettered", COUNTER,
            "Jobs moved to their dead-letter queue here"),
           ("total_dedup_hits", "dedup_hits", COUNTER,
            "ADDJOB ... DEDUP answered with an earlier job")),
    *_rows("federation",
           ("yourjobs_jobs_sent", "federation_jobs_sent", COUNTER,
            "Queued jobs moved to other nodes' consumers (YOURJOBS)"),
           ("yourjobs_jobs_received", "federation_jobs_received", COUNTER,
            "Jobs other nodes moved here for this node's consumers")),
    *_rows("persistence",
           ("loading", "loading", GAUGE, "1 while the AOF is being loaded"),
           ("aof_enabled", "aof_enabled", GAUGE, "1 when the AOF is on"),
           ("aof_current_size", "aof_size_bytes", GAUGE, "Size of the AOF"),
           ("aof_base_size", "aof_base_size_bytes", GAUGE,
            "Size of the AOF after its last rewrite (auto-rewrite grows from it)"),
           ("aof_rewrite_in_progress", "aof_rewrite_in_progress", GAUGE,
            "1 while the AOF is being rewritten"),
           ("aof_last_rewrite_time_sec", "aof_last_rewrite_duration_seconds", GAUGE,
            "How long the last AOF rewrite took; -1 before any"),
           ("aof_last_bgrewrite_status", "aof_last_rewrite_success", GAUGE,
            "1 if the last AOF rewrite succeeded", _ok),
           ("aof_last_write_status", "aof_last_write_success", GAUGE,
            "1 if the last AOF write or fsync succeeded", _ok),
           ("aof_accepting_writes", "aof_accepting_writes", GAUGE,
            "1 while write commands are accepted (0: -MISCONF, the disk failed or is full)"),
           ("aof_delayed_fsync", "aof_delayed_fsyncs", COUNTER,
            "everysec fsyncs started late: the previous one was still running")),
    *_rows("cluster",
           ("cluster_size", "cluster_size", GAUGE, "Nodes of the cluster past their handshake"),
           ("cluster_reachable_nodes", "cluster_reachable_peers", GAUGE,
            "Other nodes this node can reach now"),
           ("cluster_stats_messages_sent", "cluster_messages_sent", COUNTER,
            "Cluster bus messages sent"),
           ("cluster_stats_messages_received", "cluster_messages_received", COUNTER,
            "Cluster bus messages received"),
           ("cluster_config_save_ok", "cluster_config_save_success", GAUGE,
            "1 if the last nodes.conf save succeeded")),
]


def _section_fields(server, section: str) -> dict:
    renderer = info.SECTIONS.get(section) or server.extra_info_sections.get(section)
    return dict(renderer[1](server)) if renderer is not None else {}


def info_families(server, prefix: str):
    """The metric families of INFO_METRICS, from INFO's renderers."""
    sections: dict[str, dict] = {}
    for row in INFO_METRICS:
        fields = sections.get(row.section)
        if fields is None:
            fields = sections[row.section] = _section_fields(server, row.section)
        if row.field not in fields:
            continue
        family = CounterMetricFamily if row.kind == COUNTER else GaugeMetricFamily
        yield family(prefix + row.name, row.doc, value=row.convert(fields[row.field]))
