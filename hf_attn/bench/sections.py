"""The fixed-shape sections: throughput against the anchors, attention scaling, and a training profile.

* `throughput`: training steps (forward + backward + AdamW) and inference (no grad) at fixed shapes, in
  each precision (fp32, and bf16 autocast), for hf-attn with every position scheme x backend and every
  variant, and for each anchor (transformers' BERT, RoFormer, ModernBERT) built with the identical shape;
  the median over interleaved repeats is reported, with tokens/s, model-FLOPs utilisation against the
  matmul throughput measured interleaved with the models in the same case (`flops`), each model's speed-up
  against every anchor and hf-attn's against the fastest of its peers (`settings.PEERS`), the issue's yardstick.
* `scaling`: inference time and memory of hf-attn, eager vs SDPA, as the sequence grows: eager
  materialises the (batch, heads, T, T) score matrix, SDPA's fused kernels need not.
* `profile`: the top operators by self CPU time over a few training steps of hf-attn and of one anchor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..modeling_hf_attn import HfAttnForSequenceClassification
from ..timing import MIB, interleaved_times, peak_memory_bytes, summarize, timed
from .flops import gemm_flops, gemm_operands, linear_weights, matmul_peak, step_flops
from .models import (
    ANCHOR_BUILDERS,
    Candidate,
    build_candidates,
    count_parameters,
    encoder_layers,
    hf_attn_config,
    supported_backends,
)
from .settings import ANCHORS, BenchSettings, is_goal_row, peer_families, ratio_summary
from .timing import infer_step, make_batch, train_step

MATMUL_STEP = "matmul (interleaved peak)"
"""The step of each timed case that multiplies `flops.gemm_shapes` once each, beside the models' steps."""


def bench_throughput(settings: BenchSettings, device: torch.device) -> dict[str, Any]:
    """Training and inference at fixed shapes for every candidate in every precision, with each row's model
    FLOPs and MFU against the matmul throughput measured interleaved with the models in the same case (see
    `flops`); plus parameter counts, the peaks (before the models, and per case) and the goals."""
    candidates = build_candidates(settings, max(settings.seq_lengths), device)
    generator = torch.Generator().manual_seed(settings.seed)
    models = []
    for candidate in candidates:
        layers = encoder_layers(candidate.model)
        models.append({
            "name": candidate.name, "family": candidate.family, "scheme": candidate.scheme,
            "backend": candidate.backend, "hidden_size": candidate.model.config.hidden_size,
            "num_layers": len(layers), "params": count_parameters(candidate.model),
            "encoder_layer_params": count_parameters(layers), "encoder_matmul_weights": linear_weights(layers),
        })
    peaks = {precision: matmul_peak(settings, precision, device) for precision in settings.precision}
    rows, interleaved_peaks = [], []
    cases = {"train": (settings.train_batch, train_step), "infer": (settings.infer_batch, infer_step)}
    for mode in settings.modes:
        batch_size, step_fn = cases[mode]
        for seq in settings.seq_lengths:
            batch = make_batch(batch_size, [seq] * batch_size, seq, settings.vocab_size, generator, device)
            prepare = {c.name: (lambda c=c: c.prepare(mode == "train")) for c in candidates}
            for precision in settings.precision:  # innermost: both precisions of a case are neighbours in time
                steps = {c.name: (lambda c=c: step_fn(c, batch, precision)) for c in candidates}
                operands = gemm_operands(settings, precision, device)
                steps[MATMUL_STEP] = lambda operands=operands: [torch.mm(left, right) for left, right in operands]
                times = interleaved_times(steps, prepare, settings.warmup, settings.repeats, device)
                matmul = summarize(times[MATMUL_STEP])
                matmul_gflops = gemm_flops(settings) / (matmul["median_ms"] / 1e3) / 1e9
                interleaved_peaks.append({"mode": mode, "seq": seq, "precision": precision,
                                          "gflops": matmul_gflops, **matmul})
                case = []
                for candidate in candidates:
                    candidate.prepare(mode == "train")
                    row = {"mode": mode, "precision": precision, "batch": batch_size, "seq": seq,
                           "name": candidate.name, "family": candidate.family, "scheme": candidate.scheme,
                           "backend": candidate.backend, **summarize(times[candidate.name])}
                    seconds, tokens = row["median_ms"] / 1e3, batch_size * seq
                    flops = step_flops(candidate.model, encoder_layers(candidate.model), mode, batch_size, seq)
                    row.update(sequences_per_s=batch_size / seconds, tokens_per_s=tokens / seconds,
                               flops_per_token=flops / tokens, matmul_gflops=matmul_gflops,
                               mfu=flops / seconds / (matmul_gflops * 1e9))
                    if settings.peak_memory:
                        row["peak_mib"] = peak_memory_bytes(steps[candidate.name], device) / MIB
                    case.append(row)
                add_speedups(case)
                rows += case
    return {"models": models, "matmul_peak": peaks, "matmul_interleaved": interleaved_peaks, "rows": rows,
            "goals": goal_summary(rows)}


def add_speedups(case: list[dict[str, Any]]) -> None:
    """Speed-ups (anchor time / this time) of every row of one (mode, length, precision) case against each anchor
    at the fastest of its attentions, and of every hf-attn row against the fastest of its scheme's peers
    (`speedup_vs_peer`, `fastest_peer`, `fastest_peer_backend`). The fastest of hf-attn's own attentions for a
    scheme is that scheme's `goal` row: each side at its best."""
    fastest: dict[tuple[str, str], dict[str, Any]] = {}
    for row in case:
        key = (row["family"], row["scheme"])
        if key not in fastest or row["median_ms"] < fastest[key]["median_ms"]:
            fastest[key] = row
    anchors = {family: row for (family, _), row in fastest.items() if family in ANCHORS}
    for row in case:
        for family, anchor in anchors.items():
            row[f"speedup_vs_{family}"] = anchor["median_ms"] / row["median_ms"]
        peers = [family for family in peer_families(row["scheme"]) if family in anchors]
        if row["family"] not in ANCHORS and peers:
            peer = min(peers, key=lambda family: anchors[family]["median_ms"])
            row.update(fastest_peer=peer, fastest_peer_backend=anchors[peer]["backend"],
                       speedup_vs_peer=anchors[peer]["median_ms"] / row["median_ms"])
            if row["family"] == "hf-attn":
                row["goal"] = row is fastest["hf-attn", row["scheme"]]


def goal_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per precision and over all: the goal rows' cells (scheme x mode x length) at `CELL_GOAL` of the fastest
    peer or better, the geometric mean of the ratios, and hf-attn's training MFU range (per precision only: the
    peaks differ)."""
    summary: dict[str, Any] = {}
    cells = [r for r in rows if is_goal_row(r)]
    for precision in [*dict.fromkeys(r["precision"] for r in cells), "all"]:
        chosen = [r for r in cells if precision in ("all", r["precision"])]
        training_mfu = [r["mfu"] for r in chosen if r["mode"] == "train" and precision != "all"]
        summary[precision] = {
            **ratio_summary([r["speedup_vs_peer"] for r in chosen]),
            "training_mfu": [min(training_mfu), max(training_mfu)] if training_mfu else None,
        }
    return summary if cells else {}


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
    """Top operators by self CPU time over a few training steps (after one warm-up step) of hf-attn and,
    with `profile_anchor`, of that transformers model on the same batch, in `profile_precision`."""
    seq, size, precision = settings.profile_seq, settings.train_batch, settings.profile_precision
    torch.manual_seed(settings.seed)
    model = HfAttnForSequenceClassification(hf_attn_config(settings, settings.profile_scheme, seq))
    candidates = [Candidate("hf-attn", settings.profile_scheme, settings.profile_backend, model, None)]
    if settings.profile_anchor:
        scheme, build = ANCHOR_BUILDERS[settings.profile_anchor]
        torch.manual_seed(settings.seed)
        anchor = build(settings, seq)
        backend = supported_backends(anchor, (settings.profile_backend, "eager"))[0]  # hf-attn's where it has it
        candidates.append(Candidate(settings.profile_anchor, scheme, backend, anchor, None))
    generator = torch.Generator().manual_seed(settings.seed)
    batch = make_batch(size, [seq] * size, seq, settings.vocab_size, generator, device)
    profiles = {}
    for candidate in candidates:
        candidate.model.to(device)
        candidate.optimizer = torch.optim.AdamW(candidate.model.parameters(), lr=settings.learning_rate)
        candidate.prepare(True)
        train_step(candidate, batch, precision)
        profiles[candidate.name] = profile_steps(lambda c=candidate: train_step(c, batch, precision),
                                                 settings.profile_steps, settings.profile_rows, device)
    return {"scheme": settings.profile_scheme, "backend": settings.profile_backend, "batch": size, "seq": seq,
            "steps": settings.profile_steps, "precision": precision, "models": profiles}


def profile_steps(step: Callable[[], None], steps: int, rows: int, device: torch.device) -> dict[str, Any]:
    """`top_operators` of `steps` runs of `step`, and the wall-clock milliseconds per step under the profiler."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        seconds = timed(lambda: [step() for _ in range(steps)], device)
    return {"step_ms": 1e3 * seconds / steps, "top_ops": top_operators(prof, rows)}


def top_operators(prof: Any, rows: int) -> list[dict[str, Any]]:
    """The `rows` operators of a finished `torch.profiler.profile` with the most self CPU time, with their
    share of all operators' self CPU time."""
    averages = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total_us = sum(e.self_cpu_time_total for e in averages)
    return [{"op": e.key, "calls": e.count, "self_cpu_ms": e.self_cpu_time_total / 1e3,
             "self_cpu_share": e.self_cpu_time_total / total_us} for e in averages[:rows]]
