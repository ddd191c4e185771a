"""Unpadded batches (`unpad_inputs`, `masking.RealTokens`): every step but attention runs on the real tokens alone.

The reference is the padded computation of the same model (`unpad_inputs=False`), which computes every slot: the
real tokens' states and gradients must be the same, the padding's hidden states zero.
"""

from __future__ import annotations

import pytest
import torch
from helpers import assert_gradients_close, tiny_config_kwargs

from hf_attn import HfAttnConfig, HfAttnForCausalLM, HfAttnForSequenceClassification, HfAttnModel
from hf_attn.masking import real_tokens
from hf_attn.positions import POSITION_SCHEMES

LENGTHS = [7, 10, 3, 0]  # the last text is empty: a row of padding alone


def padding_mask(lengths: list[int], length: int) -> torch.Tensor:
    return (torch.arange(length)[None, :] < torch.tensor(lengths)[:, None]).long()


def both_ways(model: torch.nn.Module, **inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The last hidden states unpadded and padded (the reference)."""
    outputs = []
    for unpad in (True, False):
        model.config.unpad_inputs = unpad
        outputs.append(model(**inputs).last_hidden_state)
    return outputs[0], outputs[1]


def test_real_tokens_take_the_unmasked_slots_in_row_major_order_and_pad_puts_them_back() -> None:
    mask = padding_mask(LENGTHS, 10)
    states = torch.randn(4, 10, 3)
    real = real_tokens(mask)
    taken = real.take(states)
    expected = torch.stack([states[row, column] for row in range(4) for column in range(10) if mask[row, column]])
    assert torch.equal(taken, expected[None])
    padded = real.pad(taken)
    assert torch.equal(padded, states * mask[..., None])
    assert real_tokens(torch.ones(2, 5, dtype=torch.long)) is None and real_tokens(None) is None


@pytest.mark.parametrize("scheme", POSITION_SCHEMES)
@pytest.mark.parametrize("variant", [{}, {"is_decoder": True}, {"num_key_value_heads": 2, "norm_position": "post"},
                                     {"attn_implementation": "eager", "hidden_act": "swiglu"}])
def test_an_unpadded_batch_gives_the_padded_computations_states_with_zeros_at_the_padding(
    scheme: str, variant: dict
) -> None:
    torch.manual_seed(0)
    model = HfAttnModel(HfAttnConfig(**tiny_config_kwargs(position_embedding_type=scheme, **variant))).eval()
    input_ids = torch.randint(1, 64, (4, 10))
    mask = padding_mask(LENGTHS, 10)
    unpadded, padded = both_ways(model, input_ids=input_ids, attention_mask=mask, use_cache=False)
    real = mask.bool()
    torch.testing.assert_close(unpadded[real], padded[real], rtol=1e-5, atol=1e-5)
    assert torch.equal(unpadded[~real], torch.zeros_like(unpadded[~real]))


def test_sliding_window_layers_computing_only_their_band_run_unpadded_too() -> None:
    torch.manual_seed(0)
    config = HfAttnConfig(**tiny_config_kwargs(sliding_window=4, max_position_embeddings=160,
                                               layer_types=["sliding_attention", "full_attention"]))
    model = HfAttnModel(config).eval()
    input_ids = torch.randint(1, 64, (3, 160))
    mask = padding_mask([160, 90, 33], 160)
    unpadded, padded = both_ways(model, input_ids=input_ids, attention_mask=mask)
    torch.testing.assert_close(unpadded[mask.bool()], padded[mask.bool()], rtol=1e-5, atol=1e-5)


def test_training_on_an_unpadded_batch_gives_the_padded_computations_loss_and_gradients() -> None:
    gradients = []
    for unpad in (True, False):
        torch.manual_seed(0)
        config = HfAttnConfig(**tiny_config_kwargs(position_embedding_type="alibi", unpad_inputs=unpad))
        model = HfAttnForSequenceClassification(config).train()  # dropout 0: the same function both ways
        torch.manual_seed(1)
        input_ids = torch.randint(1, 64, (4, 10))
        labels = torch.tensor([0, 1, 1, 0])
        loss = model(input_ids=input_ids, attention_mask=padding_mask(LENGTHS, 10), labels=labels).loss
        loss.backward()
        gradients.append((loss.detach(), {name: p.grad for name, p in model.named_parameters() if p.grad is not None}))
    (loss, grads), (reference_loss, reference_grads) = gradients
    torch.testing.assert_close(loss, reference_loss)
    assert_gradients_close(grads, reference_grads)


def test_hidden_states_asked_for_and_generation_keep_the_padded_layout() -> None:
    torch.manual_seed(0)
    model = HfAttnModel(HfAttnConfig(**tiny_config_kwargs())).eval()
    input_ids = torch.randint(1, 64, (4, 10))
    mask = padding_mask(LENGTHS, 10)
    outputs = model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True)
    assert [tuple(states.shape) for states in outputs.hidden_states] == [(4, 10, 32)] * 3
    # every slot computed, as without unpadding
    model.config.unpad_inputs = False
    padded = model(input_ids=input_ids, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(outputs.last_hidden_state, padded)

    torch.manual_seed(0)
    decoder = HfAttnForCausalLM(HfAttnConfig(**tiny_config_kwargs(is_decoder=True, eos_token_id=None))).eval()
    left_padded = torch.tensor([[0, 0, 5, 6], [7, 8, 9, 10]])
    generated = []
    for unpad in (True, False):
        decoder.config.unpad_inputs = unpad
        generated.append(decoder.generate(left_padded, attention_mask=(left_padded != 0).long(), max_new_tokens=4,
                                          do_sample=False, pad_token_id=0))
    assert torch.equal(*generated)
