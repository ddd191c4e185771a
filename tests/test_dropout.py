"""Dropout is torch's: `nn.Dropout` modules and `nn.functional.dropout` on attention weights, whatever the
backend; configs saved by hf_attn 1.0 with `dropout_implementation` still load."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from helpers import tiny_config_kwargs
from torch import nn

from hf_attn import HfAttnConfig, HfAttnForSequenceClassification
from hf_attn.modeling_hf_attn import AttentionInputs


def test_every_dropout_module_is_torchs() -> None:
    model = HfAttnForSequenceClassification(HfAttnConfig(**tiny_config_kwargs(hidden_dropout=0.1)))
    dropouts = [module for module in model.modules() if "Dropout" in type(module).__name__]
    assert dropouts and all(type(module) is nn.Dropout for module in dropouts)


def test_attention_dropout_is_torch_dropout_of_the_attention_weights() -> None:
    """Eager attention in training, rebuilt by hand: softmax(q k^T / sqrt(d)) with torch's dropout, same seed."""
    config = HfAttnConfig(**tiny_config_kwargs(attention_dropout=0.3, hidden_dropout=0.0))
    attention = HfAttnForSequenceClassification(config).model.layers[0].self_attn.train()
    hidden = torch.randn(2, 7, config.hidden_size)
    torch.manual_seed(3)
    _, weights = attention(hidden, AttentionInputs(output_attentions=True))
    # Q and K by hand from the fused projection's weights (no rotary tables given: nothing rotates them)
    query, key, _ = attention.qkv_proj(hidden).split(attention.split_sizes, dim=-1)
    query, key = (state.unflatten(-1, (-1, config.head_dim)).transpose(1, 2) for state in (query, key))
    key = key.repeat_interleave(config.num_key_value_groups, dim=1)
    torch.manual_seed(3)
    expected = F.dropout((query @ key.transpose(2, 3) * config.head_dim**-0.5).softmax(-1), 0.3, training=True)
    torch.testing.assert_close(weights, expected)


def test_sdpa_training_with_attention_dropout_runs_sdpa() -> None:
    """Nothing forces the eager attention in training: SDPA draws its own mask, so the logits differ."""
    input_ids = torch.randint(1, 64, (4, 12))
    logits = {}
    for attn in ("eager", "sdpa"):
        torch.manual_seed(0)  # the same weights
        model = HfAttnForSequenceClassification(HfAttnConfig(**tiny_config_kwargs(attention_dropout=0.2))).train()
        model.set_attn_implementation(attn)
        torch.manual_seed(7)
        logits[attn] = model(input_ids=input_ids).logits
    assert not torch.equal(logits["sdpa"], logits["eager"])


def test_a_config_saved_with_a_dropout_implementation_loads_without_it(tmp_path: Path) -> None:
    """hf_attn 1.0 wrote `dropout_implementation` (`packed` or `torch`) to config.json; the field is gone, the
    value is dropped on load, and the model computes what one saved without it computes (no dropout in eval)."""
    torch.manual_seed(0)
    model = HfAttnForSequenceClassification(HfAttnConfig(**tiny_config_kwargs())).eval()
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert "dropout_implementation" not in saved
    (tmp_path / "config.json").write_text(json.dumps({**saved, "dropout_implementation": "packed"}))
    loaded = HfAttnForSequenceClassification.from_pretrained(tmp_path).eval()
    assert not hasattr(loaded.config, "dropout_implementation")
    input_ids = torch.randint(1, 64, (2, 9))
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=input_ids).logits, model(input_ids=input_ids).logits)
