"""hf_attn models: behaviour checked against second code paths and invariances, not recorded outputs."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from helpers import tiny_config_kwargs
from transformers import AutoModelForMultipleChoice, AutoModelForTokenClassification

from hf_attn import (
    POSITION_SCHEMES,
    HfAttnConfig,
    HfAttnForCausalLM,
    HfAttnForMaskedLM,
    HfAttnForMultipleChoice,
    HfAttnForReplacedTokenDetection,
    HfAttnForSequenceClassification,
    HfAttnForTokenClassification,
    HfAttnModel,
)
from hf_attn.bench.models import build_bert_or_roformer, hf_attn_config
from hf_attn.bench.sections.generation import build_llama, copy_to_llama, decoder_config, greedy
from hf_attn.bench.settings import BenchSettings

SCHEMES = list(POSITION_SCHEMES)


def build(model_class: type = HfAttnModel, attn: str = "eager", seed: int = 0, **overrides: object):
    torch.manual_seed(seed)
    config = HfAttnConfig(**tiny_config_kwargs(**overrides))
    return _build(model_class, config, attn)


def _build(model_class: type, config: HfAttnConfig, attn: str):
    model = model_class(config)
    model.set_attn_implementation(attn)
    return model.eval()


def random_batch(batch: int = 3, length: int = 12, pad_rows: dict[int, int] | None = None, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1, 64, (batch, length), generator=generator)
    attention_mask = torch.ones(batch, length, dtype=torch.long)
    for row, real in (pad_rows or {}).items():
        input_ids[row, real:] = 0
        attention_mask[row, real:] = 0
    return input_ids, attention_mask


def assert_same_hidden_states(actual_model, expected_model, input_ids, attention_mask) -> None:  # noqa: ANN001
    """Two models (a second code path and its reference) give the same last hidden states on one batch."""
    with torch.no_grad():
        torch.testing.assert_close(
            actual_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state,
            expected_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state,
            atol=1e-5, rtol=1e-5,
        )


# ---------------------------------------------------------------- eager vs SDPA


MASK_SETTINGS = {
    "padding": dict(),
    "causal": dict(is_decoder=True),
    "sliding": dict(sliding_window=2, layer_types=["sliding_attention", "full_attention"]),
    "causal+sliding": dict(is_decoder=True, sliding_window=3, layer_types=["sliding_attention"] * 2),
}


@pytest.mark.parametrize(("scheme", "masks", "kv_heads"),
                         list(itertools.product(SCHEMES, MASK_SETTINGS, [4, 2, 1])))
def test_sdpa_matches_eager(scheme: str, masks: str, kv_heads: int) -> None:
    overrides = dict(position_embedding_type=scheme, num_key_value_heads=kv_heads, **MASK_SETTINGS[masks])
    eager = build(attn="eager", **overrides)
    sdpa = build(attn="sdpa", **overrides)
    sdpa.load_state_dict(eager.state_dict())
    input_ids, attention_mask = random_batch(pad_rows={1: 7, 2: 2})
    with torch.no_grad():
        expected = eager(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        actual = sdpa(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        unpadded = sdpa(input_ids=input_ids[:1]).last_hidden_state  # mask None: the SDPA fast path
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(unpadded, expected[:1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("variant", [
    dict(norm_position="post"), dict(norm_type="rmsnorm"), dict(hidden_act="swiglu"), dict(hidden_act="geglu"),
    dict(scale_embeddings=True, position_embedding_type="sinusoidal"), dict(attention_bias=False),
])
def test_architecture_variants_agree_across_backends(variant: dict) -> None:
    eager, sdpa = build(attn="eager", **variant), build(attn="sdpa", **variant)
    assert_same_hidden_states(sdpa, eager, *random_batch(pad_rows={0: 5}))


def test_fully_masked_rows_are_exactly_zero_never_nan() -> None:
    # A window of 1 on a row whose real tokens end at 2: pad queries 4.. see no real key at all.
    overrides = dict(sliding_window=1, layer_types=["sliding_attention"] * 2, position_embedding_type="alibi")
    model = build(**overrides)
    input_ids, attention_mask = random_batch(batch=2, length=8, pad_rows={1: 2})
    with torch.no_grad():
        output = model(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True)
    weights = output.attentions[0]
    assert torch.isfinite(weights).all() and torch.isfinite(output.last_hidden_state).all()
    assert torch.equal(weights[1, :, 4:], torch.zeros_like(weights[1, :, 4:]))
    real_rows = weights[0].sum(-1)
    torch.testing.assert_close(real_rows, torch.ones_like(real_rows))
    sdpa = build(attn="sdpa", **overrides)
    real = attention_mask.bool()  # (the padding's states: zeros where the model unpads, computed with the weights)
    with torch.no_grad():
        torch.testing.assert_close(sdpa(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[real],
                                   output.last_hidden_state[real], atol=1e-5, rtol=1e-5)


def test_an_sdpa_model_runs_sdpa_and_returns_eager_weights_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without `output_attentions` an SDPA model runs torch's SDPA kernel and computes what eager computes; with
    it, the weights (which SDPA does not return) come from the eager path, equal to an eager model's."""
    eager, sdpa = build(attn="eager"), build(attn="sdpa")
    input_ids, attention_mask = random_batch(pad_rows={2: 4})
    kernel_calls = []
    kernel = F.scaled_dot_product_attention

    def counted_kernel(*args: object, **kwargs: object) -> torch.Tensor:
        kernel_calls.append(1)
        return kernel(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", counted_kernel)
    with torch.no_grad():
        expected = eager(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True)
        assert not kernel_calls  # the reference is eager's own arithmetic
        actual = sdpa(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        assert len(kernel_calls) == 2  # one per layer
        with_weights = sdpa(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True)
    real = attention_mask.bool()  # (the padding's states: zeros where the model unpads, computed with the weights)
    torch.testing.assert_close(actual[real], expected.last_hidden_state[real], atol=1e-5, rtol=1e-5)
    assert len(with_weights.attentions) == 2 and with_weights.attentions[0].shape == (3, 4, 12, 12)
    for a, e in zip(with_weights.attentions, expected.attentions, strict=True):
        torch.testing.assert_close(a, e)
    torch.testing.assert_close(with_weights.last_hidden_state[real], actual[real], atol=1e-5, rtol=1e-5)
    assert torch.all(with_weights.attentions[0][2, :, :, 4:] == 0)  # padded keys get no weight


# ---------------------------------------------------------------- invariances


@pytest.mark.parametrize("scheme", SCHEMES)
def test_permutation_equivariant_only_without_positions(scheme: str) -> None:
    model = build(position_embedding_type=scheme)
    input_ids, _ = random_batch(batch=1, length=10)
    permutation = torch.randperm(10, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        output = model(input_ids=input_ids).last_hidden_state
        permuted = model(input_ids=input_ids[:, permutation]).last_hidden_state
    equivariant = torch.allclose(permuted, output[:, permutation], atol=1e-5)
    assert equivariant == (scheme == "none")


@pytest.mark.parametrize(("scheme", "attn", "causal"),
                         list(itertools.product(SCHEMES, ["eager", "sdpa"], [False, True])))
def test_padding_leaves_real_token_outputs_unchanged(scheme: str, attn: str, causal: bool) -> None:
    model = build(attn=attn, position_embedding_type=scheme, is_decoder=causal)
    input_ids, _ = random_batch(batch=1, length=7)
    padded = torch.cat([input_ids, torch.zeros(1, 5, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(1, 7), torch.zeros(1, 5)], dim=1).long()
    with torch.no_grad():
        alone = model(input_ids=input_ids).last_hidden_state
        with_pads = model(input_ids=padded, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(with_pads[:, :7], alone, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_causal_outputs_ignore_future_tokens(scheme: str) -> None:
    model = build(position_embedding_type=scheme, is_decoder=True)
    input_ids, _ = random_batch(batch=1, length=10)
    changed = input_ids.clone()
    changed[0, 6:] = (changed[0, 6:] % 63) + 1
    with torch.no_grad():
        before = model(input_ids=input_ids).last_hidden_state
        after = model(input_ids=changed).last_hidden_state
    torch.testing.assert_close(after[:, :6], before[:, :6])
    assert not torch.allclose(after[:, 6:], before[:, 6:])


def test_sliding_window_hides_tokens_beyond_the_window() -> None:
    model = build(num_hidden_layers=1, sliding_window=2, layer_types=["sliding_attention"])
    input_ids, _ = random_batch(batch=1, length=10)
    changed = input_ids.clone()
    changed[0, 9] = (changed[0, 9] % 63) + 1
    with torch.no_grad():
        before, after = model(input_ids=input_ids).last_hidden_state, model(input_ids=changed).last_hidden_state
    torch.testing.assert_close(after[:, :7], before[:, :7])  # positions more than 2 away from 9
    assert not torch.allclose(after[:, 7:], before[:, 7:])


@pytest.mark.parametrize("scheme", SCHEMES)
def test_grouped_query_attention_equals_mha_with_shared_heads(scheme: str) -> None:
    """GQA with 2 KV heads == MHA whose 4 K/V heads copy each shared head for its group of queries."""
    gqa = build(position_embedding_type=scheme, num_key_value_heads=2)
    mha = build(position_embedding_type=scheme, num_key_value_heads=4)
    state = gqa.state_dict()
    head_dim, q_width = 8, 32

    def copy_each_head_for_its_group(weights: torch.Tensor) -> torch.Tensor:  # (2 heads * D, ...) -> (4 * D, ...)
        rest = weights.shape[1:]
        return weights.view(2, head_dim, *rest).repeat_interleave(2, dim=0).reshape(q_width, *rest)

    for key in list(state):
        if key.endswith("qkv_proj.weight") or key.endswith("qkv_proj.bias"):
            q, k, v = state[key].split([q_width, 16, 16], dim=0)
            state[key] = torch.cat([q, copy_each_head_for_its_group(k), copy_each_head_for_its_group(v)], dim=0)
    mha.load_state_dict(state)
    assert_same_hidden_states(mha, gqa, *random_batch(pad_rows={0: 6}))


@pytest.mark.parametrize("layout", ["interleaved", "halves"])
@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_rope_attention_weights_equal_scores_of_explicitly_rotated_heads(kv_heads: int, layout: str) -> None:
    """The model rotates Q's and K's heads as one slab; the weights must equal softmax(q_i' . k_j' / sqrt(d))
    with every head vector rotated on its own, as complex numbers: pair c (channels 2c and 2c + 1, or c
    and c + d/2 with the halves layout) times exp(i * position * theta^(-2c/d))."""
    model = build(position_embedding_type="rope", num_key_value_heads=kv_heads, num_hidden_layers=1,
                  rope_layout=layout)
    input_ids, _ = random_batch(batch=2, length=7)
    with torch.no_grad():
        weights = model(input_ids=input_ids, output_attentions=True).attentions[0]  # (B, H, T, T)
        layer, head_dim = model.layers[0], 8
        projected = layer.self_attn.qkv_proj(layer.self_attn_norm(model.embed_tokens(input_ids)))
        query, key, _ = projected.split([32, kv_heads * head_dim, kv_heads * head_dim], dim=-1)

    def rotate_each_head(states: torch.Tensor) -> torch.Tensor:  # (B, T, heads * D) -> (B, heads, T, D)
        heads = states.view(2, 7, -1, head_dim).transpose(1, 2).double()
        x, y = (heads[..., 0::2], heads[..., 1::2]) if layout == "interleaved" else heads.chunk(2, dim=-1)
        frequencies = 10_000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        turn = torch.polar(torch.ones(7, head_dim // 2, dtype=torch.float64), torch.arange(7.0)[:, None] * frequencies)
        turned = torch.complex(x, y) * turn
        # q'.k' sums over channels, so the order they are written back in does not change the scores
        return torch.cat([turned.real, turned.imag], dim=-1)

    rotated_key = rotate_each_head(key).repeat_interleave(4 // kv_heads, dim=1)
    scores = rotate_each_head(query) @ rotated_key.transpose(-1, -2) / head_dim**0.5
    torch.testing.assert_close(weights.double(), scores.softmax(dim=-1), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("grad", [False, True])
def test_rope_layouts_compute_the_same_model_up_to_a_permutation_of_query_and_key_channels(grad: bool) -> None:
    """Moving channel c + d/2 of every Q and K head next to channel c turns a `halves` model into an
    `interleaved` one: q.k sums over channels in any order, so logits and attention weights must agree
    (with and without autograd)."""
    halves = build(model_class=HfAttnForSequenceClassification, position_embedding_type="rope",
                   num_key_value_heads=2, rope_layout="halves")
    interleaved = build(model_class=HfAttnForSequenceClassification, position_embedding_type="rope",
                        num_key_value_heads=2, rope_layout="interleaved", seed=1)
    head_dim, rotated_heads = 8, 4 + 2  # query heads, then key heads, side by side in qkv_proj
    within_head = torch.stack([torch.arange(head_dim // 2), torch.arange(head_dim // 2) + head_dim // 2], dim=1)
    rows = torch.cat([within_head.flatten() + head * head_dim for head in range(rotated_heads)])
    state = halves.state_dict()
    for name in list(state):
        if "qkv_proj" in name:
            state[name] = torch.cat([state[name][rows], state[name][len(rows):]])
    interleaved.load_state_dict(state)
    input_ids, attention_mask = random_batch(pad_rows={1: 5})
    with torch.set_grad_enabled(grad):
        expected = halves(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True)
        actual = interleaved(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True)
    torch.testing.assert_close(actual.logits, expected.logits)
    for actual_weights, expected_weights in zip(actual.attentions, expected.attentions, strict=True):
        torch.testing.assert_close(actual_weights, expected_weights)


@pytest.mark.parametrize(("scheme", "activation", "norm_position", "kv_heads"), [
    ("none", "gelu", "pre", 4), ("rope", "relu", "post", 4), ("none", "silu", "pre", 4),
    ("rope", "swiglu", "pre", 2), ("none", "geglu", "post", 4),
])
def test_inference_without_autograd_equals_the_autograd_path(
    scheme: str, activation: str, norm_position: str, kv_heads: int
) -> None:
    """Inference without autograd gives the same numbers as with it, and no tensor handed out (hidden
    states, the caller's embeddings) is overwritten."""
    model = build(model_class=HfAttnForSequenceClassification, position_embedding_type=scheme,
                  hidden_act=activation, norm_position=norm_position, num_key_value_heads=kv_heads)
    input_ids, attention_mask = random_batch(pad_rows={1: 5})
    embeddings = model.model.embed_tokens(input_ids).detach()
    original = embeddings.clone()
    with torch.no_grad():
        fast = model(inputs_embeds=embeddings, attention_mask=attention_mask, output_hidden_states=True)
    assert torch.equal(embeddings, original)
    recorded = model(inputs_embeds=embeddings, attention_mask=attention_mask, output_hidden_states=True)
    assert recorded.logits.requires_grad
    assert torch.equal(fast.logits, recorded.logits)
    for fast_states, recorded_states in zip(fast.hidden_states, recorded.hidden_states, strict=True):
        assert torch.equal(fast_states, recorded_states)


def test_recorded_hidden_states_are_each_layers_input_then_the_output() -> None:
    """`output_hidden_states` (recorded by hooks): the embeddings, then what a model cut after each layer (no
    final norm) returns, then the normed output; one attention map per layer (an SDPA model computes them
    eagerly), with the config's flag as with the argument; `return_dict=False` gives the same as a tuple."""
    model = build(position_embedding_type="rope", num_hidden_layers=3, attn="sdpa")
    input_ids, attention_mask = random_batch(pad_rows={1: 5})
    with torch.no_grad():
        output = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True,
                       output_attentions=True)
        layers, norm = model.layers, model.norm
        assert len(output.hidden_states) == len(layers) + 1 and len(output.attentions) == len(layers)
        assert torch.equal(output.hidden_states[0], model.embed_tokens(input_ids))  # RoPE adds nothing here
        assert torch.equal(output.hidden_states[-1], output.last_hidden_state)
        model.norm = torch.nn.Identity()
        real = attention_mask.bool()  # the padding's states: computed here, zeros where the cut model unpads
        for depth in range(1, len(layers)):
            model.layers = layers[:depth]
            cut = model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            torch.testing.assert_close(output.hidden_states[depth][real], cut[real])
        model.layers, model.norm = layers, norm
        as_tuple = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True,
                         output_attentions=True, return_dict=False)
        assert torch.equal(as_tuple[0], output.last_hidden_state)
        assert all(torch.equal(a, b) for a, b in zip(as_tuple[1], output.hidden_states, strict=True))
        model.set_attn_implementation("eager")  # transformers refuses the config flag with SDPA
        model.config.output_attentions = True
        from_config = model(input_ids=input_ids, attention_mask=attention_mask).attentions
        assert all(torch.equal(a, b) for a, b in zip(from_config, output.attentions, strict=True))


def test_a_hook_that_keeps_a_layers_feed_forward_activations_sees_them_intact_after_the_pass() -> None:
    """Interpretability code keeps the input of each `down_proj` (the MLP's activations) from a hook;
    the next layer's projections must not overwrite what the hook kept."""
    model = build(model_class=HfAttnForSequenceClassification, num_hidden_layers=2)
    input_ids, attention_mask = random_batch(pad_rows={1: 5})
    kept: list[torch.Tensor] = []
    for layer in model.model.layers:
        layer.mlp.down_proj.register_forward_pre_hook(lambda module, args: kept.append(args[0]))
    with torch.no_grad():
        model(input_ids=input_ids, attention_mask=attention_mask)
    without_autograd, kept[:] = list(kept), []
    model(input_ids=input_ids, attention_mask=attention_mask)
    for activations, recorded in zip(without_autograd, kept, strict=True):
        assert torch.equal(activations, recorded)


def test_a_model_offloaded_by_accelerate_runs_inference_with_the_same_logits() -> None:
    """accelerate's `cpu_offload` leaves meta weights in place and swaps the real ones in from a
    replaced `forward`: the model must call its submodules rather than read their weights itself."""
    from accelerate import cpu_offload

    model = build(model_class=HfAttnForSequenceClassification)
    input_ids, attention_mask = random_batch(pad_rows={1: 5})
    with torch.no_grad():
        expected = model(input_ids=input_ids, attention_mask=attention_mask).logits
        cpu_offload(model, execution_device=torch.device("cpu"))
        assert model.model.layers[0].mlp.up_proj.weight.is_meta
        assert torch.equal(model(input_ids=input_ids, attention_mask=attention_mask).logits, expected)


# ---------------------------------------------------------------- against transformers' models, same weights

# The bench's shape builders give hf-attn and each transformers model the same width, depth, vocabulary and
# padding id; a tiny size and no dropout make each comparison instant.
TINY_BENCH_SHAPE = BenchSettings(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                 vocab_size=64, dropout=0.0, attention_dropout=0.0, generation_vocab_size=64)


def randomize_norms_and_biases(model: torch.nn.Module) -> None:
    """Norm gains and biases start at 1 and 0; random ones make a weight left out of a copy show."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                parameter.uniform_(0.5, 1.5)


def copy_to_bert_or_roformer(source: HfAttnModel, target: torch.nn.Module) -> None:
    """Write a post-norm hf-attn encoder's weights into transformers' `BertModel` or `RoFormerModel` of its shape.

    Their layers name the same pieces (`attention.self.query`, `attention.output.LayerNorm`, `intermediate.dense`,
    ...), and hf-attn fuses query, key and value into `qkv_proj`. hf-attn has no embedding norm and no token
    types: the target's embedding LayerNorm becomes the identity and its token-type row zero, so that the rest,
    their attention, positions (BERT's learned table, RoFormer's rotation) and blocks, is their own code.
    """
    embeddings = target.embeddings
    embeddings.LayerNorm = torch.nn.Identity()
    embeddings.token_type_embeddings.weight.zero_()
    embeddings.word_embeddings.weight.copy_(source.embed_tokens.weight)
    if hasattr(embeddings, "position_embeddings"):  # BERT's learned absolute positions
        embeddings.position_embeddings.weight.copy_(source.positions.embeddings.weight)
    for mine, theirs in zip(source.layers, target.encoder.layer, strict=True):
        attention = mine.self_attn
        fused = zip(attention.qkv_proj.weight.split(attention.split_sizes),
                    attention.qkv_proj.bias.split(attention.split_sizes), strict=True)
        for name, (weight, bias) in zip(("query", "key", "value"), fused, strict=True):
            getattr(theirs.attention.self, name).load_state_dict({"weight": weight, "bias": bias})
        for their_module, my_module in ((theirs.attention.output.dense, attention.o_proj),
                                        (theirs.attention.output.LayerNorm, mine.self_attn_norm),
                                        (theirs.intermediate.dense, mine.mlp.up_proj),
                                        (theirs.output.dense, mine.mlp.down_proj),
                                        (theirs.output.LayerNorm, mine.mlp_norm)):
            their_module.load_state_dict(my_module.state_dict())


@pytest.mark.parametrize(("family", "scheme", "overrides"), [
    ("BERT", "learned", {}),
    ("RoFormer", "rope", {"rope_layout": "interleaved"}),  # RoFormer rotates adjacent channel pairs
])
def test_a_post_norm_encoder_computes_what_transformers_bert_and_roformer_compute_with_its_weights(
    family: str, scheme: str, overrides: dict
) -> None:
    torch.manual_seed(0)
    config = hf_attn_config(TINY_BENCH_SHAPE, scheme, 32, norm_position="post", norm_eps=1e-12, **overrides)
    hf_attn = HfAttnModel(config)
    randomize_norms_and_biases(hf_attn)
    theirs = getattr(build_bert_or_roformer(TINY_BENCH_SHAPE, 32, family), family.lower())
    with torch.no_grad():
        copy_to_bert_or_roformer(hf_attn, theirs)
    input_ids, attention_mask = random_batch(pad_rows={1: 7, 2: 3})
    real = attention_mask.bool()
    with torch.no_grad():
        expected = theirs.eval()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        actual = hf_attn.eval()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    torch.testing.assert_close(actual[real], expected[real], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_llama_with_copied_weights_computes_the_hf_attn_decoder(kv_heads: int) -> None:
    """transformers' Llama, given hf-attn RoPE's weights (`copy_to_llama`, the bench's like-for-like decoder),
    returns the same logits (its own causal attention, RoPE, RMSNorm and SwiGLU code) and the same greedy tokens."""
    torch.manual_seed(0)
    hf_attn = HfAttnForCausalLM(decoder_config(TINY_BENCH_SHAPE, "rope", kv_heads, 64))
    randomize_norms_and_biases(hf_attn)
    llama = build_llama(hf_attn.config)
    with torch.no_grad():
        copy_to_llama(hf_attn, llama)
    input_ids = torch.randint(0, 63, (2, 20), generator=torch.Generator().manual_seed(0))
    for model in (hf_attn, llama):
        model.eval()
    with torch.no_grad():
        expected, actual = hf_attn(input_ids=input_ids).logits, llama(input_ids=input_ids).logits
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)
    assert torch.equal(greedy(llama, input_ids, 12, use_cache=True), greedy(hf_attn, input_ids, 12, use_cache=True))


def test_copy_to_llama_refuses_a_model_llama_cannot_compute() -> None:
    alibi = HfAttnForCausalLM(decoder_config(TINY_BENCH_SHAPE, "alibi", 4, 64))
    with pytest.raises(ValueError, match="RoPE on halves"):
        copy_to_llama(alibi, build_llama(decoder_config(TINY_BENCH_SHAPE, "rope", 4, 64)))


# ---------------------------------------------------------------- cross-attention


def test_decoder_with_cross_attention_reads_the_context_and_ignores_its_padding() -> None:
    encoder = build(position_embedding_type="rope")
    decoder = build(position_embedding_type="rope", is_decoder=True, add_cross_attention=True, seed=1)
    context_ids, context_mask = random_batch(batch=1, length=9, seed=4)
    query_ids, _ = random_batch(batch=1, length=5, seed=5)
    with torch.no_grad():
        context = encoder(input_ids=context_ids).last_hidden_state
        output = decoder(input_ids=query_ids, encoder_hidden_states=context, output_attentions=True)
        padded_context = torch.cat([context, torch.randn(1, 4, 32)], dim=1)
        padded_mask = torch.cat([context_mask, torch.zeros(1, 4, dtype=torch.long)], dim=1)
        with_pads = decoder(input_ids=query_ids, encoder_hidden_states=padded_context,
                            encoder_attention_mask=padded_mask).last_hidden_state
        other = decoder(input_ids=query_ids, encoder_hidden_states=torch.randn_like(context)).last_hidden_state
    assert output.cross_attentions[0].shape == (1, 4, 5, 9)
    torch.testing.assert_close(with_pads, output.last_hidden_state, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(other, output.last_hidden_state)
    with pytest.raises(ValueError, match="add_cross_attention"):
        encoder(input_ids=query_ids, encoder_hidden_states=context)


# ---------------------------------------------------------------- heads and losses


def test_classification_losses_match_torch_formulas() -> None:
    input_ids, attention_mask = random_batch(pad_rows={1: 5})
    single = build(HfAttnForSequenceClassification, num_labels=3)
    labels = torch.tensor([0, 2, 1])
    out = single(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits, labels))

    multi = build(HfAttnForSequenceClassification, num_labels=3, problem_type="multi_label_classification")
    targets = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    out = multi(input_ids=input_ids, attention_mask=attention_mask, labels=targets)
    torch.testing.assert_close(out.loss, F.binary_cross_entropy_with_logits(out.logits, targets))

    regression = build(HfAttnForSequenceClassification, num_labels=1)
    scores = torch.tensor([0.5, -1.0, 2.0])
    out = regression(input_ids=input_ids, attention_mask=attention_mask, labels=scores)
    torch.testing.assert_close(out.loss, F.mse_loss(out.logits.squeeze(-1), scores))


@pytest.mark.parametrize("pooling", ["mean", "max", "cls"])
def test_pooling_uses_real_tokens_only(pooling: str) -> None:
    model = build(HfAttnForSequenceClassification, classifier_pooling=pooling)
    input_ids, _ = random_batch(batch=1, length=6)
    padded = torch.cat([input_ids, torch.randint(1, 64, (1, 4))], dim=1)  # junk ids behind the mask
    mask = torch.cat([torch.ones(1, 6), torch.zeros(1, 4)], dim=1).long()
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=padded, attention_mask=mask).logits,
                                   model(input_ids=input_ids).logits, atol=1e-5, rtol=1e-5)


def test_masked_lm_ties_embeddings_and_resizes() -> None:
    model = build(HfAttnForMaskedLM)
    assert model.decoder.weight is model.model.embed_tokens.weight
    input_ids, attention_mask = random_batch()
    labels = torch.full_like(input_ids, -100)
    labels[:, 3] = input_ids[:, 3]
    out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits[:, 3], input_ids[:, 3]))
    model.resize_token_embeddings(80)
    assert model.decoder.weight is model.model.embed_tokens.weight and model.decoder.out_features == 80
    assert model(input_ids=torch.tensor([[79, 1]])).logits.shape == (1, 2, 80)


def test_sparse_prediction_scores_only_labelled_positions_with_the_dense_loss() -> None:
    dense = build(HfAttnForMaskedLM)
    sparse = build(HfAttnForMaskedLM, sparse_prediction=True)
    sparse.load_state_dict(dense.state_dict())
    input_ids, attention_mask = random_batch(pad_rows={1: 4})
    labels = torch.full_like(input_ids, -100)
    labels[0, [1, 5]] = input_ids[0, [1, 5]]
    labels[2, 7] = input_ids[2, 7]
    full = dense(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    picked = sparse(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    # Row-major order of the labelled positions: (0, 1), (0, 5), (2, 7).
    torch.testing.assert_close(picked.logits, full.logits[[0, 0, 2], [1, 5, 7]])
    torch.testing.assert_close(picked.loss, full.loss)
    assert sparse(input_ids=input_ids, attention_mask=attention_mask).logits.shape == full.logits.shape


def test_out_of_vocabulary_ids_get_a_clear_error() -> None:
    model = build()
    with pytest.raises(ValueError, match="resize_token_embeddings"):
        model(input_ids=torch.tensor([[1, 64]]))
    with pytest.raises(ValueError, match="attention_mask has shape"):
        model(input_ids=torch.tensor([[1, 2]]), attention_mask=torch.ones(1, 3))


def test_pad_embedding_starts_at_zero() -> None:
    assert torch.count_nonzero(build().embed_tokens.weight[0]) == 0


def test_gradient_checkpointing_gives_the_same_gradients() -> None:
    input_ids, attention_mask = random_batch(pad_rows={0: 4})
    labels = torch.tensor([0, 1, 1])
    grads = []
    for checkpointing in (False, True):
        model = build(HfAttnForSequenceClassification).train()
        if checkpointing:
            model.activation_checkpointing_enable()
        model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss.backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    torch.testing.assert_close(grads[1], grads[0])


@pytest.mark.slow
def test_torch_compile_matches_eager_forward() -> None:
    model = build(HfAttnForSequenceClassification, attn="sdpa", position_embedding_type="rope")
    input_ids, attention_mask = random_batch(pad_rows={0: 6})
    compiled = torch.compile(model)
    with torch.no_grad():
        torch.testing.assert_close(compiled(input_ids=input_ids, attention_mask=attention_mask).logits,
                                   model(input_ids=input_ids, attention_mask=attention_mask).logits,
                                   atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------- saving and loading


def nudge_position_parameters(model: HfAttnForSequenceClassification) -> None:
    """Move the scheme's parameters off their initial values (FIRE's c and L start at constants), as training
    does, so a reload that initialised them instead of loading them would change the logits."""
    with torch.no_grad():
        for parameter in model.model.positions.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_save_and_reload_gives_identical_logits(scheme: str, tmp_path: Path) -> None:
    from transformers import AutoModelForSequenceClassification

    model = build(HfAttnForSequenceClassification, position_embedding_type=scheme)
    nudge_position_parameters(model)
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path, attn_implementation="eager").eval()
    assert type(loaded) is HfAttnForSequenceClassification
    input_ids, attention_mask = random_batch(length=40, pad_rows={1: 30}) if scheme != "learned" else random_batch()
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=input_ids, attention_mask=attention_mask).logits,
                           model(input_ids=input_ids, attention_mask=attention_mask).logits)


REMOTE_LOAD = textwrap.dedent("""
    import json, sys
    sys.modules["hf_attn"] = None  # what a Hub user has: no hf_attn package at all
    import torch
    from transformers import AutoModelForSequenceClassification
    model = AutoModelForSequenceClassification.from_pretrained(sys.argv[1], trust_remote_code=True).eval()
    assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
    batch = json.load(open(sys.argv[2]))
    with torch.no_grad():
        inputs = {name: torch.tensor(values) for name, values in batch.items()}
        logits = model(**inputs).logits
    print(json.dumps(logits.tolist()))
""")


@pytest.mark.parametrize("scheme", ["rope", *(pytest.param(name, marks=pytest.mark.slow) for name in ("t5", "fire"))])
def test_saved_folder_loads_with_remote_code_where_hf_attn_is_absent(scheme: str, tmp_path: Path) -> None:
    model = build(HfAttnForSequenceClassification, position_embedding_type=scheme, num_key_value_heads=2)
    nudge_position_parameters(model)
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    for name in ("configuration_hf_attn.py", "modeling_hf_attn.py", "positions.py", "position_ids.py", "masking.py",
                 "scoring.py", "caching.py", "reading.py"):
        assert (folder / name).is_file(), f"{name} was not copied next to the weights"
    auto_map = json.loads((folder / "config.json").read_text())["auto_map"]
    assert auto_map["AutoModelForSequenceClassification"] == "modeling_hf_attn.HfAttnForSequenceClassification"
    assert auto_map["AutoConfig"] == "configuration_hf_attn.HfAttnConfig"

    input_ids, attention_mask = random_batch(pad_rows={1: 5})
    (tmp_path / "batch.json").write_text(json.dumps({"input_ids": input_ids.tolist(),
                                                     "attention_mask": attention_mask.tolist()}))
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf_home"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    result = subprocess.run([sys.executable, "-c", REMOTE_LOAD, str(folder), str(tmp_path / "batch.json")],
                            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    with torch.no_grad():
        expected = model(input_ids=input_ids, attention_mask=attention_mask).logits
    torch.testing.assert_close(torch.tensor(json.loads(result.stdout.strip().splitlines()[-1])), expected)


def test_text_classification_pipeline_matches_the_model() -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, pipeline

    words = ["[PAD]", "[UNK]", "a", "good", "bad", "movie", "not", "at", "all"]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]")
    model = build(HfAttnForSequenceClassification, id2label={0: "NEGATIVE", 1: "POSITIVE"},
                  label2id={"NEGATIVE": 0, "POSITIVE": 1})
    classifier = pipeline("text-classification", model=model, tokenizer=tokenizer)
    texts = ["a good movie", "not bad at all"]
    predictions = classifier(texts)
    encoded = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        probabilities = model(**encoded).logits.softmax(-1)
    for prediction, row in zip(predictions, probabilities):
        assert prediction["label"] == model.config.id2label[int(row.argmax())]
        assert prediction["score"] == pytest.approx(float(row.max()), abs=1e-5)


def test_replaced_token_detection_loss_equals_a_step_by_step_recomputation() -> None:
    """ELECTRA's loss rebuilt from its parts: the generator (a masked-LM model of its own) predicts the
    masked positions, samples from its softmax replace them, and the encoder's per-token logits are
    scored against "differs from the original" over real tokens only; total = MLM + 50 x detection."""
    model = build(model_class=HfAttnForReplacedTokenDetection, rtd_generator_layers=1, tie_word_embeddings=False)
    assert len(model.generator.model.layers) == 1 and len(model.model.layers) == 2
    original, attention_mask = random_batch(pad_rows={1: 5})
    masked = torch.zeros_like(original, dtype=torch.bool)
    masked[:, [1, 3]] = True
    masked[2, 6:9] = True  # several rows and runs, never padding
    labels = original.masked_fill(~masked, -100)
    corrupted = original.masked_fill(masked, 0)  # [PAD] stands for [MASK]
    with torch.no_grad():
        torch.manual_seed(5)
        output = model(input_ids=corrupted, attention_mask=attention_mask, labels=labels)
        torch.manual_seed(5)
        hidden = model.generator.model(input_ids=corrupted, attention_mask=attention_mask).last_hidden_state[masked]
        generator = model.generator
        generator_logits = generator.decoder(generator.head_norm(F.gelu(generator.dense(hidden))))
        proposals = generator_logits.index_fill(1, torch.tensor([0]), -torch.inf).softmax(dim=-1)
        samples = torch.multinomial(proposals, num_samples=1)[:, 0]
        replaced_input = original.clone()
        replaced_input[masked] = samples
        replaced = masked & (replaced_input != original)
        encoded = model.model(input_ids=replaced_input, attention_mask=attention_mask).last_hidden_state
        logits = model.detector(F.gelu(model.dense(encoded)))[..., 0]
    real = attention_mask.bool()
    probability = logits[real].sigmoid().double()
    target = replaced[real].double()
    detection = -(target * probability.log() + (1 - target) * (1 - probability).log()).mean()
    generator_loss = F.cross_entropy(generator_logits.double(), original[masked])
    assert replaced.any() and torch.equal(output.replaced, replaced)
    torch.testing.assert_close(output.logits, logits)
    torch.testing.assert_close(output.generator_loss.double(), generator_loss)
    torch.testing.assert_close(output.discriminator_loss.double(), detection)
    torch.testing.assert_close(output.loss.double(), generator_loss + 50 * detection)
    second_choice = int(original[0, 1])  # a masked position's original token
    with torch.no_grad():  # a generator sure of [PAD] (id 0, the mask's stand-in), then of that token
        model.generator.decoder.bias[0], model.generator.decoder.bias[second_choice] = 1e4, 1e3
        output = model(input_ids=corrupted, attention_mask=attention_mask, labels=labels)
    assert not output.replaced[0, 1]  # [PAD] is never a replacement: the second choice is, which is the original
    assert torch.equal(output.replaced, masked & (original != second_choice))


@pytest.mark.parametrize("model_class", [HfAttnModel, HfAttnForSequenceClassification, HfAttnForMaskedLM])
def test_token_type_ids_from_bert_style_collators_are_accepted_and_change_nothing(model_class: type) -> None:
    """The package's tokenizer returns token_type_ids when asked, and generic collators pass them along;
    the model has no segment embeddings, so its outputs are those of the call without them."""
    model = build(model_class=model_class)
    input_ids, attention_mask = random_batch(pad_rows={1: 5})
    with torch.no_grad():
        expected = model(input_ids=input_ids, attention_mask=attention_mask)[0]
        segments = torch.zeros_like(input_ids)
        actual = model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=segments)[0]
    assert torch.equal(actual, expected)


@pytest.mark.parametrize("scheme", sorted(POSITION_SCHEMES))
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_a_text_without_tokens_gets_the_classifiers_bias(scheme: str, attn: str) -> None:
    """Zero tokens (an empty or whitespace-only review) pool to zeros, so the logits are the bias alone;
    in a padded batch such a row gets the same, and the other rows what they get on their own."""
    model = build(model_class=HfAttnForSequenceClassification, attn=attn, position_embedding_type=scheme,
                  num_key_value_heads=2)
    bias = model.classifier.bias
    with torch.no_grad():
        empty = model(input_ids=torch.zeros(2, 0, dtype=torch.long), output_hidden_states=True)
        input_ids, attention_mask = random_batch(pad_rows={1: 0})
        batch = model(input_ids=input_ids, attention_mask=attention_mask).logits
        alone = model(input_ids=input_ids[:1]).logits
    assert torch.equal(empty.logits, bias.expand(2, -1))
    assert len(empty.hidden_states) == model.config.num_hidden_layers + 1
    assert torch.equal(batch[1], bias)
    torch.testing.assert_close(batch[0], alone[0])


def test_max_pooling_gives_a_row_of_padding_alone_zeros() -> None:
    model = build(model_class=HfAttnForSequenceClassification, classifier_pooling="max")
    input_ids, attention_mask = random_batch(pad_rows={1: 0})
    with torch.no_grad():
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    assert torch.equal(logits[1], model.classifier.bias)


REMOTE_HEADS = textwrap.dedent("""
    import json, sys
    sys.modules["hf_attn"] = None  # no hf_attn package at all
    import torch
    from transformers import (AutoModel, AutoModelForMultipleChoice, AutoModelForSequenceClassification,
                              AutoModelForTokenClassification)
    encoder = AutoModel.from_pretrained(sys.argv[1], trust_remote_code=True).eval()
    classifier = AutoModelForSequenceClassification.from_pretrained(sys.argv[1], trust_remote_code=True)
    tagger = AutoModelForTokenClassification.from_pretrained(sys.argv[1], trust_remote_code=True, num_labels=3)
    chooser = AutoModelForMultipleChoice.from_pretrained(sys.argv[1], trust_remote_code=True)
    ids = torch.tensor(json.load(open(sys.argv[2])))
    with torch.no_grad():
        print(json.dumps({"features": encoder(input_ids=ids).last_hidden_state.tolist(),
                          "same_encoder": all(torch.equal(head.model.embed_tokens.weight, encoder.embed_tokens.weight)
                                              for head in (classifier, tagger, chooser)),
                          "tags": list(tagger(input_ids=ids).logits.shape),
                          "choices": list(chooser(input_ids=ids[None]).logits.shape)}))
""")


def test_a_masked_lm_folder_loads_as_every_head_where_hf_attn_is_absent(tmp_path: Path) -> None:
    """`auto_map` lists every head: a pretrained masked-LM folder loads with AutoModel (features equal to
    the masked LM's encoder) and as a classifier, a token classifier or a multiple-choice head to fine-tune (the same
    encoder weights)."""
    model = build(HfAttnForMaskedLM, position_embedding_type="alibi")
    model.save_pretrained(tmp_path / "mlm")
    auto_map = json.loads((tmp_path / "mlm" / "config.json").read_text())["auto_map"]
    assert auto_map["AutoModel"] == "modeling_hf_attn.HfAttnModel"
    assert auto_map["AutoModelForSequenceClassification"] == "modeling_hf_attn.HfAttnForSequenceClassification"
    input_ids, _ = random_batch()
    (tmp_path / "ids.json").write_text(json.dumps(input_ids.tolist()))
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf_home"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    result = subprocess.run([sys.executable, "-c", REMOTE_HEADS, str(tmp_path / "mlm"), str(tmp_path / "ids.json")],
                            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded["same_encoder"] and loaded["tags"] == [*input_ids.shape, 3]
    assert loaded["choices"] == [1, input_ids.shape[0]]  # the batch's texts as the choices of one question
    with torch.no_grad():
        expected = model.model(input_ids=input_ids).last_hidden_state
    torch.testing.assert_close(torch.tensor(loaded["features"]), expected)


@pytest.mark.parametrize("model_class", [HfAttnModel, HfAttnForSequenceClassification, HfAttnForTokenClassification,
                                         HfAttnForMultipleChoice, HfAttnForMaskedLM, HfAttnForReplacedTokenDetection,
                                         HfAttnForCausalLM],
                         ids=lambda model_class: model_class.__name__)
def test_return_dict_false_in_the_config_gives_every_heads_output_as_a_tuple(model_class: type,
                                                                           tmp_path: Path) -> None:
    """As BERT does: `config.return_dict = False` (what ONNX recipes set, or `from_pretrained(...,
    return_dict=False)`) makes every head return the tuple of its output's fields, the same tensors."""
    decoder = {"is_decoder": True} if model_class is HfAttnForCausalLM else {}
    model = build(model_class, position_embedding_type="rope", **decoder)
    input_ids, attention_mask = random_batch(pad_rows={1: 5})
    if model_class is HfAttnForMultipleChoice:  # the batch's texts as the choices of one question
        input_ids, attention_mask = input_ids[None], attention_mask[None]
    with torch.no_grad():
        expected = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).to_tuple()
        model.save_pretrained(tmp_path)
        model.config.return_dict = False
        loaded = model_class.from_pretrained(tmp_path, return_dict=False, attn_implementation="eager").eval()
        for candidate in (model, loaded):
            actual = candidate(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
            assert isinstance(actual, tuple) and len(actual) == len(expected)
            for actual_field, expected_field in zip(actual, expected, strict=True):
                torch.testing.assert_close(actual_field, expected_field)
        as_dict = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, return_dict=True)
        assert torch.equal(as_dict[0], expected[0])


def test_the_token_classifier_scores_every_token_with_one_linear_layer_and_ignores_minus_100_labels() -> None:
    """Logits: the classifier applied to the encoder's states at each token (a second path); the loss: cross-entropy
    over the labelled tokens only, by hand."""
    model = build(HfAttnForTokenClassification, position_embedding_type="rope", num_labels=3)
    input_ids, attention_mask = random_batch(pad_rows={1: 5})
    labels = torch.randint(0, 3, input_ids.shape, generator=torch.Generator().manual_seed(3))
    labels[attention_mask == 0] = -100
    labels[0, 1] = -100  # a sub-word continuation
    with torch.no_grad():
        output = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        states = model.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        torch.testing.assert_close(output.logits, model.classifier(states))
        kept = labels != -100
        expected = F.cross_entropy(output.logits[kept], labels[kept])
    torch.testing.assert_close(output.loss, expected)
    assert AutoModelForTokenClassification.from_config(model.config).__class__ is HfAttnForTokenClassification


@pytest.mark.parametrize("scheme", ["t5", "fire", "cope"])
def test_reentrant_gradient_checkpointing_gives_a_learned_bias_the_gradients_of_plain_backward(scheme: str) -> None:
    """The bias of t5 and fire is computed once and learned, CoPE's table read inside each layer through the scheme:
    with reentrant checkpointing (which carries the gradients of tensor arguments only) every parameter gets the
    gradient of a backward without checkpointing."""
    model = build(HfAttnForSequenceClassification, position_embedding_type=scheme, attn="sdpa").train()
    input_ids, attention_mask = random_batch(pad_rows={1: 5})
    labels = torch.tensor([0, 1, 0])

    def gradients() -> dict[str, torch.Tensor]:
        model.zero_grad()
        model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss.backward()
        return {name: parameter.grad.clone() for name, parameter in model.named_parameters()}

    plain = gradients()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    checkpointed = gradients()
    assert any("positions" in name for name in plain)
    for name, gradient in plain.items():
        torch.testing.assert_close(checkpointed[name], gradient, msg=name)


def test_the_multiple_choice_head_scores_each_choice_from_its_own_mean_pooled_states() -> None:
    """Logits: each choice encoded alone, without its padding, its states averaged and dotted with the head's weight
    by hand; the loss: cross-entropy by hand; `AutoModelForMultipleChoice` builds the head from its config."""
    model = build(HfAttnForMultipleChoice, position_embedding_type="rope", classifier_pooling="mean")
    input_ids, attention_mask = random_batch(batch=6, pad_rows={1: 5, 4: 9})
    input_ids, attention_mask = input_ids.view(2, 3, -1), attention_mask.view(2, 3, -1)  # 2 questions, 3 choices
    labels = torch.tensor([2, 0])
    with torch.no_grad():
        output = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        expected = torch.empty(2, 3)
        for question, choice in itertools.product(range(2), range(3)):
            real = input_ids[question, choice][attention_mask[question, choice].bool()]
            states = model.model(input_ids=real[None]).last_hidden_state[0]
            expected[question, choice] = states.mean(dim=0) @ model.classifier.weight[0] + model.classifier.bias[0]
    torch.testing.assert_close(output.logits, expected)
    log_probabilities = output.logits - output.logits.exp().sum(dim=-1, keepdim=True).log()
    torch.testing.assert_close(output.loss, -log_probabilities[torch.arange(2), labels].mean())
    assert AutoModelForMultipleChoice.from_config(model.config).__class__ is HfAttnForMultipleChoice
