"""LoRA with PEFT: which modules of an hf_attn model take the adapters, and PEFT told so by model type.

PEFT picks LoRA's target modules from `target_modules`, or, left unset, from a table keyed by the config's
`model_type` (`peft.utils.constants.TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING`: BERT's `query` and
`value`, Llama's `q_proj` and `v_proj`). A model cannot declare its own defaults (PEFT 0.21 reads nothing from the
model class), and `hf_attn` is not in that table, so `LoraConfig(task_type="SEQ_CLS")` alone stops with "Please
specify `target_modules`". Two ways need no module names (docs/ecosystem.md):

- `register_with_peft()` once, then `LoraConfig(...)` without `target_modules`: PEFT takes `LORA_TARGET_MODULES`
  as it takes BERT's;
- `LoraConfig(target_modules="all-linear")`: every linear layer of attention and MLP, but the head.
"""

from __future__ import annotations

from .configuration_hf_attn import HfAttnConfig

# The attention projections: the fused query-key-value projection of self-attention, the query and fused key-value
# projections of cross-attention (encoder-decoders), and the output projection. PEFT adapts every module whose
# name ends with one of these; a model without cross-attention simply has no `q_proj` or `kv_proj`.
LORA_TARGET_MODULES = ("qkv_proj", "q_proj", "kv_proj", "o_proj")


def register_with_peft() -> None:
    """Add hf_attn's default LoRA target modules to PEFT's table of defaults by model type, so that a `LoraConfig`
    without `target_modules` adapts the attention projections (`LORA_TARGET_MODULES`). Idempotent; an entry a user
    has already put there is kept."""
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING

    TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING.setdefault(HfAttnConfig.model_type, list(LORA_TARGET_MODULES))
