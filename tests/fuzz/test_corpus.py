"""Every input kept in the fuzz corpora, through its target's contract, in
the normal suite: the seeds, and each input that once broke a contract
(crash-*), so that no finding comes back unnoticed. No atheris needed."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from tests.fuzz import TARGETS

CORPUS = Path(__file__).resolve().parent / "corpus"
INPUTS = [(target, path) for target in TARGETS
          for path in sorted((CORPUS / target).iterdir())]


def test_every_target_has_seeds():
    assert {target for target, _ in INPUTS} == set(TARGETS)


@pytest.mark.parametrize("target, path", INPUTS, ids=[f"{t}/{p.name}" for t, p in INPUTS])
def test_kept_input_holds_the_contract(target, path):
    importlib.import_module(f"tests.fuzz.{target}").check(path.read_bytes())
