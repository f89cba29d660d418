"""The compiled engine's own tests: they need nothing above the engine.

The engine layer may import disque_py.base and disque_py.formats and
nothing else of the package (docs/ARCHITECTURE.md). Run alone, these tests
prove it: tests/unit/test_layers.py runs them in a process of their own
(`pytest tests/engine --confcutdir tests/engine` with DISQUE_ENGINE_ALONE
set), where importing any other part of disque_py, or of the other tests,
fails; a test, or an engine path, that reaches upward fails with it.
"""

from __future__ import annotations

import importlib.abc
import os
import sys

ENGINE_AND_BELOW = ("disque_py.base", "disque_py.formats", "disque_py.engine", "tests.engine")
PACKAGES = ("disque_py", "tests")


class RefuseAboveTheEngine(importlib.abc.MetaPathFinder):
    """Fails the import of any module of ours above the engine layer."""

    def find_spec(self, name, path, target=None):
        if name in PACKAGES or not name.startswith(tuple(p + "." for p in PACKAGES)):
            return None
        if name in ENGINE_AND_BELOW or name.startswith(tuple(p + "." for p in ENGINE_AND_BELOW)):
            return None
        raise ImportError(f"{name} is above the engine layer: the engine's tests may not "
                          "import it")


if os.environ.get("DISQUE_ENGINE_ALONE"):
    sys.meta_path.insert(0, RefuseAboveTheEngine())
