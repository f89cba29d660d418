"""Which files the compiled engine is built from, and their fingerprint.

setup.py compiles the fingerprint into the extension; the package checks
it at import against the sources beside it, so an edited .pyx/.pxd/.pxi is
never silently shadowed by an older build. This file is read by setup.py
by path (before the package can be imported), so it imports nothing of ours.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

ENGINE_DIR = Path(__file__).resolve().parent
SOURCE_SUFFIXES = (".pyx", ".pxd", ".pxi", ".h")


def source_files(directory: Path = ENGINE_DIR) -> list[Path]:
    """The engine's sources, its part folders (model/, node/, net/) included."""
    return sorted(path for path in directory.rglob("*")
                  if path.suffix in SOURCE_SUFFIXES
                  and "build" not in path.relative_to(directory).parts)


def source_hash(directory: Path = ENGINE_DIR) -> str:
    """sha256 over the engine's source files' names and contents."""
    digest = hashlib.sha256()
    for path in source_files(directory):
        digest.update(path.relative_to(directory).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()
