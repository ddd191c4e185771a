"""The goals (issue #51) and their summaries: in every cell (scheme x mode x length x precision, and each realistic
epoch) hf-attn at least `CELL_GOAL` of its fastest peer's speed, and over the cells of each precision a geometric mean
of `GEOMEAN_GOAL`. The throughput section summarizes its own cells; the report ends with the goals over the throughput
cells and the realistic epochs together (`every_cell_lines`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from .markdown import table

CELL_GOAL = 1.0
GEOMEAN_GOAL = 1.2


def is_goal_row(row: dict[str, Any]) -> bool:
    """Whether a throughput row is one the goals are about: hf-attn's default model at the fastest of its attentions
    in the cell (`goal`, set by the throughput section's `add_speedups`); records from before it: hf-attn with SDPA."""
    if row["family"] != "hf-attn" or "speedup_vs_peer" not in row:
        return False
    return row.get("goal", row["backend"] == "sdpa")


def ratio_summary(ratios: Sequence[float]) -> dict[str, Any]:
    """How many of `ratios` (speed-ups over the fastest peer) reach `CELL_GOAL`, the worst, the geometric mean."""
    return {"cells": len(ratios), "met": sum(ratio >= CELL_GOAL for ratio in ratios),
            "geomean": statistics.geometric_mean(ratios), "worst": min(ratios)}


def precision_of(row: dict[str, Any]) -> str:
    """The precision a throughput row was measured in (records from before precisions were all fp32)."""
    return row.get("precision", "fp32")


def goal_ratios(results: dict[str, Any]) -> dict[str, list[float]]:
    """hf-attn's speed-up over its fastest peer in every goal cell of a record, by precision: the throughput
    section's goal rows and each realistic epoch (one per truncation length and padding)."""
    ratios: dict[str, list[float]] = {}
    for row in results.get("throughput", {}).get("rows", []):
        if is_goal_row(row):
            ratios.setdefault(precision_of(row), []).append(row["speedup_vs_peer"])
    for run in results.get("realistic", {}).get("runs", []):
        for row in run["rows"]:
            if "speedup_vs_peer" in row:
                ratios.setdefault(run.get("precision", "fp32"), []).append(row["speedup_vs_peer"])
    return ratios


def summary_table(goals: dict[str, dict[str, Any]], mfu: bool) -> str:
    """One row per precision (and all): cells at `CELL_GOAL` or more, the worst, the geometric mean."""
    header = ["precision", f"cells at {CELL_GOAL:.2f}x or more", "worst", f"geometric mean (goal {GEOMEAN_GOAL:.1f}x)"]
    body = [[precision, f"{g['met']}/{g['cells']}", f"{g['worst']:.2f}x", f"{g['geomean']:.2f}x",
             *([] if not mfu else ["" if not g["training_mfu"] else
                                   f"{g['training_mfu'][0]:.0%}-{g['training_mfu'][1]:.0%}"])]
            for precision, g in goals.items()]
    return table(header + (["hf-attn training MFU"] if mfu else []), body)


def every_cell_lines(results: dict[str, Any]) -> list[str]:
    """The goals over every cell of a record that has both the throughput and the realistic sections, fixed shapes and
    realistic epochs together; none for another record."""
    if "throughput" not in results or "realistic" not in results:
        return []
    goals = {precision: ratio_summary(values) for precision, values in goal_ratios(results).items()}
    return ["## Goals over every cell", "",
            "hf-attn against its fastest peer in the throughput cells and in the realistic epochs together "
            "(where hf-attn computes only the real tokens and its peers every padded slot).", "",
            summary_table(goals, mfu=False), ""]
