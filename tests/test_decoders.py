"""Decoders: `HfAttnForCausalLM` with transformers' caches and `generate()`, and an hf_attn decoder inside
`EncoderDecoderModel`. Every check compares against a second computation: the whole prefix recomputed
without a cache, a manual argmax loop, log-probabilities recomputed from the final sequences."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from helpers import assert_gradients_close, tiny_config_kwargs
from transformers import (
    AutoModelForCausalLM,
    DynamicCache,
    EncoderDecoderCache,
    EncoderDecoderConfig,
    EncoderDecoderModel,
    StaticCache,
)
from transformers.cache_utils import DynamicLayer
from transformers.generation.streamers import BaseStreamer

from hf_attn import POSITION_SCHEMES, HfAttnConfig, HfAttnForCausalLM, HfAttnModel
from hf_attn.caching import GrowingCacheLayer

SCHEMES = list(POSITION_SCHEMES)
SLIDING = dict(sliding_window=2, layer_types=["sliding_attention", "full_attention"])
# The newer schemes' settings (test_positions.py checks each against its paper and transformers): a NoPE layer
# after a RoPE one; ModernBERT's thetas per layer type, p-RoPE on the sliding layers; FIRE's L at the training length;
# CoPE counting within a sliding window, its counts clamped at 3.
NEWER_SETTINGS = {
    "rope_nope-1-0": dict(position_embedding_type="rope_nope", no_rope_layers=[1, 0]),
    "rope-theta-per-layer-type-p-rope": dict(
        position_embedding_type="rope", **SLIDING,
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 160_000.0},
                         "sliding_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.5,
                                               "rope_theta": 10_000.0}}),
    "fire-at-training-length": dict(position_embedding_type="fire", fire_initial_threshold=None),
    "cope-sliding-4-positions": dict(position_embedding_type="cope", **SLIDING, cope_max_positions=4),
}
# Untied, wider-initialised heads: a tiny random model whose head is its embedding mostly repeats the last
# token, which would let a generation test pass without telling positions apart.
VARIED = dict(tie_word_embeddings=False, initializer_range=0.2)


def decoder(seed: int = 0, attn: str = "sdpa", **overrides: object) -> HfAttnForCausalLM:
    torch.manual_seed(seed)
    model = HfAttnForCausalLM(HfAttnConfig(**tiny_config_kwargs(is_decoder=True, **overrides)))
    model.set_attn_implementation(attn)
    return model.eval()


def token_ids(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(1, 64, (batch, length), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------- cached decoding == recomputation

DECODING_SETTINGS = {
    **{scheme: dict(position_embedding_type=scheme) for scheme in SCHEMES},
    "rope-gqa2": dict(position_embedding_type="rope", num_key_value_heads=2),
    "alibi-mqa": dict(position_embedding_type="alibi", num_key_value_heads=1),
    "learned-mqa": dict(position_embedding_type="learned", num_key_value_heads=1),
    "rope-sliding": dict(position_embedding_type="rope", **SLIDING),
    "alibi-sliding-gqa2": dict(position_embedding_type="alibi", num_key_value_heads=2, **SLIDING),
    "sinusoidal-sliding": dict(position_embedding_type="sinusoidal", sliding_window=3),
    "rope-cross": dict(position_embedding_type="rope", add_cross_attention=True),
    "cope-cross-gqa2": dict(position_embedding_type="cope", add_cross_attention=True, num_key_value_heads=2),
    "alibi-cross-sliding-mqa": dict(position_embedding_type="alibi", add_cross_attention=True,
                                    num_key_value_heads=1, **SLIDING),
    **NEWER_SETTINGS,
}


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("setting", list(DECODING_SETTINGS))
def test_cached_decoding_gives_the_logits_of_recomputing_the_prefix(setting: str, attn: str) -> None:
    """A 3-token prompt, then one token at a time through a cache built as `generate()` builds it (from the
    config, so sliding layers start as transformers' window-limited layers): every step's logits equal
    those of the whole sequence run at once without a cache. The second row is left-padded."""
    overrides = DECODING_SETTINGS[setting]
    model = decoder(attn=attn, **overrides)
    input_ids = token_ids(2, 9)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, :2] = 0
    context = {}
    if model.config.add_cross_attention:
        encoder_mask = torch.ones(2, 5, dtype=torch.long)
        encoder_mask[1, 3:] = 0
        context = dict(encoder_hidden_states=torch.randn(2, 5, 32, generator=torch.Generator().manual_seed(1)),
                       encoder_attention_mask=encoder_mask)
    with torch.no_grad():
        expected = model(input_ids=input_ids, attention_mask=attention_mask, **context).logits
        cache = DynamicCache(config=model.config)
        if context:
            cache = EncoderDecoderCache(cache, DynamicCache(config=model.config))
        chunks = [(0, 3), *((t, t + 1) for t in range(3, 9))]
        for start, end in chunks:
            output = model(input_ids=input_ids[:, start:end], attention_mask=attention_mask[:, :end],
                           cache=cache, use_cache=True, **context)
            cache = output.cache
            # row 1's padded positions attend to nothing: compare real positions only
            real = attention_mask[:, start:end].bool()
            torch.testing.assert_close(output.logits[real], expected[:, start:end][real], atol=1e-5, rtol=1e-5)
    assert cache.get_seq_length() == 9


@pytest.mark.parametrize("setting", ["rope-gqa2", "alibi-sliding-gqa2", "rope-cross"])
def test_cached_decoding_stays_exact_while_the_cache_buffer_grows(setting: str, monkeypatch) -> None:  # noqa: ANN001
    """The test above with one spare slot per growth: the buffer moves into a larger one every other step."""
    monkeypatch.setattr(GrowingCacheLayer, "min_room", 1)
    monkeypatch.setattr(GrowingCacheLayer, "growth", 0.0)
    test_cached_decoding_gives_the_logits_of_recomputing_the_prefix(setting, "sdpa")


def test_growing_cache_layer_holds_what_concatenation_holds(monkeypatch) -> None:  # noqa: ANN001
    """Reference: transformers' `DynamicLayer`, which concatenates. Both get the same updates (prompt, single
    tokens, a chunk) and the same cache edits generation makes (crop, beam reordering, batch expansion and
    selection); after each, the keys and values they return and hold are equal. Two spare slots per growth,
    so both the in-place writes and the moves to a larger buffer happen."""
    monkeypatch.setattr(GrowingCacheLayer, "min_room", 2)
    monkeypatch.setattr(GrowingCacheLayer, "growth", 0.0)
    generator = torch.Generator().manual_seed(0)
    growing, reference = GrowingCacheLayer(), DynamicLayer()

    def update(length: int) -> None:
        batch = reference.keys.shape[0] if reference.is_initialized else 2
        keys, values = (torch.randn(batch, 3, length, 4, generator=generator) for _ in range(2))
        for returned, expected in zip(growing.update(keys, values), reference.update(keys, values), strict=True):
            torch.testing.assert_close(returned, expected, atol=0, rtol=0)

    edits = [
        lambda layer: layer.crop(-2),
        lambda layer: layer.reorder_cache(torch.tensor([1, 0])),
        lambda layer: layer.batch_repeat_interleave(2),
        lambda layer: layer.batch_select_indices(torch.tensor([0, 3])),
    ]
    for length in (5, 1, 1, 1, 3, 1):
        update(length)
    for edit in edits:
        edit(growing)
        edit(reference)
        for length in (1, 1, 2):
            update(length)
        assert growing.get_seq_length() == reference.get_seq_length()
        torch.testing.assert_close(growing.keys, reference.keys, atol=0, rtol=0)
        torch.testing.assert_close(growing.values, reference.values, atol=0, rtol=0)


def test_a_decoding_step_writes_into_the_cache_instead_of_copying_it() -> None:
    """Concatenating copies every cached key at every step; the growing layer's keys stay where they are
    (same storage) while there is room, and the step's tokens land after them."""
    model = decoder(position_embedding_type="rope")
    with torch.no_grad():
        cache = model(input_ids=token_ids(1, 6), use_cache=True).cache
        layer = cache.layers[0]
        storage, prompt_keys = layer.keys.data_ptr(), layer.keys.clone()
        for step in range(3):
            cache = model(input_ids=token_ids(1, 1, seed=step), cache=cache, use_cache=True).cache
    assert layer.keys.data_ptr() == storage and layer.get_seq_length() == 9
    torch.testing.assert_close(layer.keys[:, :, :6], prompt_keys, atol=0, rtol=0)


def test_a_cache_filled_under_inference_mode_decodes_on_under_no_grad() -> None:
    """Tensors made under `torch.inference_mode` cannot be written in place outside it: the next step moves the
    cache into a new buffer, and its logits are still those of recomputing the prefix."""
    model = decoder(position_embedding_type="rope")
    input_ids = token_ids(1, 6)
    with torch.inference_mode():
        cache = model(input_ids=input_ids[:, :5], use_cache=True).cache
    with torch.no_grad():
        step = model(input_ids=input_ids[:, 5:], cache=cache, use_cache=True).logits[:, -1]
        expected = model(input_ids=input_ids).logits[:, -1]
    torch.testing.assert_close(step, expected, atol=1e-5, rtol=1e-5)


def test_a_cache_filled_while_autograd_records_still_backpropagates() -> None:
    """Writing into a buffer in place would change tensors the backward pass saved: with gradients the
    cache concatenates, and a loss over two cached steps has the gradient of the same loss computed at once."""
    model = decoder(position_embedding_type="rope").train()
    input_ids = token_ids(1, 5)
    first = model(input_ids=input_ids[:, :3], use_cache=True)
    second = model(input_ids=input_ids[:, 3:], cache=first.cache, use_cache=True)
    (first.logits.sum() + second.logits.sum()).backward()
    stepwise = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    model(input_ids=input_ids).logits.sum().backward()
    assert_gradients_close(stepwise, {name: p.grad for name, p in model.named_parameters()})


def test_the_cache_under_its_transformers_4_name_past_key_values_is_used_with_a_deprecation_warning() -> None:
    """`past_key_values=` (what transformers 4.x callers pass) is the cache, as in transformers' own models: the
    step's logits are those of recomputing the prefix, not of the new token alone."""
    model = decoder(position_embedding_type="rope")
    input_ids = token_ids(1, 6)
    with torch.no_grad():
        cache = model(input_ids=input_ids[:, :5], use_cache=True).cache
        with pytest.warns(FutureWarning, match="past_key_values.*Use `cache` instead"):
            step = model(input_ids=input_ids[:, 5:], past_key_values=cache).logits[:, -1]
        expected = model(input_ids=input_ids).logits[:, -1]
    torch.testing.assert_close(step, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_a_cached_decoding_step_exports_with_transformers_dynamo_exporter() -> None:
    """transformers' `DynamoExporter` (`torch.export`) captures one decoding step over a cache; the program then
    decodes after prefixes of other lengths with the logits of recomputing the prefix."""
    from transformers.exporters.exporter_dynamo import DynamoConfig, DynamoExporter

    model = decoder(position_embedding_type="rope", num_key_value_heads=2)
    input_ids = token_ids(2, 9)

    def cache_of_prefix(length: int) -> DynamicCache:
        with torch.no_grad():
            return model(input_ids=input_ids[:, :length], use_cache=True).cache

    example = {"input_ids": input_ids[:, 5:6], "cache": cache_of_prefix(5), "use_cache": True}
    program, _ = DynamoExporter().export_program(model, example, DynamoConfig(dynamic=True))
    with torch.no_grad():
        expected = model(input_ids=input_ids).logits
        for length in (3, 5, 8):
            logits = program.module()(input_ids=input_ids[:, length : length + 1], cache=cache_of_prefix(length)).logits
            torch.testing.assert_close(logits[:, -1], expected[:, length], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("setting", ["rope", "alibi", "learned", "rope-sliding", "alibi-cross-sliding-mqa"])
def test_no_position_sees_the_future(setting: str) -> None:
    """Changing token t changes the logits at t and after, never before."""
    model = decoder(**DECODING_SETTINGS[setting])
    context = {"encoder_hidden_states": torch.randn(1, 4, 32)} if model.config.add_cross_attention else {}
    input_ids = token_ids(1, 10)
    changed = input_ids.clone()
    changed[0, 6] = 63 if input_ids[0, 6] != 63 else 62
    with torch.no_grad():
        before, after = (model(input_ids=ids, **context).logits for ids in (input_ids, changed))
    torch.testing.assert_close(after[:, :6], before[:, :6], atol=0, rtol=0)
    assert not torch.allclose(after[:, 6:], before[:, 6:])


# ---------------------------------------------------------------- generate()


def argmax_loop(model: HfAttnForCausalLM, input_ids: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy decoding by hand: the whole sequence recomputed, no cache, at every step."""
    with torch.no_grad():
        for _ in range(new_tokens):
            next_token = model(input_ids=input_ids).logits[:, -1].argmax(dim=-1, keepdim=True)
            input_ids = torch.cat([input_ids, next_token], dim=1)
    return input_ids


@pytest.mark.parametrize("setting", ["none", "sinusoidal", "learned", "rope", "alibi", "rope-sliding", "alibi-mqa",
                                     *NEWER_SETTINGS])
def test_greedy_generate_equals_a_manual_argmax_loop(setting: str) -> None:
    model = decoder(**DECODING_SETTINGS[setting], **VARIED)
    prompt = token_ids(2, 4)
    generated = model.generate(prompt, max_new_tokens=8, do_sample=False)
    assert torch.equal(generated, argmax_loop(model, prompt, 8))
    assert generated[:, 4:].unique().numel() > 1  # not one token repeated: the loop has something to match


@pytest.mark.parametrize("scheme", SCHEMES)
def test_batched_generation_with_left_padding_equals_one_prompt_at_a_time(scheme: str) -> None:
    model = decoder(position_embedding_type=scheme, **VARIED)
    short, long = token_ids(1, 3, seed=1), token_ids(1, 6, seed=2)
    batch = torch.cat([torch.cat([torch.zeros(1, 3, dtype=torch.long), short], dim=1), long])
    attention_mask = (torch.arange(6) >= torch.tensor([[3], [0]])).long()
    together = model.generate(batch, attention_mask=attention_mask, max_new_tokens=6, do_sample=False, pad_token_id=0)
    for row, prompt in enumerate((short, long)):
        alone = model.generate(prompt, max_new_tokens=6, do_sample=False, pad_token_id=0)
        assert torch.equal(together[row, 6:], alone[0, prompt.shape[1]:])


def test_beam_search_with_the_cache_scores_its_beams_as_recomputation_does() -> None:
    """Beams are reordered inside the cache at every step: the beams and their scores (summed log-probs,
    `length_penalty=0`) equal beam search without a cache and the log-probs of the returned sequences
    recomputed from scratch. (`num_beams=1` is greedy search itself in transformers: same code path.)"""
    model = decoder(position_embedding_type="alibi", num_key_value_heads=2, **VARIED)
    prompt = token_ids(2, 3)
    settings = dict(max_new_tokens=5, num_beams=4, num_return_sequences=4, length_penalty=0.0, do_sample=False,
                    output_scores=True, return_dict_in_generate=True)
    cached = model.generate(prompt, **settings)
    uncached = model.generate(prompt, use_cache=False, **settings)
    assert torch.equal(cached.sequences, uncached.sequences)
    with torch.no_grad():
        log_probs = model(input_ids=cached.sequences).logits.log_softmax(dim=-1)[:, 2:-1]
    recomputed = log_probs.gather(-1, cached.sequences[:, 3:, None]).squeeze(-1).sum(dim=-1)
    torch.testing.assert_close(cached.sequences_scores, recomputed, atol=1e-4, rtol=1e-4)
    assert len({tuple(row) for row in cached.sequences[:4].tolist()}) == 4


def test_sampling_is_reproducible_with_a_seed_and_the_same_with_or_without_the_cache() -> None:
    model = decoder(position_embedding_type="rope", **VARIED)
    prompt = token_ids(3, 4)
    settings = dict(max_new_tokens=10, do_sample=True, temperature=0.8, top_k=20, top_p=0.95)

    def sample(seed: int, **extra: object) -> torch.Tensor:
        torch.manual_seed(seed)
        return model.generate(prompt, **settings, **extra)

    assert torch.equal(sample(3), sample(3))
    assert torch.equal(sample(3), sample(3, use_cache=False))
    assert not torch.equal(sample(3), sample(4))
    assert not torch.equal(sample(3), model.generate(prompt, max_new_tokens=10, do_sample=False))


STATIC_CASES = [
    ("rope", "sdpa"), ("learned-mqa", "sdpa"), ("rope-gqa2", "eager"), ("rope_nope-1-0", "sdpa"), ("cope", "sdpa"),
    *(pytest.param(setting, attn, marks=pytest.mark.slow) for setting, attn in
      [("none", "sdpa"), ("learned", "eager"), ("rope-gqa2", "sdpa"), ("rope", "eager")]),
]


@pytest.mark.parametrize(("setting", "attn"), STATIC_CASES)
def test_a_static_cache_generates_the_tokens_of_recomputing_the_prefix(setting: str, attn: str) -> None:
    """`cache_implementation="static"` (the cache `torch.compile` decodes with: a fixed number of slots, written
    in place): greedy tokens equal the manual argmax loop, left padding included, and sampling with a seed
    draws what generation without a cache draws."""
    model = decoder(attn=attn, **DECODING_SETTINGS[setting], **VARIED)
    prompt = token_ids(2, 5)
    attention_mask = torch.ones_like(prompt)
    attention_mask[1, :2] = 0
    greedy = model.generate(prompt, attention_mask=attention_mask, max_new_tokens=8, do_sample=False,
                            cache_implementation="static", pad_token_id=0)
    alone = model.generate(prompt[1:, 2:], max_new_tokens=8, do_sample=False, cache_implementation="static")
    assert torch.equal(greedy[:1], argmax_loop(model, prompt[:1], 8))
    assert torch.equal(greedy[1:, 5:], argmax_loop(model, prompt[1:, 2:], 8)[:, 3:])
    assert torch.equal(alone[:, 3:], greedy[1:, 5:])
    settings = dict(max_new_tokens=10, do_sample=True, temperature=0.8, top_k=20)
    torch.manual_seed(3)
    sampled = model.generate(prompt, cache_implementation="static", **settings)
    torch.manual_seed(3)
    assert torch.equal(sampled, model.generate(prompt, use_cache=False, **settings))


@pytest.mark.slow
def test_a_compiled_static_cache_generates_the_tokens_of_recomputing_the_prefix() -> None:
    """`generate()` compiles the decoding step (fullgraph) when the cache is static; on the CPU it does so when the
    compile config says so."""
    from transformers import CompileConfig

    model = decoder(position_embedding_type="rope", num_key_value_heads=2, **VARIED)
    prompt = token_ids(2, 5)
    compile_config = CompileConfig(fullgraph=True, dynamic=False)
    compile_config._compile_all_devices = True  # transformers' switch for compiling on devices other than GPUs
    compiled = model.generate(prompt, max_new_tokens=8, do_sample=False, cache_implementation="static",
                              compile_config=compile_config)
    assert hasattr(model, "_compiled_call")  # the steps ran compiled
    assert torch.equal(compiled, argmax_loop(model, prompt, 8))


class Collector(BaseStreamer):
    def __init__(self) -> None:
        self.pushed: list[torch.Tensor] = []
        self.ended = False

    def put(self, value: torch.Tensor) -> None:
        self.pushed.append(value.reshape(-1))

    def end(self) -> None:
        self.ended = True


def test_streamer_receives_the_prompt_then_each_new_token() -> None:
    model = decoder(position_embedding_type="sinusoidal", **VARIED)
    prompt = token_ids(1, 4)
    streamer = Collector()
    generated = model.generate(prompt, max_new_tokens=5, do_sample=False, streamer=streamer)
    assert streamer.ended
    assert [len(pushed) for pushed in streamer.pushed] == [4, 1, 1, 1, 1, 1]
    assert torch.equal(torch.cat(streamer.pushed), generated[0])


def test_eos_stops_each_row_and_pads_after_it() -> None:
    model = decoder(position_embedding_type="rope", **VARIED)
    prompt = token_ids(2, 3)
    free = model.generate(prompt, max_new_tokens=8, do_sample=False)
    eos = int(free[0, 5])  # row 0's third new token
    stopped = model.generate(prompt, max_new_tokens=8, do_sample=False, eos_token_id=eos, pad_token_id=0)
    first_eos = [int((row[3:] == eos).nonzero()[0]) + 3 if (row[3:] == eos).any() else None for row in free]
    for row, position in enumerate(first_eos):
        if position is None:
            assert torch.equal(stopped[row, : free.shape[1]], free[row])
        else:
            assert torch.equal(stopped[row, : position + 1], free[row, : position + 1])
            assert (stopped[row, position + 1 :] == 0).all()
    assert first_eos[0] <= 5 < stopped.shape[1] - 1  # row 0 stopped early: padding follows its eos


# ---------------------------------------------------------------- cache size


def test_the_cache_of_gqa_and_mqa_is_heads_over_kv_heads_times_smaller() -> None:
    def cache_bytes(kv_heads: int) -> int:
        model = decoder(position_embedding_type="rope", num_key_value_heads=kv_heads)
        with torch.no_grad():
            cache = model(input_ids=token_ids(2, 7), use_cache=True).cache
        return sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))

    full = cache_bytes(4)
    assert full == 2 * 2 * 2 * 7 * 32 * 4  # layers x (K, V) x batch x tokens x hidden x fp32 bytes
    assert full / cache_bytes(2) == 2
    assert full / cache_bytes(1) == 4


# ---------------------------------------------------------------- saving and loading, tied or untied heads


@pytest.mark.parametrize("tied", [True, False])
def test_causal_lm_saves_and_loads_with_its_head_tied_or_not(tmp_path: Path, tied: bool) -> None:
    model = decoder(position_embedding_type="alibi", tie_word_embeddings=tied)
    assert (model.lm_head.weight is model.model.embed_tokens.weight) == tied
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is HfAttnForCausalLM
    assert (loaded.lm_head.weight is loaded.model.embed_tokens.weight) == tied
    prompt = token_ids(1, 5)
    assert torch.equal(loaded.generate(prompt, max_new_tokens=4, do_sample=False),
                       model.generate(prompt, max_new_tokens=4, do_sample=False))


REMOTE_GENERATE = textwrap.dedent("""
    import json, sys
    sys.modules["hf_attn"] = None  # no hf_attn package at all
    import torch
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(sys.argv[1], trust_remote_code=True).eval()
    assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
    prompt = torch.tensor(json.load(open(sys.argv[2])))
    print(json.dumps(model.generate(prompt, max_new_tokens=5, do_sample=False).tolist()))
""")


REMOTE_SETTINGS = {"rope-gqa2-sliding": dict(position_embedding_type="rope", num_key_value_heads=2, **SLIDING),
                   "rope-gqa2-sliding-abacus": dict(position_embedding_type="rope", num_key_value_heads=2, **SLIDING,
                                                    position_id_rule="abacus", digit_token_ids=list(range(10, 20))),
                   **NEWER_SETTINGS}


@pytest.mark.parametrize("setting", list(REMOTE_SETTINGS))
def test_causal_lm_generates_with_remote_code_where_hf_attn_is_absent(setting: str, tmp_path: Path) -> None:
    model = decoder(**REMOTE_SETTINGS[setting], **VARIED)
    model.save_pretrained(tmp_path / "lm")
    prompt = token_ids(1, 4)
    (tmp_path / "prompt.json").write_text(json.dumps(prompt.tolist()))
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf_home"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    command = [sys.executable, "-c", REMOTE_GENERATE, str(tmp_path / "lm"), str(tmp_path / "prompt.json")]
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    expected = model.generate(prompt, max_new_tokens=5, do_sample=False)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == expected.tolist()


# ---------------------------------------------------------------- bad input


def test_bad_input_is_a_clear_error() -> None:
    model = decoder(position_embedding_type="learned")
    with pytest.raises(ValueError, match="max_position_embeddings.*prompt \\+ new tokens"):
        model.generate(token_ids(1, 30), max_new_tokens=5, do_sample=False)
    with pytest.raises(ValueError, match="empty prompt"):
        model.generate(torch.zeros(1, 0, dtype=torch.long), max_new_tokens=3)
    for overrides in (SLIDING, dict(add_cross_attention=True)):
        with pytest.raises(ValueError, match="static cache .* full-attention self-attention only .*no cross"):
            model = decoder(position_embedding_type="rope", **overrides)
            cache = StaticCache(config=model.config, max_cache_len=8)
            if "add_cross_attention" in overrides:
                cache = EncoderDecoderCache(cache, DynamicCache())
            model(input_ids=token_ids(1, 3), cache=cache)
    with pytest.raises(ValueError, match="alibi.*static cache"):
        model = decoder(position_embedding_type="alibi")
        model(input_ids=token_ids(1, 3), cache=StaticCache(config=model.config, max_cache_len=8))
    with pytest.raises(ValueError, match="is_decoder=True"):
        HfAttnForCausalLM(HfAttnConfig(**tiny_config_kwargs()))
    with pytest.raises(ValueError, match="causal model"):
        HfAttnModel(HfAttnConfig(**tiny_config_kwargs()))(input_ids=token_ids(1, 3), cache=DynamicCache())


def test_use_cache_is_the_configs_for_a_decoder_at_inference_and_ignored_by_an_encoder() -> None:
    """As BERT: a decoder keeps a cache when `config.use_cache` says so (not while training, where nothing reads
    it), an encoder never keeps one and accepts `use_cache=True` quietly, with the same outputs."""
    ids = token_ids(2, 5)
    model = decoder(position_embedding_type="rope")
    assert model.config.use_cache and isinstance(model(ids).cache, DynamicCache)
    assert model(ids, use_cache=False).cache is None
    assert model.train()(ids).cache is None and model(ids, use_cache=True).cache is not None
    model.config.use_cache = False
    assert model.eval()(ids).cache is None
    torch.manual_seed(0)
    encoder = HfAttnModel(HfAttnConfig(**tiny_config_kwargs(attention_dropout=0.0, hidden_dropout=0.0))).eval()
    cached = encoder(ids, use_cache=True)
    assert cached.cache is None
    assert torch.equal(cached.last_hidden_state, encoder(ids).last_hidden_state)


def test_an_empty_prompt_starts_from_the_bos_token_and_beams_may_outnumber_the_vocabulary() -> None:
    """Documented behaviours: no prompt and a `bos_token_id` generate from that token; more beams than
    vocabulary entries still return the best-scoring beam (transformers keeps 2 x beams candidates)."""
    model = decoder(position_embedding_type="rope", **VARIED)
    from_bos = model.generate(max_new_tokens=4, do_sample=False, bos_token_id=5)
    assert torch.equal(from_bos, argmax_loop(model, torch.tensor([[5]]), 4))
    beams = model.generate(token_ids(1, 3), max_new_tokens=2, num_beams=80, do_sample=False)
    assert beams.shape == (1, 5)


# ---------------------------------------------------------------- encoder-decoder


def encoder_decoder(seed: int = 0, vocab: dict | None = None, **decoder_overrides: object) -> EncoderDecoderModel:
    """An ALiBi encoder and a RoPE decoder; `vocab`: vocab_size and pad_token_id of both (default 64 and 0)."""
    vocab = vocab or {}
    encoder_config = HfAttnConfig(**tiny_config_kwargs(position_embedding_type="alibi", **vocab))
    decoder_config = HfAttnConfig(**tiny_config_kwargs(**{"position_embedding_type": "rope", **VARIED, **vocab,
                                                          **decoder_overrides}))
    config = EncoderDecoderConfig.from_encoder_decoder_configs(
        encoder_config, decoder_config, decoder_start_token_id=1, pad_token_id=vocab.get("pad_token_id", 0)
    )
    torch.manual_seed(seed)
    return EncoderDecoderModel(config=config).eval()


def source_batch() -> dict[str, torch.Tensor]:
    input_ids = token_ids(2, 7, seed=5)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 4:] = 0
    return {"input_ids": input_ids.masked_fill(attention_mask == 0, 0), "attention_mask": attention_mask}


@pytest.mark.parametrize("decoder_overrides", [dict(), dict(num_key_value_heads=1, **SLIDING)])
def test_encoder_decoder_generates_with_the_cache_as_without_it(decoder_overrides: dict) -> None:
    model = encoder_decoder(**decoder_overrides)
    assert isinstance(model.encoder, HfAttnModel) and isinstance(model.decoder, HfAttnForCausalLM)
    source = source_batch()
    cached = model.generate(**source, max_new_tokens=8, do_sample=False, return_dict_in_generate=True)
    assert isinstance(cached.cache, EncoderDecoderCache)
    assert cached.cache.cross_attention_cache.get_seq_length() == 7  # the encoder's keys, projected once
    uncached = model.generate(**source, max_new_tokens=8, do_sample=False, use_cache=False)
    assert torch.equal(cached.sequences, uncached)
    # and by hand: argmax over the decoder's logits for the sequence so far, recomputed every step
    decoded = torch.ones(2, 1, dtype=torch.long)
    with torch.no_grad():
        for _ in range(8):
            logits = model(**source, decoder_input_ids=decoded).logits[:, -1]
            decoded = torch.cat([decoded, logits.argmax(dim=-1, keepdim=True)], dim=1)
    assert torch.equal(cached.sequences, decoded)


def test_encoder_decoder_trains_with_teacher_forcing_saves_and_loads(tmp_path: Path) -> None:
    from datasets import Dataset
    from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments

    model = encoder_decoder()
    model.train()
    source = source_batch()
    labels = token_ids(2, 5, seed=6)
    rows = [{"input_ids": source["input_ids"][i], "attention_mask": source["attention_mask"][i],
             "labels": labels[i]} for i in range(2)]
    dataset = Dataset.from_list(rows * 8).with_format("torch")
    with torch.no_grad():
        before = model(**source, labels=labels).loss.item()
    args = Seq2SeqTrainingArguments(output_dir=str(tmp_path / "run"), per_device_train_batch_size=4, num_train_epochs=3,
                                    learning_rate=3e-3, report_to=[], save_strategy="no", use_cpu=True,
                                    logging_strategy="no", disable_tqdm=True)
    Seq2SeqTrainer(model=model, args=args, train_dataset=dataset).train()
    model.eval()
    with torch.no_grad():
        after = model(**source, labels=labels).loss.item()
        # teacher forcing: the loss is the cross-entropy of the labels under logits fed the shifted labels
        shifted = torch.cat([torch.ones(2, 1, dtype=torch.long), labels[:, :-1]], dim=1)
        logits = model(**source, decoder_input_ids=shifted).logits
    assert after < before / 2
    teacher_forced = torch.nn.functional.cross_entropy(logits.reshape(-1, 64), labels.reshape(-1))
    torch.testing.assert_close(after, teacher_forced.item())

    model.save_pretrained(tmp_path / "seq2seq")
    loaded = EncoderDecoderModel.from_pretrained(tmp_path / "seq2seq").eval()
    assert torch.equal(loaded.generate(**source, max_new_tokens=6, do_sample=False),
                       model.generate(**source, max_new_tokens=6, do_sample=False))


REMOTE_SEQ2SEQ = textwrap.dedent("""
    import json, sys
    sys.modules["hf_attn"] = None  # no hf_attn package at all
    import torch
    from transformers import AutoModel, AutoModelForCausalLM, EncoderDecoderConfig, EncoderDecoderModel
    folder = sys.argv[1]
    encoder = AutoModel.from_pretrained(f"{folder}/encoder", trust_remote_code=True)
    decoder = AutoModelForCausalLM.from_pretrained(f"{folder}/decoder", trust_remote_code=True)
    if sys.argv[3] == "config":
        config = EncoderDecoderConfig(encoder=encoder.config, decoder=decoder.config, decoder_start_token_id=1,
                                      pad_token_id=0)
        model = EncoderDecoderModel(config=config, encoder=encoder, decoder=decoder).eval()
    else:
        model = EncoderDecoderModel(encoder=encoder, decoder=decoder).eval()
        for settings in (model.config, model.generation_config):  # training reads the one, generate() the other
            settings.decoder_start_token_id, settings.pad_token_id = 1, 0
    source = {name: torch.tensor(values) for name, values in json.load(open(sys.argv[2])).items()}
    print(json.dumps(model.generate(**source, max_new_tokens=6, do_sample=False).tolist()))
""")


@pytest.mark.parametrize("route", ["config", pytest.param("direct", marks=pytest.mark.slow)])
def test_encoder_decoder_loads_with_remote_code_where_hf_attn_is_absent(route: str, tmp_path: Path) -> None:
    """transformers resolves the sub-configs of a saved `EncoderDecoderModel` folder by model type from its
    own registry: the encoder and the decoder are saved as two folders (each with its code and `auto_map`) and
    joined again, through an `EncoderDecoderConfig` of the loaded models' configs or directly with
    `EncoderDecoderModel(encoder=..., decoder=...)` (which needs the remote code to register its model type)."""
    model = encoder_decoder(num_key_value_heads=2, **SLIDING)
    model.encoder.save_pretrained(tmp_path / "seq2seq" / "encoder")
    model.decoder.save_pretrained(tmp_path / "seq2seq" / "decoder")
    source = source_batch()
    (tmp_path / "source.json").write_text(json.dumps({name: value.tolist() for name, value in source.items()}))
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf_home"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    command = [sys.executable, "-c", REMOTE_SEQ2SEQ, str(tmp_path / "seq2seq"), str(tmp_path / "source.json"), route]
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    expected = model.generate(**source, max_new_tokens=6, do_sample=False)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == expected.tolist()


# ---------------------------------------------------------------- hf-attn generate


@pytest.fixture(scope="module")
def tokenizer():  # noqa: ANN201 - a HfAttnTokenizerFast
    """A Week 3 tokenizer trained on a few words: the bytes, a few merges and [PAD]."""
    from hf_attn.week3 import train_week3_tokenizer

    return train_week3_tokenizer(["a good film", "a bad film", "good good bad"] * 5, vocab_size=270, max_seq=32)


def vocabulary(tokenizer) -> dict:  # noqa: ANN001
    return dict(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)


def test_generate_command_prints_the_continuation(
    tokenizer, tmp_path: Path, capsys: pytest.CaptureFixture[str]  # noqa: ANN001
) -> None:
    from hf_attn import cli

    model = decoder(position_embedding_type="rope", **vocabulary(tokenizer), **VARIED)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    prompt = tokenizer("a good", return_tensors="pt")["input_ids"]
    greedy = model.generate(prompt, max_new_tokens=6, do_sample=False)[0, prompt.shape[1]:]
    cli.main(["generate", "--model", str(tmp_path), "--max-new-tokens", "6", "a good"])
    assert capsys.readouterr().out == tokenizer.decode(greedy) + "\n" != "\n"

    sampling = ["generate", "--model", str(tmp_path), "--do-sample", "--temperature", "0.7", "--top-k", "10",
                "--seed", "3", "--max-new-tokens", "8", "a good"]
    cli.main(sampling)
    cli.main(sampling)
    first, second = capsys.readouterr().out.splitlines()
    assert first == second
    torch.manual_seed(3)
    sampled = model.generate(prompt, max_new_tokens=8, do_sample=True, temperature=0.7, top_k=10)
    assert first == tokenizer.decode(sampled[0, prompt.shape[1]:])

    with pytest.raises(SystemExit) as exit_info:
        cli.main(["generate", "--model", str(tmp_path), ""])
    assert exit_info.value.code == 2
    assert "no tokens and the model has no bos_token_id" in capsys.readouterr().err


def test_generate_command_runs_an_encoder_decoder_folder(
    tokenizer, tmp_path: Path, capsys: pytest.CaptureFixture[str]  # noqa: ANN001
) -> None:
    from hf_attn import cli

    model = encoder_decoder(vocab=vocabulary(tokenizer))
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    source = tokenizer("a bad film", return_tensors="pt")
    expected = model.generate(**source, max_new_tokens=5, num_beams=3, do_sample=False)[0, 1:]
    cli.main(["generate", "--model", str(tmp_path), "--max-new-tokens", "5", "--num-beams", "3", "a bad film"])
    assert capsys.readouterr().out == tokenizer.decode(expected) + "\n" != "\n"


@pytest.mark.parametrize("command", [["generate", "a good"], ["perplexity", "--lengths", "16", "--dataset", "sample"]])
def test_generate_and_perplexity_name_an_encoder_folder_instead_of_failing_inside_the_model(
    command: list[str], tokenizer, tmp_path: Path, capsys: pytest.CaptureFixture[str]  # noqa: ANN001
) -> None:
    from hf_attn import HfAttnForMaskedLM, cli

    HfAttnForMaskedLM(HfAttnConfig(**tiny_config_kwargs(**vocabulary(tokenizer)))).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command[0], "--model", str(tmp_path), *command[1:]])
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and "holds an encoder (HfAttnForMaskedLM)" in error and "causal-LM folder" in error


@pytest.mark.parametrize(("command", "wanted"), [
    (["perplexity", "--lengths", "16", "--dataset", "sample"], "causal-LM folder"),
    (["predict", "a good film"], "classifier folder"),
    (["evaluate", "--dataset", "sample", "--limit", "2"], "classifier folder"),
    (["probe"], "classifier folder"),
])
def test_an_encoder_decoder_folder_is_named_instead_of_listing_every_config_the_auto_class_knows(
    command: list[str], wanted: str, tokenizer, tmp_path: Path, capsys: pytest.CaptureFixture[str]  # noqa: ANN001
) -> None:
    from hf_attn import cli

    encoder_decoder(vocab=vocabulary(tokenizer)).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    capsys.readouterr()  # the save's progress bar
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command[0], "--model", str(tmp_path), *command[1:]])
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(error.splitlines()) == 1, error
    assert "holds an encoder-decoder (EncoderDecoderModel)" in error and wanted in error


LONG_PROMPT = "a good film, a bad film " * 8  # more tokens than the tokenizer's model_max_length (32)


def test_generate_command_reads_the_whole_prompt_with_a_scheme_that_extrapolates(
    tokenizer, tmp_path: Path, capsys: pytest.CaptureFixture[str]  # noqa: ANN001
) -> None:
    """A continuation follows the prompt's end: a RoPE model reads all of a prompt longer than its training
    length (the tokenizer's default truncation would keep its start), without a warning."""
    from hf_attn import cli

    model = decoder(position_embedding_type="rope", **vocabulary(tokenizer), **VARIED)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    prompt = tokenizer(LONG_PROMPT, truncation=False, return_tensors="pt")["input_ids"]
    assert prompt.shape[1] > tokenizer.model_max_length
    whole = model.generate(prompt, max_new_tokens=6, do_sample=False)[0, prompt.shape[1]:]
    start = model.generate(prompt[:, :32], max_new_tokens=6, do_sample=False)[0, 32:]
    assert not torch.equal(whole, start)  # the test tells the two apart
    capsys.readouterr()
    cli.main(["generate", "--model", str(tmp_path), "--max-new-tokens", "6", LONG_PROMPT])
    captured = capsys.readouterr()
    assert captured.out == tokenizer.decode(whole) + "\n"
    assert "warn" not in captured.err.lower() and "longer than the specified maximum" not in captured.err

    cli.main(["generate", "--model", str(tmp_path), "--max-new-tokens", "6", "--max-length", "5", LONG_PROMPT])
    end = model.generate(prompt[:, -5:], max_new_tokens=6, do_sample=False)[0, 5:]
    assert capsys.readouterr().out == tokenizer.decode(end) + "\n"


def test_generate_command_with_learned_positions_refuses_a_long_prompt_in_one_line_or_keeps_its_end(
    tokenizer, tmp_path: Path, capsys: pytest.CaptureFixture[str]  # noqa: ANN001
) -> None:
    """Learned positions cannot read past their table: the command names the prompt's length, the limit and
    the --max-length that fits (the prompt's last tokens plus the new ones), and continues with that."""
    from hf_attn import cli

    model = decoder(position_embedding_type="learned", **vocabulary(tokenizer), **VARIED)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    prompt = tokenizer(LONG_PROMPT, truncation=False, return_tensors="pt")["input_ids"]
    command = ["generate", "--model", str(tmp_path), "--max-new-tokens", "6", LONG_PROMPT]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(command)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "Traceback" not in error and "warn" not in error.lower()
    assert f"the prompt has {prompt.shape[1]} tokens" in error and "cover 32" in error and "--max-length 27" in error

    cli.main([*command[:-1], "--max-length", "27", LONG_PROMPT])
    end = model.generate(prompt[:, -27:], max_new_tokens=6, do_sample=False)[0, 27:]
    assert capsys.readouterr().out == tokenizer.decode(end) + "\n"
    with pytest.raises(SystemExit):
        cli.main(["generate", "--model", str(tmp_path), "--max-new-tokens", "33", "a good"])
    assert "--max-new-tokens 33 is more than the 32 learned positions" in capsys.readouterr().err


def test_generate_command_checks_both_halves_of_an_encoder_decoder_against_their_learned_positions() -> None:
    """The encoder reads the prompt; the decoder its start token and every new token but the last."""
    from hf_attn.commands.generate import check_generation_fits

    halves = {name: HfAttnConfig(**tiny_config_kwargs(position_embedding_type="learned", **settings))
              for name, settings in (("encoder", {}), ("decoder", dict(is_decoder=True, add_cross_attention=True)))}
    config = EncoderDecoderConfig(**halves)
    check_generation_fits(config, 32, 32)
    with pytest.raises(ValueError, match="prompt has 33 tokens but the encoder's learned positions cover 32; pass "
                                         "--max-length 32"):
        check_generation_fits(config, 33, 5)
    with pytest.raises(ValueError, match="--max-new-tokens 33 is more than the 32 learned positions"):
        check_generation_fits(config, 3, 33)
