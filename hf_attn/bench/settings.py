"""Every size, repeat count and model choice of a benchmark run, in one frozen dataclass; and the goals.

The command line is generated from `BenchSettings` (one option per field, see `runner.add_arguments`),
and the settings are saved with the results, so that a JSON file says how its numbers were taken.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..positions import POSITION_SCHEMES
from ..runtime.precision import COMPUTED_PRECISIONS

# The transformers models each hf-attn scheme is judged against (its "peers"): RoPE against the rotary
# models, which do the same rotation work; every other scheme against all three.
PEERS = {"rope": ("RoFormer", "ModernBERT")}
DEFAULT_PEERS = ("BERT", "RoFormer", "ModernBERT")


def peer_families(scheme: str) -> tuple[str, ...]:
    """The transformers models an hf-attn scheme is judged against (`PEERS`)."""
    return PEERS.get(scheme, DEFAULT_PEERS)

# The goals (issue #51): in every cell (scheme x mode x length x precision, and each realistic epoch) at least
# CELL_GOAL of the fastest peer's speed, and over the cells of each precision a geometric mean of GEOMEAN_GOAL.
CELL_GOAL = 1.0
GEOMEAN_GOAL = 1.2


def is_goal_row(row: dict[str, Any]) -> bool:
    """Whether a throughput row is one the goals are about: hf-attn's default model at the fastest of its attentions
    in the cell (`goal`, set by `sections.add_speedups`); records from before it: hf-attn with SDPA."""
    if row["family"] != "hf-attn" or "speedup_vs_peer" not in row:
        return False
    return row.get("goal", row["backend"] == "sdpa")


def ratio_summary(ratios: Sequence[float]) -> dict[str, Any]:
    """How many of `ratios` (speed-ups over the fastest peer) reach `CELL_GOAL`, the worst, the geometric mean."""
    return {"cells": len(ratios), "met": sum(ratio >= CELL_GOAL for ratio in ratios),
            "geomean": statistics.geometric_mean(ratios), "worst": min(ratios)}
SECTIONS = ("throughput", "scaling", "realistic", "generation", "objectives", "dropout", "long-text", "streaming",
            "local-attention", "generation-compiled", "serving")
# Run by default: the others are asked for by name (`--sections generation`).
DEFAULT_SECTIONS = ("throughput", "scaling", "realistic")
# transformers classifiers timed beside hf-attn, of the same shape (see `models.ANCHOR_BUILDERS`).
ANCHORS = ("BERT", "RoFormer", "ModernBERT", "ModernBERT-defaults")
# Anchors built with their library's own dropout rather than the bench's: not like-for-like, so they
# get a ratio column but are nobody's peer (below).
OWN_DROPOUT_ANCHORS = ("ModernBERT-defaults",)
# The serving section's ways to serve a saved classifier (PyTorch fp32, the reference, always runs).
SERVING_VARIANTS = ("torch_fp32", "torch_int8", "onnx_fp32", "onnx_int8")
# Written by scripts/bench_tokenizer.py; merged into the report when present.
DEFAULT_TOKENIZER_JSON = "results/bench/bench_tokenizer.json"
WEEK3_VOCAB = 500  # bytes + merges of the Week 3 tokenizer's default (plus [PAD])


def _setting(default: Any, help_text: str) -> Any:
    """A `BenchSettings` field whose help text the command line reuses."""
    return field(default=default, metadata={"help": help_text})


@dataclass(frozen=True)
class BenchSettings:
    """Every size and repeat count of a run; the defaults are the issue's benchmark, tests shrink them."""

    device: str = _setting("cpu", "torch device: cpu, cuda, cuda:1, ...")
    threads: int | None = _setting(None, "torch intra-op threads (default: torch's choice)")
    seed: int = _setting(0, "seed of weights, token ids and batch order")
    sections: tuple[str, ...] = _setting(DEFAULT_SECTIONS, f"sections to run, of {', '.join(SECTIONS)}")
    # Model shape, shared by hf-attn and the transformers models.
    hidden_size: int = _setting(384, "model width of every model")
    num_hidden_layers: int = _setting(4, "Transformer blocks of every model")
    num_attention_heads: int = _setting(4, "attention heads of every model")
    intermediate_size: int = _setting(
        1536, "FFN width of every model; ModernBERT's gated (GeGLU) FFN gets 2/3 of it, for the same FLOPs")
    vocab_size: int = _setting(501, "vocabulary of every model (the Week 3 one; its last id is [PAD])")
    dropout: float = _setting(
        0.1, "hidden dropout of every model but ModernBERT-defaults (hf-attn's, BERT's and RoFormer's default; "
        "ModernBERT's embedding, MLP and classifier dropout)")
    attention_dropout: float = _setting(
        0.1, "attention dropout of every model but ModernBERT-defaults (ModernBERT applies it to the attention "
        "weights and output); on CPU, SDPA has no fused kernel with dropout and trains through its unfused "
        "math path, 0 shows the fused one")
    anchors: tuple[str, ...] = _setting(
        ANCHORS, "transformers models timed beside hf-attn, of the same shape: BERT, RoFormer (no SDPA in "
        "transformers 5, so eager), ModernBERT (all layers global) with --dropout and --attention-dropout like "
        "hf-attn, and ModernBERT-defaults, ModernBERT with its own defaults (no dropout at all), as it is "
        "usually trained: both settings in one interleaved run")
    # Throughput section.
    schemes: tuple[str, ...] = _setting(tuple(POSITION_SCHEMES), "hf-attn position schemes")
    backends: tuple[str, ...] = _setting(
        ("eager", "sdpa"), "attention implementations of every model (an anchor without SDPA, RoFormer, runs eager "
        "alone); a model's fastest in a cell is its time there")
    variants: tuple[str, ...] = _setting(
        ("rope:rope_layout=interleaved",),
        "hf-attn models measured beside the defaults, each SCHEME:FIELD=VALUE (one HfAttnConfig field set), "
        "e.g. RoPE on interleaved pairs instead of halves")
    precision: tuple[str, ...] = _setting(
        COMPUTED_PRECISIONS,
        "precisions of every throughput case, of fp32, bf16 (bf16: forward under bfloat16 autocast, "
        "parameters float32, as Trainer(bf16=True)); speed-ups compare models of one precision")
    peak_repeats: int = _setting(10, "timed products per GEMM shape of the matmul-peak measurement (the best counts)")
    peak_memory: bool = _setting(True, "measure each model's peak memory per case (one more step under the profiler)")
    modes: tuple[str, ...] = _setting(("train", "infer"), "train: forward + backward + AdamW; infer: no grad")
    train_batch: int = _setting(32, "training batch size")
    infer_batch: int = _setting(64, "inference batch size")
    seq_lengths: tuple[int, ...] = _setting((128, 512), "sequence lengths; the first is where 'as fast' suffices")
    warmup: int = _setting(2, "untimed steps of each model before timing")
    repeats: int = _setting(7, "timed steps of each model (the median is reported)")
    learning_rate: float = _setting(1e-4, "AdamW learning rate")
    # Attention-scaling section (hf-attn only).
    scaling_scheme: str = _setting("rope", "hf-attn position scheme of the scaling section")
    scaling_lengths: tuple[int, ...] = _setting((128, 256, 512, 1024, 2048), "sequence lengths of the scaling section")
    scaling_batch: int = _setting(8, "inference batch size of the scaling section")
    scaling_repeats: int = _setting(3, "timed steps per length and backend")
    # Realistic-batches section.
    realistic_scheme: str = _setting("rope", "hf-attn position scheme of the realistic section")
    realistic_backend: str | None = _setting(
        None, "attention implementation of every model in the realistic section (default: each of --backends the "
        "model has, its fastest on a strategy's batches counting)")
    realistic_batch: int = _setting(32, "training batch size of the realistic section")
    realistic_max_lengths: tuple[int, ...] = _setting(
        (128, 512), "truncation lengths, each also the width of fixed padding")
    realistic_vocab_size: int = _setting(
        WEEK3_VOCAB, "vocabulary (bytes + merges) of the Week 3 tokenizer that measures review lengths (a larger "
        "one makes reviews shorter in tokens; the full IMDb runs use 8000)")
    epoch_reviews: int | None = _setting(None, "reviews in the epoch (default: the sample's whole train split)")
    group_megabatch: int = _setting(50, "length-grouped batching sorts chunks of this many batches")
    # Generation section: hf-attn decoders beside transformers' Llama of the same architecture.
    generation_schemes: tuple[str, ...] = _setting(("rope", "alibi"), "hf-attn position schemes of the decoders")
    generation_kv_heads: tuple[int, ...] = _setting(
        (4, 2, 1), "key/value head counts of the decoders (heads: MHA, fewer: GQA, 1: MQA)")
    generation_vocab_size: int = _setting(8000, "vocabulary of the decoders")
    generation_contexts: tuple[int, ...] = _setting((128, 512, 2048), "prompt lengths in tokens")
    generation_batches: tuple[int, ...] = _setting((1,), "prompts generated at once")
    generation_new_tokens: int = _setting(32, "tokens generated after each prompt (greedy, no early stop)")
    generation_repeats: int = _setting(5, "timed repeats of cached generation and prefill")
    generation_uncached_new_tokens: int = _setting(
        8, "tokens generated without the cache (each one recomputes the whole prefix, so fewer; 0 skips it)")
    generation_uncached_repeats: int = _setting(2, "timed repeats of generation without the cache")
    generation_profile_steps: int = _setting(
        8, "cached decoding steps after the longest prompt profiled for hf-attn RoPE and Llama with the most "
        "key/value heads (0: no profile)")
    # Generation-compiled section: decoding steps, eager against a static cache's compiled step (the same decoders).
    generation_compiled_contexts: tuple[int, ...] = _setting(
        (128, 512, 2048), "prompt lengths of the generation-compiled section")
    generation_compiled_new_tokens: int = _setting(32, "tokens generated per call in the generation-compiled section")
    generation_compiled_repeats: int = _setting(5, "timed rounds of every variant in the generation-compiled section")
    generation_compiled_kv_heads: int = _setting(4, "key/value heads of the generation-compiled section's decoders")
    generation_compiled_freezing: bool = _setting(
        True, "compile with the weights folded into the graph as constants (Inductor's freezing)")
    # Objectives section: a pretraining step of each objective.
    objectives_config: str = _setting(
        "configs/pretraining/pretrain-rope-rtd.yaml", "pretraining experiment YAML whose model the objectives section "
        "trains")
    objectives_vocab_size: int = _setting(8001, "vocabulary of the objectives section, [PAD] included (Week 3's 8k)")
    objectives_batch: int = _setting(32, "chunks per step of the objectives section")
    objectives_length: int = _setting(128, "tokens per chunk of the objectives section")
    objectives_repeats: int = _setting(6, "timed steps of each objective")
    # Dropout section: one layer's attention with dropout, at the bench's heads.
    dropout_batch: int = _setting(8, "batch of the dropout section")
    dropout_seq: int = _setting(128, "tokens of the dropout section")
    dropout_repeats: int = _setting(15, "timed forward + backward passes of each attention in the dropout section")
    # Long-text section: one text through `pipeline`, under each reading policy.
    long_text_sizes: tuple[int, ...] = _setting(
        (10_000, 100_000, 1_000_000), "characters of the long-text section's text")
    long_text_tokenizer: str = _setting(
        "checkpoints/rope-whole-reviews", "tokenizer folder of the long-text section's classifier")
    long_text_one_pass_limit: int = _setting(
        100_000, "longest text (characters) the long-text section reads in one quadratic pass")
    # Streaming section: one-row products against a plain pass over memory.
    streaming_megabytes: int = _setting(160, "data the streaming section reads per call (beyond the caches)")
    streaming_rows: int = _setting(3072, "weight rows (outputs) of the streaming section, as an nn.Linear stores it")
    streaming_columns: int = _setting(384, "weight columns (inputs) of the streaming section")
    streaming_repeats: int = _setting(5, "timed calls of each method of the streaming section")
    # Local-attention section: a sliding window by blocks against full attention and the dense mask.
    local_attention_lengths: tuple[int, ...] = _setting((2048, 8192), "tokens of the local-attention section's input")
    local_attention_window: int = _setting(64, "radius of the local-attention section's window: keys on each side")
    local_attention_repeats: int = _setting(5, "timed forward passes of each way in the local-attention section")
    local_attention_scheme: str = _setting(
        "rope", "position scheme of the local-attention section's encoder (a bias scheme's bias is computed in the "
        "band too)")
    # Serving section: a saved classifier served four ways over the test reviews.
    serving_model: str = _setting("checkpoints/rope-whole-reviews", "saved classifier of the serving section")
    serving_dataset: str = _setting(
        "../shared/data/imdb", "IMDb copy whose seed split's test reviews the serving section reads ('sample': the "
        "packaged sample)")
    serving_limit: int | None = _setting(None, "only the first N reviews of the serving section's seeded order")
    serving_batch_size: int = _setting(32, "reviews per batch of the serving section")
    serving_chunk: int = _setting(500, "reviews per chunk of the serving section (sorted by length inside)")
    serving_variants: tuple[str, ...] = _setting(
        SERVING_VARIANTS, "ways to serve in the serving section; torch_fp32 (the reference) always runs")
    # Profile of hf-attn training steps.
    profile_steps: int = _setting(3, "profiled training steps (0: no profile)")
    profile_scheme: str = _setting("rope", "hf-attn position scheme of the profile")
    profile_backend: str = _setting("sdpa", "attention implementation of the profile")
    profile_seq: int = _setting(128, "sequence length of the profile (batch: --train-batch)")
    profile_precision: str = _setting("bf16", "precision of the profiled training steps (fp32 or bf16)")
    profile_anchor: str = _setting(
        "ModernBERT", "transformers model profiled beside hf-attn with the same steps ('' for none)")
    profile_rows: int = _setting(15, "operators listed, by self CPU time")
    tokenizer_json: str | None = _setting(
        DEFAULT_TOKENIZER_JSON, "scripts/bench_tokenizer.py's JSON, merged into the report if it exists ('' to skip)")
