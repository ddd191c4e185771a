"""Dropout that spends one CPU random draw on four elements.

On CPU, torch's dropout draws one random number per element (`aten::bernoulli_`), one of the larger
costs of a training step after the matrix products. Each draw of torch's CPU generator carries 64
random bits. The `packed` implementation cuts every draw into four 16-bit lanes and drops an element
when its lane falls below `round(p * 2**16)`, so one draw decides four elements. The drop probability
is therefore p rounded to a multiple of 2**-16 (at most 7.6e-6 away from p); kept elements are scaled
by 1 / (1 - that probability), so the expected output is exactly the input, as with torch's dropout.

Draws come from torch's default generator, so `torch.manual_seed` (and Trainer's checkpointed RNG
state) reproduce the same masks. On other devices torch's own dropout is used: CUDA's draws are
already generated in bulk on the device. `dropout_implementation="torch"` selects torch's everywhere.
"""

from __future__ import annotations

import torch
from torch import nn

DROPOUT_IMPLEMENTATIONS = ("packed", "torch")
LANE_BITS = 16
LANES_PER_DRAW = 64 // LANE_BITS
LANE_VALUES = 2**LANE_BITS


def packed_drop_mask(shape: torch.Size, p: float, device: torch.device) -> tuple[torch.Tensor, float]:
    """A boolean mask of `shape`, True where an element is dropped, and the scale for kept elements."""
    threshold = min(round(p * LANE_VALUES), LANE_VALUES - 1)
    numel = shape.numel()
    draws = torch.randint(
        -(2**63), 2**63 - 1, ((numel + LANES_PER_DRAW - 1) // LANES_PER_DRAW,), dtype=torch.int64, device=device
    )
    lanes = draws.view(torch.int16)[:numel].view(shape)  # uniform on [-2**15, 2**15)
    return lanes < threshold - LANE_VALUES // 2, LANE_VALUES / (LANE_VALUES - threshold)


def apply_dropout(
    hidden_states: torch.Tensor, p: float, training: bool, implementation: str = "packed"
) -> torch.Tensor:
    """Zero each element with probability p and scale the rest by 1 / (1 - p), in training only."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p!r}.")
    if not training or p == 0.0:
        return hidden_states
    if implementation == "torch" or hidden_states.device.type != "cpu":
        return nn.functional.dropout(hidden_states, p=p, training=True)
    drop, scale = packed_drop_mask(hidden_states.shape, p, hidden_states.device)
    return torch.where(drop, 0.0, hidden_states * scale)


class Dropout(nn.Module):
    """`nn.Dropout` with a choice of implementation (`packed` or `torch`, see the module docstring)."""

    def __init__(self, p: float, implementation: str = "packed") -> None:
        super().__init__()
        if implementation not in DROPOUT_IMPLEMENTATIONS:
            raise ValueError(
                f"unknown dropout implementation {implementation!r}; allowed: {', '.join(DROPOUT_IMPLEMENTATIONS)}."
            )
        self.p = p
        self.implementation = implementation

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return apply_dropout(hidden_states, self.p, self.training, self.implementation)

    def extra_repr(self) -> str:
        return f"p={self.p}, implementation={self.implementation}"
