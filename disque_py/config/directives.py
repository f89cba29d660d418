"""The one table of configuration directives: DIRECTIVES.

For every directive it says its kind (how it is parsed, shown and written
back: kinds.py), its default, and whether CONFIG GET shows it, CONFIG SET
changes it and CONFIG REWRITE writes it, and the effect it has the moment
it is read or set. Loading (loader.py), CONFIG GET and SET (settings.py)
and CONFIG REWRITE (rewrite.py) all read this table; nothing branches on a
directive's name.

Rules kept:
- Defaults, limits and reply texts are Disque 1.0's; reply texts are
  protocol (base/replies.py).
- `dir` changes the working directory the moment it is read, so relative
  paths after it (logfile, the AOF, nodes.conf) land there, as in Disque.
- A directive is a typed attribute of Config: its name with "_" for "-"
  (settings.py declares each, and refuses a table it does not match).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

from disque_py.base.errors import CommandError
from disque_py.base.replies import CHDIR_FAILED
from disque_py.config.kinds import (Appended, Bool, BufferLimit, Dir, Enum, Int, KeepAlive, Kind,
                                    Memory, Octal, OutputBufferLimit, Str, TlsProtocols, Words)
from disque_py.config.parse import BadValue
from disque_py.engine import DEFAULT_DEDUP_MAX_KEYS

# Defaults and limits (Disque 1.0-rc1, server.h).
DEFAULT_PORT = 7711
DEFAULT_TCP_BACKLOG = 511
DEFAULT_MAXCLIENTS = 10000
DEFAULT_MAXMEMORY = 1024 ** 3
DEFAULT_AOF_REWRITE_MIN_SIZE = 64 * 1024 ** 2
DEFAULT_NODE_TIMEOUT_MS = 15000
DEFAULT_PIDFILE = "/var/run/disque.pid"
MIN_HZ, MAX_HZ = 1, 500
MAX_BIND_ADDRESSES = 16
MAX_PASSWORD_LEN = 512


@dataclass(frozen=True, slots=True)
class Directive:
    """One configuration directive and everything the server knows about it."""

    name: str
    kind: Kind
    default: Any
    doc: str
    settable: bool = False     # CONFIG SET may change it at run time
    gettable: bool = True      # CONFIG GET shows it
    in_file: bool = True       # disque.conf and the command line accept it
    rewritable: bool = True    # CONFIG REWRITE writes it
    on_load: Callable[[Any, Any], None] | None = None  # (loader, value): effect when read
    on_set: Callable[[Any], Callable[[], None]] | None = None  # effect on SET; returns undo

    def fresh_default(self) -> Any:
        return list(self.default) if isinstance(self.default, list) else self.default


def strerror(exc: Exception) -> str:
    return getattr(exc, "strerror", None) or "Invalid argument"


def _chdir_on_load(loader: Any, path: str) -> None:
    try:
        os.chdir(path)
    except (OSError, ValueError) as exc:
        raise BadValue(f"Can't chdir to '{path}': {strerror(exc)}") from None


def _chdir_on_set(path: str) -> Callable[[], None]:
    try:
        previous = os.getcwd()
    except OSError:
        previous = None
    try:
        os.chdir(path)
    except (OSError, ValueError) as exc:
        raise CommandError(CHDIR_FAILED % strerror(exc)) from None
    return lambda: previous is not None and os.chdir(previous)


def _check_logfile(loader: Any, path: str) -> None:
    # Refuse to start rather than fail to log later, as Disque does.
    if path:
        try:
            open(path, "a").close()
        except (OSError, ValueError) as exc:
            raise BadValue(f"Can't open the log file: {strerror(exc)}") from None


def _include(loader: Any, path: str) -> None:
    loader.include(path)


def _check_rename(loader: Any, pair: tuple[str, str]) -> None:
    loader.rename(*pair)


_YES_NO = Bool()
_FACILITIES = ("user",) + tuple(f"local{n}" for n in range(8))

DIRECTIVES: dict[str, Directive] = {d.name: d for d in (
    # Ordered as Disque's CONFIG GET lists them; the others sit beside their kin.
    Directive("requirepass", Str(optional=True, maxlen=MAX_PASSWORD_LEN,
                                 error="Password is longer than CONFIG_AUTHPASS_MAX_LEN"),
              None, "Password clients must give with AUTH; unset means no password", True),
    Directive("unixsocket", Str(optional=True), None, "Also listen on this Unix socket path"),
    Directive("logfile", Str(), "", "Log file; empty logs to standard output",
              on_load=_check_logfile),
    Directive("pidfile", Str(), DEFAULT_PIDFILE, "Where the PID is written when daemonized"),
    # Disque refuses 0 in a file ("...greater than zero") but takes it from
    # CONFIG SET, and CONFIG REWRITE then writes it: we take 0 (no limit)
    # in both, so the error says what is accepted.
    Directive("maxmemory", Memory(error="You need to specify a memory limit greater than zero, "
                                        "or 0 for no limit"),
              DEFAULT_MAXMEMORY, "Memory limit for jobs; 0 means no limit", True),
    Directive("maxmemory-samples", Int(1, error="maxmemory-samples must be 1 or greater"), 5,
              "Samples taken when choosing what to free near the memory limit", True),
    Directive("timeout", Int(0, error="Invalid timeout value"), 0,
              "Close a client idle for this many seconds; 0 never", True),
    Directive("auto-aof-rewrite-percentage",
              Int(0, error="Invalid negative percentage for AOF auto rewrite"), 100,
              "Rewrite the AOF when it grew by this percentage; 0 disables", True),
    Directive("auto-aof-rewrite-min-size", Memory(set_units=False),
              DEFAULT_AOF_REWRITE_MIN_SIZE, "Smallest AOF that is rewritten automatically", True),
    Directive("slowlog-log-slower-than", Int(), 10000,
              "Log commands slower than this many microseconds; negative disables", True),
    Directive("latency-monitor-threshold",
              Int(0, error="The latency threshold can't be negative"), 0,
              "Record events slower than this many milliseconds; 0 disables", True),
    Directive("slowlog-max-len", Int(0), 128, "Entries kept in the slow log", True),
    Directive("port", Int(0, 65535, "Invalid port"), DEFAULT_PORT,
              "Client TCP port; the cluster bus uses port + 10000"),
    Directive("tcp-backlog", Int(0, error="Invalid backlog value"), DEFAULT_TCP_BACKLOG,
              "listen() backlog"),
    Directive("databases", Int(1, error="Invalid number of databases"), 16,
              "Accepted for compatibility; unused by Disque", rewritable=False),
    Directive("maxclients", Int(1, error="Invalid max clients limit"), DEFAULT_MAXCLIENTS,
              "Most clients connected at once", True),
    Directive("watchdog-period", Int(0), 0,
              "Milliseconds before the watchdog reports a stuck event loop; 0 disables",
              True, in_file=False, rewritable=False),
    Directive("hz", Int(clamp=(MIN_HZ, MAX_HZ)), 10,
              f"Background task frequency, clamped to {MIN_HZ}..{MAX_HZ}", True),
    Directive("cluster-node-timeout",
              Int(1, error="cluster node timeout must be 1 or greater"), DEFAULT_NODE_TIMEOUT_MS,
              "Milliseconds without reply before a node is flagged as failing", True),
    Directive("tcp-keepalive", KeepAlive(0, error="Invalid tcp-keepalive value"), 0,
              "TCP keepalive interval in seconds; 0 disables (CONFIG GET/SET say yes/no)", True),
    Directive("no-appendfsync-on-rewrite", _YES_NO, False,
              "Skip fsync while the AOF is being rewritten"),
    Directive("daemonize", _YES_NO, False, "Run in the background"),
    Directive("activerehashing", _YES_NO, True, "Accepted for compatibility", True),
    Directive("aof-rewrite-incremental-fsync", _YES_NO, True,
              "fsync the rewritten AOF every 32 MB while writing it", True),
    Directive("aof-load-truncated", _YES_NO, True,
              "Start even when the AOF ends with a truncated command", True),
    Directive("aof-enqueue-jobs-once", _YES_NO, False,
              "Queue jobs loaded from the AOF only if never delivered before", True),
    Directive("maxmemory-policy", Enum(("acks", "noeviction"), "Invalid maxmemory policy"),
              "acks", "What to do at the memory limit: acks or noeviction", True),
    Directive("loglevel", Enum(("debug", "verbose", "notice", "warning"),
                               "Invalid log level. Must be one of debug, verbose, notice, warning"),
              "notice", "Log verbosity", True),
    Directive("appendfsync", Enum(("everysec", "always", "no"),
                                  "argument must be 'no', 'always' or 'everysec'"),
              "everysec", "When the AOF is fsynced", True),
    Directive("syslog-enabled", _YES_NO, False, "Also log to syslog", gettable=False),
    Directive("syslog-ident", Str(), "disque", "Syslog identity", gettable=False),
    Directive("syslog-facility", Enum(_FACILITIES, "Invalid log facility. Must be one of "
                                                   "USER or between LOCAL0-LOCAL7"),
              "local0", "Syslog facility"),
    Directive("appendonly", _YES_NO, False, "Persist jobs in the append-only file", True),
    Directive("appendfilename", Str(basename=True,
                                    error="appendfilename can't be a path, just a filename"),
              "disque.aof", "AOF file name, inside dir", gettable=False),
    Directive("dir", Dir(), "./", "Working directory, changed when read; AOF and "
              "nodes.conf live here", True, on_load=_chdir_on_load, on_set=_chdir_on_set),
    Directive("client-output-buffer-limit", OutputBufferLimit(), BufferLimit(0, 0, 0),
              "`normal HARD SOFT SECONDS`: disconnect slow readers; 0 means no limit", True),
    Directive("unixsocketperm", Octal(0o777, "Invalid socket file permissions"), 0,
              "Unix socket permissions, octal"),
    Directive("bind", Words(MAX_BIND_ADDRESSES, "Too many bind addresses specified"), [],
              "Addresses to listen on; all interfaces when unset"),
    Directive("cluster-config-file", Str(), "nodes.conf",
              "Cluster state file, inside dir; written by the server", gettable=False),
    Directive("include", Appended(1), [], "Read another config file at this point",
              gettable=False, rewritable=False, on_load=_include),
    Directive("rename-command", Appended(2, lower=True), [],
              "`rename-command OLD NEW`: rename a command; an empty NEW removes it",
              gettable=False, rewritable=False, on_load=_check_rename),
    # Beyond Disque 1.0: after its own directives, so that CONFIG GET * lists
    # Disque's first, in Disque's order.
    Directive("cluster-secret", Str(optional=True, maxlen=MAX_PASSWORD_LEN,
                                    error="cluster-secret is longer than 512 bytes"),
              None, "Secret every cluster bus link must prove before it is used; "
              "unset: bus links are not authenticated", True),
    Directive("cluster-secret-mode", Enum(("require", "accept"),
                                          "cluster-secret-mode must be require or accept"),
              "require", "With a secret: `require` it on every bus link, or also `accept` "
              "links that do not prove it (the window of a rolling upgrade)", True),
    # Redis 6's protected mode and TLS directives.
    Directive("protected-mode", _YES_NO, True,
              "With no `bind` and no `requirepass`, serve only loopback and Unix socket "
              "clients", True),
    Directive("tls-port", Int(0, 65535, "Invalid tls-port"), 0,
              "TLS client port beside `port`; 0 disables TLS for clients"),
    Directive("tls-cert-file", Str(optional=True), None,
              "The node's certificate (PEM), for TLS clients and the bus; CONFIG SET of a "
              "TLS file reloads them all", True),
    Directive("tls-key-file", Str(optional=True), None,
              "The certificate's private key (PEM, unencrypted)", True),
    Directive("tls-ca-cert-file", Str(optional=True), None,
              "CA bundle that client and peer certificates are checked against", True),
    Directive("tls-auth-clients", Enum(("yes", "no", "optional"),
                                       "argument must be 'yes', 'no' or 'optional'"),
              "yes", "TLS clients must present a certificate (yes), may (optional) "
              "or are not asked (no)"),
    Directive("tls-protocols", TlsProtocols(), ("TLSv1.2", "TLSv1.3"),
              "TLS versions accepted"),
    Directive("tls-cluster", _YES_NO, False,
              "TLS on the cluster bus: nodes show tls-cert-file, check tls-ca-cert-file"),
    Directive("rereplicate", _YES_NO, True,
              "Copy a job again when its holders fail or restart empty, back to its "
              "REPLICATE level", True),
    Directive("dedup-max-keys", Int(1, error="dedup-max-keys must be 1 or greater"),
              DEFAULT_DEDUP_MAX_KEYS, "Most ADDJOB ... DEDUP keys remembered at once (each "
              "counted in used memory); a full table answers -OOM", True),
    # The HTTP endpoint (disque_py/web): off unless asked for, see docs/monitoring.md.
    Directive("http-port", Int(0, 65535, "Invalid http-port"), 0,
              "HTTP port for /metrics, /healthz, /readyz and the dashboard; 0 disables"),
    Directive("http-bind", Words(MAX_BIND_ADDRESSES, "Too many http-bind addresses specified"),
              [], "Addresses the HTTP port listens on; the `bind` ones when unset"),
)}


def attribute_of(name: str) -> str:
    """A directive's attribute on Config: "cluster-node-timeout" is
    cluster_node_timeout."""
    return name.replace("-", "_")


def arity_ok(directive: Directive, words: list[str]) -> bool:
    kind = directive.kind
    return len(words) >= kind.min_args and (kind.max_args is None or len(words) <= kind.max_args)


def markdown_table() -> str:
    """docs/operating.md's directive table, generated from DIRECTIVES."""
    rows = ["| Directive | Default | What it does | CONFIG SET at run time? |",
            "|---|---|---|---|"]
    for name, d in DIRECTIVES.items():
        default = d.kind.describe(d.default) if d.default not in (None, []) else "(none)"
        settable = "yes" if d.settable else "no"
        rows.append(f"| `{name}` | `{default}` | {d.doc} | {settable} |")
    return "\n".join(rows) + "\n"
