"""Sliding-window layers that compute only the scores inside their window (`local_attention_forward`, masking.py
`band_blocks`), checked against a direct loop over the visible keys and against the dense-mask path they replace."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import assert_gradients_close, tiny_config_kwargs
from transformers import DynamicCache
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from hf_attn import HfAttnConfig, HfAttnForCausalLM, HfAttnModel
from hf_attn import modeling_hf_attn as modeling
from hf_attn.masking import BandBlocks, band_blocks
from hf_attn.modeling_hf_attn import eager_attention_forward, local_attention_forward

BIAS_SCHEMES = ["alibi", "t5", "fire"]
# Long enough for the band path (`HfAttnModel._band_blocks`) with a window of 3 and not a multiple of its blocks.
LENGTH = 83
WINDOW = 3


class Heads(torch.nn.Module):
    """What the attention functions read from their module: one key/value head per query head."""

    num_key_value_groups = 1
    training = False
    is_causal = False

    @staticmethod
    def scoring(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        """The dot-product scores q k^T (`attention_scoring="dot"`)."""
        return query @ key.transpose(-1, -2)


def direct_attention(query, key, value, window, causal, padding, bias, scaling):  # noqa: ANN001, ANN201
    """Softmax over the visible keys of each query, one query at a time: the definition, with no mask at all."""
    batch, heads, length, _ = query.shape
    output = torch.zeros(batch, length, heads, value.shape[-1])
    for b in range(batch):
        for i in range(length):
            low, high = i - window, i if causal else i + window
            keys = [j for j in range(max(low, 0), min(high, length - 1) + 1) if padding is None or padding[b, j]]
            if not keys:
                continue
            scores = (query[b, :, i, None] @ key[b, :, keys].transpose(-1, -2))[:, 0] * scaling  # (heads, visible)
            if bias is not None:
                scores = scores + bias[min(b, bias.shape[0] - 1), :, i, keys]
            output[b, i] = (scores.softmax(-1)[..., None] * value[b, :, keys]).sum(-2)
    return output


def cut_into_blocks(scores: torch.Tensor, blocks: BandBlocks) -> torch.Tensor:
    """(1|batch, heads, length, length) -> (batch x blocks, heads, block, span): each block's part of `scores`, read
    at the slots the block reads."""
    cut = scores[:, :, blocks.query_slots[:, :, None], blocks.key_slots[:, None, :]]  # (1|B, heads, blocks, ...)
    cut = cut.transpose(1, 2)
    return cut.expand(blocks.batch, *cut.shape[1:]).reshape(-1, *cut.shape[2:])


@pytest.mark.parametrize("attention_function", [sdpa_attention_forward, eager_attention_forward])
@pytest.mark.parametrize(("length", "window", "block"), [(11, 2, 3), (11, 2, 4), (7, 20, 4), (5, 1, 8)])
@pytest.mark.parametrize("causal", [False, True])
def test_band_blocks_give_the_attention_of_a_direct_loop(attention_function, length, window, block, causal) -> None:  # noqa: ANN001
    """Blocks that do not divide the length, a window longer than the input, a block longer than it; a padded row
    with a query that sees no key (zeros) and a per-row bias."""
    generator = torch.Generator().manual_seed(0)
    query, key, value = (torch.randn(2, 2, length, 4, generator=generator) for _ in range(3))
    padding = torch.ones(2, length, dtype=torch.bool)
    padding[1, 1:] = False  # row 1: one real token, so causal queries past the window see no key
    bias = torch.randn(2, 2, length, length, generator=generator)
    blocks = band_blocks(padding[:, None, None, :], 2, length, causal=causal, sliding_window=window, block=block,
                         device=torch.device("cpu"))
    output, weights = local_attention_forward(Heads(), query, key, value, blocks, attention_function, scaling=0.5,
                                              position_bias=cut_into_blocks(bias, blocks))
    expected = direct_attention(query, key, value, window, causal, padding, bias, 0.5)
    assert weights is None
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)


def test_band_blocks_read_only_the_keys_around_each_block() -> None:
    """The attention each block runs is (block, block + 2 x window) for an encoder, (block, block + window) for a
    decoder: the scores computed grow with the length, not its square."""
    for causal, span in [(False, 64 + 2 * 16), (True, 64 + 16)]:
        blocks = band_blocks(None, 3, 1000, causal=causal, sliding_window=16, block=64, device=torch.device("cpu"))
        assert blocks.mask.shape == (3 * math.ceil(1000 / 64), 1, 64, span)


def model(scheme: str, is_decoder: bool, attn: str, **overrides: object) -> HfAttnModel:
    torch.manual_seed(0)
    config = HfAttnConfig(**tiny_config_kwargs(**{
        "position_embedding_type": scheme, "is_decoder": is_decoder, "sliding_window": WINDOW,
        "max_position_embeddings": 128, "layer_types": ["sliding_attention", "full_attention"],
        "num_key_value_heads": 2, **overrides}))
    built = HfAttnModel(config)
    built.set_attn_implementation(attn)
    return built.eval()


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    input_ids = torch.randint(1, 64, (2, LENGTH), generator=torch.Generator().manual_seed(1))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 50:] = 0
    return input_ids, attention_mask


def run_both_ways(monkeypatch: pytest.MonkeyPatch, compute):  # noqa: ANN001, ANN201
    """`compute()` with sliding layers by blocks (checked to be taken), then with today's dense mask."""
    calls = []
    monkeypatch.setattr(modeling, "local_attention_forward",
                        lambda *args, **kwargs: calls.append(1) or local_attention_forward(*args, **kwargs))
    by_blocks = compute()
    assert calls, "the sliding layers did not compute by blocks"
    monkeypatch.setattr(HfAttnModel, "_band_blocks", lambda *args, **kwargs: None)
    return by_blocks, compute()


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("is_decoder", [False, True])
@pytest.mark.parametrize("scheme", ["none", "rope", *BIAS_SCHEMES])
def test_sliding_layers_by_blocks_equal_the_dense_mask(monkeypatch, scheme: str, is_decoder: bool, attn: str) -> None:  # noqa: ANN001
    """Every scheme, encoder and decoder, a padded row, grouped-query heads, a sliding layer beside a full one."""
    encoder = model(scheme, is_decoder, attn)
    input_ids, attention_mask = batch()
    with torch.no_grad():
        by_blocks, dense = run_both_ways(
            monkeypatch, lambda: encoder(input_ids, attention_mask=attention_mask).last_hidden_state)
    torch.testing.assert_close(by_blocks, dense, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("is_decoder", [False, True])
def test_sliding_layers_by_blocks_rotate_by_their_own_theta(monkeypatch, is_decoder: bool) -> None:  # noqa: ANN001
    """RoPE's theta per layer type (ModernBERT's 10,000 on sliding layers, 160,000 on full ones; p-RoPE on the
    sliding ones): by blocks as with the dense mask, and not the model of one theta everywhere."""
    thetas = {"sliding_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.5, "rope_theta": 1e4},
              "full_attention": {"rope_type": "default", "rope_theta": 160_000.0}}
    keyed = model("rope", is_decoder, "sdpa", rope_parameters=thetas)
    input_ids, attention_mask = batch()
    with torch.no_grad():
        by_blocks, dense = run_both_ways(
            monkeypatch, lambda: keyed(input_ids, attention_mask=attention_mask).last_hidden_state)
        one_theta = model("rope", is_decoder, "sdpa")(input_ids, attention_mask=attention_mask).last_hidden_state
    torch.testing.assert_close(by_blocks, dense, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(dense, one_theta, atol=1e-3)


@pytest.mark.parametrize("scheme", ["rope", "t5", "fire"])
def test_gradients_by_blocks_equal_the_dense_mask(monkeypatch, scheme: str) -> None:  # noqa: ANN001
    """Every parameter's gradient, the learned biases' (t5, fire) included, in training mode."""
    encoder = model(scheme, False, "sdpa").train()
    input_ids, attention_mask = batch()

    def gradients() -> dict[str, torch.Tensor]:
        encoder.zero_grad()
        hidden = encoder(input_ids, attention_mask=attention_mask).last_hidden_state
        (hidden * attention_mask[..., None]).square().sum().backward()
        return {name: parameter.grad.clone() for name, parameter in encoder.named_parameters()
                if parameter.grad is not None}

    by_blocks, dense = run_both_ways(monkeypatch, gradients)
    assert_gradients_close(by_blocks, dense)


@pytest.mark.parametrize("is_decoder", [False, True])
@pytest.mark.parametrize("scheme", BIAS_SCHEMES)
def test_the_band_bias_is_the_dense_bias_read_inside_the_blocks(scheme: str, is_decoder: bool) -> None:
    """`band_bias` computes only the band's entries; they equal the dense bias over every query and key, cut into
    the blocks; per-row position ids (a left-padded FIRE row starts at its first token) included."""
    positions = model(scheme, is_decoder, "sdpa").positions
    position_ids = torch.stack([torch.arange(LENGTH), (torch.arange(LENGTH) - 5).clamp(min=0)])
    blocks = band_blocks(None, 2, LENGTH, causal=is_decoder, sliding_window=WINDOW, block=32,
                         device=torch.device("cpu"))
    with torch.no_grad():
        dense = positions.attention_positions(position_ids, LENGTH).bias
        torch.testing.assert_close(positions.band_bias(position_ids, blocks), cut_into_blocks(dense, blocks))
        assert positions.attention_positions(position_ids, LENGTH, bias=False).bias is None


@pytest.mark.parametrize("scheme", BIAS_SCHEMES)
def test_with_every_layer_sliding_no_bias_over_every_query_and_key_is_built(monkeypatch, scheme: str) -> None:  # noqa: ANN001
    """Only the band's bias: the dense (length x length) one is never computed, and the states are the dense
    path's."""
    encoder = model(scheme, False, "sdpa", layer_types=["sliding_attention"] * 2)
    input_ids, attention_mask = batch()
    shapes = []
    relative_bias = type(encoder.positions).relative_bias
    monkeypatch.setattr(type(encoder.positions), "relative_bias",
                        lambda self, offsets, query: shapes.append(tuple(offsets.shape)) or relative_bias(self, offsets,
                                                                                                         query))
    with torch.no_grad():
        by_blocks, dense = run_both_ways(
            monkeypatch, lambda: encoder(input_ids, attention_mask=attention_mask).last_hidden_state)
    assert shapes[0] != (1, LENGTH, LENGTH) and shapes[-1] == (1, LENGTH, LENGTH)  # by blocks, then the dense path
    assert len(shapes) == 2
    torch.testing.assert_close(by_blocks, dense, atol=1e-5, rtol=1e-5)


def test_asking_for_the_weights_returns_them_whole() -> None:
    """`output_attentions` takes the dense path: (batch, heads, query, key) weights, zero outside the window."""
    encoder = model("rope", False, "eager")
    input_ids, attention_mask = batch()
    with torch.no_grad():
        weights = encoder(input_ids, attention_mask=attention_mask, output_attentions=True).attentions[0]
    assert weights.shape == (2, 4, LENGTH, LENGTH)
    distance = (torch.arange(LENGTH)[:, None] - torch.arange(LENGTH)[None, :]).abs()
    assert not weights[..., distance > WINDOW].any() and weights[0, ..., distance <= WINDOW].all()


def test_generation_after_a_prompt_read_by_blocks_gives_the_same_tokens(monkeypatch) -> None:  # noqa: ANN001
    """Greedy decoding with the cache: the prompt long enough for the band path, then one token at a time."""
    torch.manual_seed(0)
    config = HfAttnConfig(**tiny_config_kwargs(
        is_decoder=True, position_embedding_type="alibi", sliding_window=WINDOW, max_position_embeddings=128,
        layer_types=["sliding_attention", "full_attention"], tie_word_embeddings=False, initializer_range=0.2))
    decoder = HfAttnForCausalLM(config).eval()
    prompt, _ = batch()
    by_blocks, dense = run_both_ways(
        monkeypatch, lambda: decoder.generate(prompt, max_new_tokens=6, do_sample=False, pad_token_id=0))
    assert by_blocks.shape == (2, LENGTH + 6)
    assert torch.equal(by_blocks, dense)


def test_a_sliding_layers_cache_keeps_only_its_window() -> None:
    """Decoding one token at a time after a prompt, from a cache built lazily (`DynamicCache()`): the sliding layer
    keeps the last `sliding_window` keys, the full layer all of them, and every step's logits equal those of the
    whole sequence run at once without a cache."""
    torch.manual_seed(0)
    config = HfAttnConfig(**tiny_config_kwargs(
        is_decoder=True, position_embedding_type="alibi", sliding_window=WINDOW,
        layer_types=["sliding_attention", "full_attention"], tie_word_embeddings=False, initializer_range=0.2))
    decoder = HfAttnForCausalLM(config).eval()
    input_ids = torch.randint(1, 64, (1, 14), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = decoder(input_ids).logits
        cache = DynamicCache()
        for start, end in [(0, 10), (10, 11), (11, 12), (12, 14)]:
            output = decoder(input_ids[:, start:end], cache=cache, use_cache=True)
            cache = output.cache
            torch.testing.assert_close(output.logits, expected[:, start:end], atol=1e-5, rtol=1e-5)
    assert [layer.keys.shape[-2] for layer in cache.layers] == [WINDOW, 14]
