"""Disque's error replies as exception classes, for the client.

The classes are the server's own (base/errors.py): one class per error
prefix (BADID, NOREPL, PAUSED, LEAVING, OOM, ...), so a client matches the
same names the server raises, and a prefix is declared once. redis-py
parses an error reply into a ResponseError; `translate` turns that into
the class of its prefix, the message being the text after the prefix.
Errors of the connection (redis.ConnectionError, redis.TimeoutError) pass
through as redis-py raises them.
"""

from __future__ import annotations

from redis.exceptions import AuthenticationError, BusyLoadingError, RedisError, ResponseError

from disque_py.base.errors import (
    AckedError, BadIdError, CommandError, DeniedError, DisqueError, LeavingError,
    LoadingError, MaxlenError, MisconfError, NoAuthError, NoJobError, NoProtoError,
    NoReplError, OutOfMemoryError, PausedError, TooLateError, WrongPassError,
)

OOMError = OutOfMemoryError

__all__ = [
    "AckedError", "BadIdError", "CommandError", "DeniedError", "DisqueError",
    "LeavingError", "LoadingError", "MaxlenError", "MisconfError", "NoAuthError",
    "NoJobError", "NoProtoError", "NoReplError", "OOMError", "OutOfMemoryError",
    "PausedError", "TooLateError", "WrongPassError", "MOVE_ON", "REFUSED", "translate",
]

# What redis-py raises for an error reply: a ResponseError, or for the
# prefixes it takes for trouble with the connection (NOAUTH, WRONGPASS,
# ERR invalid password, LOADING) a subclass of its ConnectionError, which
# must not be taken for a lost node: the node answered.
REFUSED = (ResponseError, AuthenticationError, BusyLoadingError)
# Refusals after which another node may serve the call: the node did nothing.
MOVE_ON = (LeavingError, LoadingError)

_BY_PREFIX: dict[str, type[DisqueError]] = {
    cls.prefix.decode(): cls
    for cls in (CommandError, BadIdError, NoJobError, AckedError, TooLateError, NoReplError,
                PausedError, MaxlenError, LeavingError, NoAuthError, OutOfMemoryError,
                MisconfError, LoadingError, NoProtoError, WrongPassError, DeniedError)
}


def translate(error: RedisError) -> DisqueError:
    """The Disque error class of a reply redis-py raised as `error`.

    redis-py strips the prefixes it knows (ERR, OOM, LOADING, NOAUTH,
    WRONGPASS), keeping them in `status_code`, and leaves the others at the
    head of the message."""
    text = str(error)
    prefix = getattr(error, "status_code", None)
    if prefix is None:
        head, _, rest = text.partition(" ")
        if head in _BY_PREFIX:
            prefix, text = head, rest
    translated = _BY_PREFIX.get(prefix or "ERR", CommandError)(text)
    translated.__cause__ = error
    return translated
