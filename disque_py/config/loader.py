"""Reading the configuration: a file, the files it includes, and the
command line, applied in order to a Config with each directive's effect.

Rules kept:
- Command-line directives (--port 7777) apply after the file, as if
  appended to it.
- An error names the file, the line and the directive, as Disque does
  (ConfigError.report); "-" reads the file from standard input.
- rename-command lines are checked against the command table when it is
  given, as Disque checks them.
"""

from __future__ import annotations

import os
import sys
from typing import Iterable

from disque_py.base.errors import ConfigError
from disque_py.base.replies import BAD_DIRECTIVE, UNBALANCED
from disque_py.config.directives import DIRECTIVES, arity_ok, attribute_of, strerror
from disque_py.config.parse import ENCODING, ERRORS, BadValue, decode, encode, quote, split_args

MAX_INCLUDE_DEPTH = 16  # Disque has none and recurses until it crashes
STDIN_PATH = "-"


def _display(raw: bytes) -> str:
    return raw.decode(ENCODING, "backslashreplace")


class Loader:
    """Applies config lines to a Config, in order, with their effects."""

    def __init__(self, config, commands: Iterable[str] | None) -> None:
        self.config = config
        self.commands = None if commands is None else {name.lower() for name in commands}
        self.depth = 0

    def load_file(self, path: str, shown_as: str) -> None:
        try:
            if path == STDIN_PATH:
                data = sys.stdin.buffer.read()
            else:
                with open(path, "rb") as file:
                    data = file.read()
        except (OSError, ValueError) as exc:
            raise ConfigError(f"Fatal error, can't open config file '{path}': "
                              f"{strerror(exc)}", filename=shown_as) from None
        self.load_text(data, shown_as)

    def load_text(self, data: bytes, filename: str) -> None:
        for number, raw in enumerate(data.split(b"\n"), 1):
            line = raw.strip(b" \t\r\n")
            if not line or line.startswith(b"#"):
                continue
            try:
                args = split_args(line)
            except BadValue:
                raise ConfigError(UNBALANCED, filename=filename, line_number=number,
                                  line=_display(line)) from None
            if args:
                self.apply(args, filename, number, line)

    def load_command_line(self, extra_args: Iterable[str]) -> None:
        # Each --name starts a line; the words after it are its arguments.
        lines: list[list[bytes]] = []
        for word in extra_args:
            if word.startswith("--"):
                lines.append([encode(word[2:])])
            elif lines:
                lines[-1].append(encode(word))
            else:
                lines.append([encode(word)])
        for number, args in enumerate(lines, 1):
            shown = b" ".join([args[0], *(quote(arg) for arg in args[1:])])
            self.apply(args, None, number, shown)

    def apply(self, args: list[bytes], filename: str | None, number: int, line: bytes) -> None:
        name = args[0].lower().decode(ENCODING, ERRORS)
        directive = DIRECTIVES.get(name)
        words = [decode(arg) for arg in args[1:]]
        try:
            if directive is None or not directive.in_file or not arity_ok(directive, words):
                raise BadValue(BAD_DIRECTIVE)
            value = directive.kind.parse(words)
            if directive.on_load is not None:
                directive.on_load(self, value)
            attribute = attribute_of(name)
            self.config._store(attribute,
                               directive.kind.merge(getattr(self.config, attribute), value))
        except BadValue as exc:
            raise ConfigError(str(exc), filename=filename, line_number=number,
                              line=_display(line), directive=name) from None

    def include(self, path: str) -> None:
        if self.depth >= MAX_INCLUDE_DEPTH:
            raise BadValue("Too many nested include directives")
        self.depth += 1
        try:
            self.load_file(path, os.path.abspath(path))
        finally:
            self.depth -= 1

    def rename(self, old: str, new: str) -> None:
        """Check a rename against the command table as Disque does, if known."""
        if self.commands is None:
            return
        if old not in self.commands:
            raise BadValue("No such command in rename-command")
        self.commands.discard(old)
        if new:
            if new in self.commands:
                raise BadValue("Target command name already exists")
            self.commands.add(new)
