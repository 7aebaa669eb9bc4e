"""Fixtures of the audit tests: one synthetic run per test module (`base_run`), and a copy of it per test to edit
(`run`). A module may define its own `base_run` (another size) and the copy follows it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from curate.audit_synth import build_synthetic_run


@pytest.fixture(scope="module")
def base_run(tmp_path_factory) -> Path:
    return build_synthetic_run(tmp_path_factory.mktemp("audit_run") / "run", 600)


@pytest.fixture
def run(base_run, tmp_path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(base_run, copy)
    return copy
