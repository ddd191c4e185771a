"""The fixed-shape sections: throughput against the anchors, attention scaling, and a training profile.

* `throughput`: training steps (forward + backward + AdamW, fp32) and inference (no grad) at fixed
  shapes, for hf-attn with every position scheme x backend and every variant, and for each anchor
  (transformers' BERT, RoFormer, ModernBERT) built with the identical shape; the median over
  interleaved repeats is reported, with each model's speed-up against every anchor.
* `scaling`: inference time and memory of hf-attn, eager vs SDPA, as the sequence grows: eager
  materialises the (batch, heads, T, T) score matrix, SDPA's fused kernels need not.
* `profile`: the top operators by self CPU time over a few hf-attn training steps.
"""

from __future__ import annotations

from typing import Any

import torch

from ..modeling_hf_attn import HfAttnForSequenceClassification
from .models import Candidate, build_candidates, count_parameters, encoder_layers, hf_attn_config
from .settings import ANCHORS, OWN_DROPOUT_ANCHORS, BenchSettings
from .timing import (
    MIB,
    infer_step,
    interleaved_times,
    make_batch,
    peak_memory_bytes,
    summarize,
    synchronize,
    train_step,
)


def bench_throughput(settings: BenchSettings, device: torch.device) -> dict[str, Any]:
    """Training and inference at fixed shapes for every candidate, plus their parameter counts."""
    candidates = build_candidates(settings, max(settings.seq_lengths), device)
    generator = torch.Generator().manual_seed(settings.seed)
    models = []
    for candidate in candidates:
        layers = encoder_layers(candidate.model)
        models.append({
            "name": candidate.name, "family": candidate.family, "scheme": candidate.scheme,
            "backend": candidate.backend, "hidden_size": candidate.model.config.hidden_size,
            "num_layers": len(layers), "params": count_parameters(candidate.model),
            "encoder_layer_params": count_parameters(layers),
        })
    rows = []
    cases = {"train": (settings.train_batch, train_step), "infer": (settings.infer_batch, infer_step)}
    for mode in settings.modes:
        batch_size, step_fn = cases[mode]
        for seq in settings.seq_lengths:
            batch = make_batch(batch_size, [seq] * batch_size, seq, settings.vocab_size, generator, device)
            steps = {c.name: (lambda c=c: step_fn(c, batch)) for c in candidates}
            prepare = {c.name: (lambda c=c: c.prepare(mode == "train")) for c in candidates}
            times = interleaved_times(steps, prepare, settings.warmup, settings.repeats, device)
            case = []
            for candidate in candidates:
                candidate.prepare(mode == "train")
                row = {"mode": mode, "batch": batch_size, "seq": seq, "name": candidate.name,
                       "family": candidate.family, "scheme": candidate.scheme, "backend": candidate.backend,
                       **summarize(times[candidate.name]),
                       "peak_mib": peak_memory_bytes(steps[candidate.name], device) / MIB}
                row["sequences_per_s"] = batch_size / (row["median_ms"] / 1e3)
                case.append(row)
            add_speedups(case)
            rows += case
    return {"models": models, "rows": rows}


def add_speedups(case: list[dict[str, Any]]) -> None:
    """Speed-ups (anchor time / this time) of every row of one (mode, length) case against each anchor,
    and against the fastest anchor built with the bench's dropout (`speedup_vs_best`)."""
    anchor_ms = {r["family"]: r["median_ms"] for r in case if r["family"] in ANCHORS}
    comparable_ms = [ms for family, ms in anchor_ms.items() if family not in OWN_DROPOUT_ANCHORS]
    for row in case:
        for family, ms in anchor_ms.items():
            row[f"speedup_vs_{family}"] = ms / row["median_ms"]
        if comparable_ms:
            row["speedup_vs_best"] = min(comparable_ms) / row["median_ms"]


def bench_scaling(settings: BenchSettings, device: torch.device) -> dict[str, Any]:
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


def profile_training(settings: BenchSettings, device: torch.device) -> dict[str, Any]:
    """Top operators by self CPU time over a few hf-attn training steps (after one warm-up step)."""
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(settings.seed)
    model = HfAttnForSequenceClassification(hf_attn_config(settings, settings.profile_scheme, settings.profile_seq))
    model.to(device)
    candidate = Candidate("hf-attn", settings.profile_scheme, settings.profile_backend, model,
                          torch.optim.AdamW(model.parameters(), lr=settings.learning_rate))
    generator = torch.Generator().manual_seed(settings.seed)
    seq, size = settings.profile_seq, settings.train_batch
    batch = make_batch(size, [seq] * size, seq, settings.vocab_size, generator, device)
    candidate.prepare(True)
    train_step(candidate, batch)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(settings.profile_steps):
            train_step(candidate, batch)
        synchronize(device)
    return {
        "scheme": settings.profile_scheme, "backend": settings.profile_backend, "batch": size, "seq": seq,
        "steps": settings.profile_steps, "top_ops": top_operators(prof, settings.profile_rows),
    }


def top_operators(prof: Any, rows: int) -> list[dict[str, Any]]:
    """The `rows` operators of a finished `torch.profiler.profile` with the most self CPU time, with their
    share of all operators' self CPU time."""
    averages = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total_us = sum(e.self_cpu_time_total for e in averages)
    return [{"op": e.key, "calls": e.count, "self_cpu_ms": e.self_cpu_time_total / 1e3,
             "self_cpu_share": e.self_cpu_time_total / total_us} for e in averages[:rows]]
