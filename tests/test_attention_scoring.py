"""`attention_scoring` (dot, general, additive) and `scale_attn_weights`, against formulas written here by hand."""

from __future__ import annotations

import importlib.util
import math

import pytest
import torch
from helpers import REPO, tiny_config_kwargs

from hf_attn import HfAttnConfig, HfAttnForCausalLM, HfAttnModel
from hf_attn.modeling_hf_attn import eager_attention_forward
from hf_attn.positions import POSITION_SCHEMES, PositionScheme
from hf_attn.scoring import ATTENTION_SCORINGS, AttentionScoring

# (scoring, scale_attn_weights, a position scheme it combines with that reaches the scores)
SCORINGS = [("dot", True, "rope"), ("dot", False, "rope"), ("general", True, "rope"), ("general", False, "alibi"),
            ("additive", True, "alibi")]


def decoder(scoring: str, scale: bool, scheme: str, implementation: str = "eager", **overrides: object):
    """A tiny decoder with cross-attention, its scoring's parameters drawn away from their initial values."""
    torch.manual_seed(0)
    config = HfAttnConfig(**tiny_config_kwargs(
        position_embedding_type=scheme, attention_scoring=scoring, scale_attn_weights=scale, is_decoder=True,
        add_cross_attention=True, num_key_value_heads=2, attn_implementation=implementation, **overrides))
    model = HfAttnForCausalLM(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if ".scoring." in name:  # `general` starts at the identity: a random W tests the formula
                parameter.normal_(std=0.3)
    return model


def hand_scores(attention: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, scale: bool) -> torch.Tensor:
    """(heads, Q, K) scores of one text from its per-head queries (heads, Q, D) and keys (kv_heads, K, D), the
    papers' formulas written pair by pair: q.k (/ sqrt(D)), q^T W k (/ sqrt(D)), v^T tanh(W1 q + W2 k)."""
    heads, head_dim = query.shape[0], query.shape[-1]
    scoring = attention.scoring
    scores = torch.empty(heads, query.shape[1], key.shape[1])
    for h in range(heads):
        k_h = key[h // (heads // key.shape[0])]  # grouped-query attention: a key head serves a group of heads
        for i, q in enumerate(query[h]):
            for j, k in enumerate(k_h):
                if attention.config.attention_scoring == "additive":
                    scores[h, i, j] = scoring.vector[h] @ torch.tanh(
                        scoring.query_weight[h].T @ q + scoring.key_weight[h].T @ k)
                else:
                    bilinear = scoring.weight[h] if attention.config.attention_scoring == "general" else torch.eye(
                        head_dim)
                    scores[h, i, j] = q @ bilinear @ k / (math.sqrt(head_dim) if scale else 1.0)
    return scores


def heads(states: torch.Tensor, count: int) -> torch.Tensor:
    """(T, count x D) -> (count, T, D)."""
    return states.unflatten(-1, (count, -1)).transpose(0, 1)


@pytest.mark.parametrize(("scoring", "scale"), [("dot", True), ("dot", False), ("general", True), ("general", False),
                                                ("additive", True)])
def test_self_and_cross_attention_weights_are_the_scorings_formula(scoring: str, scale: bool) -> None:
    model = decoder(scoring, scale, "none", num_hidden_layers=1)
    layer = model.model.layers[0]
    inputs = {}
    for name in ("self_attn", "cross_attn"):
        getattr(layer, name).register_forward_pre_hook(
            lambda module, args, kwargs, name=name: inputs.__setitem__(name, args[0]), with_kwargs=True)
    encoder_states = torch.randn(1, 7, 32)
    output = model(torch.randint(1, 64, (1, 5)), encoder_hidden_states=encoder_states, output_attentions=True)

    self_attn, cross_attn = layer.self_attn, layer.cross_attn
    query, key, _ = self_attn.qkv_proj(inputs["self_attn"][0]).split(self_attn.split_sizes, dim=-1)
    scores = hand_scores(self_attn, heads(query, 4), heads(key, 2), scale)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    expected = scores.masked_fill(~causal, -torch.inf).softmax(dim=-1)
    torch.testing.assert_close(output.attentions[0][0], expected, atol=1e-5, rtol=1e-5)

    query = cross_attn.q_proj(inputs["cross_attn"][0])
    key, _ = cross_attn.kv_proj(encoder_states[0]).split(cross_attn.split_sizes[1:], dim=-1)
    expected = hand_scores(cross_attn, heads(query, 4), heads(key, 2), scale).softmax(dim=-1)
    torch.testing.assert_close(output.cross_attentions[0][0], expected, atol=1e-5, rtol=1e-5)


class NegativeSquaredDistance(AttentionScoring):
    """-|q - k|^2: a scoring that is not a dot product, registered by a test as a user would add one."""

    is_dot_product = False

    def forward(self, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        return -torch.cdist(query, key) ** 2


def test_a_scoring_added_as_one_class_and_one_line_is_accepted_checked_and_used(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Adding a scoring is a class and its line in `ATTENTION_SCORINGS`: the config accepts its name, checks it by
    its class (not a dot product: never unscaled), and self-attention's weights are its formula, written here pair
    by pair; an `sdpa` model runs it eagerly, to the same logits."""
    monkeypatch.setitem(ATTENTION_SCORINGS, "distance", NegativeSquaredDistance)
    with pytest.raises(ValueError, match="attention_scoring='distance' is never scaled"):
        HfAttnConfig(attention_scoring="distance", scale_attn_weights=False)
    model = decoder("distance", True, "none", num_hidden_layers=1)
    attention = model.model.layers[0].self_attn
    inputs = []
    attention.register_forward_pre_hook(lambda module, args: inputs.append(args[0]))
    input_ids, context = torch.randint(1, 64, (1, 5)), torch.randn(1, 7, 32)
    output = model(input_ids, encoder_hidden_states=context, output_attentions=True)

    with torch.no_grad():
        query, key, _ = attention.qkv_proj(inputs[0][0]).split(attention.split_sizes, dim=-1)
        query, key = heads(query, 4), heads(key, 2)
        scores = torch.tensor([[[-(q - k).pow(2).sum() for k in key[h // 2]] for q in query[h]] for h in range(4)])
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    expected = scores.masked_fill(~causal, -torch.inf).softmax(dim=-1)
    torch.testing.assert_close(output.attentions[0][0], expected, atol=1e-5, rtol=1e-5)
    sdpa = decoder("distance", True, "none", implementation="sdpa", num_hidden_layers=1)
    torch.testing.assert_close(sdpa(input_ids, encoder_hidden_states=context).logits,
                               model(input_ids, encoder_hidden_states=context).logits)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_reduced_precision_weights_are_as_close_to_the_formula_as_a_float32_softmax(dtype: torch.dtype) -> None:
    """The eager softmax runs in the scores' dtype (no float32 copy of the scores) and the queries carry the
    scaling: its weights are as close to the formula computed in float64 as those it replaced (scores scaled, then a
    float32 softmax cast back), and within one rounding of a float32 softmax of the same scores."""
    attention = decoder("dot", True, "none", num_hidden_layers=1).model.layers[0].self_attn
    torch.manual_seed(1)
    query = (torch.randn(2, 4, 40, 8) * 3).to(dtype)
    key, value = (torch.randn(2, 2, 40, 8) * 3).to(dtype), torch.randn(2, 2, 40, 8).to(dtype)
    scaling = 8**-0.5
    _, weights = eager_attention_forward(attention, query, key, value, None, scaling)
    keys = key.repeat_interleave(2, dim=1)
    exact = (query.double() @ keys.double().transpose(-1, -2) * scaling).softmax(dim=-1)
    replaced = torch.softmax(query @ keys.transpose(-1, -2) * scaling, dim=-1, dtype=torch.float32).to(dtype)
    assert weights.dtype == dtype
    error, replaced_error = ((w.double() - exact).abs().max() for w in (weights, replaced))
    assert error <= 1.25 * replaced_error
    same_scores = torch.softmax((query * scaling) @ keys.transpose(-1, -2), dim=-1, dtype=torch.float32).to(dtype)
    torch.testing.assert_close(weights, same_scores, atol=torch.finfo(dtype).eps, rtol=torch.finfo(dtype).eps)


@pytest.mark.parametrize(("scoring", "scale", "scheme"), SCORINGS)
def test_sdpa_gives_the_eager_logits(scoring: str, scale: bool, scheme: str) -> None:
    """SDPA computes dot and general (the query carries W); additive falls back to the eager math."""
    eager = decoder(scoring, scale, scheme)
    sdpa = decoder(scoring, scale, scheme, implementation="sdpa")
    sdpa.load_state_dict(eager.state_dict())
    input_ids, encoder_states = torch.randint(1, 64, (2, 6)), torch.randn(2, 4, 32)
    padding = torch.tensor([[1] * 6, [0, 0, 1, 1, 1, 1]])
    encoder_padding = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    logits = [model(input_ids, attention_mask=padding, encoder_hidden_states=encoder_states,
                    encoder_attention_mask=encoder_padding).logits for model in (eager, sdpa)]
    torch.testing.assert_close(logits[1], logits[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("scoring", "scale", "scheme"), SCORINGS)
def test_the_cache_gives_the_logits_of_the_whole_sequence(scoring: str, scale: bool, scheme: str) -> None:
    model = decoder(scoring, scale, scheme)
    input_ids, encoder_states = torch.randint(1, 64, (2, 7)), torch.randn(2, 5, 32)
    with torch.no_grad():
        whole = model(input_ids, encoder_hidden_states=encoder_states, use_cache=False).logits
        prefix = model(input_ids[:, :4], encoder_hidden_states=encoder_states, use_cache=True)
        cache, steps = prefix.cache, []
        for position in range(4, 7):  # the cross-attention keys are read back from the cache after the prefix
            step = model(input_ids[:, position:position + 1], encoder_hidden_states=encoder_states, cache=cache)
            cache = step.cache
            steps.append(step.logits)
    torch.testing.assert_close(torch.cat([prefix.logits, *steps], dim=1), whole, atol=1e-5, rtol=1e-5)


def test_general_with_rope_depends_on_the_offset_alone() -> None:
    """W multiplies the query before RoPE rotates it: shifting every position leaves the weights unchanged (it would
    not if W sat between the rotated query and key)."""
    torch.manual_seed(0)
    model = HfAttnModel(HfAttnConfig(**tiny_config_kwargs(attention_scoring="general"),
                                     attn_implementation="eager")).eval()
    with torch.no_grad():
        model.layers[0].self_attn.scoring.weight.normal_(std=0.3)
    input_ids = torch.randint(1, 64, (1, 6))
    weights = [model(input_ids, position_ids=torch.arange(6)[None] + shift, output_attentions=True).attentions[0]
               for shift in (0, 9)]
    torch.testing.assert_close(weights[1], weights[0], atol=1e-5, rtol=1e-5)


def test_general_starts_as_the_dot_product() -> None:
    torch.manual_seed(0)
    dot = HfAttnModel(HfAttnConfig(**tiny_config_kwargs())).eval()
    general = HfAttnModel(HfAttnConfig(**tiny_config_kwargs(attention_scoring="general"))).eval()
    missing = general.load_state_dict(dot.state_dict(), strict=False).missing_keys
    assert missing and all(key.endswith("scoring.weight") for key in missing)
    input_ids = torch.randint(1, 64, (2, 6))
    torch.testing.assert_close(general(input_ids).last_hidden_state, dot(input_ids).last_hidden_state)


def test_a_scheme_that_rotates_queries_and_keys_refuses_additive_scores(monkeypatch: pytest.MonkeyPatch) -> None:
    """The refusal asks the scheme's class, so a scheme registered under any name that rotates is refused too."""

    class Spinning(PositionScheme):
        rotates_queries_and_keys = True

    monkeypatch.setitem(POSITION_SCHEMES, "spinning", Spinning)
    for scheme in ("rope", "spinning"):
        with pytest.raises(ValueError, match=f"invalid `attention_scoring`='additive'; position_embedding_type="
                                             f"'{scheme}' rotates queries and keys") as refused:
            HfAttnConfig(position_embedding_type=scheme, attention_scoring="additive")
        assert len(str(refused.value).splitlines()) == 1 and "alibi" in str(refused.value)
    for scheme, scoring in [("alibi", "additive"), ("t5", "additive"), ("rope", "general")]:
        HfAttnConfig(position_embedding_type=scheme, attention_scoring=scoring)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("attention_scoring", "bilinear", "allowed: dot, general, additive"),
    ("scale_attn_weights", "no", "must be bool"),
])
def test_bad_scoring_values_are_refused_in_one_line(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=f"invalid `{field}`={value!r}; {message}"):
        HfAttnConfig(**{field: value})


def test_additive_scores_refuse_to_be_unscaled() -> None:
    with pytest.raises(ValueError, match="invalid `scale_attn_weights`=False; attention_scoring='additive' is never"):
        HfAttnConfig(position_embedding_type="alibi", attention_scoring="additive", scale_attn_weights=False)


def test_the_saturation_script_measures_the_variances_and_entropies_of_its_closed_form() -> None:
    """scripts/attention_saturation.py: scores of unit-variance q, k have variance d_k (1 scaled), and the entropy of
    softmax over many Gaussian logits of small variance s^2 is log n - s^2 / 2."""
    spec = importlib.util.spec_from_file_location("attention_saturation", REPO / "scripts" / "attention_saturation.py")
    saturation = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(saturation)
    generator = torch.Generator().manual_seed(0)
    for scaled, variance in ((False, 32.0), (True, 1.0)):
        measured = saturation.measure(32, keys=16, queries=400, scaled=scaled, generator=generator)
        assert measured["score_variance"] == pytest.approx(variance, rel=0.1)
    for variance in (0.1, 0.5):
        expected = math.log(4096) - variance / 2
        assert saturation.gaussian_logit_entropy(variance, 4096, 200, generator) == pytest.approx(expected, abs=0.01)


@pytest.mark.parametrize(("scoring", "scheme"), [("general", "rope"), ("additive", "alibi")])
def test_a_saved_scoring_loads_with_its_learned_parameters(scoring: str, scheme: str, tmp_path) -> None:  # noqa: ANN001
    """save_pretrained and from_pretrained carry the scorings' parameters: the loaded model computes the same logits."""
    model = decoder(scoring, True, scheme)
    model.save_pretrained(tmp_path)
    loaded = HfAttnForCausalLM.from_pretrained(tmp_path, attn_implementation="eager").eval()
    input_ids, encoder_states = torch.randint(1, 64, (1, 5)), torch.randn(1, 3, 32)
    torch.testing.assert_close(loaded(input_ids, encoder_hidden_states=encoder_states).logits,
                               model(input_ids, encoder_hidden_states=encoder_states).logits)
