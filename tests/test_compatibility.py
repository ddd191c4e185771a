"""Checkpoints saved before 1.0 load with the logits they had.

`tests/fixtures/pre-1.0/` holds tiny classifiers saved by the code before the 1.0 clean-up (which removed
the RoPE layout conversion and the inference-only fast paths), with the logits that code computed on
fixed inputs: the reference is the old implementation's own output, which these folders must keep.
`rope-before-rope-layout` has a config.json without `rope_layout`, as written before the field existed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from hf_attn import HfAttnForSequenceClassification

FIXTURES = Path(__file__).parent / "fixtures" / "pre-1.0"
EXPECTED = json.loads((FIXTURES / "expected_logits.json").read_text())


@pytest.mark.parametrize("name", ["rope-interleaved", "rope-before-rope-layout", "alibi-gqa", "sinusoidal-geglu"])
@pytest.mark.parametrize("grad", [False, True])
def test_pre_1_0_checkpoints_give_their_saved_logits(name: str, grad: bool) -> None:
    model = HfAttnForSequenceClassification.from_pretrained(FIXTURES / name).eval()
    with torch.set_grad_enabled(grad):
        logits = model(
            input_ids=torch.tensor(EXPECTED["input_ids"]), attention_mask=torch.tensor(EXPECTED["attention_mask"])
        ).logits
    torch.testing.assert_close(logits.detach(), torch.tensor(EXPECTED[name]), rtol=1e-5, atol=1e-6)


def test_a_config_saved_before_rope_layout_existed_loads_as_halves() -> None:
    saved = json.loads((FIXTURES / "rope-before-rope-layout" / "config.json").read_text())
    assert "rope_layout" not in saved
    model = HfAttnForSequenceClassification.from_pretrained(FIXTURES / "rope-before-rope-layout")
    assert model.config.rope_layout == "halves"
