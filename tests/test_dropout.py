"""Packed dropout: checked against its definition (rate, independence, scale, gradient) and torch's dropout."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import tiny_config_kwargs

from hf_attn import HfAttnConfig, HfAttnForSequenceClassification
from hf_attn.dropout import Dropout, apply_dropout

ELEMENTS = 1 << 20


def effective_probability(p: float) -> float:
    """What the docstring promises: p rounded to a multiple of 2**-16."""
    return round(p * 65536) / 65536


def dropped(p: float, shape: tuple[int, ...] = (ELEMENTS,), seed: int = 0) -> torch.Tensor:
    torch.manual_seed(seed)
    return apply_dropout(torch.ones(shape), p, training=True) == 0


def assert_rate(observed: torch.Tensor, expected: float) -> None:
    """The mean of Bernoulli flags lies within 5 standard errors of `expected`."""
    flags = observed.double()
    tolerance = 5 * math.sqrt(expected * (1 - expected) / flags.numel())
    assert abs(flags.mean().item() - expected) < tolerance, (flags.mean().item(), expected, tolerance)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_every_lane_of_a_draw_drops_at_rate_p(p: float) -> None:
    # Each 64-bit draw decides four consecutive elements; a lane with a stuck bit would show here.
    drop = dropped(p).view(-1, 4)
    for lane in range(4):
        assert_rate(drop[:, lane], effective_probability(p))


def test_neighbouring_elements_are_independent() -> None:
    p = 0.3
    drop = dropped(p)
    # Pairs inside one draw (lanes 0-1, 1-2, 2-3) and across draws (lane 3 to the next draw's lane 0).
    assert_rate(drop[:-1] & drop[1:], effective_probability(p) ** 2)
    assert_rate(drop.view(-1, 4)[:-1, 3] & drop.view(-1, 4)[1:, 0], effective_probability(p) ** 2)


def test_kept_elements_are_scaled_so_the_expected_output_is_the_input() -> None:
    p = 0.1
    torch.manual_seed(1)
    inputs = torch.rand(1000, 257) + 0.5  # no zeros, and a size that is not a multiple of four
    outputs = apply_dropout(inputs, p, training=True)
    kept = outputs != 0
    torch.testing.assert_close(outputs[kept], inputs[kept] / (1 - effective_probability(p)), rtol=0, atol=1e-6)
    assert abs((outputs / inputs).mean().item() - 1) < 5 * math.sqrt(p / (1 - p) / inputs.numel())


def test_gradient_is_the_kept_mask_times_the_scale() -> None:
    p = 0.25
    torch.manual_seed(2)
    inputs = (torch.rand(64, 48) + 0.5).requires_grad_()
    upstream = torch.randn(64, 48)
    outputs = apply_dropout(inputs, p, training=True)
    outputs.backward(upstream)
    expected = torch.where(outputs == 0, 0.0, upstream / (1 - effective_probability(p)))
    torch.testing.assert_close(inputs.grad, expected, rtol=0, atol=1e-6)


def test_the_same_seed_gives_the_same_mask() -> None:
    assert torch.equal(dropped(0.1, seed=3), dropped(0.1, seed=3))
    assert not torch.equal(dropped(0.1, seed=3), dropped(0.1, seed=4))


def test_evaluation_and_zero_probability_leave_the_input_alone() -> None:
    inputs = torch.randn(8, 16)
    assert torch.equal(Dropout(0.5).eval()(inputs), inputs)
    assert torch.equal(apply_dropout(inputs, 0.0, training=True), inputs)


def test_the_torch_implementation_is_torch_dropout() -> None:
    inputs = torch.randn(32, 64)
    torch.manual_seed(5)
    actual = Dropout(0.2, implementation="torch").train()(inputs)
    torch.manual_seed(5)
    assert torch.equal(actual, F.dropout(inputs, 0.2, training=True))


def test_bad_probability_and_implementation_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"dropout probability must be in \[0, 1\)"):
        apply_dropout(torch.ones(3), 1.0, training=True)
    with pytest.raises(ValueError, match="allowed: packed, torch"):
        Dropout(0.1, implementation="bernoulli")
    with pytest.raises(ValueError, match="dropout_implementation"):
        HfAttnConfig(**tiny_config_kwargs(dropout_implementation="fast"))


@pytest.mark.parametrize(("implementation", "same_as_eager"), [("packed", True), ("torch", False)])
def test_packed_attention_dropout_runs_the_eager_attention_and_torch_dropout_keeps_sdpa(
    implementation: str, same_as_eager: bool
) -> None:
    """Packed dropout of attention weights needs them materialised: an SDPA model training with it gives
    the eager model's logits draw for draw. With torch dropout SDPA runs, drawing its own mask."""
    input_ids = torch.randint(1, 64, (4, 12))
    logits = {}
    for attn in ("eager", "sdpa"):
        torch.manual_seed(0)  # the same weights
        config = HfAttnConfig(
            **tiny_config_kwargs(attention_dropout=0.2, hidden_dropout=0.1, dropout_implementation=implementation)
        )
        model = HfAttnForSequenceClassification(config).train()
        model.set_attn_implementation(attn)
        torch.manual_seed(7)  # the same dropout draws
        logits[attn] = model(input_ids=input_ids).logits
    assert torch.equal(logits["sdpa"], logits["eager"]) == same_as_eager
