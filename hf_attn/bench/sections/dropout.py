"""The `dropout` section: one layer's attention with dropout in training, SDPA against the eager product.

On a CPU, SDPA's fused kernels take no dropout, so a training step with attention dropout runs SDPA's math path;
this times it, forward and backward, against the eager computation (scores, softmax, dropout, weighted sum) at the
bench's heads (`num_attention_heads` of `hidden_size / num_attention_heads`, `dropout_batch` x `dropout_seq`
tokens, `attention_dropout`), in float32 and on bfloat16 tensors, interleaved. Asked for by name: `hf-attn bench
--sections dropout`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import torch
import torch.nn.functional as F

from ...timing import interleaved_times, summarize
from .base import BenchSection, option

if TYPE_CHECKING:  # the settings gather every section's fields
    from ..settings import BenchSettings

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def attention_ways(probability: float) -> dict[str, Callable[..., torch.Tensor]]:
    """Attention with dropout `probability` over (batch, heads, tokens, head dim) tensors, eager and by SDPA."""

    def eager(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        scores = query @ key.transpose(-1, -2) * query.shape[-1] ** -0.5
        return F.dropout(scores.softmax(-1), probability, training=True) @ value

    def sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(query, key, value, dropout_p=probability)

    return {"eager": eager, "sdpa": sdpa}


@dataclasses.dataclass(frozen=True)
class DropoutSection(BenchSection):
    """One layer's attention with dropout, forward and backward, SDPA against eager, in each dtype."""

    name: ClassVar[str] = "dropout"
    dropout_batch: int = option(8, "batch of the dropout section")
    dropout_seq: int = option(128, "tokens of the dropout section")
    dropout_repeats: int = option(15, "timed forward + backward passes of each attention in the dropout section")

    @classmethod
    def run(cls, settings: BenchSettings, device: torch.device) -> dict[str, Any]:
        """For each dtype, each way's forward + backward times (`timing.summarize`) and SDPA's median over eager's."""
        heads = settings.num_attention_heads
        shape = (settings.dropout_batch, heads, settings.dropout_seq, settings.hidden_size // heads)
        generator = torch.Generator().manual_seed(settings.seed)
        rows = []
        for name, dtype in DTYPES.items():
            tensors = [torch.randn(*shape, generator=generator).to(device, dtype).requires_grad_() for _ in range(3)]
            steps = {way: (lambda attend=attend: attend(*tensors).float().sum().backward())
                     for way, attend in attention_ways(settings.attention_dropout).items()}
            times = interleaved_times(steps, warmup=1, repeats=settings.dropout_repeats, device=device)
            ways = {way: summarize(seconds) for way, seconds in times.items()}
            rows.append({"dtype": name, **ways,
                         "sdpa_over_eager": ways["sdpa"]["median_ms"] / ways["eager"]["median_ms"]})
        return {"shape": list(shape), "dropout": settings.attention_dropout, "repeats": settings.dropout_repeats,
                "rows": rows}

    @classmethod
    def report(cls, record: dict[str, Any]) -> list[str]:
        batch, heads, tokens, head_dim = record["shape"]
        rows = [f"| {row['dtype']} | {row['eager']['median_ms']:.2f} | {row['sdpa']['median_ms']:.2f} | "
                f"{row['sdpa_over_eager']:.2f}x |" for row in record["rows"]]
        return ["## Attention with dropout, forward + backward", "",
                f"One layer's attention, batch {batch}, {heads} heads of {head_dim}, {tokens} tokens, dropout "
                f"{record['dropout']}; median ms of {record['repeats']} interleaved repeats.", "",
                "| dtype | eager | SDPA | SDPA / eager |", "|---|---|---|---|", *rows, ""]
