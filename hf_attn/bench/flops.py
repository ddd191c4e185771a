"""Model FLOPs, the machine's measured matrix-multiply peak, and model-FLOPs utilisation (MFU).

Model FLOPs count the multiply-adds a model's matrix products need, as 2 FLOPs each (the convention of
MFU, after PaLM's appendix B); elementwise work, norms, softmax and the optimizer are left out. For an
encoder over sequences of T tokens, with P the weights of the `nn.Linear` layers inside its Transformer
blocks, n layers of width d, S the weights of the position scheme's linear layers (FIRE's MLP), which run
once per query-key pair, and H the weights of the linear layers after the encoder (pooler, classifier),
which run once per sequence:

    forward FLOPs per sequence = T * (2 * P + n * 4 * T * d) + 2 * S * T^2 + 2 * H

(2 * P per token for the projections; per layer, Q K^T and the weighted sum of V are T x T x d multiply-adds
each.) A training step is 3 x the forward: the backward pass multiplies by each weight twice, once for
the input's gradient and once for the weight's. `FlopCounterMode` (torch.utils.flop_counter) agrees
exactly on eager attention (tests/test_bench.py); it does not count CPU SDPA's fused kernel.

The peak is the GFLOP/s of `torch.mm` over the model's own GEMM shapes in the precision of the run
(bfloat16 operands for bf16: autocast hands the matrix units exactly these), measured twice: once before the
models (`matmul_peak`, the best of `peak_repeats` products per shape), and inside every timed case as one
more step interleaved with the models' steps (all shapes once per repeat, `gemm_flops` over its median
time). MFU = achieved model FLOP/s over the interleaved figure of the same case, so that a machine busy with
other work slows the yardstick with the models, and MFU says how far from the machine's own matrix
throughput a model runs, not from a datasheet figure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ..positions import PositionScheme
from ..runtime.precision import compute_dtype
from ..timing import timed

if TYPE_CHECKING:  # the settings gather every section's fields, and the throughput section imports this module
    from .settings import BenchSettings

MODE_FLOP_FACTORS = {"infer": 1, "train": 3}  # training: forward + backward (2 x forward)


def linear_weights(module: nn.Module) -> int:
    """Weights (not biases) of the `nn.Linear` layers in `module`: the multiply-adds per input row."""
    return sum(layer.weight.numel() for layer in module.modules() if isinstance(layer, nn.Linear))


def forward_flops_per_sequence(model: nn.Module, layers: nn.ModuleList, seq: int) -> int:
    """Model FLOPs of one forward pass over one sequence of `seq` tokens (module doc's formula)."""
    per_token = linear_weights(layers)
    per_pair = sum(linear_weights(scheme) for scheme in model.modules() if isinstance(scheme, PositionScheme))
    head = linear_weights(model) - per_token - per_pair
    attention = len(layers) * 4 * seq * model.config.hidden_size
    return seq * (2 * per_token + attention) + 2 * per_pair * seq * seq + 2 * head


def step_flops(model: nn.Module, layers: nn.ModuleList, mode: str, batch: int, seq: int) -> int:
    """Model FLOPs of one step: `infer` is a forward pass, `train` 3 x that."""
    return MODE_FLOP_FACTORS[mode] * batch * forward_flops_per_sequence(model, layers, seq)


def gemm_shapes(settings: BenchSettings) -> list[tuple[int, int, int]]:
    """(rows, inner, columns) of the benchmark model's projections over one training batch at the shortest
    length: Q/K/V, the attention output, the FFN's up and down projections."""
    rows = settings.train_batch * min(settings.seq_lengths)
    width, ffn = settings.hidden_size, settings.intermediate_size
    return [(rows, width, 3 * width), (rows, width, width), (rows, width, ffn), (rows, ffn, width)]


def gemm_operands(settings: BenchSettings, precision: str, device: torch.device) -> list[tuple[torch.Tensor, ...]]:
    """Random left and right operands of every shape of `gemm_shapes`, in the dtype of `precision`."""
    dtype = compute_dtype(precision)
    generator = torch.Generator().manual_seed(settings.seed)
    return [(torch.randn(rows, inner, generator=generator).to(device, dtype),
             torch.randn(inner, columns, generator=generator).to(device, dtype))
            for rows, inner, columns in gemm_shapes(settings)]


def gemm_flops(settings: BenchSettings) -> int:
    """FLOPs of one product of each shape of `gemm_shapes` (2 per multiply-add)."""
    return sum(2 * rows * inner * columns for rows, inner, columns in gemm_shapes(settings))


def matmul_peak(settings: BenchSettings, precision: str, device: torch.device) -> dict[str, Any]:
    """The best GFLOP/s of `torch.mm` in `precision` over `gemm_shapes`, each timed `peak_repeats` times
    after one untimed product (the best, not the median: a peak is what the machine can do)."""
    shapes = []
    for left, right in gemm_operands(settings, precision, device):
        torch.mm(left, right)
        seconds = min(timed(lambda: torch.mm(left, right), device) for _ in range(settings.peak_repeats))
        (rows, inner), columns = left.shape, right.shape[1]
        shapes.append({"shape": [rows, inner, columns], "gflops": 2 * rows * inner * columns / seconds / 1e9})
    return {"precision": precision, "dtype": str(compute_dtype(precision)).removeprefix("torch."),
            "gflops": max(shape["gflops"] for shape in shapes), "shapes": shapes}
