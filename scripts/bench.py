"""Benchmark hf-attn against transformers' BERT, RoFormer and ModernBERT of the same shape (= `hf-attn bench`).

Writes results/bench/bench.json, results/bench/bench.md and results/bench/bench_attention_scaling.png, and
prints the markdown report. A quick look at one case on a busy machine:

    python scripts/bench.py --sections throughput --modes train --seq-lengths 128 --schemes rope --repeats 3

The full default run takes tens of minutes on a 2-core CPU; run it on a quiet machine, since other
jobs make every ratio noisier (the report shows the load average at start and end).
"""

from __future__ import annotations

import argparse

from hf_attn.bench import add_arguments, run_from_args


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    main()
