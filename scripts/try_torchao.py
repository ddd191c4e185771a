"""Does torchao's int8 serve the committed classifier on this CPU? Its int8 configurations beside PyTorch fp32 and
`torch.ao`'s dynamic int8 (what hf-attn serves with, docs/serving.md), on the same batches, interleaved.

Eager: seeded test reviews read whole, in batches sorted by length. Compiled (`--compile`): torchao's int8 is
written for `torch.compile` (Inductor fuses its int8 matmuls), so the fp32 model and torchao's dynamic int8 are also
compiled for one fixed batch (reviews cut to `--compiled-length` tokens) and timed beside the eager variants on it.
torchao is not a dependency of hf-attn: `pip install torchao` to run this.

    python scripts/try_torchao.py --model checkpoints/rope-whole-reviews --dataset ../shared/data/imdb --threads 1 \
        --compile --out results/serving/torchao.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torchao
from torchao.quantization import Int8DynamicActivationInt8WeightConfig, Int8WeightOnlyConfig, quantize_

from hf_attn import timing
from hf_attn.experiments.data import load_imdb
from hf_attn.saved import load_saved_classifier


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--reviews", type=int, default=64, help="seeded test reviews read whole (eager)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--compile", action="store_true", help="also time compiled fp32 and torchao int8")
    parser.add_argument("--compiled-length", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5, help="timed calls of each variant on the fixed batch")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    timing.use_threads(args.threads)
    model, tokenizer = load_saved_classifier(args.model)
    model.eval()
    variants = {"torch_fp32": model, "torch_ao_dynamic_int8": _torch_ao_int8(model)}
    for name, config in (("torchao_int8_dynamic", Int8DynamicActivationInt8WeightConfig()),
                         ("torchao_int8_weight_only", Int8WeightOnlyConfig())):
        quantized = copy.deepcopy(model)
        quantize_(quantized, config)
        variants[name] = quantized
    test = load_imdb(args.dataset)["test"]
    chosen = np.random.default_rng(args.seed).permutation(len(test))[: args.reviews]
    reviews = sorted(((test["text"][int(index)], test["label"][int(index)]) for index in chosen),
                     key=lambda review: len(review[0]))
    texts, labels = [text for text, _ in reviews], [label for _, label in reviews]
    batches = [texts[start : start + args.batch_size] for start in range(0, len(texts), args.batch_size)]

    def logits(network: torch.nn.Module, batch: list[str], **encoding: object) -> np.ndarray:
        encoded = tokenizer(batch, padding=True, return_tensors="pt", **encoding)
        with torch.inference_mode():
            return network(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"]).logits.numpy()

    eager = _interleaved({name: (lambda batch, network=network: logits(network, batch))
                          for name, network in variants.items()}, batches)
    record = {"command": "python scripts/try_torchao.py " + " ".join(
                  f"--{key.replace('_', '-')} {value}" for key, value in vars(args).items()
                  if value not in (None, False)).replace(" True", ""),
              "cpu": timing.this_cpu(), "threads": args.threads, "torch": torch.__version__,
              "torchao": torchao.__version__,
              "load_average_at_start": os.getloadavg(),
              "eager": {"reviews": len(texts), "read": "whole, batches sorted by length",
                        "rows": _rows(eager, labels)}}
    if args.compile:
        fixed, fixed_labels = texts[-args.batch_size:], labels[-args.batch_size:]  # the longest fill the length
        cut = {"truncation": True, "max_length": args.compiled_length}
        compiled_variants = {"torch_fp32": model, "torch_ao_dynamic_int8": variants["torch_ao_dynamic_int8"],
                             "torch_fp32_compiled": torch.compile(model, dynamic=False),
                             "torchao_int8_dynamic_compiled": torch.compile(variants["torchao_int8_dynamic"],
                                                                            dynamic=False)}
        compile_seconds = {}
        for name, network in compiled_variants.items():  # compiles (and warms) outside the timing
            compile_seconds[name] = round(timing.timed(lambda: logits(network, fixed, **cut)), 1)  # noqa: B023
        timed = _interleaved({name: (lambda batch, network=network: logits(network, batch, **cut))
                              for name, network in compiled_variants.items()}, [fixed] * args.repeats)
        record["compiled"] = {"batch": f"the {len(fixed)} longest of the reviews above, cut to "
                                       f"{args.compiled_length} tokens, {args.repeats} timed calls each",
                              "first_call_seconds": compile_seconds,
                              "rows": _rows(timed, fixed_labels * args.repeats)}
    record["load_average_at_end"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))


def _torch_ao_int8(model: torch.nn.Module) -> torch.nn.Module:
    with warnings.catch_warnings():  # torch.ao's dynamic quantization is deprecated in favour of torchao
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear}, dtype=torch.qint8)


def _interleaved(runners: dict[str, Callable[[list[str]], np.ndarray]],
                 batches: list[list[str]]) -> dict[str, tuple[float, list[int]]]:
    """Each variant's total seconds and predictions, every batch read by each variant in turn."""
    seconds, predicted = dict.fromkeys(runners, 0.0), {name: [] for name in runners}
    for batch in batches:
        for name, run in runners.items():
            seconds[name] += timing.timed(lambda: predicted[name].extend(  # noqa: B023 - called at once
                run(batch).argmax(axis=-1).tolist()))
    return {name: (seconds[name], predicted[name]) for name in runners}


def _rows(timed: dict[str, tuple[float, list[int]]], labels: list[int]) -> dict[str, dict[str, float]]:
    reference_seconds, reference = timed["torch_fp32"]
    return {name: {"accuracy": float(np.mean(np.asarray(predicted) == labels)),
                   "agreement_with_torch_fp32": float(np.mean(np.asarray(predicted) == reference)),
                   "seconds": round(seconds, 2), "speed_vs_torch_fp32": round(reference_seconds / seconds, 3)}
            for name, (seconds, predicted) in timed.items()}


if __name__ == "__main__":
    main()
