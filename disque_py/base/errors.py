"""The error tree every client-visible failure goes through.

Each class carries the RESP error prefix that Disque clients match on
(ERR, BADID, NOJOB, NOREPL, PAUSED, MAXLEN, LEAVING, ...). The message is the
text after the prefix. Errors are values as much as exceptions: handlers may
raise them or return them, and resp.encode_error turns either into
"-PREFIX message\\r\\n". Messages are worded exactly as Disque words them,
because client libraries and operators' scripts compare them.
"""

from __future__ import annotations


class DisqueError(Exception):
    """Base class: a reply of the form -PREFIX message."""

    prefix = b"ERR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __eq__(self, other) -> bool:
        """Errors are values: same kind and same message compare equal."""
        return type(self) is type(other) and self.message == other.message

    def __hash__(self) -> int:
        return hash((type(self), self.message))

    def as_reply(self) -> DisqueError:
        """This error, kept as a reply value once it was raised: without the
        traceback and context that tie it to the frames it left, which hold
        it in turn (a reference cycle only a full collection would free)."""
        self.__traceback__ = self.__context__ = self.__cause__ = None
        return self

    def wire(self) -> bytes:
        """The RESP encoding of this error; newlines cannot break the frame."""
        text = self.message.replace("\r", " ").replace("\n", " ")
        return b"-%s %s\r\n" % (self.prefix, text.encode("latin-1", "replace"))


class CommandError(DisqueError):
    """Generic -ERR: syntax, bad option values, unknown commands."""


class ProtocolError(CommandError):
    """Malformed RESP input. The connection is closed after the reply."""

    def __init__(self, detail: str) -> None:
        super().__init__("Protocol error: " + detail)


class BadIdError(DisqueError):
    prefix = b"BADID"


class NoJobError(DisqueError):
    prefix = b"NOJOB"


class AckedError(DisqueError):
    prefix = b"ACKED"


class TooLateError(DisqueError):
    prefix = b"TOOLATE"


class NoReplError(DisqueError):
    prefix = b"NOREPL"


class PausedError(DisqueError):
    prefix = b"PAUSED"


class MaxlenError(DisqueError):
    prefix = b"MAXLEN"


class LeavingError(DisqueError):
    prefix = b"LEAVING"


class NoAuthError(DisqueError):
    prefix = b"NOAUTH"


class OutOfMemoryError(DisqueError):
    prefix = b"OOM"


class MisconfError(DisqueError):
    prefix = b"MISCONF"


class LoadingError(DisqueError):
    prefix = b"LOADING"


class NoProtoError(DisqueError):
    prefix = b"NOPROTO"


class WrongPassError(DisqueError):
    prefix = b"WRONGPASS"


class DeniedError(DisqueError):
    """Protected mode refuses a client from another host (then hangs up)."""

    prefix = b"DENIED"


class ConfigError(Exception):
    """A configuration file or command line that cannot be loaded.

    Not a client reply: start-up prints it and exits, naming where it is.
    """

    def __init__(self, message: str, *, filename: str | None = None,
                 line_number: int | None = None, line: str | None = None,
                 directive: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.filename = filename
        self.line_number = line_number
        self.line = line
        self.directive = directive

    def report(self) -> str:
        """The multi-line text shown to the operator, in Disque's layout."""
        where = self.filename or "(command line)"
        parts = ["", "*** FATAL CONFIG FILE ERROR ***"]
        if self.line_number is not None:
            parts.append(f"Reading the configuration file {where}, at line {self.line_number}")
        else:
            parts.append(f"Reading the configuration file {where}")
        if self.line is not None:
            parts.append(f">>> '{self.line}'")
        if self.directive:
            parts.append(f"{self.message} (directive '{self.directive}')")
        else:
            parts.append(self.message)
        return "\n".join(parts)


class StartupError(Exception):
    """The server cannot start as configured (a port taken, an AOF that
    cannot be loaded, a TLS file that cannot be read): start-up logs the
    message, which says what to fix, and exits with status 1."""

