"""The configuration's current values: Config, what the rest of the server
reads its settings from, and CONFIG GET / SET / REWRITE.

Every directive is a typed attribute of Config, declared below in the
table's order: "cluster-node-timeout" is config.cluster_node_timeout, an
int. A reader follows a setting by its name; the class is refused at import
if its declarations and DIRECTIVES (directives.py) differ. Changes come only
through load() and CONFIG SET (set()); code that must follow a setting
subscribes with on_change().

Rules kept:
- A CONFIG SET whose listener fails leaves the value (and cwd) unchanged:
  listeners that already ran are called again with the old value.
- CONFIG GET lists the gettable directives in the table's order, Disque's
  first.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable

from disque_py.base.errors import CommandError
from disque_py.base.globmatch import glob_match
from disque_py.base.replies import INVALID_ARGUMENT, NO_CONFIG_FILE, REWRITE_FAILED, UNSUPPORTED
from disque_py.config.directives import DIRECTIVES, attribute_of, strerror
from disque_py.config.kinds import BufferLimit
from disque_py.config.loader import STDIN_PATH, Loader
from disque_py.config.parse import ENCODING, ERRORS, BadValue
from disque_py.config.rewrite import read_lines, replace_file, rewritten_content

_GETTABLE = tuple((name.encode(), d) for name, d in DIRECTIVES.items() if d.gettable)


def _for_reply(raw: bytes) -> str:
    """raw as it may appear inside an error reply: valid text, no newlines."""
    return raw.decode(ENCODING, "replace").replace("\r", " ").replace("\n", " ")


class Config:
    """The configuration values, as typed attributes; CONFIG GET, SET and
    REWRITE."""

    # Every directive (directives.py), in the table's order.
    requirepass: str | None
    unixsocket: str | None
    logfile: str
    pidfile: str
    maxmemory: int
    maxmemory_samples: int
    timeout: int
    auto_aof_rewrite_percentage: int
    auto_aof_rewrite_min_size: int
    slowlog_log_slower_than: int
    latency_monitor_threshold: int
    slowlog_max_len: int
    port: int
    tcp_backlog: int
    databases: int
    maxclients: int
    watchdog_period: int
    hz: int
    cluster_node_timeout: int
    tcp_keepalive: int
    no_appendfsync_on_rewrite: bool
    daemonize: bool
    activerehashing: bool
    aof_rewrite_incremental_fsync: bool
    aof_load_truncated: bool
    aof_enqueue_jobs_once: bool
    maxmemory_policy: str
    loglevel: str
    appendfsync: str
    syslog_enabled: bool
    syslog_ident: str
    syslog_facility: str
    appendonly: bool
    appendfilename: str
    dir: str
    client_output_buffer_limit: BufferLimit
    unixsocketperm: int
    bind: list[str]
    cluster_config_file: str
    include: list[str]
    rename_command: list[tuple[str, str]]
    cluster_secret: str | None
    cluster_secret_mode: str
    protected_mode: bool
    tls_port: int
    tls_cert_file: str | None
    tls_key_file: str | None
    tls_ca_cert_file: str | None
    tls_auth_clients: str
    tls_protocols: tuple[str, ...]
    tls_cluster: bool
    rereplicate: bool
    dedup_max_keys: int
    http_port: int
    http_bind: list[str]

    __slots__ = tuple(__annotations__) + ("_listeners", "config_file")

    def __init__(self) -> None:
        for name, directive in DIRECTIVES.items():
            self._store(attribute_of(name), directive.fresh_default())
        self._listeners: dict[str, list[Callable[[Any], None]]] = {}
        self.config_file: str | None = None  # absolute path, for REWRITE and INFO

    def __setattr__(self, attribute: str, value: Any) -> None:
        if attribute in _SETTINGS:
            raise AttributeError(f"{attribute} is a setting: it changes through CONFIG SET "
                                 "(Config.set)")
        object.__setattr__(self, attribute, value)

    def _store(self, attribute: str, value: Any) -> None:
        """Where set() and the package's loader (loader.py) put a setting's
        new value: the one way past the read-only attributes."""
        object.__setattr__(self, attribute, value)

    @classmethod
    def load(cls, path: str | None, extra_args: Iterable[str] = (), *,
             commands: Iterable[str] | None = None) -> Config:
        """Read path ("-" for stdin, None for none), then the command-line
        directives. With commands (the command names), rename-command lines
        are checked against them as Disque checks them. Raises ConfigError."""
        config = cls()
        loader = Loader(config, commands)
        if path == STDIN_PATH:
            loader.load_file(STDIN_PATH, "(stdin)")
        elif path is not None:
            config.config_file = os.path.abspath(path)
            loader.load_file(config.config_file, config.config_file)
        loader.load_command_line(extra_args)
        return config

    def value(self, name: str) -> Any:
        """A directive's value by its name (for code that iterates the table)."""
        return getattr(self, attribute_of(name))

    def on_change(self, name: str, callback: Callable[[Any], None]) -> None:
        """Call callback(new_value) after each successful CONFIG SET of name.

        A callback may refuse by raising (CommandError gives the client its
        message): the old value is restored, callbacks that already ran are
        called again with it, and the error propagates.
        """
        if name not in DIRECTIVES:
            raise KeyError(name)
        self._listeners.setdefault(name, []).append(callback)

    def get_matching(self, pattern: bytes) -> list[bytes]:
        """CONFIG GET: [name, value, ...] for the names matching the glob."""
        reply: list[bytes] = []
        for name, directive in _GETTABLE:
            if glob_match(pattern, name):
                reply += (name, directive.kind.show(self.value(directive.name)))
        return reply

    def set(self, name: bytes, value: bytes) -> None:
        """CONFIG SET name value. Raises CommandError with Disque's messages."""
        directive = DIRECTIVES.get(name.lower().decode(ENCODING, ERRORS))
        if directive is None or not directive.settable:
            raise CommandError(UNSUPPORTED % _for_reply(name))
        attribute = attribute_of(directive.name)
        old = getattr(self, attribute)
        try:
            new = directive.kind.parse_set(value, old)
        except BadValue:
            raise CommandError(INVALID_ARGUMENT % (_for_reply(value), _for_reply(name))) from None
        undo = directive.on_set(new) if directive.on_set is not None else None
        self._store(attribute, new)
        self._notify(directive.name, old, new, undo)

    def _notify(self, name: str, old: Any, new: Any, undo: Callable[[], None] | None) -> None:
        notified: list[Callable[[Any], None]] = []
        try:
            for callback in self._listeners.get(name, ()):
                callback(new)
                notified.append(callback)
        except Exception:
            self._store(attribute_of(name), old)
            if undo is not None:
                undo()
            for callback in reversed(notified):
                callback(old)
            raise

    def rewrite(self) -> None:
        """CONFIG REWRITE: write the current values back into the loaded file."""
        if self.config_file is None:
            raise CommandError(NO_CONFIG_FILE)
        try:
            content = rewritten_content(read_lines(self.config_file), self)
            replace_file(self.config_file, content)
        except OSError as exc:
            raise CommandError(REWRITE_FAILED % strerror(exc)) from None


_SETTINGS = frozenset(attribute_of(name) for name in DIRECTIVES)
if set(Config.__annotations__) != _SETTINGS:
    raise ImportError("Config's declared settings and DIRECTIVES differ: declare each "
                      "directive once, in the table's order")
