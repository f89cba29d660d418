"""How a client turns a job's body into bytes and back.

A serializer has `dumps(value) -> bytes` and `loads(bytes) -> value`. The
default, RAW, passes bytes through (and encodes a str as UTF-8); JSON uses
orjson. Any object with the two methods can be passed instead.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson


class Serializer(Protocol):
    """Bodies to bytes (ADDJOB) and back (GETJOB, QPEEK, SHOW)."""

    def dumps(self, value: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


class Raw:
    """Bodies are bytes; a str is sent as UTF-8 and read back as bytes."""

    def dumps(self, value: Any) -> bytes:
        if isinstance(value, bytes):
            return value
        if isinstance(value, (str, bytearray, memoryview)):
            return value.encode() if isinstance(value, str) else bytes(value)
        raise TypeError(f"a job body is bytes or str without a serializer, not "
                        f"{type(value).__name__}: pass serializer='json' or your own")

    def loads(self, data: bytes) -> Any:
        return data


class Json:
    """Bodies are JSON documents, written and read by orjson."""

    def dumps(self, value: Any) -> bytes:
        return orjson.dumps(value)

    def loads(self, data: bytes) -> Any:
        return orjson.loads(data)


RAW = Raw()
JSON = Json()
_NAMED: dict[str, Serializer] = {"raw": RAW, "bytes": RAW, "json": JSON}


def serializer_for(choice: str | Serializer | None) -> Serializer:
    """The serializer a client was given: None or "raw", "json", or an object."""
    if choice is None:
        return RAW
    if isinstance(choice, str):
        try:
            return _NAMED[choice]
        except KeyError:
            raise ValueError(f"unknown serializer {choice!r}: raw, json, or an object "
                             f"with dumps() and loads()") from None
    return choice
