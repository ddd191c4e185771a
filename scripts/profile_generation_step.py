"""Where a decoding step's time goes, hf-attn against Llama of the same weights, in milliseconds per token.

The models and the four variants are the generation-compiled bench section's
(`hf_attn.bench.sections.generation_compiled`: hf-attn and Llama as they run by default, and each with a static cache
and the compiled step). For each variant, interleaved over `--repeats` rounds of one greedy `generate()` of
`--new-tokens` tokens after a `--context`-token prompt, the thread's CPU time is split into:

* `step`: one generated token, between two calls of `generate()`'s logits processors (the bench's figure);
* `forward`: the model's call inside it (the compiled call for the compiled variants), timed around
  `generate()`'s `model_forward`; `step - forward` is `generate()`'s own work per token (and, for a static
  cache, `create_masks_for_generate`);
* `weight products`: the step's products with every weight matrix (the `nn.Linear`s and the head, in the model's
  order, one token), run alone with the same weights in the same interleaved round: at batch 1 a step reads
  every weight once, so this is the floor any implementation of these weights pays, eager or compiled;
* `rest of forward`: `forward - weight products`: attention over the cache, norms, RoPE, the cache write, and
  Python or, compiled, the graph's guards and small kernels.

    python scripts/profile_generation_step.py --context 128 --out results/bench/generation-step-128.json
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import transformers
from torch import nn

from hf_attn import timing
from hf_attn.bench.runner import write_script_record
from hf_attn.bench.sections.generation import build_decoders
from hf_attn.bench.sections.generation_compiled import compile_config, generate
from hf_attn.bench.settings import BenchSettings

PARTS = ("step", "forward", "generate_own", "weight_products", "rest_of_forward")


class ForwardClock:
    """Times every call of the function `generate()` runs the model with, in the thread's CPU time."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.seconds: list[float] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        clock = timing.CLOCKS["thread"]
        began = clock()
        output = self.function(*args, **kwargs)
        self.seconds.append(clock() - began)
        return output


def clock_forward(model: nn.Module, compiled: bool) -> list[ForwardClock]:
    """Wrap, on this model object only, the function `generate()` runs its decoding steps with: `self.__call__`, or
    for a compiled variant the result of `self.get_compiled_call(config)` (its `__call__` stays as it is: the
    compiled function is made of it). The prompt's pass calls the model directly (`self(...)`), not these.
    Returns the list the clocks of later `generate()` calls are appended to."""
    clocks: list[ForwardClock] = []

    def clocked(function: Callable[..., Any]) -> ForwardClock:
        clocks.append(ForwardClock(function))
        return clocks[-1]

    if compiled:
        compiled_call = model.get_compiled_call
        model.get_compiled_call = lambda config: clocked(compiled_call(config))
    else:
        model.__call__ = clocked(model.__call__)
    return clocks


def weight_products(model: nn.Module) -> Callable[[], None]:
    """One token's products with every `nn.Linear` of `model` (the head included), in module order."""
    layers = [module for module in model.modules() if isinstance(module, nn.Linear)]
    inputs = [torch.randn(1, layer.in_features) for layer in layers]

    def run() -> None:
        with torch.no_grad():
            for layer, features in zip(layers, inputs):
                nn.functional.linear(features, layer.weight, layer.bias)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    timing.use_threads(1)
    settings = BenchSettings(generation_kv_heads=(4,), generation_schemes=("rope",))
    hf_attn, llama = (decoder.model for decoder in
                      build_decoders(settings, args.context + args.new_tokens, torch.device("cpu")))
    static = dict(cache_implementation="static", compile_config=compile_config(True))
    variants = {"hf-attn": (hf_attn, {}), "hf-attn static compiled": (copy.deepcopy(hf_attn), static),
                "Llama": (llama, {}), "Llama static compiled": (copy.deepcopy(llama), static)}
    clocks = {name: clock_forward(model, compiled=bool(extra)) for name, (model, extra) in variants.items()}
    products = {name: weight_products(model) for name, (model, _) in variants.items()}
    prompt = torch.randint(0, settings.generation_vocab_size - 1, (1, args.context),
                           generator=torch.Generator().manual_seed(settings.seed))
    load_start = os.getloadavg()
    for model, extra in variants.values():  # warm-up; compiles the static variants' step
        generate(model, prompt, args.new_tokens, "greedy", settings.seed, extra)
    parts: dict[str, dict[str, list[float]]] = {name: {part: [] for part in PARTS} for name in variants}
    for _ in range(args.repeats):
        for name, (model, extra) in variants.items():
            for clock in clocks[name]:
                clock.seconds.clear()
            _, seconds = generate(model, prompt, args.new_tokens, "greedy", settings.seed, extra)
            forwards = [second for clock in clocks[name] for second in clock.seconds]
            if len(forwards) != args.new_tokens - 1:
                raise RuntimeError(f"{name}: {len(forwards)} decoding steps clocked, {args.new_tokens - 1} expected")
            all_products = timing.timed(lambda: [products[name]() for _ in range(args.new_tokens)],  # noqa: B023
                                        clock="thread")
            measured = {"step": statistics.median(seconds["cpu"]), "forward": statistics.median(forwards),
                        "weight_products": all_products / args.new_tokens}
            measured["generate_own"] = measured["step"] - measured["forward"]
            measured["rest_of_forward"] = measured["forward"] - measured["weight_products"]
            for part, value in measured.items():
                parts[name][part].append(value * 1e3)
    rows = [{"variant": name, **{f"{part}_ms": statistics.median(values[part]) for part in PARTS},
             **{f"{part}_ms_per_repeat": values[part] for part in PARTS}} for name, values in parts.items()]
    for row in rows:
        print(f"{row['variant']:24s} " + " ".join(f"{part} {row[f'{part}_ms']:5.2f}" for part in PARTS))
    weight_bytes = sum(module.weight.numel() * module.weight.element_size() for module in hf_attn.modules()
                       if isinstance(module, nn.Linear))
    results = {
        "command": f"python scripts/profile_generation_step.py --context {args.context} --new-tokens "
                   f"{args.new_tokens} --repeats {args.repeats} --out {args.out}",
        "environment": {"cpu": timing.this_cpu(), "threads": 1, "cpus": os.cpu_count(),
                        "load_average_start": load_start,
                        "load_average_end": os.getloadavg(), "torch": torch.__version__,
                        "transformers": transformers.__version__},
        "context": args.context, "new_tokens": args.new_tokens, "repeats": args.repeats,
        "weight_megabytes_read_per_token": weight_bytes / 1e6,
        "rows": rows,
    }
    write_script_record(args.out, results)


if __name__ == "__main__":
    main()
