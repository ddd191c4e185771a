"""`hf-attn bench`: the speed benchmark against transformers' BERT, RoFormer, ModernBERT and Llama. Its options
and its run live with it in `hf_attn.bench`; this module imports them only when `bench` is parsed, since the
options are generated from its settings (which import torch)."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..bench.runner import add_arguments as add_bench_arguments

    add_bench_arguments(parser)


def run(args: argparse.Namespace) -> None:
    """Run the benchmark with the parsed options, write its JSON, markdown and plot, and print the markdown."""
    from ..bench.runner import run_from_args

    run_from_args(args)
