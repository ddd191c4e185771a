"""Decoding speed per token of hf-attn and transformers' Llama of the same weights, each run two ways by
`generate()`: as it runs by default (a dynamic cache, eager PyTorch) and with a static cache whose decoding
step `generate()` compiles (`cache_implementation="static"`, a `CompileConfig`; on a CPU transformers compiles
only when the config's `_compile_all_devices` says so).

The models are the bench's generation decoders (`hf_attn.bench.generation`: d 384, 4 layers, 4 heads, 8,000
tokens, RoPE; Llama receives hf-attn's weights, so both compute the same function). A step's time is read
inside `generate()` by a logits processor, which runs once per generated token: the time between two calls is
one cached forward pass plus `generate()`'s own work for the token, with no prompt pass in it. Both the wall
clock and the thread's CPU time are kept: on a machine shared with other work the CPU time is the figure to
compare (the wall clock adds the time the other processes held the cores). Each repeat
runs every variant once per mode (greedy, sampling) in turn, so load reaches all alike; a repeat's figure
is the median of its steps, the row's the median of its repeats. The first call of a compiled variant at
each context compiles (a static cache has a fixed number of slots: a new context is a new graph); its
time is recorded. Each model also runs compiled with its linear layers switched to
`hf_attn.serving.StreamingLinear` ("streamed": a single row's products as a multiply-and-sum that streams the
weights). Tokens are compared across the variants: the same greedy tokens, and the same samples from the same
seed.

    python scripts/bench_generation_compiled.py --contexts 128,512,2048 --new-tokens 32 --repeats 5 \
        --out results/bench/generation-compiled.json
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import CompileConfig, LogitsProcessor, LogitsProcessorList

from hf_attn.bench.generation import build_decoders
from hf_attn.bench.runner import write_script_record
from hf_attn.bench.settings import BenchSettings
from hf_attn.serving import stream_single_row_products
from hf_attn.timing import CLOCKS as TIMING_CLOCKS
from hf_attn.timing import this_cpu, timed, use_threads

# A row's clocks (its keys wall_ms, cpu_ms) and what each reads.
CLOCKS = {"wall": TIMING_CLOCKS["wall"], "cpu": TIMING_CLOCKS["thread"]}
MODES = {"greedy": dict(do_sample=False), "sampling": dict(do_sample=True, top_k=50, temperature=1.0)}


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--contexts", default="128,512,2048", help="prompt lengths, comma-separated")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--kv-heads", type=int, default=4)
    parser.add_argument("--no-freezing", action="store_true", help="compile without folding the weights in")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    use_threads(args.threads)
    contexts = [int(value) for value in args.contexts.split(",")]
    settings = BenchSettings(generation_kv_heads=(args.kv_heads,), generation_schemes=("rope",))
    hf_attn, llama = (decoder.model for decoder in
                      build_decoders(settings, max(contexts) + args.new_tokens, torch.device("cpu")))
    static = dict(cache_implementation="static", compile_config=compile_config(not args.no_freezing))
    # Each compiled variant has a model of its own: a model keeps the compiled step of its last compile config.
    variants = {"hf-attn": (hf_attn, {}), "hf-attn static compiled": (copy.deepcopy(hf_attn), static),
                "hf-attn static compiled streamed": (stream_single_row_products(copy.deepcopy(hf_attn)), static),
                "Llama": (llama, {}), "Llama static compiled": (copy.deepcopy(llama), static),
                "Llama static compiled streamed": (stream_single_row_products(copy.deepcopy(llama)), static)}
    load_start, started = os.getloadavg(), time.strftime("%Y-%m-%d %H:%M:%S")
    generator = torch.Generator().manual_seed(settings.seed)
    rows, compile_seconds = [], {}
    for context in contexts:
        # Each compiled variant compiles a graph of its own per context (a new cache size): forget the previous
        # context's, which would otherwise count against Dynamo's recompile limit of the shared step function.
        torch.compiler.reset()
        prompt = torch.randint(0, settings.generation_vocab_size - 1, (1, context), generator=generator)
        for name, (model, extra) in variants.items():  # warm-up; compiles the static variants' step
            first_call = timed(lambda: generate(model, prompt, args.new_tokens, "greedy", settings.seed, extra))  # noqa: B023
            if extra:
                compile_seconds[f"{name} | {context}"] = first_call
        steps = {(name, mode, clock): [] for name in variants for mode in MODES for clock in CLOCKS}
        tokens = {}
        for _ in range(args.repeats):
            for mode in MODES:
                for name, (model, extra) in variants.items():
                    tokens[name, mode], seconds = generate(model, prompt, args.new_tokens, mode, settings.seed, extra)
                    for clock in CLOCKS:
                        steps[name, mode, clock].append(statistics.median(seconds[clock]) * 1e3)
        for mode in MODES:
            for name in variants:
                row = {"context": context, "mode": mode, "variant": name,
                       "same_tokens_as_hf_attn": torch.equal(tokens[name, mode], tokens["hf-attn", mode])}
                for clock in CLOCKS:
                    median = statistics.median(steps[name, mode, clock])
                    row[f"{clock}_ms"] = median
                    row[f"{clock}_ms_per_repeat"] = steps[name, mode, clock]
                    for reference in ("Llama", "Llama static compiled"):
                        key = reference.lower().replace(" ", "_")
                        row[f"{clock}_vs_{key}"] = statistics.median(steps[reference, mode, clock]) / median
                rows.append(row)
                print(f"{context:5d} {mode:8s} {name:32s} cpu {row['cpu_ms']:6.2f} ms/token "
                      f"{row['cpu_vs_llama']:.2f}x Llama {row['cpu_vs_llama_static_compiled']:.2f}x Llama compiled | "
                      f"wall {row['wall_ms']:6.2f} ms {row['wall_vs_llama']:.2f}x | same tokens: "
                      f"{row['same_tokens_as_hf_attn']}", flush=True)
    for name in (name for name, (_, extra) in variants.items() if extra):
        for context in contexts:  # the warm-up call's time beyond a compiled call's: the compile
            steady = next(r for r in rows if (r["variant"], r["context"], r["mode"]) == (name, context, "greedy"))
            compile_seconds[f"{name} | {context}"] -= steady["wall_ms"] * args.new_tokens / 1e3
    results = {
        "command": "python scripts/bench_generation_compiled.py " + " ".join(
            f"--{key.replace('_', '-')} {value}" for key, value in vars(args).items() if key != "no_freezing")
        + (" --no-freezing" if args.no_freezing else ""),
        "environment": {"cpu": this_cpu(), "threads": args.threads, "cpus": os.cpu_count(), "started": started,
                        "load_average_start": load_start, "load_average_end": os.getloadavg(),
                        "torch": torch.__version__, "transformers": transformers.__version__},
        # "options", not "settings": a file with settings and a torch version is one of `hf-attn bench`'s
        # records, which docs/benchmarks.md's records table lists.
        "options": {"new_tokens": args.new_tokens, "repeats": args.repeats, "kv_heads": args.kv_heads,
                     "freezing": not args.no_freezing, "hidden_size": settings.hidden_size,
                     "num_hidden_layers": settings.num_hidden_layers, "vocab_size": settings.generation_vocab_size},
        "first_call_extra_seconds": compile_seconds,
        "rows": rows,
    }
    write_script_record(args.out, results)


if __name__ == "__main__":
    main()
