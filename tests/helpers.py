"""Test helpers: tiny configs so the whole suite runs in minutes on 2 CPU cores."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"
REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "configs" / "smoke.yaml"
# Overrides that shrink the smoke experiment's model and tokenizer to seconds per run (add row limits).
SMOKE_TINY_MODEL = ["model.hidden_size=32", "model.intermediate_size=64", "tokenizer_vocab_size=300"]


def tiny_config_kwargs(**overrides: object) -> dict:
    """A 2-layer, 32-wide model: big enough for every code path, small enough to be instant."""
    kwargs = dict(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=32,
        pad_token_id=0,
        hidden_dropout=0.0,
        attention_dropout=0.0,
    )
    kwargs.update(overrides)
    return kwargs


def require(path: Path) -> Path:
    """`path`, or skip the test with the reason when this checkout has no ../shared beside it."""
    if not path.exists():
        pytest.skip(f"{path} is absent; it holds the Week 3 sample files and IMDb these tests compare against")
    return path
