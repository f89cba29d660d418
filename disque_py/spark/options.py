"""The `disque` data source's options: their names, kinds and checks.

Shared by the writers (datasource.py) and the streaming source
(stream_reader.py). Spark lower-cases option names; a name with no meaning
here, or a value of the wrong kind, is an OptionError raised on the driver
before any task runs.
"""

from __future__ import annotations

TRUE_WORDS = ("true", "yes", "1")
FALSE_WORDS = ("false", "no", "0")
INT_OPTIONS = ("replicate", "ttl", "retry", "delay", "maxlen", "priority", "batch_size",
               "max_in_flight", "timeout_ms")
BOOL_OPTIONS = ("async", "row_key", "dedup")
STRING_OPTIONS = ("queue", "nodes", "body_column", "key_column", "password", "path")
# Spark passes its own options to the source too (lower-cased, as all are).
SPARK_OPTIONS = ("checkpointlocation",)


class OptionError(ValueError):
    """A data source option with no meaning or a bad value."""


def bool_option(name: str, value: str) -> bool:
    if value.lower() in TRUE_WORDS:
        return True
    if value.lower() in FALSE_WORDS:
        return False
    raise OptionError(f"disque: option {name} must be true or false, not {value!r}")


def int_option(name: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise OptionError(f"disque: option {name} must be an integer, not {value!r}") from None


def parse_nodes(value: str | None) -> list[str]:
    nodes = [node.strip() for node in (value or "").split(",") if node.strip()]
    if not nodes:
        raise OptionError("disque: option nodes is required (host:port,host:port)")
    return nodes
