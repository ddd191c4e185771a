"""The one place that decides what a run computes in: bfloat16 autocast where the hardware has bfloat16 units, else
float32. Experiments, their commands, the arena and the bench ask it; nothing else names a dtype to compute in.

An experiment's (or a command's) `precision` is `auto` (the default), `bf16` or `fp32`. `bf16` runs the forward
and backward passes under `torch.autocast(dtype=torch.bfloat16)` (`TrainingArguments(bf16=True)` when training);
the parameters, gradients and optimizer state stay float32. CPUs with AMX or AVX512-BF16 run bfloat16 matrix
products several times faster than float32; without them bfloat16 is emulated and slower, so `auto` picks it only
where the units are there, and asking for `bf16` elsewhere is an error that names the hardware.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .cpu import this_cpu

if TYPE_CHECKING:  # torch is imported where it is used: the command line reads PRECISIONS while building its parser
    import torch
    from transformers import TrainingArguments

PRECISIONS = ("auto", "bf16", "fp32")
# What `auto` resolves to, float32 first: the precisions a run actually computes in.
COMPUTED_PRECISIONS = ("fp32", "bf16")
# /proc/cpuinfo flags of x86 CPUs with bfloat16 matrix or vector instructions (Sapphire Rapids, Zen 4 and later).
BF16_CPU_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})


class PrecisionError(ValueError):
    """A precision that is not one of `PRECISIONS`, or bfloat16 asked of hardware without it."""


def bf16_units(device: torch.device) -> str | None:
    """What on `device` computes in bfloat16 (for messages and records), or None where nothing does."""
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device) if torch.cuda.is_bf16_supported() else None
    if device.type == "cpu":
        found = sorted(BF16_CPU_FLAGS & set(this_cpu()["matmul_flags"] or ()))
        return f"CPU with {', '.join(found)}" if found else None
    return None


def describe(device: torch.device) -> str:
    """The hardware of `device` in words, for an error that says why it has no bfloat16."""
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "cpu":
        return f"this CPU (no {' or '.join(sorted(BF16_CPU_FLAGS))} in its flags)"
    return f"device type {device.type}"


def resolve_precision(requested: str, device: torch.device) -> str:
    """`bf16` or `fp32`: what `requested` (`auto`, `bf16`, `fp32`) means on `device`."""
    if requested not in PRECISIONS:
        raise PrecisionError(f"precision must be one of {', '.join(PRECISIONS)}, got {requested!r}")
    has_bf16 = bf16_units(device) is not None
    if requested == "bf16" and not has_bf16:
        raise PrecisionError(f"precision bf16: {describe(device)} has no bfloat16 units, so bfloat16 would be "
                             "emulated and slower than float32; use precision fp32 (or auto, which picks it)")
    if requested == "auto":
        return "bf16" if has_bf16 else "fp32"
    return requested


def default_device() -> torch.device:
    """The device the experiment commands run on: the first GPU where there is one, else the CPU."""
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@contextlib.contextmanager
def autocast(precision: str, device: torch.device) -> Iterator[None]:
    """Run the block in `precision` (`bf16` or `fp32`, as `resolve_precision` returns) on `device`."""
    import torch

    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
        yield


def compute_dtype(precision: str) -> torch.dtype:
    """The dtype a matrix product's operands have under `precision` (`bf16` or `fp32`): what autocast hands the
    matrix units."""
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]


def trainer_precision(arguments: TrainingArguments) -> str:
    """`bf16` or `fp32`: what a `Trainer` with these arguments computes in (`training_arguments` set its `bf16`
    from `resolve_precision`)."""
    return "bf16" if arguments.bf16 else "fp32"
