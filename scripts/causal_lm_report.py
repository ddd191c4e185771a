"""The causal-LM study's table, plot and samples (docs/causal-lm.md), from `hf-attn perplexity` results.

Reads `RESULTS/<scheme>.json` (written by `hf-attn perplexity --output`), or with `--seeds 42,43` one
`RESULTS/<scheme>-seed<N>.json` per seed, writes `RESULTS/extrapolation.md` (a table of validation perplexity per
scheme and evaluation length, the mean over the seeds with each seed's value, each run's steps and training time;
the unigram level; with seeds, the schemes' ordering at each length where every seed agrees) and
`RESULTS/extrapolation.png` (the ALiBi paper's Figure 1 shape), then picks the scheme with the lowest validation
perplexity at the training length and writes `RESULTS/samples.md`: its continuations of a few prompts with beam
search and with sampling (fixed seed), generated within the training length.

    python scripts/causal_lm_report.py --results results/causal-lm --runs runs/causal-lm
    python scripts/causal_lm_report.py --results results/causal-lm/study --runs runs/causal-lm/study --seeds 42,43
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from statistics import fmean
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed

from hf_attn.analysis.plots import plot_perplexity_by_length

SCHEMES = ("none", "sinusoidal", "sinusoidal-scaled", "learned", "rope", "alibi")  # configs/causal-lm/<name>.yaml
PROMPTS = ("This movie was", "I have never seen a film", "The acting in this", "Worst movie ever")
DECODING = {
    "beam search (4 beams)": {"num_beams": 4, "do_sample": False},
    "sampling (temperature 0.8, top-p 0.9, seed 0)": {"do_sample": True, "temperature": 0.8, "top_p": 0.9,
                                                     "top_k": 0},
}
SEED = 0


def result_name(scheme: str, seed: int | None) -> str:
    """A run's name: its folder under --runs and, with `.json`, its `hf-attn perplexity --output` file."""
    return scheme if seed is None else f"{scheme}-seed{seed}"


def read_results(results: Path, schemes: tuple[str, ...], seeds: tuple[int | None, ...]
                 ) -> dict[str, list[dict[str, Any]]]:
    """Each scheme's reports, one per seed."""
    names = [result_name(scheme, seed) for scheme in schemes for seed in seeds]
    missing = [name for name in names if not (results / f"{name}.json").is_file()]
    if missing:
        raise SystemExit(f"no {', '.join(f'{m}.json' for m in missing)} in {results}; run `hf-attn perplexity "
                         "--output` for those runs first (docs/causal-lm.md).")
    return {scheme: [json.loads((results / f"{result_name(scheme, seed)}.json").read_text()) for seed in seeds]
            for scheme in schemes}


def perplexities(reports: list[dict[str, Any]], length: str) -> list[float] | None:
    """The seeds' perplexities at `length`, or None where the scheme cannot be read there (a learned table)."""
    values = [report["perplexity_by_length"][length]["perplexity"] for report in reports]
    return values if all(isinstance(value, float) for value in values) else None


def ordering(reports: dict[str, list[dict[str, Any]]], length: str) -> str:
    """The schemes by mean perplexity at `length`, lowest first: `<` where every seed of one is below every seed
    of the next, `~` where the seeds overlap (no measured difference)."""
    measured = sorted((fmean(values), min(values), max(values), scheme) for scheme, runs in reports.items()
                      if (values := perplexities(runs, length)) is not None)
    words = [measured[0][3]]
    for (_, _, highest, _), (_, lowest, _, scheme) in zip(measured, measured[1:]):
        words += ["<" if highest < lowest else "~", scheme]
    return " ".join(words)


def table(reports: dict[str, list[dict[str, Any]]]) -> str:
    """Markdown: one row per scheme, mean perplexity over the seeds per evaluation length (as a multiple of the
    training length) with each seed's value, then the unigram level and, with two seeds or more, the ordering."""
    seeds = len(next(iter(reports.values())))
    first = next(iter(reports.values()))[0]
    lengths, training_length = list(first["perplexity_by_length"]), first["training_length"]
    header = ["scheme", *(f"{length} ({int(length) // training_length}x)" for length in lengths), "steps",
              "train time (s)"]
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for scheme, runs in reports.items():
        cells = []
        for length in lengths:
            values = perplexities(runs, length)
            if values is None:
                cells.append(runs[0]["perplexity_by_length"][length]["perplexity"])
            else:
                mean = f"{fmean(values):.1f}"
                cells.append(mean if seeds == 1 else f"{mean} ({', '.join(f'{value:.1f}' for value in values)})")
        seconds = fmean(run["training"]["train_runtime_s"] for run in runs)
        rows.append(f"| {scheme} | " + " | ".join(cells) + f" | {runs[0]['training']['optimizer_steps']} | "
                    f"{seconds:.0f} |")
    lines = [f"Validation perplexity of each causal LM (trained at {training_length} tokens) on the same "
             f"{first['evaluated_tokens']:,} tokens of validation reviews, cut into non-overlapping windows of each "
             "length (Press et al. 2022's nonoverlapping evaluation). Lower is better."
             + ("" if seeds == 1 else f" Each cell: the mean of {seeds} seeds (each seed's value)."), "", *rows, ""]
    if "unigram_perplexity" in first:
        lines += [f"Unigram level (each token's smoothed frequency in the training reviews, no context): "
                  f"{first['unigram_perplexity']:.1f}.", ""]
    if seeds > 1:
        lines += ["Ordering by mean perplexity (`<`: every seed below every seed of the next; `~`: the seeds "
                  "overlap, no measured difference):", ""]
        lines += [f"- {length}: {ordering(reports, length)}" for length in lengths] + [""]
    return "\n".join(lines)


def run_folder(runs: Path, scheme: str, seeds: tuple[int | None, ...]) -> Path:
    """The run folder of `scheme` that samples are drawn from: its first seed's that this machine has."""
    folders = [runs / result_name(scheme, seed) for seed in seeds]
    for folder in folders:
        if (folder / "config.json").is_file():
            return folder
    raise SystemExit(f"wrote the table and plot; samples.md needs a run folder of {scheme}, and none of "
                     f"{', '.join(map(str, folders))} holds a model: pass --runs where they are, or train one "
                     "(docs/causal-lm.md)")


def samples(model_dir: Path, scheme: str, perplexity: float) -> str:
    """Markdown: the model's continuation of each prompt with each decoding, prompt + new tokens within the
    training length (a learned table has no later position, and the other schemes were trained on no more)."""
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    length = model.config.max_position_embeddings
    lines = [f"Continuations by the `{scheme}` model (lowest validation perplexity at the training length: "
             f"{perplexity:.1f}), from `{model_dir}`; prompt + new tokens <= {length} (the training length). "
             "Generated by `python scripts/causal_lm_report.py` with transformers' `generate()`.", ""]
    for prompt in PROMPTS:
        input_ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
        lines += [f"## “{prompt}”", ""]
        for name, options in DECODING.items():
            set_seed(SEED)
            with torch.no_grad():
                output = model.generate(input_ids, attention_mask=torch.ones_like(input_ids),
                                        max_new_tokens=length - input_ids.shape[1], **options)
            lines += [f"- **{name}:** {tokenizer.decode(output[0])}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results/causal-lm"))
    parser.add_argument("--runs", type=Path, default=Path("runs/causal-lm"), help="the runs' --output-dir parent")
    parser.add_argument("--schemes", default=",".join(SCHEMES))
    parser.add_argument("--seeds", help="comma-separated seeds: read SCHEME-seedN.json (runs SCHEME-seedN), not "
                                        "SCHEME.json")
    args = parser.parse_args(argv)
    seeds = tuple(int(seed) for seed in args.seeds.split(",")) if args.seeds else (None,)
    reports = read_results(args.results, tuple(args.schemes.split(",")), seeds)
    (args.results / "extrapolation.md").write_text(table(reports))
    curves = {scheme: {int(length): fmean(values) for length in runs[0]["perplexity_by_length"]
                       if (values := perplexities(runs, length)) is not None} for scheme, runs in reports.items()}
    training_length = next(iter(reports.values()))[0]["training_length"]
    plot_perplexity_by_length(curves, args.results / "extrapolation.png", training_length)
    best = min(curves, key=lambda scheme: curves[scheme][training_length])
    (args.results / "samples.md").write_text(samples(run_folder(args.runs, best, seeds), best,
                                                     curves[best][training_length]))
    print(f"wrote {args.results}/extrapolation.md, extrapolation.png, samples.md (best at {training_length}: {best})",
          file=sys.stderr)


if __name__ == "__main__":
    main()
