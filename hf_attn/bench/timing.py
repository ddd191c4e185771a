"""Steps, wall-clock timing with interleaved repeats, and peak memory of one step.

Every repeat times one step of *each* model, in an order rotated from repeat to repeat, so that drift
of a shared machine (other jobs, thermal throttling) hits all models alike; the i-th times of two
models are neighbours in time, which lets the report count paired wins as well as compare medians.

Peak memory is the high-water mark of bytes held by torch's allocator during one step, *above what
was already held when the step began* (parameters, AdamW state, other models and cached tables are
not counted; activations, gradients and temporaries are). On CUDA it is
`torch.cuda.max_memory_allocated()` minus `torch.cuda.memory_allocated()` before the step. On CPU
no allocator statistics exist (and `tracemalloc` does not see torch's allocations), so the step runs
once under `torch.profiler` with `profile_memory=True` and the peak is the maximum of the running
sum of the allocations and frees it records. Both count tensor bytes, not process RSS (no allocator
caching or fragmentation).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..runtime.precision import autocast
from .models import Candidate

MIB = 2**20


def make_batch(
    batch: int, lengths: Sequence[int], padded_length: int, vocab_size: int, generator: torch.Generator,
    device: torch.device,
) -> dict[str, torch.Tensor]:
    """Random token ids (never [PAD], the last id) for `lengths` real tokens per row, right-padded."""
    pad_id = vocab_size - 1
    input_ids = torch.randint(0, pad_id, (batch, padded_length), generator=generator)
    attention_mask = (torch.arange(padded_length)[None, :] < torch.tensor(lengths)[:, None]).long()
    input_ids = input_ids.masked_fill(attention_mask == 0, pad_id)
    labels = torch.randint(0, 2, (batch,), generator=generator)
    return {"input_ids": input_ids.to(device), "attention_mask": attention_mask.to(device), "labels": labels.to(device)}


def train_step(candidate: Candidate, batch: dict[str, torch.Tensor], precision: str = "fp32") -> None:
    """Forward (under bfloat16 autocast for `bf16`), backward and AdamW, as transformers' `Trainer`: the
    backward pass runs outside autocast, in the dtypes the forward chose, and parameters, gradients and
    optimizer state stay float32."""
    with autocast(precision, batch["input_ids"].device):
        loss = candidate.model(**batch).loss
    loss.backward()
    candidate.optimizer.step()
    candidate.optimizer.zero_grad(set_to_none=True)


def infer_step(candidate: Candidate, batch: dict[str, torch.Tensor], precision: str = "fp32") -> None:
    # no_grad, not inference_mode: a RoPE/sinusoidal cache grown here must stay usable for training.
    with torch.no_grad(), autocast(precision, batch["input_ids"].device):
        candidate.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(step: Callable[[], None], device: torch.device) -> float:
    """Wall-clock seconds of one step; CUDA work is waited for on both sides."""
    synchronize(device)
    start = time.perf_counter()
    step()
    synchronize(device)
    return time.perf_counter() - start


def peak_memory_bytes(step: Callable[[], None], device: torch.device) -> int:
    """Peak bytes allocated by torch during `step` above what was held before it (see module doc)."""
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


def interleaved_times(
    steps: dict[str, Callable[[], None]], prepare: dict[str, Callable[[], None]], warmup: int, repeats: int,
    device: torch.device,
) -> dict[str, list[float]]:
    """Seconds per repeat for every named step, one step of each per repeat in a rotating order."""
    names = list(steps)
    for _ in range(warmup):
        for name in names:
            prepare[name]()
            steps[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            prepare[name]()
            times[name].append(timed(steps[name], device))
    return times


def summarize(times: list[float]) -> dict[str, Any]:
    """Median, minimum and maximum, plus every repeat in timing order (each repeat times every model once,
    so the i-th entries of two models are neighbours in time)."""
    return {"median_ms": 1e3 * statistics.median(times), "min_ms": 1e3 * min(times), "max_ms": 1e3 * max(times),
            "times_ms": [1e3 * seconds for seconds in times]}
