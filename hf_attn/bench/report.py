"""The markdown report and the attention-scaling plot of a results dict (fresh, or read from a JSON file).

Formatting reads only what the JSON holds, so results written by earlier versions of the bench (with
fewer anchors, or without per-repeat times) still format: columns follow the anchors present.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .dropout import format_dropout
from .generation_compiled import format_generation_compiled
from .local_attention import format_local_attention
from .long_text import format_long_text
from .objectives import format_objectives
from .serving import format_serving
from .settings import (
    ANCHORS,
    CELL_GOAL,
    GEOMEAN_GOAL,
    OWN_DROPOUT_ANCHORS,
    SECTIONS,
    is_goal_row,
    peer_families,
    ratio_summary,
)
from .streaming import format_streaming


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


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


NOT_RECORDED = "not recorded"
"""What a report shows for a field its record predates."""


def where_it_ran(record: dict[str, Any]) -> dict[str, str]:
    """Where and how a record ran, as text: CPU model, its matmul flags, threads, precisions, load average at
    start and end; `NOT_RECORDED` for what an older record lacks (its precisions come from its settings,
    and records from before precisions were fp32)."""
    environment = record["environment"]
    cpu = environment.get("cpu") or {}
    flags = cpu.get("matmul_flags")
    loads = [environment.get(f"load_average_{end}") for end in ("start", "end")]
    precision = environment.get("precision") or record.get("settings", {}).get("precision") or ["fp32"]
    return {
        "CPU": cpu.get("model") or NOT_RECORDED,
        "flags": NOT_RECORDED if flags is None else " ".join(flags) or "none (no AVX2)",
        "threads": f"{environment['threads']} of {environment['cpu_count']}" if "threads" in environment
        else NOT_RECORDED,
        "precision": ",".join(precision),
        "load": " -> ".join(NOT_RECORDED if load is None else f"{load[0]:.1f}" for load in loads),
    }


def _precision(row: dict[str, Any]) -> str:
    return row.get("precision", "fp32")  # records from before precisions were all fp32


def _cells(rows: list[dict[str, Any]]) -> list[tuple[str, int, int, str]]:
    """(mode, batch, length, precision) of every case, in the order they were measured."""
    return list(dict.fromkeys((r["mode"], r["batch"], r["seq"], _precision(r)) for r in rows))


def _format_peaks(peaks: dict[str, Any], interleaved: list[dict[str, Any]] | None) -> list[str]:
    """The peak measured before the models, then the one measured inside each case (records from before it
    say so: their MFU is over the peak measured before)."""
    out = ["### Matrix-multiply peak", "",
           "Best GFLOP/s of `torch.mm` over the model's GEMM shapes (rows = tokens of a training batch), in each "
           "precision, measured before the models.", "",
           _table(["precision", "best GFLOP/s", *(f"{'x'.join(map(str, s['shape']))}" for s in
                                                 next(iter(peaks.values()))["shapes"])],
                  [[p["precision"], f"{p['gflops']:.0f}", *(f"{s['gflops']:.0f}" for s in p["shapes"])]
                   for p in peaks.values()]), ""]
    if not interleaved:
        return out + [f"Interleaved peak: {NOT_RECORDED} (MFU below is over the best GFLOP/s above).", ""]
    return out + ["The same products once each per repeat as one more step interleaved with the models' steps of "
                  "each case: GFLOP/s from the median; MFU below is over the figure of its own case.", "",
                  _table(["case", "median GFLOP/s", "min ms", "max ms"],
                         [[f"{p['mode']} {p['seq']} {p['precision']}", f"{p['gflops']:.0f}", f"{p['min_ms']:.2f}",
                           f"{p['max_ms']:.2f}"] for p in interleaved]), ""]


def _versus(row: dict[str, Any]) -> str:
    """Which attentions a goal row's ratio compares: hf-attn's and its fastest peer's (older records: the peer)."""
    if "fastest_peer_backend" not in row:
        return row["fastest_peer"]
    return f"{row['backend']} vs {row['fastest_peer']} {row['fastest_peer_backend']}"


def _summary_table(goals: dict[str, dict[str, Any]], mfu: bool) -> str:
    """One row per precision (and all): cells at `CELL_GOAL` or more, the worst, the geometric mean."""
    header = ["precision", f"cells at {CELL_GOAL:.2f}x or more", "worst", f"geometric mean (goal {GEOMEAN_GOAL:.1f}x)"]
    body = [[precision, f"{g['met']}/{g['cells']}", f"{g['worst']:.2f}x", f"{g['geomean']:.2f}x",
             *([] if not mfu else ["" if not g["training_mfu"] else
                                   f"{g['training_mfu'][0]:.0%}-{g['training_mfu'][1]:.0%}"])]
            for precision, g in goals.items()]
    return _table(header + (["hf-attn training MFU"] if mfu else []), body)


def _format_goals(section: dict[str, Any]) -> list[str]:
    """hf-attn against its fastest peer in every cell, side by side, and the goal summary."""
    rows = [r for r in section["rows"] if is_goal_row(r)]
    cells = _cells(rows)
    by_cell = {(r["scheme"], r["mode"], r["seq"], _precision(r)): r for r in rows}
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
            _table(["positions", "peers", *(f"{mode} {seq} {precision}" for mode, _, seq, precision in cells)], body),
            "", _summary_table(section["goals"], mfu=True), "", *ceiling]


def _format_ceiling(all_rows: list[dict[str, Any]], goal_rows: list[dict[str, Any]],
                    cells: list[tuple[str, int, int, str]]) -> list[str]:
    """The most any model of the same matrix products could gain on the fastest peer in each cell: the peer's
    step over the time of its matrix products at the case's interleaved peak, 1 / its MFU."""
    def peer_mfu(row: dict[str, Any]) -> float:
        return min((r for r in all_rows if (r["family"], r["backend"], r["mode"], r["seq"], _precision(r))
                    == (row["fastest_peer"], row["fastest_peer_backend"], row["mode"], row["seq"], _precision(row))),
                   key=lambda r: r["median_ms"])["mfu"]

    by_cell = {(r["scheme"], r["mode"], r["seq"], _precision(r)): r for r in goal_rows}
    body = [[scheme, *(f"{1 / peer_mfu(by_cell[(scheme, mode, seq, precision)]):.2f}x"
                       for mode, _, seq, precision in cells)]
            for scheme in dict.fromkeys(r["scheme"] for r in goal_rows)]
    return ["The ceiling: the fastest peer's step time over the time of its matrix products at the case's "
            "interleaved peak (1 / its MFU), the speed-up of a model that did the same products and nothing else:",
            "", _table(["positions", *(f"{mode} {seq} {precision}" for mode, _, seq, precision in cells)], body), ""]


def goal_ratios(results: dict[str, Any]) -> dict[str, list[float]]:
    """hf-attn's speed-up over its fastest peer in every goal cell of a record, by precision: the throughput
    section's goal rows and each realistic epoch (one per truncation length and padding)."""
    ratios: dict[str, list[float]] = {}
    for row in results.get("throughput", {}).get("rows", []):
        if is_goal_row(row):
            ratios.setdefault(_precision(row), []).append(row["speedup_vs_peer"])
    for run in results.get("realistic", {}).get("runs", []):
        for row in run["rows"]:
            if "speedup_vs_peer" in row:
                ratios.setdefault(run.get("precision", "fp32"), []).append(row["speedup_vs_peer"])
    return ratios


def _format_all_goals(results: dict[str, Any]) -> list[str]:
    """The goals over every cell of the record, fixed shapes and realistic epochs together."""
    ratios = goal_ratios(results)
    goals = {precision: ratio_summary(values) for precision, values in ratios.items()}
    return ["## Goals over every cell", "",
            "hf-attn against its fastest peer in the throughput cells and in the realistic epochs together "
            "(where hf-attn computes only the real tokens and its peers every padded slot).", "",
            _summary_table(goals, mfu=False), ""]


def _format_mfu(rows: list[dict[str, Any]]) -> list[str]:
    cells = _cells(rows)
    by_model: dict[tuple[str, str, str], dict[tuple[str, int, str], dict[str, Any]]] = {}
    for r in rows:
        by_model.setdefault((r["family"], r["scheme"], r["backend"]), {})[(r["mode"], r["seq"], _precision(r))] = r
    body = [[*model, *(f"{found[(mode, seq, precision)]['mfu']:.0%}" if (mode, seq, precision) in found else ""
                       for mode, _, seq, precision in cells)] for model, found in by_model.items()]
    return ["### Model-FLOPs utilisation", "",
            "Model FLOPs of a step (matrix products only; training = 3 x forward; docs/benchmarks.md) per median "
            "second, over the matmul peak of the same case (interleaved with the models) where recorded, else "
            "over the best peak of the same precision measured before the models.", "",
            _table(["model", "positions", "attention", *(f"{mode} {seq} {precision}" for mode, _, seq, precision
                                                          in cells)], body), ""]


def _format_throughput(section: dict[str, Any]) -> list[str]:
    rows = section["rows"]
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
    if "matmul_peak" in section:
        out += _format_peaks(section["matmul_peak"], section.get("matmul_interleaved"))
    if section.get("goals"):
        out += _format_goals(section)
    own_dropout = [family for family in OWN_DROPOUT_ANCHORS if family in anchors]
    if own_dropout:
        out += [f"{', '.join(own_dropout)}: built with its library's own dropout defaults (ModernBERT's: none), as "
                "it is usually trained; it has a ratio column but is nobody's peer and counts neither in 'faster "
                "in' nor in the goal.", ""]
    labels = {"train": "Training (forward + backward + AdamW", "infer": "Inference (no grad"}
    goals = []
    for mode, batch, seq, precision in _cells(rows):
        case = [r for r in rows if (r["mode"], r["seq"], _precision(r)) == (mode, seq, precision)]
        out += [f"### {labels[mode]}, {precision}), batch {batch}, sequence {seq}", ""]
        table_rows = []
        for r in case:
            goal = _goal(r, shortest)
            if goal:
                goals.append((goal, f"{mode} {seq} {precision} {r['scheme']}"))
            flops = [f"{r['tokens_per_s']:,.0f}", f"{r['mfu']:.1%}"] if has_flops else []
            peer = [_ratio(r.get("speedup_vs_peer"))] if has_peers else []
            table_rows.append([r["family"], r["scheme"], r["backend"], f"{r['median_ms']:.1f}", f"{r['min_ms']:.1f}",
                               f"{r['sequences_per_s']:.1f}", *flops,
                               *(_ratio(r.get(f"speedup_vs_{a}")) for a in anchors), *peer,
                               _faster_repeats(r, case), f"{r['peak_mib']:.1f}" if "peak_mib" in r else "", goal])
        out += [_table(["model", "positions", "attention", "median ms", "min ms", "seq/s",
                        *(["tokens/s", "MFU"] if has_flops else []), *(f"vs {a}" for a in anchors),
                        *(["vs fastest peer"] if has_peers else []), "faster in", "peak MiB", "goal"], table_rows), ""]
    if goals and not has_peers:
        misses = [case for goal, case in goals if goal == "NO"]
        out += [f"Goal (hf-attn + sdpa at least as fast as the fastest transformers model with the same dropout "
                f"at {shortest} tokens, "
                f"faster beyond): met in {len(goals) - len(misses)}/{len(goals)} cases"
                + (f"; missed: {', '.join(misses)}." if misses else "."), ""]
    if has_flops:
        out += _format_mfu(rows)
    out += ["### Parameters", "",
            _table(["model", "positions", "hidden", "layers", "parameters", "encoder-layer parameters"],
                   [[m["family"], m["scheme"], m["hidden_size"], m["num_layers"], f"{m['params']:,}",
                     f"{m['encoder_layer_params']:,}"]
                    for m in {(m["family"], m["scheme"]): m for m in section["models"]}.values()]), ""]
    return out


def _format_scaling(section: dict[str, Any]) -> list[str]:
    by_seq: dict[int, dict[str, dict[str, Any]]] = {}
    for r in section["rows"]:
        by_seq.setdefault(r["seq"], {})[r["backend"]] = r
    backends = list(dict.fromkeys(r["backend"] for r in section["rows"]))
    header = ["seq"] + [f"{b} ms" for b in backends] + [f"{b} peak MiB" for b in backends]
    rows = [
        [seq] + [f"{cells[b]['median_ms']:.1f}" for b in backends] + [f"{cells[b]['peak_mib']:.1f}" for b in backends]
        for seq, cells in by_seq.items()
    ]
    if {"eager", "sdpa"} <= set(backends):
        header.append("sdpa speed-up")
        for row, cells in zip(rows, by_seq.values()):
            row.append(_ratio(cells["eager"]["median_ms"] / cells["sdpa"]["median_ms"]))
    batch = section["rows"][0]["batch"] if section["rows"] else "?"
    return [f"## Attention cost scaling (hf-attn {section['scheme']}, inference, batch {batch})", "",
            _table(header, rows), ""]


def _attention(row: dict[str, Any], model: str) -> str:
    """" (eager)": the attention a realistic row timed `model` with (older records: one for all, in the heading)."""
    return f" ({row['backend_by_model'][model]})" if "backend_by_model" in row else ""


def _format_realistic(section: dict[str, Any]) -> list[str]:
    attention = f" {section['backend']}" if "backend" in section else ""  # later records: per model, in each run
    out = [f"## Realistic batches (one epoch of {section['reviews']} IMDb reviews, hf-attn {section['scheme']}"
           f"{attention}, batch {section['batch']})", "",
           f"Lengths: {section['tokenizer']}; median {section['length_median']}, 90th percentile "
           f"{section['length_p90']} tokens.", ""]
    for run in section["runs"]:
        rows = [[r["strategy"], r["batches"], f"{r['real_tokens']:,}", f"{r['padded_tokens']:,}",
                 f"{r['padding_efficiency']:.0%}", f"{r['epoch_s']:.1f}", _ratio(r["speedup_vs_fixed"])]
                for r in run["rows"]]
        precision = f", {run['precision']}" if "precision" in run else ""  # records before #51: fp32 alone
        out += [f"### Truncated to {run['max_length']} tokens{precision} ({run['truncated_fraction']:.0%} of reviews "
                "longer)", "",
                _table(["padding", "batches", "real tokens", "padded tokens", "efficiency", "epoch s", "vs fixed"],
                       rows), ""]
        if "epoch_s_by_model" in run["rows"][0]:  # records from before the peers joined the section have hf-attn alone
            models = list(run["rows"][0]["epoch_s_by_model"])
            peer = [[r["strategy"], *(f"{r['epoch_s_by_model'][name]:.1f}{_attention(r, name)}" for name in models),
                     _ratio(r["speedup_vs_padded"]),
                     f"{r['speedup_vs_peer']:.2f}x ({r['fastest_peer']})" if "speedup_vs_peer" in r else ""]
                    for r in run["rows"]]
            at_best = ", each at the fastest of its attentions" if "backend_by_model" in run["rows"][0] else ""
            out += ["Epoch seconds of every model on the same batches (hf-attn computes only the real tokens outside "
                    f"attention; the others every padded slot){at_best}:", "",
                    _table(["padding", *models, "hf-attn vs padded", "hf-attn vs fastest peer"], peer), ""]
    return out


def _operators_table(top_ops: list[dict[str, Any]]) -> str:
    return _table(["op", "calls", "self CPU ms", "share"],
                  [[f"`{op['op']}`", op["calls"], f"{op['self_cpu_ms']:.1f}", f"{op['self_cpu_share']:.1%}"]
                   for op in top_ops])


def _format_profile(section: dict[str, Any]) -> list[str]:
    """One operators table per profiled model (records from before the anchor: hf-attn's `top_ops` alone)."""
    models = section.get("models") or {f"hf-attn {section['scheme']} {section['backend']}": section}
    precision = section.get("precision", "fp32")
    out = []
    for name, profile in models.items():
        step = f", {profile['step_ms']:.0f} ms per step under the profiler" if "step_ms" in profile else ""
        out += [f"## Profile ({name} training, {precision}, batch {section['batch']}, sequence {section['seq']}, "
                f"{section['steps']} profiled step(s){step})", "", _operators_table(profile["top_ops"]), ""]
    return out


def _format_generation(section: dict[str, Any]) -> list[str]:
    rows, heads = section["rows"], section["num_attention_heads"]
    new, uncached = section["new_tokens"], section["uncached_new_tokens"]
    out = ["## Generation (greedy `generate()`, fp32, SDPA)", "",
           f"Each prompt is followed by {new} generated tokens with the cache"
           + (f" and {uncached} without it (`use_cache=False`: every step recomputes the whole prefix)" if uncached
              and any("uncached" in r for r in rows) else "")
           + ". Llama: transformers' `LlamaForCausalLM` with hf-attn RoPE's weights (same function); 'vs Llama' = "
           "the Llama of the same key/value heads' median time / this row's (above 1: this row is faster); 'faster "
           "in' counts the repeats in which this row's cached generation beat that Llama's of the same repeat. "
           "Generate ms and tokens/s include the prompt's forward pass (prefill); decode ms/token is generate(N) "
           "minus generate(1), per repeat, over N - 1 tokens; model step ms is one cached forward pass of one "
           "token after the prompt, the model alone (decode minus model step: what `generate()` adds per token).",
           ""]
    for batch, context in dict.fromkeys((r["batch"], r["context"]) for r in rows):
        case = [r for r in rows if (r["batch"], r["context"]) == (batch, context)]
        table_rows = [[r["family"], r["scheme"], r["kv_heads"], f"{r['prefill']['median_ms']:.1f}",
                       _ratio(r.get("prefill_vs_llama")), f"{r['cached']['median_ms']:.0f}",
                       f"{r['cached']['min_ms']:.0f}", f"{r['cached_tokens_per_s']:.1f}",
                       _ratio(r.get("cached_vs_llama")), r.get("cached_faster_in", ""),
                       f"{r['decode_per_token']['median_ms']:.2f}", _ratio(r.get("decode_per_token_vs_llama")),
                       f"{r['model_step']['median_ms']:.2f}", _ratio(r.get("model_step_vs_llama")),
                       r.get("model_step_faster_in", ""),
                       f"{r['uncached_tokens_per_s']:.1f}" if "uncached" in r else "",
                       _ratio(r.get("uncached_vs_llama")), _ratio(r.get("cache_speedup"))]
                      for r in case]
        out += [f"### Context {context}, batch {batch}", "",
                _table(["model", "positions", "kv heads", "prefill ms", "vs Llama", "generate ms", "min ms",
                        "tokens/s", "vs Llama", "faster in", "decode ms/token", "vs Llama", "model step ms", "vs Llama",
                        "faster in", "uncached tokens/s", "vs Llama", "cache speed-up"], table_rows), ""]
    out += ["### KV-cache memory after the prompt", "",
            "Bytes of the key and value tensors in the cache after the prompt's forward pass (measured), and "
            "the bytes allocated for them (hf-attn keeps room for the next tokens); "
            f"'MHA / this' divides the {heads}-key/value-head model's bytes by this row's, to compare with "
            "heads / kv heads.", "",
            _table(["model", "positions", "kv heads", "batch", "context", "cache MiB", "allocated MiB",
                    "MHA / this", "heads / kv heads"],
                   [[r["family"], r["scheme"], r["kv_heads"], r["batch"], r["context"],
                     f"{r['cache_bytes'] / 2**20:.2f}",
                     f"{r['cache_allocated_bytes'] / 2**20:.2f}" if "cache_allocated_bytes" in r else "",
                     f"{r['cache_vs_most_kv_heads']:.2f}",
                     f"{heads / r['kv_heads']:.2f}"] for r in rows]), ""]
    profile = section.get("decode_profile")
    for name, top_ops in (profile or {}).get("models", {}).items():
        out += [f"### Profile of {profile['steps']} cached decoding steps of {name} after {profile['context']} "
                f"tokens (batch {profile['batch']})", "", _operators_table(top_ops), ""]
    return out


def _format_tokenizer(section: Any) -> list[str]:
    """scripts/bench_tokenizer.py's JSON: its top-level scalars as a caption and its `rows` records as a
    table; any other layout verbatim, so a change on that side never breaks this report."""
    out = ["## Tokenizer speed (from scripts/bench_tokenizer.py)", ""]
    records = section.get("rows") if isinstance(section, dict) else None
    if not (isinstance(records, list) and records and all(isinstance(r, dict) for r in records)):
        return out + ["```json", json.dumps(section, indent=2), "```", ""]
    caption = [f"{key} {value}" for key, value in section.items() if isinstance(value, (str, int, float))]
    header = list(dict.fromkeys(key for record in records for key in record))
    body = [[record.get(key, "") for key in header] for record in records]
    return out + ([", ".join(caption) + ".", ""] if caption else []) + [_table(header, body), ""]


# The report lines of each part of a record, in the report's order: the sections (`settings.SECTIONS`), then the
# tokenizer's JSON and the profile.
SECTION_REPORTS: dict[str, Callable[[Any], list[str]]] = {
    "throughput": _format_throughput, "scaling": _format_scaling, "realistic": _format_realistic,
    "generation": _format_generation, "objectives": format_objectives, "dropout": format_dropout,
    "long-text": format_long_text, "streaming": format_streaming, "local-attention": format_local_attention,
    "generation-compiled": format_generation_compiled, "serving": format_serving, "tokenizer": _format_tokenizer,
    "profile": _format_profile,
}


def format_markdown(results: dict[str, Any]) -> str:
    """The report: one table per measured case, then scaling, realistic batches, generation, tokenizer and
    profile."""
    env = results["environment"]
    machine = where_it_ran(results)
    out = ["# hf-attn benchmark", "",
           f"torch {env['torch']}, transformers {env['transformers']}, device {env.get('gpu', env['device'])}, "
           f"CPU {machine['CPU']} (matmul flags: {machine['flags']}), precision {machine['precision']}, "
           f"{env['threads']} threads of {env['cpu_count']} CPUs, 1-minute load average "
           f"{env['load_average_start'][0]:.1f} at start, {env['load_average_end'][0]:.1f} at end; "
           f"started {env['started']}"
           + (f"; bfloat16 units: {env['bf16_units'] or 'none (bf16 is emulated)'}" if "bf16_units" in env else "")
           + ". "
           "All numbers come from this one run; compare ratios, not absolute times.", ""]
    for name, formatter in SECTION_REPORTS.items():
        if name in results:
            out += formatter(results[name])
    if "throughput" in results and "realistic" in results:
        out += _format_all_goals(results)
    return "\n".join(out)


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


RECORDS_BEGIN = "<!-- bench records: generated by `hf-attn bench --records-only`, do not edit by hand -->"
RECORDS_END = "<!-- end of bench records -->"


def is_bench_record(record: Any) -> bool:
    """Whether a JSON file's content is a record `hf-attn bench` wrote (settings and environment)."""
    return isinstance(record, dict) and "settings" in record and "torch" in record.get("environment", {})


def records_table(records: dict[str, dict[str, Any]]) -> str:
    """One row per bench record (name -> record, in start order): where it ran (`where_it_ran`), what it
    measured, and its matmul peaks: the best before the models, and the range of the per-case medians
    measured interleaved with them."""
    body = []
    for name, record in sorted(records.items(), key=lambda item: item[1]["environment"]["started"]):
        environment, throughput = record["environment"], record.get("throughput", {})
        peaks = throughput.get("matmul_peak")
        best = NOT_RECORDED if not peaks else ", ".join(f"{p['precision']} {p['gflops']:.0f}" for p in peaks.values())
        interleaved = throughput.get("matmul_interleaved")
        by_precision: dict[str, list[float]] = {}
        for case in interleaved or []:
            by_precision.setdefault(case["precision"], []).append(case["gflops"])
        around = ", ".join(f"{precision} {min(values):.0f}-{max(values):.0f}" for precision, values in
                           by_precision.items()) or (NOT_RECORDED if "throughput" in record else "")
        sections = [section for section in SECTIONS if section in record]
        machine = where_it_ran(record)
        body.append([f"`{name}`", environment["started"], ", ".join(sections), machine["CPU"], machine["flags"],
                     machine["threads"], machine["precision"], machine["load"],
                     "" if "throughput" not in record else best, around])
    return _table(["record", "started", "sections", "CPU", "matmul flags", "threads", "precision",
                   "load (1 min) start -> end", "matmul GFLOP/s, best before", "matmul GFLOP/s, interleaved"], body)


def with_records_table(document: str, table: str) -> str:
    """`document` with the text between `RECORDS_BEGIN` and `RECORDS_END` replaced by `table`."""
    if RECORDS_BEGIN not in document or RECORDS_END not in document:
        raise ValueError(f"the document has no generated records section; add the lines {RECORDS_BEGIN!r} and "
                         f"{RECORDS_END!r} where it belongs")
    before, rest = document.split(RECORDS_BEGIN, 1)
    return before + RECORDS_BEGIN + "\n\n" + table + "\n\n" + RECORDS_END + rest.split(RECORDS_END, 1)[1]


def read_records(folder: Path) -> dict[str, dict[str, Any]]:
    """Every bench record among the JSON files of `folder`, by file name."""
    records = {path.name: json.loads(path.read_text()) for path in sorted(Path(folder).glob("*.json"))}
    return {name: record for name, record in records.items() if is_bench_record(record)}


def update_records_table(folder: Path, document: Path) -> None:
    """Rewrite `document`'s records table (`with_records_table`) from the bench records in `folder`."""
    document.write_text(with_records_table(document.read_text(), records_table(read_records(folder))))
