"""LoRA with PEFT on a committed encoder: PEFT finds the target modules by model type, the adapter trains, saves
and reloads to the same logits, and merging it into the weights changes no logit."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import REPO, tiny_config_kwargs
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from hf_attn import HfAttnConfig, HfAttnForSequenceClassification
from hf_attn.experiments.data import limit_rows
from hf_attn.lora import LORA_TARGET_MODULES, register_with_peft
from hf_attn.tasks import load_classification

ENCODER = REPO / "checkpoints" / "rope-mlm"


def adapted_modules(model: torch.nn.Module) -> set[str]:
    """The names (last part) of the modules that hold a LoRA adapter."""
    return {name.rsplit(".", 1)[-1] for name, module in model.named_modules() if hasattr(module, "lora_A")}


def encoder_classifier() -> torch.nn.Module:
    """The committed masked-LM encoder under a new two-label head (the same head every call: seeded)."""
    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_pretrained(ENCODER, num_labels=2)


def test_lora_fine_tunes_a_committed_encoder_saves_reloads_and_merges(tmp_path: Path) -> None:
    register_with_peft()
    model = get_peft_model(encoder_classifier(), LoraConfig(task_type="SEQ_CLS", r=4, lora_alpha=8))
    assert adapted_modules(model) == {"qkv_proj", "o_proj"}  # found by model type, no names given
    trainable = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
    assert all("lora_" in name or ".classifier." in name for name in trainable)  # the head is trained whole

    rows = limit_rows(load_classification("sample").splits["train"], 6)
    tokenizer = AutoTokenizer.from_pretrained(ENCODER)
    batch = tokenizer(list(rows["text"]), truncation=True, max_length=32, padding=True, return_tensors="pt")
    labels = torch.tensor(list(rows["label"]))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    frozen = {name: p.detach().clone() for name, p in model.named_parameters() if "qkv_proj.base_layer" in name}
    model.train()
    for _ in range(2):
        loss = model(**batch, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    assert all(torch.equal(p, frozen[name]) for name, p in model.named_parameters() if name in frozen)
    with torch.no_grad():
        adapted = model(**batch).logits
        with model.disable_adapter():  # the trained LoRA matrices change the output: not an identity adapter
            assert not torch.allclose(model(**batch).logits, adapted, atol=1e-4)

    model.save_pretrained(tmp_path)
    assert {path.name for path in tmp_path.iterdir()} >= {"adapter_config.json", "adapter_model.safetensors"}
    reloaded = PeftModel.from_pretrained(encoder_classifier(), tmp_path).eval()
    merged = model.merge_and_unload()
    assert isinstance(merged, HfAttnForSequenceClassification) and not adapted_modules(merged)
    with torch.no_grad():
        torch.testing.assert_close(reloaded(**batch).logits, adapted, atol=0, rtol=0)
        torch.testing.assert_close(merged(**batch).logits, adapted, atol=1e-5, rtol=1e-5)

@pytest.mark.parametrize("cross_attention", [False, True])
def test_all_linear_adapts_attention_and_mlp_but_not_the_head(cross_attention: bool) -> None:
    """PEFT's `all-linear` needs no names either; the registered defaults cover every attention projection of a
    decoder with cross-attention too."""
    register_with_peft()
    config = HfAttnConfig(**tiny_config_kwargs(is_decoder=cross_attention, add_cross_attention=cross_attention))
    every_linear = get_peft_model(HfAttnForSequenceClassification(config),
                                  LoraConfig(task_type="SEQ_CLS", target_modules="all-linear"))
    attention = {"q_proj", "kv_proj", "o_proj"} if cross_attention else {"qkv_proj", "o_proj"}
    assert adapted_modules(every_linear) == {*attention, "qkv_proj", "up_proj", "down_proj"}
    by_type = get_peft_model(HfAttnForSequenceClassification(config), LoraConfig(task_type="SEQ_CLS"))
    assert adapted_modules(by_type) == {*attention, "qkv_proj"} and adapted_modules(by_type) <= set(LORA_TARGET_MODULES)
