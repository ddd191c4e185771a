"""Scratch memory for the widest short-lived tensors of a CPU forward pass without autograd.

A layer's fused QKV projection (batch x seq x 3d) and its feed-forward up-projection (batch x seq x 4d)
are dead as soon as the next matrix product has read them, yet a forward pass allocates each afresh,
layer after layer. On CPU, torch takes tensors this large from glibc, which maps them from the kernel
(above 32 MiB always) and unmaps them on free: each arrives as new zeroed pages, one page fault per
4 KiB. Writing all of them into one buffer per pass (they are never alive at the same time) takes
those faults once per pass instead of twice per layer.
"""

from __future__ import annotations

import torch
from torch import nn


class ProjectionScratch:
    """One buffer, reused by every projection of a forward pass whose output dies within its layer.

    `linear` returns a view of the buffer, valid until its next call: the caller must have consumed
    it by then. Only a plain `nn.Linear` that nothing intercepts writes into the scratch (so nothing
    that would have run is skipped), and only when nothing intercepts the modules that read the output
    either (a hook could keep the tensor, which the next projection overwrites). Anything else (a LoRA
    wrapper, a quantised subclass, a hooked layer, accelerate's offloading, which replaces `forward`)
    is called as usual, as is every linear while autograd records
    (`out=` tensors cannot record gradients), under autocast, or off CPU (CUDA's caching allocator
    already reuses freed memory).
    """

    def __init__(self, widest_output: int) -> None:
        """`widest_output`: the largest `out_features` to be projected, so that the buffer, sized on
        first use for it, never has to be allocated again for a wider one."""
        self.widest_output = widest_output
        self._buffer: torch.Tensor | None = None

    def linear(self, linear: nn.Module, inputs: torch.Tensor, reader: nn.Module | None = None) -> torch.Tensor:
        """`linear(inputs)`, bit-identical: F.linear on a contiguous input is addmm(bias, inputs_2d,
        weight.T), the kernel used here with an `out=` tensor. `reader`: the module whose submodules
        receive the output, if any."""
        if not _writes_into_scratch(linear, inputs) or (reader is not None and _is_intercepted(reader)):
            return linear(inputs)
        rows = inputs.numel() // inputs.shape[-1]
        size = rows * linear.out_features
        buffer = self._buffer
        if buffer is None or buffer.numel() < size or buffer.dtype != inputs.dtype:
            buffer = self._buffer = inputs.new_empty(rows * max(linear.out_features, self.widest_output))
        output = buffer[:size].view(rows, linear.out_features)
        flat_inputs = inputs.reshape(rows, inputs.shape[-1])
        if linear.bias is None:
            torch.mm(flat_inputs, linear.weight.t(), out=output)
        else:
            torch.addmm(linear.bias, flat_inputs, linear.weight.t(), out=output)
        return output.view(*inputs.shape[:-1], linear.out_features)


def project(
    linear: nn.Module, inputs: torch.Tensor, scratch: ProjectionScratch | None, reader: nn.Module | None = None
) -> torch.Tensor:
    """`linear(inputs)`, through `scratch` when the caller has one (a layer called on its own has none)."""
    return linear(inputs) if scratch is None else scratch.linear(linear, inputs, reader)


def _writes_into_scratch(linear: nn.Module, inputs: torch.Tensor) -> bool:
    """The conditions of `ProjectionScratch`, plus a contiguous input of the weight's dtype (F.linear
    takes another kernel for a strided one)."""
    return (
        type(linear) is nn.Linear
        and not _is_intercepted(linear)
        and not torch.is_grad_enabled()
        and not torch.is_autocast_enabled(inputs.device.type)
        and inputs.device.type == "cpu"
        and inputs.is_contiguous()
        and inputs.dtype == linear.weight.dtype
    )


def _is_intercepted(module: nn.Module) -> bool:
    """Whether code other than the class's own forward would run around `module` or one of its
    submodules: a forward (pre-)hook, its own or a global one, or a `forward` replaced on the instance
    (as accelerate's `add_hook_to_module` does to move offloaded weights in)."""
    return bool(nn.modules.module._global_forward_hooks or nn.modules.module._global_forward_pre_hooks) or any(
        submodule._forward_hooks or submodule._forward_pre_hooks or "forward" in vars(submodule)
        for submodule in module.modules()
    )
