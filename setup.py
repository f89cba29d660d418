"""Builds the compiled engine (disque_py/engine/_core.pyx) with Cython.

Everything else about the package is in pyproject.toml. Cython runs on
every build (force=True): a .c left over from an older .pyx is never
reused. The sources' fingerprint is compiled in as ENGINE_SOURCE_HASH and
checked when the package is imported (disque_py/engine/__init__.py).
"""

import importlib.util
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


SOURCE_HASH = _load_sources_module().source_hash(ENGINE)

engine = Extension(
    "disque_py.engine._core",
    ["disque_py/engine/_core.pyx"],
    define_macros=[("ENGINE_SOURCE_HASH", '"%s"' % SOURCE_HASH)],
    extra_compile_args=["-O2"],
)

setup(ext_modules=cythonize([engine], force=True, language_level=3,
                            compiler_directives={"embedsignature": True}))
