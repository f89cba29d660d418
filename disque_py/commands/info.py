"""INFO: Redis' "# Section" / "field:value" text with Disque's field names.

Sections are rendered by the functions in SECTIONS, in order. "default"
(and INFO alone) gives Disque's eight sections, byte for byte the list
clients that parse INFO know; "all" adds ours (Federation, and those later
layers register, such as Cluster) and Commandstats (calls and time of each
command whose handler ran, as Disque's INFO all); a name gives one; an unknown name gives
an empty reply, as in Disque. Memory is reported as the process RSS (what the
kernel charges us), plus the running estimate of job memory that the
maxmemory policy uses.
"""

from __future__ import annotations

import hashlib
import os
import platform
import resource
import sys

from disque_py import DISQUE_VERSION, __version__

_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
# Disque's build id is a hash of what it was built from; ours, of what runs.
BUILD_ID = hashlib.sha1(f"{__version__} {sys.version} {platform.machine()}".encode()
                        ).hexdigest()[:16]


def process_rss() -> int:
    """Resident set size in bytes (one read of /proc/self/statm)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE_SIZE
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def bytes_to_human(n: int) -> str:
    if n < 1024:
        return f"{n}B"
    for unit in "KMGTP":
        n /= 1024
        if n < 1024 or unit == "P":
            return f"{n:.2f}{unit}"
    return f"{n}B"


def _server(srv) -> list[tuple[str, object]]:
    uptime = int(srv.uptime())
    uname = platform.uname()
    return [
        ("disque_version", DISQUE_VERSION),
        ("disque_py_version", __version__),
        ("disque_git_sha1", "00000000"),
        ("disque_git_dirty", 0),
        ("disque_build_id", BUILD_ID),
        ("os", f"{uname.system} {uname.release} {uname.machine}"),
        ("arch_bits", 64 if sys.maxsize > 2 ** 32 else 32),
        ("multiplexing_api", "uvloop"),
        ("python_version", platform.python_version()),
        ("process_id", os.getpid()),
        ("run_id", srv.run_id),
        ("tcp_port", srv.port),
        ("uptime_in_seconds", uptime),
        ("uptime_in_days", uptime // 86400),
        ("hz", srv.config.hz),
        ("executable", srv.executable),
        ("config_file", srv.config_file),
    ]


def _clients(srv) -> list[tuple[str, object]]:
    longest_output = biggest_input = blocked = 0
    for session in srv.clients.values():
        if session.waiting:         # one client may have several ADDJOBs parked
            blocked += 1
        conn = session.conn
        if conn is not None:
            longest_output = max(longest_output, conn.output_buffered())
            biggest_input = max(biggest_input, conn.input_buffered())
    return [
        ("connected_clients", len(srv.clients)),
        ("client_longest_output_list", longest_output),
        ("client_biggest_input_buf", biggest_input),
        ("blocked_clients", blocked),
    ]


def _memory(srv) -> list[tuple[str, object]]:
    rss = process_rss()
    srv.peak_memory = max(srv.peak_memory, rss)
    return [
        ("used_memory", rss),
        ("used_memory_human", bytes_to_human(rss)),
        ("used_memory_rss", rss),
        ("used_memory_peak", srv.peak_memory),
        ("used_memory_peak_human", bytes_to_human(srv.peak_memory)),
        ("used_memory_dataset", srv.node.used_memory),
        ("maxmemory", srv.node.maxmemory),
        ("maxmemory_human", bytes_to_human(srv.node.maxmemory)),
        ("mem_fragmentation_ratio", "1.00"),
        ("mem_allocator", "pymalloc"),
        ("dedup_keys", len(srv.node.dedup)),                  # beyond Disque
        ("dedup_memory", srv.node.dedup.memory),
        ("dedup_max_keys", srv.node.dedup.max_keys),
    ]


def _jobs(srv) -> list[tuple[str, object]]:
    return [("registered_jobs", len(srv.node.jobs))]


def _queues(srv) -> list[tuple[str, object]]:
    return [("registered_queues", len(srv.node.queues))]


def _federation(srv) -> list[tuple[str, object]]:
    stats = srv.node.federation
    return [
        ("needjobs_sent", stats.needjobs_sent),
        ("needjobs_received", stats.needjobs_received),
        ("yourjobs_jobs_sent", stats.jobs_sent),
        ("yourjobs_jobs_received", stats.jobs_received),
        ("jobs_offered_to_waiting_nodes", stats.offers),
    ]


def _persistence(srv) -> list[tuple[str, object]]:
    return srv.persistence_info()


def _stats(srv) -> list[tuple[str, object]]:
    stats = srv.stats
    return [
        ("total_connections_received", stats.connections_received),
        ("total_commands_processed", stats.commands_processed),
        ("instantaneous_ops_per_sec", stats.instantaneous_ops),
        ("total_net_input_bytes", stats.net_input_bytes),
        ("total_net_output_bytes", stats.net_output_bytes),
        ("instantaneous_input_kbps", f"{stats.instantaneous_input_kbps:.2f}"),
        ("instantaneous_output_kbps", f"{stats.instantaneous_output_kbps:.2f}"),
        ("rejected_connections", stats.rejected_connections),
        ("latest_fork_usec", 0),            # nothing here forks (rewrites run in-process)
        ("total_jobs_created", srv.node.stats_jobs_created),
        ("total_jobs_dead_lettered", srv.node.stats_dead_lettered),   # beyond Disque
        ("total_dedup_hits", srv.node.dedup.hits),
        ("total_dedup_refused", srv.node.dedup.refused),
        ("total_dedup_dropped", srv.node.dedup.dropped),
    ]


def _cpu(srv) -> list[tuple[str, object]]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return [
        ("used_cpu_sys", f"{me.ru_stime:.2f}"),
        ("used_cpu_user", f"{me.ru_utime:.2f}"),
        ("used_cpu_sys_children", f"{children.ru_stime:.2f}"),
        ("used_cpu_user_children", f"{children.ru_utime:.2f}"),
    ]


def _commandstats(srv) -> list[tuple[str, object]]:
    """Commands whose handler ran since start-up or CONFIG RESETSTAT."""
    fields = []
    for name, command in srv.commands.commands.items():
        if command.calls:
            usec = int(command.seconds * 1_000_000)
            fields.append((f"cmdstat_{name.decode('latin-1')}",
                           f"calls={command.calls},usec={usec},"
                           f"usec_per_call={usec / command.calls:.2f}"))
    return fields


# name -> (title, renderer), in Disque's order.
SECTIONS = {
    "server": ("Server", _server),
    "clients": ("Clients", _clients),
    "memory": ("Memory", _memory),
    "jobs": ("Jobs", _jobs),
    "queues": ("Queues", _queues),
    "federation": ("Federation", _federation),
    "persistence": ("Persistence", _persistence),
    "stats": ("Stats", _stats),
    "cpu": ("CPU", _cpu),
    "commandstats": ("Commandstats", _commandstats),
}


# What INFO and INFO default show: Disque 1.0-rc1's sections, nothing more.
DEFAULT_SECTIONS = ("server", "clients", "memory", "jobs", "queues", "persistence",
                    "stats", "cpu")


def render(srv, section: str) -> str:
    if section == "default":
        names = DEFAULT_SECTIONS
    elif section == "all":
        names = list(SECTIONS) + list(srv.extra_info_sections)
    else:
        names = [section]
    blocks = []
    for name in names:
        section = SECTIONS.get(name) or srv.extra_info_sections.get(name)
        if section is None:
            continue
        title, renderer = section
        fields = renderer(srv)
        lines = [f"# {title}"] + [f"{key}:{value}" for key, value in fields]
        blocks.append("\r\n".join(lines) + "\r\n")
    return "\r\n".join(blocks)
