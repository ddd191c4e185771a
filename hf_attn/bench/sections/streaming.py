"""The `streaming` section: how fast one core reads a weight matrix in a one-row product, against a plain pass.

A decoding step at batch 1 multiplies one row by every weight matrix once, so it runs at the speed those products
stream the weights. Each figure reads `streaming_megabytes` of float32 data from memory (more than the caches
hold): a `sum` over one tensor that size; and a row times each of the copies of a `streaming_rows` x
`streaming_columns` weight that together make that size, as BLAS's product (`nn.functional.linear`, the weight
stored (out, in) as `nn.Linear` keeps it; and `row @ weight` with the weight stored (in, out)), and as
`(row * weight).sum(-1)` compiled by Inductor (`hf_attn.serving.StreamingLinear`'s single-row product in a compiled
graph). The methods run interleaved, timed in the calling thread's CPU time on a CPU (run it with `--threads 1`);
the record keeps the GB/s of each method's median. Asked for by name: `hf-attn bench --sections streaming`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from ...timing import interleaved_times, summarize
from .base import BenchSection, option

if TYPE_CHECKING:  # the settings gather every section's fields
    from ..settings import BenchSettings

FUSED = "(row * weight).sum(-1), compiled"


def single_row_product(row: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """(1, in) x (out, in) -> (1, out) as a multiply-and-sum: the product `StreamingLinear` compiles."""
    return (row[..., None, :] * weight).sum(dim=-1)


def streaming_methods(settings: BenchSettings, product: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                      device: torch.device) -> tuple[dict[str, Callable[[], Any]], int]:
    """The four ways to read `streaming_megabytes` (see the module), the fused one by `product`, and how many
    copies of the weight they read."""
    rows, columns = settings.streaming_rows, settings.streaming_columns
    copies = max(2, settings.streaming_megabytes * 10**6 // (rows * columns * 4))
    generator = torch.Generator().manual_seed(settings.seed)
    weights = [torch.randn(rows, columns, generator=generator).to(device) for _ in range(copies)]  # (out, in)
    transposed = [weight.t().contiguous() for weight in weights]  # (in, out)
    whole = torch.randn(copies * rows * columns, generator=generator).to(device)
    row = torch.randn(1, columns, generator=generator).to(device)
    return {
        "sum over one tensor": lambda: whole.sum(),
        "BLAS, weight (out, in): nn.functional.linear": lambda: [nn.functional.linear(row, w) for w in weights],
        "BLAS, weight (in, out): row @ weight": lambda: [row @ w for w in transposed],
        FUSED: lambda: [product(row, w) for w in weights],
    }, copies


@dataclasses.dataclass(frozen=True)
class StreamingSection(BenchSection):
    """One-row products against a plain pass over memory, in GB/s."""

    name: ClassVar[str] = "streaming"
    streaming_megabytes: int = option(160, "data the streaming section reads per call (beyond the caches)")
    streaming_rows: int = option(3072, "weight rows (outputs) of the streaming section, as an nn.Linear stores it")
    streaming_columns: int = option(384, "weight columns (inputs) of the streaming section")
    streaming_repeats: int = option(5, "timed calls of each method of the streaming section")

    @classmethod
    def run(cls, settings: BenchSettings, device: torch.device) -> dict[str, Any]:
        """Each method's GB/s at its median time, and per repeat (the warm-up compiles the fused product)."""
        fused = torch.compile(single_row_product, fullgraph=True, dynamic=False)
        methods, copies = streaming_methods(settings, fused, device)
        gigabytes = copies * settings.streaming_rows * settings.streaming_columns * 4 / 1e9
        with torch.no_grad():
            times = interleaved_times(methods, warmup=1, repeats=settings.streaming_repeats, device=device,
                                      clock="thread" if device.type == "cpu" else "wall")
        rows = [{"method": name, "gb_per_s": gigabytes / (summarize(seconds)["median_ms"] / 1e3),
                 "gb_per_s_per_repeat": [gigabytes / value for value in seconds]} for name, seconds in times.items()]
        return {"weight": [settings.streaming_rows, settings.streaming_columns], "copies": copies,
                "gigabytes_read": gigabytes, "rows": rows}

    @classmethod
    def report(cls, record: dict[str, Any]) -> list[str]:
        rows, columns = record["weight"]
        body = [f"| {row['method']} | {row['gb_per_s']:.1f} |" for row in record["rows"]]
        return ["## Weight streaming: one-row products against a pass over memory", "",
                f"{record['gigabytes_read']:.3f} GB read per call: {record['copies']} weights of {rows} x {columns}.",
                "", "| method | GB/s (median) |", "|---|---:|", *body, ""]
