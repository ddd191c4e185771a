"""The CPU this process runs on: its model name and the flags that decide how fast a matrix product runs.

Read from `/proc/cpuinfo` without torch, so that choosing a precision (`precision.bf16_units`) costs no import.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

# The CPU flags that decide how fast a matrix product runs: vector width (AVX2 + FMA, AVX-512) and the
# bfloat16 / int8 units (AVX-512 BF16 and VNNI, AMX tiles); on an AVX2-only CPU bf16 is emulated.
MATMUL_CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16",
                    "amx_int8")


def cpu_description(cpuinfo: str) -> dict[str, Any]:
    """The CPU of a `/proc/cpuinfo` text: its model name, and which of `MATMUL_CPU_FLAGS` it has (in that
    order). Fields missing from the text (another OS, an emulator) are None."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():  # the first processor's block is enough: the cores of one CPU agree
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    flags = fields.get("flags")
    return {"model": fields.get("model name"),
            "matmul_flags": None if flags is None else [flag for flag in MATMUL_CPU_FLAGS if flag in flags.split()]}


@functools.cache
def this_cpu() -> dict[str, Any]:
    """`cpu_description` of this machine (model and flags None where there is no `/proc/cpuinfo`)."""
    cpuinfo = Path("/proc/cpuinfo")
    return cpu_description(cpuinfo.read_text() if cpuinfo.is_file() else "")
