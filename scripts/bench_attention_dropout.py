"""One layer's attention with dropout in training, forward and backward: SDPA against the eager product.

On a CPU, SDPA's fused kernels take no dropout, so a training step with attention dropout runs SDPA's math path;
this times it against the eager computation (scores, softmax, dropout, weighted sum) at the bench's shape
(batch 8, 4 heads, 128 tokens, head dim 96), in fp32 and under bf16 tensors, interleaved, median of 15.

    python scripts/bench_attention_dropout.py [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from hf_attn.bench.runner import this_cpu

SHAPE = (8, 4, 128, 96)
DROPOUT = 0.1


def eager(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    scores = query @ key.transpose(-1, -2) * SHAPE[-1] ** -0.5
    return F.dropout(scores.softmax(-1), DROPOUT, training=True) @ value


def sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(query, key, value, dropout_p=DROPOUT)


def median_ms(ways: dict[str, Callable[..., torch.Tensor]], dtype: torch.dtype, repeats: int = 15) -> dict[str, float]:
    tensors = [torch.randn(*SHAPE, dtype=dtype, requires_grad=True) for _ in range(3)]
    times: dict[str, list[float]] = {name: [] for name in ways}
    for attend in ways.values():  # warm-up
        attend(*tensors).float().sum().backward()
    for _ in range(repeats):
        for name, attend in ways.items():
            start = time.perf_counter()
            attend(*tensors).float().sum().backward()
            times[name].append(time.perf_counter() - start)
    return {name: round(1000 * statistics.median(values), 2) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{this_cpu()['model']}, {args.threads} thread(s), shape {SHAPE}, dropout {DROPOUT}")
    for dtype in (torch.float32, torch.bfloat16):
        print(dtype, median_ms({"eager": eager, "sdpa": sdpa}, dtype), "ms (forward + backward)")


if __name__ == "__main__":
    main()
