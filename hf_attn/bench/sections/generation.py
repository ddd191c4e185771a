"""The `generation` section: greedy `generate()` speed with and without the KV cache, and the cache's size,
for hf-attn decoders beside transformers' `LlamaForCausalLM` of the same architecture.

Llama is pre-norm RMSNorm, RoPE on halves, a SwiGLU FFN, no attention biases and a token table tied to
the head here; hf-attn is built the same way (its FFN keeps biases, so Llama gets `mlp_bias=True`). For
every key/value head count (MHA, GQA, MQA) one Llama and two hf-attn models (RoPE, ALiBi) share the
same weights: `copy_to_llama` writes hf-attn's into Llama, so hf-attn RoPE and Llama compute the same
function, and any difference in speed is the code's, not the model's.

Each case (context length, batch) times, interleaved over the models as the other sections do:

* `prefill`: one forward pass over the prompt that fills the cache (what `generate()` does first);
* `cached`: `generate(max_new_tokens=N)`, greedy, with the cache (the prompt's forward pass included);
* `decode`: the cached per-token cost, from `generate()` of N tokens minus `generate()` of 1 token in the
  same repeat, over N - 1 tokens: the steps after the prompt, with `generate()`'s own per-step work;
* `step`: the model alone, N - 1 cached forward passes of one token after the prompt (no `generate()`
  around them), per pass: `decode` minus `step` is what `generate()` adds to every token, the same code
  for every model;
* `uncached`: `generate(use_cache=False)`: every step runs the whole prefix again.

The cache's size is measured, not computed: the bytes of the key and value tensors that the prompt's
forward pass leaves in the cache.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from ...configuration_hf_attn import HfAttnConfig
from ...modeling_hf_attn import HfAttnForCausalLM
from ...timing import interleaved_times, summarize
from ..markdown import ratio, table
from ..profiling import operators_table, top_operators
from .base import BenchSection, option

if TYPE_CHECKING:  # the settings gather every section's fields
    from ..settings import BenchSettings

LLAMA = "Llama"
LLAMA_SCHEME = "rope"  # the hf-attn scheme Llama positions with: its rows in the tables, and the profiled pair


def decoder_config(settings: BenchSettings, scheme: str, kv_heads: int, max_length: int) -> HfAttnConfig:
    """An hf-attn decoder of Llama's architecture at the bench's shape, without dropout."""
    return HfAttnConfig(
        vocab_size=settings.generation_vocab_size,
        hidden_size=settings.hidden_size,
        num_hidden_layers=settings.num_hidden_layers,
        num_attention_heads=settings.num_attention_heads,
        num_key_value_heads=kv_heads,
        intermediate_size=settings.intermediate_size,
        hidden_act="swiglu",
        norm_type="rmsnorm",
        norm_position="pre",
        position_embedding_type=scheme,
        rope_layout="halves",
        max_position_embeddings=max_length,
        attention_bias=False,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        is_decoder=True,
        tie_word_embeddings=True,
        pad_token_id=settings.generation_vocab_size - 1,
    )


def build_llama(config: HfAttnConfig) -> nn.Module:
    """transformers' `LlamaForCausalLM` with exactly the architecture of the hf-attn decoder `config`."""
    from transformers import LlamaConfig, LlamaForCausalLM

    llama_config = LlamaConfig(
        vocab_size=config.vocab_size,
        hidden_size=config.hidden_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads,
        head_dim=config.head_dim,
        intermediate_size=config.intermediate_size,
        hidden_act="silu",
        rms_norm_eps=config.norm_eps,
        max_position_embeddings=config.max_position_embeddings,
        rope_parameters=dict(config.rope_parameters or {"rope_type": "default", "rope_theta": 10_000.0}),
        attention_bias=config.attention_bias,
        mlp_bias=True,  # hf-attn's FFN projections have biases
        attention_dropout=0.0,
        tie_word_embeddings=config.tie_word_embeddings,
        pad_token_id=config.pad_token_id,
        bos_token_id=None,
        eos_token_id=None,
    )
    return LlamaForCausalLM(llama_config)


@torch.no_grad()
def copy_to_llama(source: HfAttnForCausalLM, llama: nn.Module) -> None:
    """Write the hf-attn decoder's weights into a Llama of the same architecture (`build_llama`).

    hf-attn fuses Q, K and V into `qkv_proj` and SwiGLU's gate and up branches into `up_proj` (gate first);
    Llama keeps them apart. Everything else maps one to one.
    """
    config = source.config
    if not config.position_scheme.takes_rope_parameters or config.rope_layout != "halves" or config.attention_bias:
        raise ValueError("copy_to_llama needs an hf-attn decoder with RoPE on halves and no attention biases.")
    target = llama.model
    target.embed_tokens.weight.copy_(source.model.embed_tokens.weight)
    target.norm.weight.copy_(source.model.norm.weight)
    llama.lm_head.weight.copy_(source.lm_head.weight)
    for mine, theirs in zip(source.model.layers, target.layers, strict=True):
        attention = mine.self_attn
        for name, weight in zip(("q_proj", "k_proj", "v_proj"),
                                attention.qkv_proj.weight.split(attention.split_sizes), strict=True):
            getattr(theirs.self_attn, name).weight.copy_(weight)
        theirs.self_attn.o_proj.weight.copy_(attention.o_proj.weight)
        for part, name in ((mine.mlp.up_proj.weight, "weight"), (mine.mlp.up_proj.bias, "bias")):
            gate, up = part.chunk(2, dim=0)
            getattr(theirs.mlp.gate_proj, name).copy_(gate)
            getattr(theirs.mlp.up_proj, name).copy_(up)
        theirs.mlp.down_proj.weight.copy_(mine.mlp.down_proj.weight)
        theirs.mlp.down_proj.bias.copy_(mine.mlp.down_proj.bias)
        theirs.input_layernorm.weight.copy_(mine.self_attn_norm.weight)
        theirs.post_attention_layernorm.weight.copy_(mine.mlp_norm.weight)


@dataclasses.dataclass
class Decoder:
    """One model under test: hf-attn (a position scheme) or Llama, with a key/value head count."""

    family: str  # "hf-attn" or "Llama"
    scheme: str
    kv_heads: int
    model: nn.Module

    @property
    def name(self) -> str:
        return f"{self.family} {self.scheme} kv{self.kv_heads}"


def build_decoders(settings: BenchSettings, max_length: int, device: torch.device) -> list[Decoder]:
    """For every key/value head count: hf-attn with each scheme, then Llama with hf-attn's weights (all the
    hf-attn models of one head count start from one seed, so they share every weight)."""
    decoders = []
    for kv_heads in settings.generation_kv_heads:
        rope_model = None
        for scheme in settings.generation_schemes:
            torch.manual_seed(settings.seed)
            config = decoder_config(settings, scheme, kv_heads, max_length)
            model = HfAttnForCausalLM(config)
            decoders.append(Decoder("hf-attn", scheme, kv_heads, model))
            rope_model = model if config.position_scheme.takes_rope_parameters else rope_model
        llama = build_llama(decoder_config(settings, LLAMA_SCHEME, kv_heads, max_length))
        if rope_model is not None:
            copy_to_llama(rope_model, llama)
        decoders.append(Decoder(LLAMA, LLAMA_SCHEME, kv_heads, llama))
    for decoder in decoders:
        decoder.model.to(device).eval()
        decoder.model.set_attn_implementation("sdpa")
    return decoders


def greedy(model: nn.Module, prompt: torch.Tensor, new_tokens: int, use_cache: bool) -> torch.Tensor:
    """Greedy generation of exactly `new_tokens` tokens (no end-of-sequence token stops it)."""
    return model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new_tokens,
                          min_new_tokens=new_tokens, do_sample=False, use_cache=use_cache, pad_token_id=0)


@torch.no_grad()
def prefill(model: nn.Module, prompt: torch.Tensor) -> Any:
    """The forward pass over the prompt that fills a new cache, keeping the last position's logits only (as
    `generate()` does); returns the cache."""
    from transformers import DynamicCache

    return model(input_ids=prompt, cache=DynamicCache(), use_cache=True, logits_to_keep=1).cache


@torch.no_grad()
def decode_steps(model: nn.Module, cache: Any, prompt: torch.Tensor, steps: int) -> None:
    """`steps` cached forward passes of one token after `prompt`, the model alone: each pass appends a
    position to `cache` (filled by `prefill`), which is then cropped off again, so every pass
    decodes at the prompt's length and the cache can be reused."""
    batch, context = prompt.shape
    tokens, positions = prompt[:, -1:], torch.full((batch, 1), context, device=prompt.device)
    attention_mask = prompt.new_ones(batch, context + 1)
    for _ in range(steps):
        model(input_ids=tokens, attention_mask=attention_mask, cache=cache, use_cache=True, position_ids=positions,
              logits_to_keep=1)
        cache.crop(-1)


def cache_bytes(cache: Any) -> tuple[int, int]:
    """Bytes of the key and value tensors held by a transformers cache, and bytes allocated for them (more
    when a layer keeps spare room for the next tokens, as hf-attn's `GrowingCacheLayer` does)."""
    tensors = [tensor for layer in cache.layers for tensor in (layer.keys, layer.values)]
    return sum(tensor.nbytes for tensor in tensors), sum(tensor.untyped_storage().nbytes() for tensor in tensors)


@dataclasses.dataclass(frozen=True)
class GenerationSection(BenchSection):
    """hf-attn decoders' greedy `generate()` beside transformers' Llama of the same weights. Asked for by name:
    `hf-attn bench --sections generation`."""

    name: ClassVar[str] = "generation"
    generation_schemes: tuple[str, ...] = option(("rope", "alibi"), "hf-attn position schemes of the decoders")
    generation_kv_heads: tuple[int, ...] = option(
        (4, 2, 1), "key/value head counts of the decoders (heads: MHA, fewer: GQA, 1: MQA)")
    generation_vocab_size: int = option(8000, "vocabulary of the decoders")
    generation_contexts: tuple[int, ...] = option((128, 512, 2048), "prompt lengths in tokens")
    generation_batches: tuple[int, ...] = option((1,), "prompts generated at once")
    generation_new_tokens: int = option(32, "tokens generated after each prompt (greedy, no early stop)")
    generation_repeats: int = option(5, "timed repeats of cached generation and prefill")
    generation_uncached_new_tokens: int = option(
        8, "tokens generated without the cache (each one recomputes the whole prefix, so fewer; 0 skips it)")
    generation_uncached_repeats: int = option(2, "timed repeats of generation without the cache")
    generation_profile_steps: int = option(
        8, "cached decoding steps after the longest prompt profiled for hf-attn RoPE and Llama with the most "
        "key/value heads (0: no profile)")

    @classmethod
    def run(cls, settings: BenchSettings, device: torch.device) -> dict[str, Any]:
        """Prefill, cached and uncached greedy generation and cache bytes of every decoder, for every (batch,
        context length); each row has its ratios against the Llama of the same key/value head count."""
        if settings.generation_new_tokens < 2:
            raise ValueError("generation_new_tokens must be at least 2: the per-token decoding cost is "
                             "generate(N) - generate(1) over N - 1 tokens.")
        new_tokens, uncached_tokens = settings.generation_new_tokens, settings.generation_uncached_new_tokens
        max_length = max(settings.generation_contexts) + max(new_tokens, uncached_tokens)
        decoders = build_decoders(settings, max_length, device)
        generator = torch.Generator().manual_seed(settings.seed)
        rows = []
        for batch in settings.generation_batches:
            for context in settings.generation_contexts:
                prompt = torch.randint(0, settings.generation_vocab_size - 1, (batch, context), generator=generator)
                case = time_case(settings, decoders, prompt.to(device), device)
                add_llama_ratios(case)
                rows += case
        section = {"new_tokens": new_tokens, "uncached_new_tokens": uncached_tokens,
                   "num_attention_heads": settings.num_attention_heads, "rows": rows}
        if settings.generation_profile_steps:
            section["decode_profile"] = profile_decoding(settings, decoders, prompt)
        return section

    @classmethod
    def report(cls, record: dict[str, Any]) -> list[str]:
        rows, heads = record["rows"], record["num_attention_heads"]
        new, uncached = record["new_tokens"], record["uncached_new_tokens"]
        out = ["## Generation (greedy `generate()`, fp32, SDPA)", "",
               f"Each prompt is followed by {new} generated tokens with the cache"
               + (f" and {uncached} without it (`use_cache=False`: every step recomputes the whole prefix)" if uncached
                  and any("uncached" in r for r in rows) else "")
               + ". Llama: transformers' `LlamaForCausalLM` with hf-attn RoPE's weights (same function); 'vs Llama' = "
               "the Llama of the same key/value heads' median time / this row's (above 1: this row is faster); 'faster "
               "in' counts the repeats in which this row's cached generation beat that Llama's of the same repeat. "
               "Generate ms and tokens/s include the prompt's forward pass (prefill); decode ms/token is generate(N) "
               "minus generate(1), per repeat, over N - 1 tokens; model step ms is one cached forward pass of one "
               "token after the prompt, the model alone (decode minus model step: what `generate()` adds per token).",
               ""]
        for batch, context in dict.fromkeys((r["batch"], r["context"]) for r in rows):
            case = [r for r in rows if (r["batch"], r["context"]) == (batch, context)]
            table_rows = [[r["family"], r["scheme"], r["kv_heads"], f"{r['prefill']['median_ms']:.1f}",
                           ratio(r.get("prefill_vs_llama")), f"{r['cached']['median_ms']:.0f}",
                           f"{r['cached']['min_ms']:.0f}", f"{r['cached_tokens_per_s']:.1f}",
                           ratio(r.get("cached_vs_llama")), r.get("cached_faster_in", ""),
                           f"{r['decode_per_token']['median_ms']:.2f}", ratio(r.get("decode_per_token_vs_llama")),
                           f"{r['model_step']['median_ms']:.2f}", ratio(r.get("model_step_vs_llama")),
                           r.get("model_step_faster_in", ""),
                           f"{r['uncached_tokens_per_s']:.1f}" if "uncached" in r else "",
                           ratio(r.get("uncached_vs_llama")), ratio(r.get("cache_speedup"))]
                          for r in case]
            out += [f"### Context {context}, batch {batch}", "",
                    table(["model", "positions", "kv heads", "prefill ms", "vs Llama", "generate ms", "min ms",
                           "tokens/s", "vs Llama", "faster in", "decode ms/token", "vs Llama", "model step ms",
                           "vs Llama", "faster in", "uncached tokens/s", "vs Llama", "cache speed-up"], table_rows), ""]
        out += ["### KV-cache memory after the prompt", "",
                "Bytes of the key and value tensors in the cache after the prompt's forward pass (measured), and "
                "the bytes allocated for them (hf-attn keeps room for the next tokens); "
                f"'MHA / this' divides the {heads}-key/value-head model's bytes by this row's, to compare with "
                "heads / kv heads.", "",
                table(["model", "positions", "kv heads", "batch", "context", "cache MiB", "allocated MiB",
                       "MHA / this", "heads / kv heads"],
                      [[r["family"], r["scheme"], r["kv_heads"], r["batch"], r["context"],
                        f"{r['cache_bytes'] / 2**20:.2f}",
                        f"{r['cache_allocated_bytes'] / 2**20:.2f}" if "cache_allocated_bytes" in r else "",
                        f"{r['cache_vs_most_kv_heads']:.2f}",
                        f"{heads / r['kv_heads']:.2f}"] for r in rows]), ""]
        profile = record.get("decode_profile")
        for name, top_ops in (profile or {}).get("models", {}).items():
            out += [f"### Profile of {profile['steps']} cached decoding steps of {name} after {profile['context']} "
                    f"tokens (batch {profile['batch']})", "", operators_table(top_ops), ""]
        return out


def profile_decoding(settings: BenchSettings, decoders: list[Decoder], prompt: torch.Tensor) -> dict[str, Any]:
    """Top operators by self CPU time over greedy cached decoding steps after `prompt` (the last case's), for
    hf-attn RoPE and Llama with the most key/value heads: where a step's time goes, model by model."""
    from torch.profiler import ProfilerActivity, profile

    kv_heads = max(settings.generation_kv_heads)
    chosen = [d for d in decoders if d.kv_heads == kv_heads and d.scheme == LLAMA_SCHEME]
    batch, context = prompt.shape
    profiles = {}
    for decoder in chosen:
        cache = prefill(decoder.model, prompt)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            decode_steps(decoder.model, cache, prompt, settings.generation_profile_steps)
        profiles[decoder.name] = top_operators(prof, settings.profile_rows)
    return {"batch": batch, "context": context, "steps": settings.generation_profile_steps, "models": profiles}


def time_case(settings: BenchSettings, decoders: list[Decoder], prompt: torch.Tensor,
              device: torch.device) -> list[dict[str, Any]]:
    """One (batch, context) case: every decoder's steps interleaved, then the cache each one holds."""
    new_tokens, uncached_tokens = settings.generation_new_tokens, settings.generation_uncached_new_tokens
    caches = {decoder.model: prefill(decoder.model, prompt) for decoder in decoders}
    kinds: dict[str, Callable[[nn.Module], object]] = {
        "prefill": lambda model: prefill(model, prompt),
        "generate_1": lambda model: greedy(model, prompt, 1, use_cache=True),
        "cached": lambda model: greedy(model, prompt, new_tokens, use_cache=True),
        "step": lambda model: decode_steps(model, caches[model], prompt, new_tokens - 1),
    }
    times = _interleave(decoders, kinds, settings.generation_repeats, device)
    if uncached_tokens and settings.generation_uncached_repeats:
        uncached = {"uncached": lambda model: greedy(model, prompt, uncached_tokens, use_cache=False)}
        times.update(_interleave(decoders, uncached, settings.generation_uncached_repeats, device, warmup=0))
    batch, context = prompt.shape
    rows = []
    for decoder in decoders:
        mine = {kind: times[f"{decoder.name} | {kind}"] for kind in ("prefill", "generate_1", "cached", "uncached")
                if f"{decoder.name} | {kind}" in times}
        decode = [(n - one) / (new_tokens - 1) for n, one in zip(mine["cached"], mine["generate_1"], strict=True)]
        mine["model_step"] = [seconds / (new_tokens - 1) for seconds in times[f"{decoder.name} | step"]]
        held, allocated = cache_bytes(prefill(decoder.model, prompt))
        row = {"batch": batch, "context": context, "name": decoder.name, "family": decoder.family,
               "scheme": decoder.scheme, "kv_heads": decoder.kv_heads, "cache_bytes": held,
               "cache_allocated_bytes": allocated}
        for kind, seconds in {**mine, "decode_per_token": decode}.items():
            row[kind] = summarize(seconds)
        row["cached_tokens_per_s"] = batch * new_tokens / (row["cached"]["median_ms"] / 1e3)
        row["decode_tokens_per_s"] = batch / (row["decode_per_token"]["median_ms"] / 1e3)
        if "uncached" in mine:
            row["uncached_tokens_per_s"] = batch * uncached_tokens / (row["uncached"]["median_ms"] / 1e3)
            row["cache_speedup"] = row["cached_tokens_per_s"] / row["uncached_tokens_per_s"]
        rows.append(row)
    return rows


def _interleave(decoders: list[Decoder], kinds: dict[str, Callable[[nn.Module], object]], repeats: int,
                device: torch.device, warmup: int = 1) -> dict[str, list[float]]:
    """`timing.interleaved_times` over every (decoder, kind), a decoder's kinds next to each other in time."""
    steps = {f"{d.name} | {kind}": (lambda d=d, run=run: run(d.model)) for d in decoders for kind, run in kinds.items()}
    return interleaved_times(steps, warmup=warmup, repeats=repeats, device=device)


def add_llama_ratios(case: list[dict[str, Any]]) -> None:
    """Speed-ups against the Llama of the same key/value head count (its median time / this row's), the
    repeats in which this row's cached generation and model step beat that Llama's of the same repeat, and
    the cache's size against the same family and scheme with the most key/value heads (MHA)."""
    llama = {r["kv_heads"]: r for r in case if r["family"] == LLAMA}
    for row in case:
        reference = llama.get(row["kv_heads"])
        if reference is not None:
            for kind in ("prefill", "cached", "decode_per_token", "model_step", "uncached"):
                if kind in row:
                    row[f"{kind}_vs_llama"] = reference[kind]["median_ms"] / row[kind]["median_ms"]
        if reference is not None and row["family"] != LLAMA:
            for kind in ("cached", "model_step"):
                theirs = reference[kind]["times_ms"]
                wins = sum(mine < other for mine, other in zip(row[kind]["times_ms"], theirs, strict=True))
                row[f"{kind}_faster_in"] = f"{wins}/{len(theirs)}"
        mha = max((r for r in case if (r["family"], r["scheme"]) == (row["family"], row["scheme"])),
                  key=lambda r: r["kv_heads"])
        row["cache_vs_most_kv_heads"] = mha["cache_bytes"] / row["cache_bytes"]
