"""How hf-attn times code: one clock, interleaved repeats and their summary, peak memory, threads and the machine.

Every speed figure of the package and of `scripts/` comes from here: `hf-attn bench`, the arena's speed cells,
the serving and decoding measurements. A measurement runs each candidate step once per repeat, in an order
rotated from repeat to repeat (`interleaved_times`), so that drift of a shared machine (other jobs, thermal
throttling) hits all candidates alike; the i-th times of two candidates are neighbours in time, which lets a
report count paired wins as well as compare medians (`summarize`). `machine()` records where the numbers were
taken, since absolute times say more about the machine than about the model.

Peak memory is the high-water mark of bytes held by torch's allocator during one step, *above what was already
held when the step began* (parameters, optimizer state, other models and cached tables are not counted;
activations, gradients and temporaries are). On CUDA it is `torch.cuda.max_memory_allocated()` minus
`torch.cuda.memory_allocated()` before the step. On CPU no allocator statistics exist (and `tracemalloc` does not
see torch's allocations), so the step runs once under `torch.profiler` with `profile_memory=True` and the peak is
the maximum of the running sum of the allocations and frees it records. Both count tensor bytes, not process RSS
(no allocator caching or fragmentation). Where the process's own footprint is the question (a served model, a long
input), `resident_mib` reads the resident set and its peak, and `in_fresh_process` runs the measurement in a new
process, so that what this one has held before does not hide it.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from .runtime.cpu import MATMUL_CPU_FLAGS, cpu_description, this_cpu  # noqa: F401 - the bench's too

MIB = 2**20
CPU = torch.device("cpu")
# The clocks a step can be timed with: the wall clock, or the CPU time of the calling thread or of the whole process
# (all its threads), which on a machine shared with other work leaves out the time the others held the cores.
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "thread": time.thread_time,
                                          "process": time.process_time}


def synchronize(device: torch.device) -> None:
    """Wait for the work queued on `device` (CUDA runs asynchronously; a CPU needs no waiting)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(step: Callable[[], object], device: torch.device = CPU, clock: str = "wall") -> float:
    """Seconds of one call of `step` on `clock` (`CLOCKS`); CUDA work is waited for on both sides."""
    if clock not in CLOCKS:
        raise ValueError(f"unknown clock {clock!r}; the clocks are {', '.join(CLOCKS)}")
    read = CLOCKS[clock]
    synchronize(device)
    start = read()
    step()
    synchronize(device)
    return read() - start


def interleaved_times(
    steps: Mapping[str, Callable[[], object]], prepare: Mapping[str, Callable[[], object]] | None = None,
    warmup: int = 1, repeats: int = 5, device: torch.device = CPU, clock: str = "wall",
) -> dict[str, list[float]]:
    """Seconds per repeat for every named step, one call of each per repeat in a rotating order, after `warmup`
    untimed calls of each. `prepare[name]`, where given, runs untimed before each call of that step (e.g. to switch
    a model between training and evaluation)."""
    names = list(steps)
    prepare = prepare or {}
    for _ in range(warmup):
        for name in names:
            prepare.get(name, _nothing)()
            steps[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            prepare.get(name, _nothing)()
            times[name].append(timed(steps[name], device, clock))
    return times


def _nothing() -> None:
    """The preparation of a step that needs none."""


def summarize(times: list[float]) -> dict[str, Any]:
    """Median, minimum and maximum in milliseconds, plus every repeat in timing order (with `interleaved_times`,
    the i-th entries of two steps are neighbours in time)."""
    return {"median_ms": 1e3 * statistics.median(times), "min_ms": 1e3 * min(times), "max_ms": 1e3 * max(times),
            "times_ms": [1e3 * seconds for seconds in times]}


def median_seconds(steps: Mapping[str, Callable[[], object]], **timing: Any) -> dict[str, float]:
    """The median seconds of each step over `interleaved_times(steps, **timing)`."""
    return {name: statistics.median(seconds) for name, seconds in interleaved_times(steps, **timing).items()}


def peak_memory_bytes(step: Callable[[], object], device: torch.device) -> int:
    """Peak bytes allocated by torch during `step` above what was held before it (see the module's docstring)."""
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        step()
        synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    # The running sum of this step's allocations and frees (negative sizes), from the profiler's event
    # tree: `prof.events()` folds allocations into the operator that made them, which hides a
    # temporary freed inside its operator. The events' own `total_allocated` is no use either: it also
    # counts tensors allocated under earlier profiles and still alive (e.g. AdamW state), and frees of
    # tensors from before the step (last step's gradients) would push it below 0, so the peak starts at 0.
    allocations = []
    pending = list(prof.profiler.kineto_results.experimental_event_tree())
    while pending:
        event = pending.pop()
        pending.extend(event.children)
        if event.tag.name == "Allocation" and event.extra_fields.device.type == "cpu":
            allocations.append((event.start_time_ns, event.extra_fields.alloc_size))
    held = peak = 0
    for _, size in sorted(allocations):
        held += size
        peak = max(peak, held)
    return peak


def resident_mib(field: str = "VmHWM") -> float:
    """This process's peak resident memory (`VmHWM`, the high-water mark of its own address space) or its resident
    memory now (`VmRSS`), MiB, from /proc/self/status. `getrusage`'s `ru_maxrss` would not do: Linux carries it
    across `execve`, so a child started by a large parent begins at the parent's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024  # kilobytes
    raise RuntimeError(f"/proc/self/status has no {field}: resident memory is measured on Linux only")


def reset_resident_peak() -> None:
    """Bring `VmHWM` down to the resident memory now (Linux: 5 written to /proc/self/clear_refs)."""
    Path("/proc/self/clear_refs").write_text("5")


def in_fresh_process(function: Callable[..., Any], *args: Any) -> Any:
    """`function(*args)` in a new Python process, spawned rather than forked (it starts with none of this one's
    memory), and its result; `function` must be importable by name."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, args)


def use_threads(threads: int | None) -> int:
    """Set torch's intra-op threads to `threads` (None: keep torch's choice); returns the number in use."""
    if threads:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def machine(device: torch.device = CPU) -> dict[str, Any]:
    """Where a measurement runs: the CPU, its cores and torch's threads, the GPU if `device` is one, the versions,
    the load average and the time it started (a record adds `load_average_end` when it is done)."""
    import transformers

    record = {"torch": torch.__version__, "transformers": transformers.__version__,
              "python": platform.python_version(), "machine": platform.machine(), "device": str(device),
              "threads": torch.get_num_threads(), "cpu_count": os.cpu_count(), "cpu": this_cpu(),
              "load_average_start": os.getloadavg(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    if device.type == "cuda":
        record["gpu"] = torch.cuda.get_device_name(device)
    return record
