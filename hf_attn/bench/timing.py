"""The bench's steps: a random batch, a training step (as transformers' `Trainer`) and an inference step.

They are timed with `hf_attn.timing` (the clock, interleaved repeats, their summary, peak memory).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..runtime.precision import autocast

# The arena's speed cells import these from here (arena/measure.py); new code takes them from hf_attn.timing.
from ..timing import MIB, interleaved_times, peak_memory_bytes, summarize  # noqa: F401
from .models import Candidate


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
