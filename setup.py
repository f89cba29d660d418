"""Builds the compiled engine (disque_py/engine/_core.pyx) with Cython.

Everything else about the package is in pyproject.toml. Cython runs on
every build (force=True): a .c left over from an older .pyx is never
reused. The sources' fingerprint is compiled in as ENGINE_SOURCE_HASH and
checked when the package is imported (disque_py/engine/__init__.py).

DISQUE_ENGINE_SANITIZE=address,undefined (any -fsanitize= list) builds
the engine instrumented, for `make test-asan` and `make fuzz` (with
fuzzer-no-link: coverage for libFuzzer); CC names the compiler (clang).
The extension then leaves the sanitizers' runtime unresolved: the process
preloads it (docs/checking.md). Without the variable the build is the
normal one.
"""

import importlib.util
import os
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent
ENGINE = HERE / "disque_py" / "engine"


def _load_sources_module():
    spec = importlib.util.spec_from_file_location("_engine_sources", ENGINE / "_sources.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sanitizer_flags(sanitizers: str) -> tuple[list[str], list[str]]:
    """Compile and link flags for an instrumented build ("" = normal)."""
    if not sanitizers:
        return ["-O2"], []
    # -O1 keeps reports' stacks readable and the run fast enough; an
    # undefined-behaviour report stops the process like a memory error does.
    instrument = ["-fsanitize=" + sanitizers, "-fno-omit-frame-pointer", "-g", "-O1"]
    if "undefined" in sanitizers.split(","):
        instrument.append("-fno-sanitize-recover=undefined")
    return instrument, ["-fsanitize=" + sanitizers]


SOURCE_HASH = _load_sources_module().source_hash(ENGINE)
COMPILE_FLAGS, LINK_FLAGS = _sanitizer_flags(os.environ.get("DISQUE_ENGINE_SANITIZE", ""))

engine = Extension(
    "disque_py.engine._core",
    ["disque_py/engine/_core.pyx"],
    define_macros=[("ENGINE_SOURCE_HASH", '"%s"' % SOURCE_HASH)],
    extra_compile_args=COMPILE_FLAGS,
    extra_link_args=LINK_FLAGS,
)

setup(ext_modules=cythonize([engine], force=True, language_level=3,
                            compiler_directives={"embedsignature": True}))
