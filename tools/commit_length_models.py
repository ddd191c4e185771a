"""Commit the best decoder of each position scheme on one task of the length study, chosen on validation.

For each scheme, of the seeds whose cells are committed under `--results` and whose run folders this machine
holds under `--runs`, the one with the highest exact match in distribution (validation), then the lowest
validation loss, is written as a float16 checkpoint (`hf-attn checkpoint`, with its card) to
`--output/SCHEME`, replacing the one there; `--output/README.md` lists each chosen seed with its scores in and past
the training lengths. Task models are small (about 1.7 MB each at the study's budget).

    python tools/commit_length_models.py --task reverse --results results/length/study --runs runs/length \
        --output checkpoints/length/reverse
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's package and tools

from hf_attn.publishing.checkpoint import write_checkpoint  # noqa: E402
from tools.commit_checkpoint import MAX_TASK_MODEL_MB  # noqa: E402


def in_distribution(cell: dict[str, Any]) -> float:
    """A cell's exact match over its validation buckets (the training lengths)."""
    rows = cell["val_exact_match_by_length"]
    return sum(row["correct"] for row in rows) / sum(row["count"] for row in rows)


def best_seeds(cells: Path, runs: Path, task: str) -> dict[str, tuple[int, dict[str, Any]]]:
    """Each scheme's chosen seed and its cell: the best in distribution, then by validation loss, among the seeds
    whose run folder is here."""
    chosen: dict[str, tuple[int, dict[str, Any]]] = {}
    for scheme_dir in sorted((cells / "tasks" / task / "sequence").iterdir()):
        candidates = []
        for path in sorted(scheme_dir.glob("seed*.json")):
            seed = int(path.stem.removeprefix("seed"))
            if (runs / "runs" / "sequence" / task / f"{scheme_dir.name}-seed{seed}" / "metrics.json").is_file():
                cell = json.loads(path.read_text())
                candidates.append((-in_distribution(cell), cell["val_loss"], seed, cell))
        if candidates:
            _, _, seed, cell = min(candidates, key=lambda candidate: candidate[:3])
            chosen[scheme_dir.name] = (seed, cell)
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", required=True)
    parser.add_argument("--results", type=Path, required=True, help="the arena's --results (its cells/)")
    parser.add_argument("--runs", type=Path, required=True, help="the arena's --output-dir on this machine")
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    chosen = best_seeds(args.results / "cells", args.runs, args.task)
    if not chosen:
        raise SystemExit(f"no committed cell of task {args.task!r} has its run folder under {args.runs}")
    lines = [f"# The length study's best decoder of each scheme on `{args.task}`", "",
             "Chosen on validation (exact match at the training lengths, then validation loss) among the seeds "
             "trained on the machine that wrote this folder, by `python tools/commit_length_models.py "
             f"--task {args.task} --results {args.results} --runs {args.runs} --output {args.output}`; each folder "
             "is a float16 `from_pretrained` folder with its card. Test: exact match past the training length.", "",
             "| scheme | seed | validation (in distribution) | test, first bucket past it |", "|---|---|---|---|"]
    for scheme, (seed, cell) in chosen.items():
        write_checkpoint(args.runs / "runs" / "sequence" / args.task / f"{scheme}-seed{seed}", args.output / scheme,
                         overwrite=True, max_bytes=MAX_TASK_MODEL_MB * 10**6, max_checkpoints=len(chosen))
        past = cell["test_exact_match_by_length"][0]
        lines.append(f"| {scheme} | {seed} | {in_distribution(cell):.3f} | {past['accuracy']:.3f} "
                     f"({past['low']}..{past['high']}) |")
    (args.output / "README.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {len(chosen)} checkpoints under {args.output}")


if __name__ == "__main__":
    main()
