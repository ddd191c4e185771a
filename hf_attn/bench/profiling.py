"""Where a step's time goes: the top operators of `torch.profiler` over a few steps, and their table. The profile
part (training steps) and the generation section (decoding steps) both report them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..timing import timed
from .markdown import table


def profiled_steps(step: Callable[[], None], steps: int, rows: int, device: torch.device) -> dict[str, Any]:
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


def operators_table(top_ops: list[dict[str, Any]]) -> str:
    """`top_operators`' rows as a markdown table."""
    return table(["op", "calls", "self CPU ms", "share"],
                 [[f"`{op['op']}`", op["calls"], f"{op['self_cpu_ms']:.1f}", f"{op['self_cpu_share']:.1%}"]
                  for op in top_ops])
