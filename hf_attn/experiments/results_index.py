"""`results/README.md`: an index of every results JSON, generated from the files themselves.

    python -m hf_attn.experiments.results_index [RESULTS_DIR]

One table row per JSON file under RESULTS_DIR (default `results`; not an arena's `cells/`, whose report is
listed): its study (the subfolder it lies in), its name linked to the file (and to the markdown report beside it
named after the file or its folder, if any), its key metric on test and validation, and the command recorded in
it. The key metric is the first entry of `KEY_METRICS` whose keys the file holds; a file with none (a benchmark) is
listed with its link and command only. A recorded command that runs a script the repository no longer has
(`python scripts/X.py`) is marked as such, since it cannot be rerun. Regenerate the index after adding or changing
results rather than editing it by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

INDEX_NAME = "README.md"
# A script a recorded command runs, relative to the repository (the folder above the results folder).
SCRIPT_IN_COMMAND = re.compile(r"(?:^|\s)((?:scripts|tools)/[\w./-]+\.(?:py|sh))")

# (metric, its test key, its validation key) by kind of result; dotted keys reach into sections.
KEY_METRICS: tuple[tuple[str, str | None, str | None], ...] = (
    ("accuracy", "test_accuracy", "val_accuracy"),  # classifiers (hf-attn train), TF-IDF baselines
    ("DAN accuracy", "dan.test_accuracy", "dan.val_accuracy"),  # a Week 3 folder (hf-attn prepare)
    ("masked-LM loss", None, "eval_mlm_loss"),  # masked-LM pretraining, on validation chunks
    ("detection accuracy", None, "eval_detection_accuracy"),  # replaced-token detection pretraining
    ("causal-LM perplexity", None, "training.eval_perplexity"),  # hf-attn perplexity of a causal LM
    ("exact match (greedy)", "test_exact_match_greedy", "val_exact_match_greedy"),  # hf-attn seq2seq
    ("hard reviews right, of 6", "hard_probe_score", None),  # hf-attn probe
)

HEADER = """# Results

Every results JSON in this folder, one row each, grouped by study (the subfolder). Generated from the
files by `python -m hf_attn.experiments.results_index`; do not edit by hand. `test` and `validation`
are the file's key metric on the seed split's test and validation parts; `command` is the command the
file records (empty where the file records none; "script removed" where it runs a script the repository
no longer has).

| study | result | metric | test | validation | command |
|---|---|---|---|---|---|
"""


def lookup(record: Any, dotted_key: str | None) -> Any:
    """`record["a"]["b"]` for `a.b`; None where the key is missing (or not asked for)."""
    if dotted_key is None:
        return None
    value = record
    for key in dotted_key.split("."):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def key_metric(record: Any) -> tuple[str, Any, Any]:
    """(metric name, test value, validation value) of a results record, from `KEY_METRICS`; empty if none fits."""
    for metric, test_key, validation_key in KEY_METRICS:
        test, validation = lookup(record, test_key), lookup(record, validation_key)
        if test is not None or validation is not None:
            return metric, test, validation
    return "", None, None


def format_value(value: Any) -> str:
    """A table cell for a number: floats to 4 decimals, other values as they are, None empty."""
    if value is None:
        return ""
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def missing_scripts(command: str, repository: Path) -> list[str]:
    """The scripts `command` runs (`scripts/X.py`, `tools/X.sh`) that `repository` does not hold."""
    return [script for script in SCRIPT_IN_COMMAND.findall(command) if not (repository / script).is_file()]


def index_row(results_dir: Path, path: Path) -> str:
    """The table row of one results JSON."""
    relative = path.relative_to(results_dir)
    study, *name = relative.with_suffix("").parts if len(relative.parts) > 1 else ("", relative.stem)
    link = f"[{'/'.join(name)}]({relative.as_posix()})"
    for report in (path.with_suffix(".md"), path.parent.with_suffix(".md")):  # beside the file, or its folder
        if report.is_file() and results_dir in report.parents:
            link += f" ([report]({report.relative_to(results_dir).as_posix()}))"
            break
    record = json.loads(path.read_text())
    metric, test, validation = key_metric(record)
    command = lookup(record, "command")
    command_cell = f"`{command}`".replace("|", "\\|") if command else ""
    if command and missing_scripts(command, results_dir.parent):
        command_cell += " (script removed)"
    return f"| {study} | {link} | {metric} | {format_value(test)} | {format_value(validation)} | {command_cell} |"


CELLS = "cells"  # an arena's measurements, one JSON each: its report beside them is the result (arena.json)


def build_index(results_dir: str | os.PathLike[str]) -> str:
    """The markdown index of every `*.json` under `results_dir` but an arena's `cells/`, sorted by study and name."""
    results_dir = Path(results_dir)
    files = sorted((path for path in results_dir.rglob("*.json") if CELLS not in path.relative_to(results_dir).parts),
                   key=lambda path: path.relative_to(results_dir).with_suffix("").parts)
    return HEADER + "".join(index_row(results_dir, path) + "\n" for path in files)


def write_index(results_dir: str | os.PathLike[str]) -> Path:
    """Write `results_dir/README.md` (see `build_index`) and return its path."""
    index = Path(results_dir) / INDEX_NAME
    index.write_text(build_index(results_dir))
    return index


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results_dir", nargs="?", default="results", help="the folder to index (default: results)")
    args = parser.parse_args(argv)
    print(f"wrote {write_index(args.results_dir)}")


if __name__ == "__main__":
    main()
