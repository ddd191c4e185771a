"""The `throughput` section: training steps (forward + backward + AdamW) and inference (no grad) at fixed shapes.

In each precision (fp32, and bf16 autocast), for hf-attn with every position scheme x backend and every variant, and
for each anchor (transformers' BERT, RoFormer, ModernBERT) built with the identical shape; the median over interleaved
repeats is reported, with tokens/s, model-FLOPs utilisation against the matmul throughput measured interleaved with
the models in the same case (`flops`), each model's speed-up against every anchor and hf-attn's against the fastest of
its peers (`models.PEERS`), the issue's yardstick, and the goals (`goals`). Run by default.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from ...positions import POSITION_SCHEMES
from ...timing import MIB, interleaved_times, peak_memory_bytes, summarize
from ..flops import gemm_flops, gemm_operands, linear_weights, matmul_peak, step_flops
from ..goals import CELL_GOAL, GEOMEAN_GOAL, is_goal_row, precision_of, ratio_summary, summary_table
from ..markdown import NOT_RECORDED, ratio, table
from ..models import (
    ANCHORS,
    OWN_DROPOUT_ANCHORS,
    Variant,
    build_candidates,
    count_parameters,
    encoder_layers,
    peer_families,
)
from ..timing import infer_step, make_batch, train_step
from .base import BenchSection, option

if TYPE_CHECKING:  # the settings gather every section's fields
    from ..settings import BenchSettings

@dataclasses.dataclass(frozen=True)
class ThroughputSection(BenchSection):
    """Every candidate's training and inference steps at fixed shapes, against the anchors and the goals."""

    name: ClassVar[str] = "throughput"
    by_default: ClassVar[bool] = True
    schemes: tuple[str, ...] = option(tuple(POSITION_SCHEMES), "hf-attn position schemes")
    variants: tuple[str, ...] = option(
        ("rope:rope_layout=interleaved",),
        "hf-attn models measured beside the defaults, each SCHEME:FIELD=VALUE (one HfAttnConfig field set), "
        "e.g. RoPE on interleaved pairs instead of halves")
    peak_repeats: int = option(10, "timed products per GEMM shape of the matmul-peak measurement (the best counts)")
    peak_memory: bool = option(True, "measure each model's peak memory per case (one more step under the profiler)")
    modes: tuple[str, ...] = option(("train", "infer"), "train: forward + backward + AdamW; infer: no grad")
    infer_batch: int = option(64, "inference batch size")
    seq_lengths: tuple[int, ...] = option((128, 512), "sequence lengths; the first is where 'as fast' suffices")
    repeats: int = option(7, "timed steps of each model (the median is reported)")

    @classmethod
    def check(cls, settings: BenchSettings) -> None:
        for variant in settings.variants:
            Variant.parse(variant)

    @classmethod
    def run(cls, settings: BenchSettings, device: torch.device) -> dict[str, Any]:
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

    @classmethod
    def report(cls, record: dict[str, Any]) -> list[str]:
        rows = record["rows"]
        shortest = min(r["seq"] for r in rows)
        anchors = [family for family in ANCHORS if any(r["family"] == family for r in rows)]
        has_flops, has_peers = "mfu" in rows[0], any("speedup_vs_peer" in r for r in rows)
        out = ["## Throughput", "",
               "Speed-up = the transformers model's median step time / this row's (above 1: this row is faster), "
               "within one precision; seq/s" + (" and tokens/s" if has_flops else "") + " from the median; the minimum "
               "is the least disturbed repeat, for judging noise, and 'faster in' counts the repeats in which this row "
               + ("beat its fastest peer (RoPE: RoFormer, ModernBERT; other schemes: BERT, RoFormer, ModernBERT) in "
                  if has_peers else "beat the fastest transformers model with the same dropout in ")
               + "that repeat. Peak MiB: allocator high-water mark above what was held before the step (activations, "
               "gradients, temporaries). bf16: forward under bfloat16 autocast, parameters and optimizer float32.", ""]
        if "matmul_peak" in record:
            out += _format_peaks(record["matmul_peak"], record.get("matmul_interleaved"))
        if record.get("goals"):
            out += _format_goals(record)
        own_dropout = [family for family in OWN_DROPOUT_ANCHORS if family in anchors]
        if own_dropout:
            out += [f"{', '.join(own_dropout)}: built with its library's own dropout defaults (ModernBERT's: none), as "
                    "it is usually trained; it has a ratio column but is nobody's peer and counts neither in 'faster "
                    "in' nor in the goal.", ""]
        labels = {"train": "Training (forward + backward + AdamW", "infer": "Inference (no grad"}
        goals = []
        for mode, batch, seq, precision in _cells(rows):
            case = [r for r in rows if (r["mode"], r["seq"], precision_of(r)) == (mode, seq, precision)]
            out += [f"### {labels[mode]}, {precision}), batch {batch}, sequence {seq}", ""]
            table_rows = []
            for r in case:
                goal = _goal(r, shortest)
                if goal:
                    goals.append((goal, f"{mode} {seq} {precision} {r['scheme']}"))
                flops = [f"{r['tokens_per_s']:,.0f}", f"{r['mfu']:.1%}"] if has_flops else []
                peer = [ratio(r.get("speedup_vs_peer"))] if has_peers else []
                table_rows.append([r["family"], r["scheme"], r["backend"], f"{r['median_ms']:.1f}",
                                   f"{r['min_ms']:.1f}", f"{r['sequences_per_s']:.1f}", *flops,
                                   *(ratio(r.get(f"speedup_vs_{a}")) for a in anchors), *peer,
                                   _faster_repeats(r, case), f"{r['peak_mib']:.1f}" if "peak_mib" in r else "", goal])
            out += [table(["model", "positions", "attention", "median ms", "min ms", "seq/s",
                           *(["tokens/s", "MFU"] if has_flops else []), *(f"vs {a}" for a in anchors),
                           *(["vs fastest peer"] if has_peers else []), "faster in", "peak MiB", "goal"], table_rows),
                    ""]
        if goals and not has_peers:
            misses = [case for goal, case in goals if goal == "NO"]
            out += [f"Goal (hf-attn + sdpa at least as fast as the fastest transformers model with the same dropout "
                    f"at {shortest} tokens, "
                    f"faster beyond): met in {len(goals) - len(misses)}/{len(goals)} cases"
                    + (f"; missed: {', '.join(misses)}." if misses else "."), ""]
        if has_flops:
            out += _format_mfu(rows)
        out += ["### Parameters", "",
                table(["model", "positions", "hidden", "layers", "parameters", "encoder-layer parameters"],
                      [[m["family"], m["scheme"], m["hidden_size"], m["num_layers"], f"{m['params']:,}",
                        f"{m['encoder_layer_params']:,}"]
                       for m in {(m["family"], m["scheme"]): m for m in record["models"]}.values()]), ""]
        return out


MATMUL_STEP = "matmul (interleaved peak)"
"""The step of each timed case that multiplies `flops.gemm_shapes` once each, beside the models' steps."""


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


def _faster_repeats(row: dict[str, Any], case: list[dict[str, Any]]) -> str:
    """In how many repeats this row's step beat its yardstick's step of the same repeat ("k/n"): the fastest
    of its scheme's peers (`fastest_peer`), or in records from before peers, the fastest anchor with the
    bench's dropout. Interleaving puts the two side by side in time, so this count is not moved by the drift
    between repeats that moves medians. Empty for the anchors and for records without per-repeat times."""
    if "fastest_peer" in row:
        anchors = [r for r in case if r["family"] == row["fastest_peer"] and "times_ms" in r]
    else:
        anchors = [r for r in case
                   if r["family"] in ANCHORS and r["family"] not in OWN_DROPOUT_ANCHORS and "times_ms" in r]
    if row["family"] in ANCHORS or not anchors or "times_ms" not in row:
        return ""
    fastest = min(anchors, key=lambda r: r["median_ms"])["times_ms"]
    return f"{sum(mine < theirs for mine, theirs in zip(row['times_ms'], fastest, strict=True))}/{len(fastest)}"


def _goal(row: dict[str, Any], shortest: int) -> str:
    """The issue's target for a goal row (`is_goal_row`): at least `CELL_GOAL` of its fastest peer's speed.
    Records from before peers: hf-attn + sdpa at least as fast as the fastest like-for-like anchor at the
    shortest length, strictly faster at longer ones."""
    if "speedup_vs_peer" in row:
        if not is_goal_row(row):
            return ""
        met = row["speedup_vs_peer"] >= CELL_GOAL
    elif "speedup_vs_best" in row and row["family"] == "hf-attn" and row["backend"] == "sdpa":
        met = row["speedup_vs_best"] >= 1.0 if row["seq"] <= shortest else row["speedup_vs_best"] > 1.0
    else:
        return ""
    return "yes" if met else "NO"


def _cells(rows: list[dict[str, Any]]) -> list[tuple[str, int, int, str]]:
    """(mode, batch, length, precision) of every case, in the order they were measured."""
    return list(dict.fromkeys((r["mode"], r["batch"], r["seq"], precision_of(r)) for r in rows))


def _format_peaks(peaks: dict[str, Any], interleaved: list[dict[str, Any]] | None) -> list[str]:
    """The peak measured before the models, then the one measured inside each case (records from before it
    say so: their MFU is over the peak measured before)."""
    out = ["### Matrix-multiply peak", "",
           "Best GFLOP/s of `torch.mm` over the model's GEMM shapes (rows = tokens of a training batch), in each "
           "precision, measured before the models.", "",
           table(["precision", "best GFLOP/s", *(f"{'x'.join(map(str, s['shape']))}" for s in
                                                next(iter(peaks.values()))["shapes"])],
                 [[p["precision"], f"{p['gflops']:.0f}", *(f"{s['gflops']:.0f}" for s in p["shapes"])]
                  for p in peaks.values()]), ""]
    if not interleaved:
        return out + [f"Interleaved peak: {NOT_RECORDED} (MFU below is over the best GFLOP/s above).", ""]
    return out + ["The same products once each per repeat as one more step interleaved with the models' steps of "
                  "each case: GFLOP/s from the median; MFU below is over the figure of its own case.", "",
                  table(["case", "median GFLOP/s", "min ms", "max ms"],
                        [[f"{p['mode']} {p['seq']} {p['precision']}", f"{p['gflops']:.0f}", f"{p['min_ms']:.2f}",
                          f"{p['max_ms']:.2f}"] for p in interleaved]), ""]


def _versus(row: dict[str, Any]) -> str:
    """Which attentions a goal row's ratio compares: hf-attn's and its fastest peer's (older records: the peer)."""
    if "fastest_peer_backend" not in row:
        return row["fastest_peer"]
    return f"{row['backend']} vs {row['fastest_peer']} {row['fastest_peer_backend']}"


def _format_goals(section: dict[str, Any]) -> list[str]:
    """hf-attn against its fastest peer in every cell, side by side, and the goal summary."""
    rows = [r for r in section["rows"] if is_goal_row(r)]
    cells = _cells(rows)
    by_cell = {(r["scheme"], r["mode"], r["seq"], precision_of(r)): r for r in rows}
    body = [[scheme, ", ".join(peer_families(scheme)),
             *(f"{by_cell[(scheme, mode, seq, precision)]['speedup_vs_peer']:.2f}x "
               f"({_versus(by_cell[(scheme, mode, seq, precision)])})" for mode, _, seq, precision in cells)]
            for scheme in dict.fromkeys(r["scheme"] for r in rows)]
    each_at_best = any("fastest_peer_backend" in r for r in rows)
    ceiling = _format_ceiling(section["rows"], rows, cells) if each_at_best and "mfu" in rows[0] else []
    return ["### hf-attn against its fastest peer", "",
            ("hf-attn at the faster of its attentions against the fastest of its peers, each peer at the faster of "
             "its own (which in brackets): the ratio of median step times" if each_at_best else
             "hf-attn (sdpa) median step time's speed-up over the fastest of its peers in each cell (which peer in "
             "brackets)") + f". Goals: at least {CELL_GOAL:.2f}x in every cell, at least {GEOMEAN_GOAL:.1f}x in "
            "the geometric mean.", "",
            table(["positions", "peers", *(f"{mode} {seq} {precision}" for mode, _, seq, precision in cells)], body),
            "", summary_table(section["goals"], mfu=True), "", *ceiling]


def _format_ceiling(all_rows: list[dict[str, Any]], goal_rows: list[dict[str, Any]],
                    cells: list[tuple[str, int, int, str]]) -> list[str]:
    """The most any model of the same matrix products could gain on the fastest peer in each cell: the peer's
    step over the time of its matrix products at the case's interleaved peak, 1 / its MFU."""
    def peer_mfu(row: dict[str, Any]) -> float:
        return min((r for r in all_rows if (r["family"], r["backend"], r["mode"], r["seq"], precision_of(r))
                    == (row["fastest_peer"], row["fastest_peer_backend"], row["mode"], row["seq"], precision_of(row))),
                   key=lambda r: r["median_ms"])["mfu"]

    by_cell = {(r["scheme"], r["mode"], r["seq"], precision_of(r)): r for r in goal_rows}
    body = [[scheme, *(f"{1 / peer_mfu(by_cell[(scheme, mode, seq, precision)]):.2f}x"
                       for mode, _, seq, precision in cells)]
            for scheme in dict.fromkeys(r["scheme"] for r in goal_rows)]
    return ["The ceiling: the fastest peer's step time over the time of its matrix products at the case's "
            "interleaved peak (1 / its MFU), the speed-up of a model that did the same products and nothing else:",
            "", table(["positions", *(f"{mode} {seq} {precision}" for mode, _, seq, precision in cells)], body), ""]


def _format_mfu(rows: list[dict[str, Any]]) -> list[str]:
    cells = _cells(rows)
    by_model: dict[tuple[str, str, str], dict[tuple[str, int, str], dict[str, Any]]] = {}
    for r in rows:
        by_model.setdefault((r["family"], r["scheme"], r["backend"]), {})[(r["mode"], r["seq"], precision_of(r))] = r
    body = [[*model, *(f"{found[(mode, seq, precision)]['mfu']:.0%}" if (mode, seq, precision) in found else ""
                       for mode, _, seq, precision in cells)] for model, found in by_model.items()]
    return ["### Model-FLOPs utilisation", "",
            "Model FLOPs of a step (matrix products only; training = 3 x forward; docs/benchmarks.md) per median "
            "second, over the matmul peak of the same case (interleaved with the models) where recorded, else "
            "over the best peak of the same precision measured before the models.", "",
            table(["model", "positions", "attention", *(f"{mode} {seq} {precision}" for mode, _, seq, precision
                                                         in cells)], body), ""]
