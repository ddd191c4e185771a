"""Test helpers: tiny configs so the whole suite runs in minutes on 2 CPU cores."""

from __future__ import annotations


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
