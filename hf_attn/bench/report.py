"""The markdown report and the attention-scaling plot of a results dict (fresh, or read from a JSON file).

Formatting reads only what the JSON holds, so results written by earlier versions of the bench (with
fewer anchors, or without per-repeat times) still format: columns follow the anchors present.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .settings import ANCHORS, OWN_DROPOUT_ANCHORS


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


def _faster_repeats(row: dict[str, Any], case: list[dict[str, Any]]) -> str:
    """In how many repeats this row's step beat the fastest like-for-like anchor's step of the same repeat
    ("k/n"): interleaving puts the two side by side in time, so this count is not moved by the drift
    between repeats that moves medians. Empty for the anchors and for records without per-repeat times."""
    anchors = [r for r in case
               if r["family"] in ANCHORS and r["family"] not in OWN_DROPOUT_ANCHORS and "times_ms" in r]
    if row["family"] in ANCHORS or not anchors or "times_ms" not in row:
        return ""
    fastest = min(anchors, key=lambda r: r["median_ms"])["times_ms"]
    return f"{sum(mine < theirs for mine, theirs in zip(row['times_ms'], fastest, strict=True))}/{len(fastest)}"


def _goal(row: dict[str, Any], shortest: int) -> str:
    """The issue's target for hf-attn + sdpa: at least as fast as the fastest like-for-like anchor at the
    shortest length, strictly faster at longer ones."""
    if row["family"] != "hf-attn" or row["backend"] != "sdpa" or "speedup_vs_best" not in row:
        return ""
    met = row["speedup_vs_best"] >= 1.0 if row["seq"] <= shortest else row["speedup_vs_best"] > 1.0
    return "yes" if met else "NO"


def _format_throughput(section: dict[str, Any]) -> list[str]:
    rows = section["rows"]
    shortest = min(r["seq"] for r in rows)
    anchors = [family for family in ANCHORS if any(r["family"] == family for r in rows)]
    out = ["## Throughput", "",
           "Speed-up = the transformers model's median step time / this row's (above 1: this row is faster); "
           "seq/s from the median; the minimum is the least disturbed repeat, for judging noise, and 'faster "
           "in' counts the repeats in which this row beat the fastest transformers model with the same dropout in "
           "that repeat. Peak MiB: allocator high-water mark above what was held before the step (activations, "
           "gradients, temporaries).", ""]
    own_dropout = [family for family in OWN_DROPOUT_ANCHORS if family in anchors]
    if own_dropout:
        out += [f"{', '.join(own_dropout)}: built with its library's own dropout defaults (ModernBERT's: none), as "
                "it is usually trained; it has a ratio column but counts neither in 'faster in' nor in the goal.", ""]
    labels = {"train": "Training (forward + backward + AdamW, fp32)", "infer": "Inference (no grad, fp32)"}
    goals = []
    for mode, batch, seq in dict.fromkeys((r["mode"], r["batch"], r["seq"]) for r in rows):
        case = [r for r in rows if (r["mode"], r["seq"]) == (mode, seq)]
        out += [f"### {labels[mode]}, batch {batch}, sequence {seq}", ""]
        table_rows = []
        for r in case:
            goal = _goal(r, shortest)
            if goal:
                goals.append((goal, f"{mode} {seq} {r['scheme']}"))
            table_rows.append([r["family"], r["scheme"], r["backend"], f"{r['median_ms']:.1f}", f"{r['min_ms']:.1f}",
                               f"{r['sequences_per_s']:.1f}", *(_ratio(r.get(f"speedup_vs_{a}")) for a in anchors),
                               _faster_repeats(r, case), f"{r['peak_mib']:.1f}", goal])
        out += [_table(["model", "positions", "attention", "median ms", "min ms", "seq/s",
                        *(f"vs {a}" for a in anchors), "faster in", "peak MiB", "goal"], table_rows), ""]
    if goals:
        misses = [case for goal, case in goals if goal == "NO"]
        out += [f"Goal (hf-attn + sdpa at least as fast as the fastest transformers model with the same dropout "
                f"at {shortest} tokens, "
                f"faster beyond): met in {len(goals) - len(misses)}/{len(goals)} cases"
                + (f"; missed: {', '.join(misses)}." if misses else "."), ""]
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


def _format_realistic(section: dict[str, Any]) -> list[str]:
    out = [f"## Realistic batches (one epoch of {section['reviews']} IMDb reviews, hf-attn {section['scheme']} "
           f"{section['backend']}, batch {section['batch']})", "",
           f"Lengths: {section['tokenizer']}; median {section['length_median']}, 90th percentile "
           f"{section['length_p90']} tokens.", ""]
    for run in section["runs"]:
        rows = [[r["strategy"], r["batches"], f"{r['real_tokens']:,}", f"{r['padded_tokens']:,}",
                 f"{r['padding_efficiency']:.0%}", f"{r['epoch_s']:.1f}", _ratio(r["speedup_vs_fixed"])]
                for r in run["rows"]]
        out += [f"### Truncated to {run['max_length']} tokens ({run['truncated_fraction']:.0%} of reviews longer)", "",
                _table(["padding", "batches", "real tokens", "padded tokens", "efficiency", "epoch s", "vs fixed"],
                       rows), ""]
    return out


def _operators_table(top_ops: list[dict[str, Any]]) -> str:
    return _table(["op", "calls", "self CPU ms", "share"],
                  [[f"`{op['op']}`", op["calls"], f"{op['self_cpu_ms']:.1f}", f"{op['self_cpu_share']:.1%}"]
                   for op in top_ops])


def _format_profile(section: dict[str, Any]) -> list[str]:
    return [f"## Profile (hf-attn {section['scheme']} {section['backend']} training, batch {section['batch']}, "
            f"sequence {section['seq']}, {section['steps']} profiled step(s))", "",
            _operators_table(section["top_ops"]), ""]


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


def format_markdown(results: dict[str, Any]) -> str:
    """The report: one table per measured case, then scaling, realistic batches, generation, tokenizer and
    profile."""
    env = results["environment"]
    out = ["# hf-attn benchmark", "",
           f"torch {env['torch']}, transformers {env['transformers']}, device {env.get('gpu', env['device'])}, "
           f"{env['threads']} threads of {env['cpu_count']} CPUs, 1-minute load average "
           f"{env['load_average_start'][0]:.1f} at start, {env['load_average_end'][0]:.1f} at end; "
           f"started {env['started']}. "
           "All numbers come from this one run; compare ratios, not absolute times.", ""]
    formatters = {"throughput": _format_throughput, "scaling": _format_scaling, "realistic": _format_realistic,
                  "generation": _format_generation, "tokenizer": _format_tokenizer, "profile": _format_profile}
    for name, formatter in formatters.items():
        if name in results:
            out += formatter(results[name])
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
