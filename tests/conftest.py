"""Shared fixtures: the real data in ../shared/data (skip with a clear reason where it is absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Nothing may be downloaded in tests.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path of ../shared/data; skips the test where the shared data is not present."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not found at {SHARED_DATA} (../shared/data): skipping the test that needs it")
    return SHARED_DATA
