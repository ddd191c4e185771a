"""Faster compiled decoding of one sequence at a time: single-row products that stream the weights.

At batch 1 a decoding step multiplies one row by every weight matrix and reads each weight once, so the step
runs at the speed the products stream the weights. A BLAS matrix-vector product reads a weight stored as
`nn.Linear` stores it, (out, in), at a fraction of the speed of a plain pass over memory (MKL on a CPU:
docs/benchmarks.md, `hf-attn bench --sections streaming`); written as `(row * weight).sum(-1)`, Inductor fuses the
product into one loop over the weight that streams it nearly as fast as that pass.

This is an opt-in for serving, not part of the model code a Hub repo receives: `stream_single_row_products(model)`
switches the model's `nn.Linear` layers (any model's: hf-attn's or transformers') to `StreamingLinear` in place,
before `generate(..., cache_implementation="static", compile_config=...)`. Eagerly, for several rows, for sizes a
graph keeps symbolic, under autocast and under `torch.export`, a `StreamingLinear` is `nn.Linear`. Do not use it
before `torch.ao` quantization, which swaps exactly `nn.Linear`.
"""

from __future__ import annotations

import torch
from torch import nn


class StreamingLinear(nn.Linear):
    """`nn.Linear` whose product with a single row is, inside a compiled graph, a multiply-and-sum (see the module).
    The sums run in another order than BLAS's: results differ in the last bits."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        compiling = torch.compiler.is_compiling() and not torch.compiler.is_exporting()  # checked first: eager pays
        one_row = compiling and all(isinstance(size, int) and size == 1 for size in input.shape[:-1])  # sizes fixed
        if one_row and not torch.is_autocast_enabled(input.device.type):  # autocast casts a linear's inputs only
            output = (input[..., None, :] * self.weight).sum(dim=-1)
            return output if self.bias is None else output + self.bias
        return super().forward(input)


def stream_single_row_products(model: nn.Module) -> nn.Module:
    """Switch every `nn.Linear` of `model` to `StreamingLinear`, in place (the same parameters and state dict);
    returns the model."""
    for module in model.modules():
        if type(module) is nn.Linear:
            module.__class__ = StreamingLinear
    return model
