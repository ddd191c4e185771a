"""Exact match by source (or target) length in tokens, from `hf-attn seq2seq` results JSONs, as a PNG.

Each results file is one line, named by its `--label` (`group/variant` lines share a colour per group); a length
with fewer than `--min-pairs` pairs is left out (a handful of pairs is noise). Seeds of one setting are
separate files with labels such as `attention/seed 42`.

    python scripts/plot_seq2seq_lengths.py --output results/seq2seq/notes/bottleneck.png \
        --result attention/seed42=results/seq2seq/notes/tf-attention-s42.json \
        --result pooled/seed42=results/seq2seq/notes/pooled-s42.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hf_attn.analysis.plots import plot_line_panels


def length_series(results: dict, split: str, side: str, min_pairs: int) -> tuple[list[int], list[float]]:
    """(lengths, exact match in %) of greedy decoding on `split` by `side` (source / target) length."""
    by_length = results[f"{split}_exact_match_greedy_by_{side}_tokens"]
    kept = sorted((int(length), row["exact_match"]) for length, row in by_length.items() if row["n"] >= min_pairs)
    return [length for length, _ in kept], [100 * value for _, value in kept]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--result", action="append", required=True, metavar="LABEL=PATH",
                        help="a line's label and its results JSON (repeat)")
    parser.add_argument("--output", required=True, type=Path, help="the PNG to write")
    parser.add_argument("--split", default="test", choices=("val", "test"))
    parser.add_argument("--side", default="source", choices=("source", "target"))
    parser.add_argument("--min-pairs", type=int, default=20, help="leave out lengths with fewer pairs")
    args = parser.parse_args()
    lines = {}
    for item in args.result:
        label, separator, path = item.partition("=")
        if not separator:
            parser.error(f"--result {item!r} must look like LABEL=PATH")
        lines[label] = length_series(json.loads(Path(path).read_text()), args.split, args.side, args.min_pairs)
    title = f"greedy exact match on {args.split} by {args.side} length"
    plot_line_panels([(title, "exact match (%)", lines)], args.output, f"{args.side} tokens")
    print(args.output)


if __name__ == "__main__":
    main()
