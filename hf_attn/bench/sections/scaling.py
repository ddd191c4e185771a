"""The `scaling` section: inference time and memory of hf-attn, eager vs SDPA, as the sequence grows: eager
materialises the (batch, heads, T, T) score matrix, SDPA's fused kernels need not. Run by default; its plot is
`plot_attention_scaling`'s.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from ...modeling_hf_attn import HfAttnForSequenceClassification
from ...timing import MIB, interleaved_times, peak_memory_bytes, summarize
from ..markdown import ratio, table
from ..models import Candidate, hf_attn_config
from ..timing import infer_step, make_batch
from .base import BenchSection, option

if TYPE_CHECKING:  # the settings gather every section's fields
    from ..settings import BenchSettings


@dataclasses.dataclass(frozen=True)
class ScalingSection(BenchSection):
    """hf-attn's inference at growing lengths, each of `backends`."""

    name: ClassVar[str] = "scaling"
    by_default: ClassVar[bool] = True
    scaling_scheme: str = option("rope", "hf-attn position scheme of the scaling section")
    scaling_lengths: tuple[int, ...] = option((128, 256, 512, 1024, 2048), "sequence lengths of the scaling section")
    scaling_batch: int = option(8, "inference batch size of the scaling section")
    scaling_repeats: int = option(3, "timed steps per length and backend")

    @classmethod
    def run(cls, settings: BenchSettings, device: torch.device) -> dict[str, Any]:
        """Inference time and memory of hf-attn, eager vs SDPA, as the sequence grows."""
        torch.manual_seed(settings.seed)
        config = hf_attn_config(settings, settings.scaling_scheme, max(settings.scaling_lengths))
        model = HfAttnForSequenceClassification(config).to(device)
        candidates = [Candidate("hf-attn", settings.scaling_scheme, b, model, None) for b in settings.backends]
        generator = torch.Generator().manual_seed(settings.seed)
        rows = []
        for seq in settings.scaling_lengths:
            size = settings.scaling_batch
            batch = make_batch(size, [seq] * size, seq, settings.vocab_size, generator, device)
            steps = {c.backend: (lambda c=c: infer_step(c, batch)) for c in candidates}
            prepare = {c.backend: (lambda c=c: c.prepare(False)) for c in candidates}
            times = interleaved_times(steps, prepare, 1, settings.scaling_repeats, device)
            for candidate in candidates:
                candidate.prepare(False)
                rows.append({"seq": seq, "batch": settings.scaling_batch, "backend": candidate.backend,
                             **summarize(times[candidate.backend]),
                             "peak_mib": peak_memory_bytes(steps[candidate.backend], device) / MIB})
        return {"scheme": settings.scaling_scheme, "rows": rows}

    @classmethod
    def report(cls, record: dict[str, Any]) -> list[str]:
        by_seq: dict[int, dict[str, dict[str, Any]]] = {}
        for r in record["rows"]:
            by_seq.setdefault(r["seq"], {})[r["backend"]] = r
        backends = list(dict.fromkeys(r["backend"] for r in record["rows"]))
        header = ["seq"] + [f"{b} ms" for b in backends] + [f"{b} peak MiB" for b in backends]
        rows = [[seq] + [f"{cells[b]['median_ms']:.1f}" for b in backends]
                + [f"{cells[b]['peak_mib']:.1f}" for b in backends] for seq, cells in by_seq.items()]
        if {"eager", "sdpa"} <= set(backends):
            header.append("sdpa speed-up")
            for row, cells in zip(rows, by_seq.values()):
                row.append(ratio(cells["eager"]["median_ms"] / cells["sdpa"]["median_ms"]))
        batch = record["rows"][0]["batch"] if record["rows"] else "?"
        return [f"## Attention cost scaling (hf-attn {record['scheme']}, inference, batch {batch})", "",
                table(header, rows), ""]


def plot_attention_scaling(results: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Time and peak memory against sequence length, one line per attention backend, log-log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    section = results["scaling"]
    backends = list(dict.fromkeys(r["backend"] for r in section["rows"]))
    figure, (time_axis, memory_axis) = plt.subplots(1, 2, figsize=(10, 4))
    for backend in backends:
        rows = [r for r in section["rows"] if r["backend"] == backend]
        seqs = [r["seq"] for r in rows]
        time_axis.plot(seqs, [r["median_ms"] for r in rows], marker="o", label=backend)
        memory_axis.plot(seqs, [max(r["peak_mib"], 1e-3) for r in rows], marker="o", label=backend)
    lengths = sorted({r["seq"] for r in section["rows"]})
    for axis, label in ((time_axis, "median inference time (ms)"), (memory_axis, "peak memory above baseline (MiB)")):
        axis.set_xscale("log", base=2)
        axis.set_xticks(lengths, labels=[str(n) for n in lengths], minor=False)
        axis.minorticks_off()
        axis.set_yscale("log")
        axis.set_xlabel("sequence length (tokens)")
        axis.set_ylabel(label)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend()
    batch = section["rows"][0]["batch"] if section["rows"] else "?"
    figure.suptitle(f"hf-attn {section['scheme']}: attention cost, batch {batch}")
    figure.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
