"""How fast one core reads a weight matrix in a one-row product, against a plain pass over memory.

A decoding step at batch 1 multiplies one row by every weight matrix once, so it runs at the speed those
products stream the weights. Each figure here reads `--megabytes` of float32 data from memory (more than the
cache holds): a `sum` over one tensor that size; and a row times each of the copies of a `--rows` x `--columns`
weight that together make that size, as BLAS's product (`nn.functional.linear`, the weight stored (out, in) as
`nn.Linear` keeps it; and `row @ weight` with the weight stored (in, out)), and as `(row * weight).sum(-1)`
compiled by Inductor (`hf_attn.serving.StreamingLinear`'s single-row product in a compiled graph). One thread;
the methods run interleaved, `--repeats` times; the JSON keeps the median GB/s of each.

    python scripts/bench_weight_streaming.py --out results/bench/weight-streaming.json
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

import torch
from torch import nn

from hf_attn.bench.runner import write_script_record
from hf_attn.timing import interleaved_times, this_cpu, use_threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=160, help="data read per measurement (beyond the cache)")
    parser.add_argument("--rows", type=int, default=3072, help="weight rows (outputs), as an nn.Linear stores it")
    parser.add_argument("--columns", type=int, default=384, help="weight columns (inputs)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    use_threads(1)
    copies = max(2, args.megabytes * 10**6 // (args.rows * args.columns * 4))
    weights = [torch.randn(args.rows, args.columns) for _ in range(copies)]  # (out, in), as nn.Linear
    transposed = [weight.t().contiguous() for weight in weights]  # (in, out)
    whole = torch.randn(copies * args.rows * args.columns)
    row = torch.randn(1, args.columns)
    fused = torch.compile(lambda row, weight: (row[..., None, :] * weight).sum(dim=-1), fullgraph=True, dynamic=False)
    methods = {
        "sum over one tensor": lambda: whole.sum(),
        "BLAS, weight (out, in): nn.functional.linear": lambda: [nn.functional.linear(row, w) for w in weights],
        "BLAS, weight (in, out): row @ weight": lambda: [row @ w for w in transposed],
        "(row * weight).sum(-1), compiled": lambda: [fused(row, w) for w in weights],
    }
    load_start = os.getloadavg()
    with torch.no_grad():  # the warm-up compiles the fused product
        seconds = interleaved_times(methods, warmup=1, repeats=args.repeats, clock="thread")
    gigabytes = whole.numel() * 4 / 1e9
    rows = [{"method": name, "gb_per_s": gigabytes / statistics.median(values),
             "gb_per_s_per_repeat": [gigabytes / value for value in values]} for name, values in seconds.items()]
    for entry in rows:
        print(f"{entry['method']:48s} {entry['gb_per_s']:6.1f} GB/s")
    results = {
        "command": f"python scripts/bench_weight_streaming.py --megabytes {args.megabytes} --rows {args.rows} "
                   f"--columns {args.columns} --repeats {args.repeats} --out {args.out}",
        "environment": {"cpu": this_cpu(), "threads": 1, "cpus": os.cpu_count(), "load_average_start": load_start,
                        "load_average_end": os.getloadavg(), "torch": torch.__version__},
        "weight": [args.rows, args.columns], "copies": copies, "gigabytes_read": gigabytes,
        "rows": rows,
    }
    write_script_record(args.out, results)


if __name__ == "__main__":
    main()
