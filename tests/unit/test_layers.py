"""The layer contract where import-linter cannot look, and the seams it names.

lint-imports (pyproject.toml, run by `make test`) checks the Python
modules. It does not read the compiled engine's sources, and it cannot see
a subprocess's imports or a duck-typed interface; these tests do:
  * the engine's .pyx/.pxi/.pxd import only the layers below it, and its own
    tests pass in a process where every layer above it fails to import;
  * the command-line entry points that need no server (the `disque` client
    launcher, `disque-py cluster`) start without the compiled engine;
  * the services the server layer attaches provide every member the
    commands layer declares (commands/services.py).
"""

from __future__ import annotations

import ast
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

from disque_py.commands.services import ClusterControl, PersistenceControl
from disque_py.server.cluster_service import ClusterService
from disque_py.server.persistence_service import PersistenceService

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "disque_py" / "engine"
BELOW_THE_ENGINE = ("disque_py.base", "disque_py.formats", "disque_py.engine")
PYTHON_IMPORT = re.compile(r"^\s*(?:from\s+(disque_py[\w.]*)\s+c?import|import\s+(disque_py[\w.]*))",
                           re.M)


def test_the_engine_sources_import_only_the_layers_below_it():
    imported = {}
    for path in ENGINE.rglob("*"):
        if path.suffix in (".pyx", ".pxi", ".pxd", ".py") and \
                "build" not in path.relative_to(ENGINE).parts:
            for match in PYTHON_IMPORT.finditer(path.read_text()):
                imported.setdefault(match.group(1) or match.group(2), []).append(path.name)
    assert imported, "no import found: the pattern no longer reads the sources"
    upward = {module: files for module, files in imported.items()
              if not module.startswith(BELOW_THE_ENGINE)}
    assert upward == {}


def test_the_engine_alone_passes_its_own_tests():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--confcutdir",
         str(ROOT / "tests" / "engine"), str(ROOT / "tests" / "engine")],
        cwd=ROOT, env={**os.environ, "DISQUE_ENGINE_ALONE": "1"},
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"\b\d{2,} passed", done.stdout), done.stdout[-2000:]


# A process whose import of the compiled engine fails, running one entry point.
WITHOUT_ENGINE = """
import importlib.abc, sys
class NoEngine(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "disque_py.engine" or name.startswith("disque_py.engine."):
            raise ImportError("the engine is not to be imported here")
sys.meta_path.insert(0, NoEngine())
sys.argv = {argv!r}
{entry}
"""


def _run_without_engine(argv: list[str], entry: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_ENGINE.format(argv=argv, entry=entry)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": "/nonexistent"})


def test_the_disque_launcher_starts_without_the_engine():
    # No redis-cli on this PATH: the launcher itself ran, and says what is missing.
    done = _run_without_engine(["disque", "PING"],
                               "from disque_py.tools.launcher import client_main\nclient_main()")
    assert done.returncode == 127 and "redis-cli is needed" in done.stderr, done.stderr


def test_disque_py_cluster_starts_without_the_engine():
    for argv in (["disque-py", "cluster", "--help"], ["disque-py", "--help"]):
        done = _run_without_engine(argv, "from disque_py.tools.cli import main\nmain()")
        assert done.returncode == 0, done.stderr
        assert "cluster" in done.stdout


def _members(protocol) -> set[str]:
    declared = set(getattr(protocol, "__annotations__", {}))
    declared |= {name for name, value in vars(protocol).items()
                 if inspect.isfunction(value) and not name.startswith("_")}
    return declared


def _provided(service) -> set[str]:
    """The service's methods and properties, and the attributes its
    constructor assigns."""
    provided = {name for name in dir(service) if not name.startswith("_")}
    init = ast.parse(inspect.getsource(service.__init__).strip())
    provided |= {node.attr for node in ast.walk(init)
                 if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                 and isinstance(node.value, ast.Name) and node.value.id == "self"}
    return provided


def test_the_services_provide_what_the_commands_layer_declares():
    for protocol, service in ((ClusterControl, ClusterService),
                              (PersistenceControl, PersistenceService)):
        assert _members(protocol) - _provided(service) == set(), service.__name__
