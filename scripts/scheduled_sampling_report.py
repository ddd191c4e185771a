"""Teacher forcing against scheduled sampling on a length task: exact match by output length, as JSON and a PNG.

Each `--run LABEL=FOLDER` is a folder written by `hf-attn train` on a generated length task (`LABEL` as
`condition/seed`, e.g. `teacher forcing/seed 42`). Its saved model answers every validation pair (the training
lengths) and every test pair (past them) of the task its metrics.json records, greedily and in the run's precision,
and is scored by exact match at each length on its own (the run's own scores merge lengths into buckets); the
JSON keeps, per run, the schedule, the validation loss, the training time, those scores and how its wrong answers
are wrong (`error_profile`: errors that compound, the exposure bias scheduled sampling aims at, leave the rest of
an answer wrong after its first slip), and per condition the exact match of all its seeds' answers pooled at each
length.

    python scripts/scheduled_sampling_report.py --output results/scheduled-sampling/reverse-none \\
        --run "teacher forcing/seed 42=runs/scheduled-sampling/tf-s42" \\
        --run "scheduled sampling/seed 42=runs/scheduled-sampling/ss-s42"
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

from hf_attn.analysis.plots import plot_line_panels
from hf_attn.experiments.sequence import bucket_records, score_pairs
from hf_attn.modeling_hf_attn import HfAttnForCausalLM
from hf_attn.tasks import dataset_source
from hf_attn.tasks.length import BucketScore, Pair


def scores_by_length(folder: Path) -> dict[str, Any]:
    """A run folder's record (schedule, seed, validation loss, time) and its exact match at each length on
    validation and test."""
    metrics = json.loads((folder / "metrics.json").read_text())
    experiment = metrics["experiment"]
    data = dataset_source(experiment["dataset"]).load_pairs()
    model = HfAttnForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    record = {"folder": str(folder), "task": experiment["dataset"]["name"], "seed": experiment["seed"],
              "scheduled_sampling": experiment.get("scheduled_sampling", {}), "val_loss": metrics["val_loss"],
              "train_runtime_s": metrics.get("train_runtime_s"), "precision": metrics["precision"]}
    for split in ("validation", "test"):
        pairs = [Pair(row["input"], row["target"], row["length"]) for row in data[split]]
        by_length, answers = score_pairs(model, tokenizer, pairs, None, metrics["precision"])
        record[f"{split}_exact_match_by_length"] = bucket_records(by_length)
        record[f"{split}_errors"] = error_profile(answers, [pair.target for pair in pairs])
    return record


def error_profile(answers: list[str], targets: list[str]) -> dict[str, int]:
    """How the wrong answers are wrong: how many there are, how many have the target's length, and of those how
    many are right again after their first wrong item (one slip, not errors that compound from it)."""
    wrong = [(answer.split(), target.split()) for answer, target in zip(answers, targets)
             if answer.split() != target.split()]
    right_length = [(answer, target) for answer, target in wrong if len(answer) == len(target)]
    recovered = 0
    for answer, target in right_length:
        first = next(index for index, (mine, gold) in enumerate(zip(answer, target)) if mine != gold)
        recovered += answer[first + 1 :] == target[first + 1 :]
    return {"wrong": len(wrong), "right_length": len(right_length), "right_after_first_error": recovered}


def pooled_by_condition(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per condition (the label before `/`) and split, each length's answers of all its seeds counted together."""
    pooled: dict[str, dict[str, dict[int, list[int]]]] = {}
    for label, record in runs.items():
        condition = label.split("/", 1)[0]
        for split in ("validation", "test"):
            counts = pooled.setdefault(condition, {}).setdefault(split, {})
            for row in record[f"{split}_exact_match_by_length"]:
                correct, count = counts.get(row["low"], [0, 0])
                counts[row["low"]] = [correct + row["correct"], count + row["count"]]
    return {condition: {split: bucket_records([BucketScore(length, length, correct, count)
                                               for length, (correct, count) in sorted(counts.items())])
                        for split, counts in splits.items()}
            for condition, splits in pooled.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", required=True, metavar="LABEL=FOLDER",
                        help="a run's label (condition/seed) and its `hf-attn train` folder (repeat)")
    parser.add_argument("--output", required=True, type=Path, help="writes OUTPUT.json and OUTPUT.png")
    args = parser.parse_args()
    runs = {}
    for item in args.run:
        label, separator, folder = item.partition("=")
        if not separator:
            parser.error(f"--run {item!r} must look like LABEL=FOLDER")
        runs[label] = scores_by_length(Path(folder))
    report = {"runs": runs, "by_condition": pooled_by_condition(runs)}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    lines = {}
    for label, record in runs.items():
        rows = record["validation_exact_match_by_length"] + record["test_exact_match_by_length"]
        lines[label] = ([row["low"] for row in rows], [100 * row["accuracy"] for row in rows],
                        [100 * row["standard_error"] for row in rows])
    task = next(iter(runs.values()))["task"]
    title = f"{task}: validation (training lengths) and test (past them)"
    print(plot_line_panels([(title, "greedy exact match (%)", lines)], args.output.with_suffix(".png"),
                           "output length (items)"))

if __name__ == "__main__":
    main()
