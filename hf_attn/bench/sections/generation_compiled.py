"""The `generation-compiled` section: decoding speed per token, eager against a static cache's compiled step.

hf-attn and transformers' Llama of the same weights (the generation section's decoders, `build_decoders`: RoPE,
`generation_compiled_kv_heads` key/value heads, so both compute the same function), each run by `generate()` as it
runs by default (a dynamic cache, eager PyTorch) and with a static cache whose decoding step `generate()` compiles
(`cache_implementation="static"`, a `CompileConfig`; on a CPU transformers compiles only when the config's
`_compile_all_devices` says so); and compiled with its linear layers switched to `hf_attn.serving.StreamingLinear`
("streamed": a single row's products as a multiply-and-sum that streams the weights).

A step's time is read inside `generate()` by a logits processor, which runs once per generated token: the time
between two calls is one cached forward pass plus `generate()`'s own work for the token, with no prompt pass in it.
Both the wall clock and the thread's CPU time are kept: on a machine shared with other work the CPU time is the
figure to compare (run it with `--threads 1`). Each repeat runs every variant once per mode (greedy, sampling) in
turn, so load reaches all alike; a repeat's figure is the median of its steps, the row's the median of its repeats.
The first call of a compiled variant at each context compiles (a static cache has a fixed number of slots: a new
context is a new graph); its time beyond a compiled call's is recorded. Tokens are compared across the variants:
the same greedy tokens, and the same samples from the same seed. Asked for by name: `hf-attn bench --sections
generation-compiled`.
"""

from __future__ import annotations

import copy
import dataclasses
import statistics
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from transformers import CompileConfig, LogitsProcessor, LogitsProcessorList

from ...serving import stream_single_row_products
from ...timing import CLOCKS as TIMING_CLOCKS
from ...timing import timed
from .base import BenchSection, option
from .generation import build_decoders

if TYPE_CHECKING:  # the settings gather every section's fields
    from ..settings import BenchSettings

# A row's clocks (its keys wall_ms, cpu_ms) and what each reads.
CLOCKS = {"wall": TIMING_CLOCKS["wall"], "cpu": TIMING_CLOCKS["thread"]}
MODES = {"greedy": dict(do_sample=False), "sampling": dict(do_sample=True, top_k=50, temperature=1.0)}
REFERENCES = ("Llama", "Llama static compiled")  # each row's speed is also given as a ratio to these


class StepClock(LogitsProcessor):
    """Records the time of every call (`generate()` calls its logits processors once per new token): the wall
    clock, and this thread's CPU time, which a busy machine's other processes do not add to (with one torch
    thread, every operator runs on the calling thread)."""

    def __init__(self) -> None:
        self.times: list[tuple[float, ...]] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self.times.append(tuple(read() for read in CLOCKS.values()))
        return scores


def compile_config(freezing: bool) -> CompileConfig:
    """A full-graph, static-shape compile; `freezing` folds the weights into the graph as constants, which lets
    Inductor lay them out for its CPU matmul kernels (the model must not be trained afterwards)."""
    config = CompileConfig(fullgraph=True, dynamic=False, mode=None, options={"freezing": True} if freezing else None)
    config._compile_all_devices = True  # transformers' switch for compiling on a CPU
    return config


def generate(model: torch.nn.Module, prompt: torch.Tensor, new_tokens: int, mode: str, seed: int,
             extra: dict[str, Any]) -> tuple[torch.Tensor, dict[str, list[float]]]:
    """Tokens and the seconds of each step (wall, CPU) of one `generate()` call of exactly `new_tokens` tokens."""
    clock = StepClock()
    torch.manual_seed(seed)
    tokens = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new_tokens,
                            min_new_tokens=new_tokens, pad_token_id=0, logits_processor=LogitsProcessorList([clock]),
                            **MODES[mode], **extra)
    pairs = list(zip(clock.times, clock.times[1:]))
    return tokens, {clock: [later[index] - earlier[index] for earlier, later in pairs]
                    for index, clock in enumerate(CLOCKS)}


def compiled_variants(settings: BenchSettings, max_length: int,
                      device: torch.device) -> dict[str, tuple[torch.nn.Module, dict[str, Any]]]:
    """Each variant's model and its extra `generate()` arguments. Each compiled variant has a model of its own: a
    model keeps the compiled step of its last compile config."""
    decoders = dataclasses.replace(settings, generation_kv_heads=(settings.generation_compiled_kv_heads,),
                                   generation_schemes=("rope",))
    hf_attn, llama = (decoder.model for decoder in build_decoders(decoders, max_length, device))
    static = dict(cache_implementation="static", compile_config=compile_config(settings.generation_compiled_freezing))
    return {"hf-attn": (hf_attn, {}), "hf-attn static compiled": (copy.deepcopy(hf_attn), static),
            "hf-attn static compiled streamed": (stream_single_row_products(copy.deepcopy(hf_attn)), static),
            "Llama": (llama, {}), "Llama static compiled": (copy.deepcopy(llama), static),
            "Llama static compiled streamed": (stream_single_row_products(copy.deepcopy(llama)), static)}


def time_context(settings: BenchSettings, variants: dict[str, tuple[torch.nn.Module, dict[str, Any]]],
                 prompt: torch.Tensor) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The rows of one prompt (per mode and variant: median ms per token on each clock, its ratios to
    `REFERENCES`, whether the tokens are hf-attn's), and the compiled variants' first-call seconds."""
    new_tokens, seed, context = settings.generation_compiled_new_tokens, settings.seed, prompt.shape[1]
    first_calls = {}
    for name, (model, extra) in variants.items():  # warm-up; compiles the static variants' step
        seconds = timed(lambda: generate(model, prompt, new_tokens, "greedy", seed, extra))  # noqa: B023
        if extra:
            first_calls[name] = seconds
    steps: dict[tuple[str, str, str], list[float]] = {
        (name, mode, clock): [] for name in variants for mode in MODES for clock in CLOCKS}
    tokens = {}
    for _ in range(settings.generation_compiled_repeats):
        for mode in MODES:
            for name, (model, extra) in variants.items():
                tokens[name, mode], seconds = generate(model, prompt, new_tokens, mode, seed, extra)
                for clock in CLOCKS:
                    steps[name, mode, clock].append(statistics.median(seconds[clock]) * 1e3)
    rows = []
    for mode in MODES:
        for name in variants:
            row = {"context": context, "mode": mode, "variant": name,
                   "same_tokens_as_hf_attn": torch.equal(tokens[name, mode], tokens["hf-attn", mode])}
            for clock in CLOCKS:
                median = statistics.median(steps[name, mode, clock])
                row[f"{clock}_ms"] = median
                row[f"{clock}_ms_per_repeat"] = steps[name, mode, clock]
                for reference in REFERENCES:
                    key = reference.lower().replace(" ", "_")
                    row[f"{clock}_vs_{key}"] = statistics.median(steps[reference, mode, clock]) / median
            rows.append(row)
    return rows, first_calls


@dataclasses.dataclass(frozen=True)
class GenerationCompiledSection(BenchSection):
    """Decoding steps, eager against a static cache's compiled step (the generation section's decoders)."""

    name: ClassVar[str] = "generation-compiled"
    generation_compiled_contexts: tuple[int, ...] = option(
        (128, 512, 2048), "prompt lengths of the generation-compiled section")
    generation_compiled_new_tokens: int = option(32, "tokens generated per call in the generation-compiled section")
    generation_compiled_repeats: int = option(5, "timed rounds of every variant in the generation-compiled section")
    generation_compiled_kv_heads: int = option(4, "key/value heads of the generation-compiled section's decoders")
    generation_compiled_freezing: bool = option(
        True, "compile with the weights folded into the graph as constants (Inductor's freezing)")

    @classmethod
    def run(cls, settings: BenchSettings, device: torch.device) -> dict[str, Any]:
        """Every variant's rows at every context, and the compiles' seconds (a compiled variant's first call beyond a
        compiled call's time)."""
        contexts, new_tokens = settings.generation_compiled_contexts, settings.generation_compiled_new_tokens
        variants = compiled_variants(settings, max(contexts) + new_tokens, device)
        generator = torch.Generator().manual_seed(settings.seed)
        rows, compile_seconds = [], {}
        for context in contexts:
            # Each compiled variant compiles a graph of its own per context (a new cache size): forget the previous
            # context's, which would otherwise count against Dynamo's recompile limit of the shared step function.
            torch.compiler.reset()
            prompt = torch.randint(0, settings.generation_vocab_size - 1, (1, context), generator=generator).to(device)
            context_rows, first_calls = time_context(settings, variants, prompt)
            rows += context_rows
            for name, seconds in first_calls.items():
                steady = next(r for r in context_rows if (r["variant"], r["mode"]) == (name, "greedy"))
                compile_seconds[f"{name} | {context}"] = seconds - steady["wall_ms"] * new_tokens / 1e3
        return {"options": {"new_tokens": new_tokens, "repeats": settings.generation_compiled_repeats,
                            "kv_heads": settings.generation_compiled_kv_heads,
                            "freezing": settings.generation_compiled_freezing, "hidden_size": settings.hidden_size,
                            "num_hidden_layers": settings.num_hidden_layers,
                            "vocab_size": settings.generation_vocab_size},
                "first_call_extra_seconds": compile_seconds, "rows": rows}

    @classmethod
    def report(cls, record: dict[str, Any]) -> list[str]:
        body = [f"| {row['context']} | {row['mode']} | {row['variant']} | {row['cpu_ms']:.2f} | "
                f"{row['cpu_vs_llama']:.2f}x | {row['cpu_vs_llama_static_compiled']:.2f}x | {row['wall_ms']:.2f} | "
                f"{'yes' if row['same_tokens_as_hf_attn'] else 'NO'} |" for row in record["rows"]]
        compiles = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in record["first_call_extra_seconds"].items())
        return ["## Generation, compiled: ms per generated token, eager against a static cache's compiled step", "",
                f"{record['options']['new_tokens']} tokens after each prompt, median of {record['options']['repeats']} "
                "repeats of each step's median; 'vs' = that model's CPU time / this row's (above 1: this row is "
                f"faster). Compiles (first call beyond a compiled call): {compiles or 'none'}.", "",
                "| context | mode | variant | CPU ms | vs Llama | vs Llama compiled | wall ms | same tokens as "
                "hf-attn |",
                "|---:|---|---|---:|---:|---:|---:|---|", *body, ""]
