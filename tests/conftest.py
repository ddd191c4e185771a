"""Shared fixtures and the offline environment every test runs in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import SHARED, require

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="module")
def sample_dir() -> Path:
    """The Week 3 sample files made by an independent implementation (skips where ../shared is absent)."""
    return require(SHARED / "week3-sample")
