"""Time CPU inference with and without the projection scratch, side by side, beside BERT.

Without autograd, hf-attn writes every layer's QKV and up-projection into one buffer per forward pass
(`hf_attn/scratch.py`) instead of allocating them afresh, which on CPU means fresh pages from the
kernel. This measures what that buys for the benchmark's shape (`hf-attn bench`'s models): the same
hf-attn model with the scratch and with a stand-in that defers to each `nn.Linear` (the forward pass
as it was before), and transformers' BERT, their steps interleaved so machine drift hits them alike:

    python scripts/bench_scratch.py --threads 2 --scheme alibi --batch 64 --length 512

Besides wall-clock medians it records, per step, the process's minor page faults and system CPU
seconds (`getrusage`), the cost the scratch removes. Writes a JSON record (`--output`) and prints a
markdown table.
"""

from __future__ import annotations

import argparse
import json
import resource
import shlex
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from hf_attn import modeling_hf_attn
from hf_attn.bench import (
    BenchSettings,
    Candidate,
    build_candidates,
    infer_step,
    interleaved_times,
    make_batch,
    parse_side_by_side_arguments,
)
from hf_attn.scratch import ProjectionScratch


class DeferringScratch(ProjectionScratch):
    """A scratch that holds nothing: every projection allocates its output, as before the scratch."""

    def linear(
        self, linear: torch.nn.Module, inputs: torch.Tensor, reader: torch.nn.Module | None = None
    ) -> torch.Tensor:
        return linear(inputs)


def counted(step: Callable[[], None], usage: list[tuple[int, float]]) -> Callable[[], None]:
    """`step`, appending its (minor page faults, system CPU seconds) to `usage` on every call."""

    def run() -> None:
        before = resource.getrusage(resource.RUSAGE_SELF)
        step()
        after = resource.getrusage(resource.RUSAGE_SELF)
        usage.append((after.ru_minflt - before.ru_minflt, after.ru_stime - before.ru_stime))

    return run


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scheme", default="alibi", help="hf-attn position scheme")
    parser.add_argument("--batch", type=int, default=64, help="sequences per inference step")
    parser.add_argument("--length", type=int, default=512, help="tokens per sequence")
    args = parse_side_by_side_arguments(parser, argv, arm="arm", output="results/bench-scratch-ab.json")

    settings = BenchSettings(schemes=(args.scheme,), backends=("sdpa",), variants=())
    device = torch.device("cpu")
    ours, bert = (c for c in build_candidates(settings, args.length, device) if c.family in ("hf-attn", "BERT"))
    batch = make_batch(args.batch, [args.length] * args.batch, args.length, settings.vocab_size,
                       torch.Generator().manual_seed(settings.seed), device)

    def use(scratch_class: type[ProjectionScratch], candidate: Candidate) -> Callable[[], None]:
        """Before each step of an arm: the scratch class the model module builds, and the eval mode."""
        def prepare() -> None:
            modeling_hf_attn.ProjectionScratch = scratch_class
            candidate.prepare(training=False)
        return prepare

    arms = {"hf-attn, scratch": (ours, ProjectionScratch), "hf-attn, no scratch": (ours, DeferringScratch),
            "BERT": (bert, ProjectionScratch)}
    usage: dict[str, list[tuple[int, float]]] = {name: [] for name in arms}
    steps = {name: counted(lambda c=candidate: infer_step(c, batch), usage[name])
             for name, (candidate, _) in arms.items()}
    prepare = {name: use(scratch_class, candidate) for name, (candidate, scratch_class) in arms.items()}
    try:
        times = interleaved_times(steps, prepare, args.warmup, args.repeats, device)
    finally:
        modeling_hf_attn.ProjectionScratch = ProjectionScratch
    timed_usage = {name: records[args.warmup:] for name, records in usage.items()}  # the timed steps only
    rows = {
        name: {"median_ms": 1e3 * statistics.median(times[name]),
               "page_faults_per_step": statistics.median(faults for faults, _ in timed_usage[name]),
               "system_cpu_s_per_step": statistics.median(system for _, system in timed_usage[name])}
        for name in arms
    }
    for row in rows.values():
        row["speedup_vs_no_scratch"] = rows["hf-attn, no scratch"]["median_ms"] / row["median_ms"]
        row["speedup_vs_BERT"] = rows["BERT"]["median_ms"] / row["median_ms"]
    command = "python scripts/bench_scratch.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    record = {"command": command, "args": vars(args),
              "torch": torch.__version__, "threads": torch.get_num_threads(), "rows": rows}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(record, indent=2) + "\n")
    print(f"inference, batch {args.batch} x {args.length} tokens, hf-attn {args.scheme} (sdpa), "
          f"{args.repeats} interleaved steps each")
    print("| model | median ms | vs no scratch | vs BERT | page faults / step | system CPU s / step |")
    print("|---|---|---|---|---|---|")
    for name, row in rows.items():
        print(f"| {name} | {row['median_ms']:.0f} | {row['speedup_vs_no_scratch']:.2f}x | "
              f"{row['speedup_vs_BERT']:.2f}x | {row['page_faults_per_step']:.0f} | "
              f"{row['system_cpu_s_per_step']:.2f} |")
    return record


if __name__ == "__main__":
    main()
