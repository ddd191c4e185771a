"""Position schemes against closed-form references written independently of the package."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import pytest
import torch
from helpers import tiny_config_kwargs

from hf_attn import POSITION_SCHEMES, HfAttnConfig, HfAttnModel, PositionScheme, modeling_hf_attn
from hf_attn.positions import (
    FirePositions,
    RopeWithNopeLayers,
    RotaryPositions,
    T5Positions,
    alibi_slopes,
    apply_rotary,
    sinusoidal_embedding,
)


def rope_config(**rope: object) -> HfAttnConfig:
    parameters = {"rope_type": "default", "rope_theta": 10_000.0, **rope}
    return HfAttnConfig(**tiny_config_kwargs(position_embedding_type="rope", rope_parameters=parameters))


def test_sinusoidal_embedding_equals_vaswani_formula() -> None:
    dim = 32
    table = sinusoidal_embedding(torch.tensor([0, 1, 7, 31, 5000]), dim)
    for row, pos in enumerate((0, 1, 7, 31, 5000)):
        for i in range(dim // 2):
            angle = pos / 10_000 ** (2 * i / dim)
            # fp32 angles of position 5000 carry an error of ~5000 * 2**-24 rad
            assert table[row, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-3 if pos > 100 else 1e-5)
            assert table[row, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-3 if pos > 100 else 1e-5)


def channel_pairs(dim: int, layout: str) -> list[tuple[int, int]]:
    """The (x, y) channels RoPE rotates together, written out: frequency i acts on pair i."""
    if layout == "interleaved":
        return [(2 * i, 2 * i + 1) for i in range(dim // 2)]
    return [(i, i + dim // 2) for i in range(dim // 2)]


def explicit_rotation(
    vector: torch.Tensor, position: int, theta: float = 10_000.0, layout: str = "halves"
) -> torch.Tensor:
    """Rotate each channel pair by position * theta^(-2i/d) with a 2x2 matrix, one pair at a time."""
    dim = vector.shape[-1]
    rotated = vector.clone()
    for i, pair in enumerate(channel_pairs(dim, layout)):
        angle = position * theta ** (-2 * i / dim)
        matrix = torch.tensor([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
        rotated[list(pair)] = matrix @ vector[list(pair)]
    return rotated


def rotate(config: HfAttnConfig, vectors: torch.Tensor, positions: list[int]) -> torch.Tensor:
    """Rotate (len(positions), head_dim) vectors, each at its own position, with the package's RoPE."""
    rope = RotaryPositions(config)
    rotation = rope.attention_positions(torch.tensor([positions]), len(positions)).rotary["full_attention"]
    query = vectors[None, None]  # (1, 1, T, D)
    return apply_rotary(query, rotation, config.rope_layout)[0, 0]


@pytest.mark.parametrize("layout", ["interleaved", "halves"])
def test_rope_equals_explicit_rotation_matrices(layout: str) -> None:
    config = HfAttnConfig(**tiny_config_kwargs(position_embedding_type="rope", rope_layout=layout))
    torch.manual_seed(0)
    vectors = torch.randn(5, config.head_dim)
    positions = [0, 1, 2, 17, 30]
    rotated = rotate(config, vectors, positions)
    for row, position in enumerate(positions):
        expected = explicit_rotation(vectors[row], position, layout=layout)
        torch.testing.assert_close(rotated[row], expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("layout", ["interleaved", "halves"])
def test_rope_keeps_half_precision_inputs_in_half_precision(layout: str) -> None:
    """fp32 tables must not promote bf16 queries and keys to fp32 (which doubles their memory and
    hands attention q/k of another dtype than v)."""
    torch.manual_seed(3)
    config = rope_config()
    config.rope_layout = layout
    rotation = RotaryPositions(config).attention_positions(torch.arange(5)[None], 5).rotary["full_attention"]
    query = torch.randn(1, 2, 5, config.head_dim, dtype=torch.bfloat16)
    expected = apply_rotary(query.float(), rotation, layout)
    rotated = apply_rotary(query, rotation, layout)
    assert rotated.dtype == torch.bfloat16
    # bf16 keeps 8 bits of mantissa: x1 cos - x2 sin rounds twice, so allow a few bf16 steps of |x| ~ 1.
    torch.testing.assert_close(rotated.float(), expected, atol=3e-2, rtol=2e-2)


@pytest.mark.parametrize(("scheme", "buffer"), [
    ("rope", "inv_freq"), ("alibi", "slopes"), ("rope_alibi", "inv_freq"), ("rope_alibi", "slopes")
])
def test_position_buffers_survive_casting_the_model_to_half_precision(scheme: str, buffer: str, tmp_path) -> None:  # noqa: ANN001
    """`model.to(bf16)` (and `from_pretrained(dtype=...)`) would round position buffers (RoPE's
    frequencies, ALiBi's slopes) to 8 bits of mantissa: each must stay the fp32 model's."""
    model = HfAttnModel(HfAttnConfig(**tiny_config_kwargs(position_embedding_type=scheme)))
    table = getattr(model.positions, buffer).clone()
    model.to(torch.bfloat16)
    assert getattr(model.positions, buffer).dtype == torch.float32
    torch.testing.assert_close(getattr(model.positions, buffer), table)
    model.save_pretrained(tmp_path)
    loaded = HfAttnModel.from_pretrained(tmp_path, dtype=torch.float16)
    assert loaded.embed_tokens.weight.dtype == torch.float16
    torch.testing.assert_close(getattr(loaded.positions, buffer), table)


def test_rope_score_depends_only_on_offset() -> None:
    config = rope_config()
    torch.manual_seed(1)
    q, k = torch.randn(config.head_dim), torch.randn(config.head_dim)
    for offset in (0, 3, -5):
        scores = []
        for start in (6, 10, 40):  # 40 + offset is beyond max_position_embeddings: extrapolation too
            rq = rotate(config, q[None], [start + offset])[0]
            rk = rotate(config, k[None], [start])[0]
            scores.append(float(rq @ rk))
        assert scores == pytest.approx([scores[0]] * len(scores), abs=1e-4)


def test_rope_leaves_norms_and_values_untouched() -> None:
    config = rope_config()
    vectors = torch.randn(4, config.head_dim)
    rotated = rotate(config, vectors, [0, 5, 9, 12])
    torch.testing.assert_close(rotated.norm(dim=-1), vectors.norm(dim=-1))
    torch.testing.assert_close(rotated[0], vectors[0])  # position 0 is the identity


def test_linear_scaling_divides_angles_by_factor() -> None:
    """Position interpolation: position 2p with factor 2 gets exactly the angles of position p unscaled."""
    vectors = torch.randn(3, 8)
    scaled = rotate(rope_config(rope_type="linear", factor=2.0), vectors, [2, 8, 20])
    plain = rotate(rope_config(), vectors, [1, 4, 10])
    torch.testing.assert_close(scaled, plain, atol=1e-5, rtol=1e-5)


def test_dynamic_ntk_is_plain_rope_within_training_length_and_rescaled_beyond() -> None:
    config, plain = rope_config(rope_type="dynamic", factor=2.0), rope_config()
    vectors = torch.randn(3, 8)
    torch.testing.assert_close(rotate(config, vectors, [1, 5, 9]), rotate(plain, vectors, [1, 5, 9]))
    long = list(range(64))  # twice max_position_embeddings
    dim, length = config.head_dim, len(long)
    base = 10_000.0 * ((2.0 * length / 32) - 1) ** (dim / (dim - 2))  # NTK-aware base (bloc97 / emozilla)
    rotated = rotate(config, torch.ones(length, dim), long)
    expected = torch.stack([explicit_rotation(torch.ones(dim), p, theta=base) for p in long])
    torch.testing.assert_close(rotated, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    ("heads", "expected"),
    [
        (8, [2.0 ** -(i + 1) for i in range(8)]),
        (4, [2.0 ** -(2 * (i + 1)) for i in range(4)]),
        # non-power of 2 (paper's reference code): slopes for 4 heads, then the odd-numbered ones for 8
        (6, [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]),
    ],
)
def test_alibi_slopes_follow_the_papers_geometric_sequence(heads: int, expected: list[float]) -> None:
    assert alibi_slopes(heads).tolist() == pytest.approx(expected)


def test_alibi_bias_is_minus_slope_times_distance() -> None:
    config = HfAttnConfig(**tiny_config_kwargs(position_embedding_type="alibi"))
    bias = POSITION_SCHEMES["alibi"](config).attention_positions(torch.arange(6)[None], 6).bias
    slopes = alibi_slopes(4)
    for head in range(4):
        for i in range(6):
            for j in range(6):
                assert bias[0, head, i, j].item() == pytest.approx(-slopes[head].item() * abs(i - j))


@pytest.mark.parametrize("scheme", [name for name, scheme in POSITION_SCHEMES.items() if scheme.extrapolates])
def test_extrapolating_schemes_run_beyond_max_position_embeddings(scheme: str) -> None:
    model = HfAttnModel(HfAttnConfig(**tiny_config_kwargs(position_embedding_type=scheme))).eval()
    output = model(input_ids=torch.randint(1, 64, (2, 80)))  # max_position_embeddings is 32
    assert output.last_hidden_state.shape == (2, 80, 32)
    assert torch.isfinite(output.last_hidden_state).all()


@pytest.mark.parametrize("is_decoder", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("cached", [0, 190], ids=["whole", "after-a-cache"])
def test_t5_bias_equals_transformers_t5_attention_bias_given_the_same_table(is_decoder: bool, cached: int) -> None:
    """Buckets past the largest (max_distance 128 at 200 tokens), keys on both sides in an encoder, and the
    queries after a cache (T5 numbers them from `past_seen_tokens`) all give transformers' T5 bias."""
    from transformers import T5Config
    from transformers.models.t5.modeling_t5 import T5Attention

    config = HfAttnConfig(**tiny_config_kwargs(position_embedding_type="t5", is_decoder=is_decoder))
    ours = T5Positions(config)
    torch.nn.init.normal_(ours.relative_attention_bias.weight)
    t5_config = T5Config(d_model=32, d_kv=8, num_heads=4, relative_attention_num_buckets=32,
                         relative_attention_max_distance=128, is_decoder=is_decoder)
    theirs = T5Attention(t5_config, has_relative_attention_bias=True)
    theirs.relative_attention_bias.weight.data.copy_(ours.relative_attention_bias.weight.data)
    keys, queries = 200, 200 - cached
    bias = ours.attention_positions(torch.arange(cached, keys)[None], keys).bias
    expected = theirs.compute_bias(queries, keys, past_seen_tokens=cached)
    assert bias.shape == expected.shape == (1, 4, queries, keys)
    assert torch.equal(bias, expected)
    assert len(ours.relative_attention_bias.weight) == 32 and bias.unique().numel() > 16  # far buckets are used


def fire_bias_by_the_formula(
    fire: FirePositions, query: int, key: int, initial_threshold: float = 512.0
) -> list[float]:
    """Li et al.'s b(i, j) = f(psi(i - j) / psi(max(L, i))), psi(x) = log(|c x| + 1), L = |scale * initial|, f an
    MLP 1 -> 32 (ReLU) -> heads, written out with Python floats, one hidden unit at a time."""
    c, scale = fire.c.item(), fire.threshold_scale.item()
    psi = lambda x: math.log(abs(c * x) + 1)  # noqa: E731
    x = psi(query - key) / (psi(max(abs(scale * initial_threshold), query)) + 1e-6)
    first, second = fire.mlp[0], fire.mlp[2]
    hidden = [max(0.0, first.weight[u, 0].item() * x + first.bias[u].item()) for u in range(first.out_features)]
    return [sum(second.weight[h, u].item() * hidden[u] for u in range(len(hidden))) + second.bias[h].item()
            for h in range(second.out_features)]


@pytest.mark.parametrize("cached", [0, 20], ids=["whole", "after-a-cache"])
def test_fire_bias_equals_the_papers_formula(cached: int) -> None:
    """Past and beyond the threshold L (set to ~10 here so 24 tokens cross it), every query, key and head;
    queries after a cache are normalised by their own position."""
    torch.manual_seed(0)
    fire = FirePositions(HfAttnConfig(**tiny_config_kwargs(position_embedding_type="fire", is_decoder=True)))
    for layer in (fire.mlp[0], fire.mlp[2]):
        torch.nn.init.normal_(layer.weight)
        torch.nn.init.normal_(layer.bias)
    with torch.no_grad():
        fire.c.fill_(0.7)
        fire.threshold_scale.fill_(-10.0 / 512)  # L = |scale * 512| = 10
    keys = 24
    bias = fire.attention_positions(torch.arange(cached, keys)[None], keys).bias
    assert bias.shape == (1, 4, keys - cached, keys)
    for row, query in enumerate(range(cached, keys)):
        for key in range(keys):
            assert bias[0, :, row, key].tolist() == pytest.approx(fire_bias_by_the_formula(fire, query, key), abs=1e-5)


def test_fire_reads_a_left_padded_prompt_as_the_prompt_alone() -> None:
    """FIRE normalises by the query's position, so it must be the position id (a left-padded row's count from its
    first token), not the slot; L is set to 2 so the normaliser changes with every position here."""
    from test_decoders import decoder, token_ids

    model = decoder(position_embedding_type="fire")
    with torch.no_grad():
        model.model.positions.threshold_scale.fill_(2 / 512)
    prompt = token_ids(1, 4)
    padded = torch.cat([torch.zeros(1, 3, dtype=torch.long), prompt], dim=1)
    attention_mask = (torch.arange(7) >= 3).long()[None]
    with torch.no_grad():
        alone = model(input_ids=prompt).logits
        together = model(input_ids=padded, attention_mask=attention_mask,
                         position_ids=(attention_mask.cumsum(-1) - 1).clamp(min=0)).logits
    torch.testing.assert_close(together[:, 3:], alone, atol=1e-5, rtol=1e-5)


def test_learned_positions_refuse_longer_inputs_clearly() -> None:
    model = HfAttnModel(HfAttnConfig(**tiny_config_kwargs(position_embedding_type="learned")))
    with pytest.raises(ValueError, match="max_position_embeddings.*truncat"):
        model(input_ids=torch.randint(1, 64, (1, 33)))


def test_a_new_scheme_is_one_class_and_one_registry_line(monkeypatch: pytest.MonkeyPatch) -> None:
    class ConstantOffset(PositionScheme):
        def embed(self, inputs_embeds: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
            return inputs_embeds + 1.0

    monkeypatch.setitem(POSITION_SCHEMES, "offset", ConstantOffset)
    config = HfAttnConfig(**tiny_config_kwargs(position_embedding_type="offset"))
    model = HfAttnModel(config).eval()
    assert isinstance(model.positions, ConstantOffset)
    model(input_ids=torch.randint(1, 64, (1, 5)))


def test_yarn_scales_cos_sin_by_its_attention_factor() -> None:
    """YaRN's default attention factor is 0.1 ln(factor) + 1 (Peng et al.), applied to cos and sin."""
    rope = RotaryPositions(rope_config(rope_type="yarn", factor=4.0))
    cos, sin = rope.attention_positions(torch.arange(3)[None], 3).rotary["full_attention"]
    expected = 0.1 * math.log(4.0) + 1.0
    torch.testing.assert_close(cos[0, 0], torch.full_like(cos[0, 0], expected))  # position 0: cos = 1
    assert torch.allclose(cos[0, 1] ** 2 + sin[0, 1] ** 2, torch.full_like(cos[0, 1], expected**2))
    model = HfAttnModel(rope_config(rope_type="yarn", factor=4.0)).eval()
    assert torch.isfinite(model(input_ids=torch.randint(1, 64, (1, 100))).last_hidden_state).all()


# ---------------------------------------------------------------- RoPE with NoPE layers (SmolLM3)


@pytest.mark.parametrize(("layers", "no_rope_layers"), [(4, None), (8, None), (6, None), (3, [0, 1, 0])])
def test_rope_nope_rotates_the_layers_a_smollm3_config_of_the_same_shape_rotates(
    layers: int, no_rope_layers: list[int] | None
) -> None:
    """SmolLM3's default: every 4th layer (4, 8, ...) without RoPE; or `no_rope_layers` as given."""
    from transformers import SmolLM3Config

    smollm3 = SmolLM3Config(num_hidden_layers=layers, no_rope_layers=no_rope_layers)
    config = HfAttnConfig(**tiny_config_kwargs(position_embedding_type="rope_nope", num_hidden_layers=layers,
                                               no_rope_layers=no_rope_layers))
    expected = [bool(flag) for flag in smollm3.no_rope_layers]
    assert RopeWithNopeLayers.rotated_layers(config) == expected
    assert [layer.self_attn.rotates for layer in HfAttnModel(config).layers] == expected


def copy_attention_weights(ours: torch.nn.Module, theirs: torch.nn.Module) -> torch.nn.Module:
    """Copy a layer's fused Q/K/V (4 heads of 8, 2 key-value heads) and output projections into transformers'
    separate ones (Llama's names)."""
    q, k, v = ours.qkv_proj.weight.split([32, 16, 16])
    q_bias, k_bias, v_bias = ours.qkv_proj.bias.split([32, 16, 16])
    with torch.no_grad():
        for projection, weight, bias in ((theirs.q_proj, q, q_bias), (theirs.k_proj, k, k_bias),
                                         (theirs.v_proj, v, v_bias), (theirs.o_proj, ours.o_proj.weight,
                                                                      ours.o_proj.bias)):
            projection.weight.copy_(weight)
            projection.bias.copy_(bias)
    return theirs


def test_rope_nope_attention_equals_smollm3_attention_given_the_same_weights() -> None:
    """Each of 4 layers (the 4th without RoPE) against transformers' SmolLM3Attention of the same config, Q/K/V
    weights copied, causal, eager."""
    from transformers import SmolLM3Config
    from transformers.models.smollm3.modeling_smollm3 import SmolLM3Attention, SmolLM3RotaryEmbedding

    torch.manual_seed(0)
    config = HfAttnConfig(**tiny_config_kwargs(position_embedding_type="rope_nope", num_hidden_layers=4,
                                               num_key_value_heads=2, is_decoder=True))
    model = HfAttnModel(config).eval()
    smollm3 = SmolLM3Config(
        hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, attention_bias=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000.0}, attention_dropout=0.0,
    )
    smollm3._attn_implementation = "eager"
    length = 7
    hidden = torch.randn(1, length, 32)
    position_ids = torch.arange(length)[None]
    cos_sin = SmolLM3RotaryEmbedding(smollm3)(hidden, position_ids)
    causal = torch.full((length, length), float("-inf")).triu(1)[None, None]
    batch = model.attention_batch(hidden, None, position_ids, None, None, None, False, False)
    for index, layer in enumerate(model.layers):
        theirs = copy_attention_weights(layer.self_attn, SmolLM3Attention(smollm3, index).eval())
        with torch.no_grad():
            expected = theirs(hidden, cos_sin, causal)[0]
            ours = layer.self_attn(hidden, batch.self_attention[layer.attention_type])[0]
        assert theirs.use_rope == layer.self_attn.rotates == (index != 3)
        torch.testing.assert_close(ours, expected, atol=1e-5, rtol=1e-5)


def test_rope_alibi_attention_equals_llama_attention_with_alibi_of_the_ids_in_its_mask() -> None:
    """RoPE with ALiBi: transformers' LlamaAttention (same weights, its rotary tables of the same ids) with the
    causal mask plus -slope * |id_j - id_i| per head, written out, at ids that are not the slots (coupled places:
    repeated, out of order)."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

    torch.manual_seed(0)
    config = HfAttnConfig(**tiny_config_kwargs(position_embedding_type="rope_alibi", num_key_value_heads=2,
                                               is_decoder=True))
    model = HfAttnModel(config).eval()
    llama = LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                        attention_bias=True, rope_parameters={"rope_type": "default", "rope_theta": 10_000.0})
    llama._attn_implementation = "eager"
    ids = [0, 3, 2, 1, 9, 3, 2, 1, 9, 5, 4]
    length = len(ids)
    hidden = torch.randn(1, length, 32)
    position_ids = torch.tensor([ids])
    cos_sin = LlamaRotaryEmbedding(llama)(hidden, position_ids)
    slopes = [2.0 ** -(2 * (head + 1)) for head in range(4)]
    mask = torch.tensor([[[0.0 if j <= i else float("-inf") for j in range(length)] for i in range(length)]])
    mask = mask - torch.tensor([[[slope * abs(ids[j] - ids[i]) for j in range(length)] for i in range(length)]
                                for slope in slopes])
    batch = model.attention_batch(hidden, None, position_ids, None, None, None, False, False)
    for index, layer in enumerate(model.layers):
        theirs = copy_attention_weights(layer.self_attn, LlamaAttention(llama, index).eval())
        with torch.no_grad():
            expected = theirs(hidden, cos_sin, mask[None])[0]
            inputs = replace(batch.self_attention[layer.attention_type], bias=batch.biases[layer.attention_type])
            ours = layer.self_attn(hidden, inputs)[0]
        torch.testing.assert_close(ours, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("flags", "same_as"), [([1, 1], "rope"), ([0, 0], "none")])
def test_rope_nope_with_every_layer_alike_is_rope_or_no_positions(flags: list[int], same_as: str) -> None:
    torch.manual_seed(0)
    model = HfAttnModel(HfAttnConfig(**tiny_config_kwargs(position_embedding_type="rope_nope", no_rope_layers=flags)))
    reference = HfAttnModel(HfAttnConfig(**tiny_config_kwargs(position_embedding_type=same_as)))
    reference.load_state_dict(model.state_dict())
    input_ids = torch.randint(1, 64, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(model.eval()(input_ids).last_hidden_state,
                                   reference.eval()(input_ids).last_hidden_state)


# ---------------------------------------------------------------- RoPE's theta per layer type (ModernBERT)

MODERNBERT_THETAS = {"full_attention": {"rope_type": "default", "rope_theta": 160_000.0},
                     "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0}}
ALTERNATING = dict(sliding_window=4, num_hidden_layers=3,
                   layer_types=["full_attention", "sliding_attention", "sliding_attention"])


def test_rope_theta_per_layer_type_gives_modernberts_inverse_frequencies() -> None:
    """ModernBertConfig's defaults spell 160,000 on global (full) layers and 10,000 on local (sliding) ones as
    `rope_parameters` keyed by layer type; ours reads that spelling and computes the same frequencies."""
    from transformers import ModernBertConfig
    from transformers.models.modernbert.modeling_modernbert import ModernBertRotaryEmbedding

    modernbert = ModernBertConfig(hidden_size=32, num_attention_heads=4, num_hidden_layers=3)
    assert modernbert.rope_parameters == MODERNBERT_THETAS
    config = HfAttnConfig(**tiny_config_kwargs(rope_parameters=MODERNBERT_THETAS, **ALTERNATING))
    rope = RotaryPositions(config)
    theirs = ModernBertRotaryEmbedding(modernbert)
    for layer_type in ("full_attention", "sliding_attention"):
        torch.testing.assert_close(rope.inv_freq[rope.layer_types.index(layer_type)],
                                   getattr(theirs, f"{layer_type}_inv_freq"))


def test_rope_theta_per_layer_type_rotates_each_layer_by_its_own_theta() -> None:
    config = HfAttnConfig(**tiny_config_kwargs(rope_parameters=MODERNBERT_THETAS, **ALTERNATING))
    positions = [0, 3, 17]
    rotary = RotaryPositions(config).attention_positions(torch.tensor([positions]), 3).rotary
    vectors = torch.randn(3, config.head_dim, generator=torch.Generator().manual_seed(0))
    for layer_type, parameters in MODERNBERT_THETAS.items():
        rotated = apply_rotary(vectors[None, None], rotary[layer_type])[0, 0]
        for row, position in enumerate(positions):
            expected = explicit_rotation(vectors[row], position, theta=parameters["rope_theta"])
            torch.testing.assert_close(rotated[row], expected, atol=1e-5, rtol=1e-5)


def test_the_same_theta_on_every_layer_type_is_one_rope_dict() -> None:
    torch.manual_seed(0)
    flat = HfAttnModel(HfAttnConfig(**tiny_config_kwargs(**ALTERNATING))).eval()
    same = {kind: {"rope_type": "default", "rope_theta": 10_000.0} for kind in MODERNBERT_THETAS}
    keyed = HfAttnModel(HfAttnConfig(**tiny_config_kwargs(rope_parameters=same, **ALTERNATING))).eval()
    keyed.load_state_dict(flat.state_dict())
    input_ids = torch.randint(1, 64, (1, 12))
    with torch.no_grad():
        torch.testing.assert_close(keyed(input_ids).last_hidden_state, flat(input_ids).last_hidden_state)


# ---------------------------------------------------------------- p-RoPE (Barbero et al.)


@pytest.mark.parametrize("share", [0.0, 0.25, 0.5, 1.0])
@pytest.mark.parametrize("layout", ["interleaved", "halves"])
def test_p_rope_rotates_the_highest_frequencies_alone(share: float, layout: str) -> None:
    """p-RoPE: pair i turns by position x theta^(-2i/d) for the p x d/2 pairs of highest frequency (i < p d/2), the
    others not at all; written out with 2x2 matrices, pair by pair."""
    config = HfAttnConfig(**tiny_config_kwargs(
        rope_layout=layout, rope_parameters={"rope_type": "proportional", "partial_rotary_factor": share,
                                             "rope_theta": 10_000.0}))
    dim, positions = config.head_dim, [0, 1, 5, 29]
    vectors = torch.randn(len(positions), dim, generator=torch.Generator().manual_seed(0))
    rotated = rotate(config, vectors, positions)
    kept = int(share * dim // 2)
    for row, position in enumerate(positions):
        expected = vectors[row].clone()
        for i, pair in enumerate(channel_pairs(dim, layout)):
            angle = position * 10_000.0 ** (-2 * i / dim) if i < kept else 0.0
            matrix = torch.tensor([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
            expected[list(pair)] = matrix @ vectors[row][list(pair)]
        torch.testing.assert_close(rotated[row], expected, atol=1e-5, rtol=1e-5)
    if share == 1.0:  # RoPE itself
        rope = HfAttnConfig(**tiny_config_kwargs(rope_layout=layout))
        torch.testing.assert_close(rotated, rotate(rope, vectors, positions))


# ---------------------------------------------------------------- FIRE's threshold at the training length


@pytest.mark.parametrize("threshold", [None, 12])
def test_fire_threshold_at_the_training_length_interpolates_within_it(threshold: int | None) -> None:
    """`fire_initial_threshold` None starts L at max_position_embeddings (32 here), or at the length given: the bias
    of in-distribution offsets equals the formula with that L and differs from the bias with today's L = 512."""
    torch.manual_seed(0)
    kwargs = tiny_config_kwargs(position_embedding_type="fire", is_decoder=True)
    fire = FirePositions(HfAttnConfig(**kwargs, fire_initial_threshold=threshold))
    at_512 = FirePositions(HfAttnConfig(**kwargs))
    for layer in (fire.mlp[0], fire.mlp[2]):
        torch.nn.init.normal_(layer.weight)
        torch.nn.init.normal_(layer.bias)
    at_512.load_state_dict(fire.state_dict())
    keys = 32
    bias = fire.attention_positions(torch.arange(keys)[None], keys).bias
    initial = threshold or 32
    for query in (0, 5, 11, 20, 31):
        for key in range(query + 1):
            assert bias[0, :, query, key].tolist() == pytest.approx(
                fire_bias_by_the_formula(fire, query, key, initial_threshold=initial), abs=1e-5)
    assert not torch.allclose(bias, at_512.attention_positions(torch.arange(keys)[None], keys).bias)


def cope_weights_by_hand(query: torch.Tensor, key: torch.Tensor, visible: torch.Tensor, table: torch.Tensor,
                         causal: bool) -> tuple[torch.Tensor, float]:
    """CoPE's attention weights of one head, (query, key), a slow loop over i and j (Golovneva et al., eq. 3-5, as
    their code scales: scores and position logits by 1/sqrt(d)): g_ik = sigmoid(q_i . k_k / sqrt(d)) over the
    visible keys, p_ij = sum_{k=j..i} g_ik (in an encoder also k = i..j for a later key), clamped to the table's last
    position, e[p] = (p - floor p) e[ceil p] + (1 - p + floor p) e[floor p], logit q_i . (k_j + e[p_ij]) / sqrt(d).
    Also the largest count before clamping."""
    length, dim = query.shape
    weights, largest = torch.zeros(length, length, dtype=torch.float64), 0.0
    for i in range(length):
        logits = {}
        for j in range(length):
            if not visible[j] or (causal and j > i):
                continue
            between = range(j, i + 1) if j <= i else range(i, j + 1)
            p = sum(torch.sigmoid(query[i] @ key[k] / math.sqrt(dim)).item() for k in between if visible[k])
            largest = max(largest, p)
            p = min(p, table.shape[1] - 1)
            low, high = math.floor(p), math.ceil(p)
            e = (p - low) * table[:, high] + (1 - p + low) * table[:, low]
            logits[j] = (query[i] @ (key[j] + e) / math.sqrt(dim)).item()
        if logits:
            values = torch.softmax(torch.tensor(list(logits.values()), dtype=torch.float64), dim=0)
            weights[i, list(logits)] = values
    return weights, largest


@pytest.mark.parametrize("is_decoder", [True, False], ids=["causal", "bidirectional"])
def test_cope_attention_equals_the_papers_formula_computed_by_hand(is_decoder: bool) -> None:
    """Every head's weights in both layers of a tiny model, a left-padded row included, against the loop above;
    `cope_max_positions` = 3 so that counts are clamped."""
    torch.manual_seed(0)
    config = HfAttnConfig(**tiny_config_kwargs(position_embedding_type="cope", is_decoder=is_decoder,
                                               cope_max_positions=3, initializer_range=0.2))
    model = HfAttnModel(config).eval()
    with torch.no_grad():
        model.positions.embeddings.normal_()  # the default init is small: make the positions matter
    input_ids = torch.randint(1, 64, (2, 7))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, :2] = 0
    with torch.no_grad():
        outputs = model(input_ids, attention_mask=attention_mask, output_hidden_states=True, output_attentions=True)
        largest = 0.0
        for layer_idx, layer in enumerate(model.layers):
            hidden = layer.self_attn_norm(outputs.hidden_states[layer_idx])  # the layer's input, pre-norm
            query, key, _ = layer.self_attn.qkv_proj(hidden).split(layer.self_attn.split_sizes, dim=-1)
            query, key = (states.unflatten(-1, (4, 8)).double() for states in (query, key))
            table = model.positions.embeddings[layer_idx].double()
            for row in range(2):
                for head in range(4):
                    expected, count = cope_weights_by_hand(query[row, :, head], key[row, :, head],
                                                           attention_mask[row].bool(), table, is_decoder)
                    largest = max(largest, count)
                    actual = outputs.attentions[layer_idx][row, head].double()
                    real = attention_mask[row].bool()
                    torch.testing.assert_close(actual[real], expected[real], atol=1e-5, rtol=1e-5)
    assert largest > 3  # some counts were clamped to the last position


def test_cope_reads_the_scores_so_an_sdpa_model_runs_eagerly_and_densely(monkeypatch: pytest.MonkeyPatch) -> None:
    """An `attn_implementation="sdpa"` CoPE encoder runs neither the SDPA kernel nor sliding blocks (its positions
    count every visible key) and gives the eager model's output; ALiBi on the same input runs both (the check can
    fail)."""
    calls = {"kernel": 0, "blocks": 0}

    def counted(name: str, function: Callable) -> Callable:
        return lambda *args, **kwargs: calls.update({name: calls[name] + 1}) or function(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                        counted("kernel", torch.nn.functional.scaled_dot_product_attention))
    monkeypatch.setattr(modeling_hf_attn, "local_attention_forward",
                        counted("blocks", modeling_hf_attn.local_attention_forward))
    input_ids = torch.randint(1, 64, (2, 80), generator=torch.Generator().manual_seed(0))  # long enough for blocks
    outputs = {}
    for scheme, attn in (("cope", "eager"), ("cope", "sdpa"), ("alibi", "sdpa")):
        torch.manual_seed(0)
        model = HfAttnModel(HfAttnConfig(**tiny_config_kwargs(position_embedding_type=scheme, sliding_window=3)))
        model.set_attn_implementation(attn)
        with torch.no_grad():
            outputs[scheme, attn] = model.eval()(input_ids).last_hidden_state
        assert all(bool(count) == (scheme == "alibi") for count in calls.values()), (scheme, attn, calls)
    torch.testing.assert_close(outputs["cope", "sdpa"], outputs["cope", "eager"], atol=0, rtol=0)

