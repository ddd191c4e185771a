"""Test helpers: tiny configs so the whole suite runs in minutes on 2 CPU cores."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

SHARED = Path(__file__).resolve().parents[2] / "shared"
REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "configs" / "smoke.yaml"
# multi-GPU DDP and FSDP configurations for `accelerate launch --config_file` (docs/ecosystem.md).
ACCELERATE_CONFIGS = REPO / "configs" / "accelerate"
# Overrides that shrink the smoke experiment's model and tokenizer to seconds per run (add row limits).
# Float32 gradients of one loss computed two ways (blocks or a dense mask, compiled or eager, unpadded or padded):
# their rounding is ~1e-6 of the gradient's scale on every CPU kind seen (AVX2, AVX-512, AMX); a wrong entry is not.
GRADIENT_RTOL = 5e-5
SMOKE_TINY_MODEL = ["model.hidden_size=32", "model.intermediate_size=64", "tokenizer_vocab_size=300"]


def tiny_config_kwargs(**overrides: object) -> dict:
    """A 2-layer, 32-wide model: big enough for every code path, small enough to be instant."""
    kwargs = dict(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=32,
        pad_token_id=0,
        hidden_dropout=0.0,
        attention_dropout=0.0,
    )
    kwargs.update(overrides)
    return kwargs


def assert_close_to_scale(actual: torch.Tensor, expected: torch.Tensor, rtol: float = 1e-5, msg: str | None = None,
                          floor: float = 0.0) -> None:
    """`actual` equals `expected` within `rtol` of `expected`'s largest magnitude (or of `floor`, if larger), element
    by element.

    Two computations of one sum (another kernel, another order, a CPU with other vector units) differ by rounding
    in proportion to the sum's terms, not to its result: a gradient entry near zero that sums terms of size ~100
    carries ~100 x eps of rounding. A tolerance relative to each element fails there on some CPUs; one relative to
    the tensor's scale holds on every CPU and still catches a wrong entry of any size above that scale's noise.
    """
    scale = max(expected.detach().abs().max().item() if expected.numel() else 0.0, floor)
    torch.testing.assert_close(actual, expected, rtol=0, atol=rtol * max(scale, 1e-6), msg=msg)


def assert_gradients_close(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    """Two computations of one model's gradients agree, parameter by parameter, within `GRADIENT_RTOL` of each
    tensor's scale. A tensor whose true gradient is zero (the last bias of FIRE's MLP shifts every score of a row
    alike, which softmax ignores) holds rounding noise alone, with no scale of its own: it is held to a thousandth
    of the model's largest gradient instead."""
    assert actual.keys() == expected.keys()
    floor = 1e-3 * max(tensor.abs().max().item() for tensor in expected.values() if tensor.numel())
    for name in expected:
        assert_close_to_scale(actual[name], expected[name], rtol=GRADIENT_RTOL, msg=name, floor=floor)


def require(path: Path) -> Path:
    """`path`, or skip the test with the reason when this checkout has no ../shared beside it."""
    if not path.exists():
        pytest.skip(f"{path} is absent; it holds the Week 3 sample files and IMDb these tests compare against")
    return path


def load_tool(name: str) -> ModuleType:
    """The repository's script tools/NAME.py as a module (tools/ is this repository's, not part of the package)."""
    spec = importlib.util.spec_from_file_location(f"tools.{name}", REPO / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_on_two_processes(cli_args: list[str], cwd: Path) -> None:
    """Run `hf_attn.cli CLI_ARGS` under `accelerate launch` on two CPU processes with the repository's DDP
    configuration (configs/accelerate/ddp.yaml, the one the docs give for GPUs); fail with its stderr.

    accelerate 1.x: `--cpu` picks its single-process launcher; the configuration's MULTI_GPU starts torchrun, and on
    a machine without GPUs the package joins the processes over gloo on the CPU.
    """
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    assert accelerate, "accelerate's launcher is not installed next to this Python"
    with socket.socket() as probe:  # a free port, so that two launches in a row never share torchrun's default
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    command = [accelerate, "launch", "--config_file", str(ACCELERATE_CONFIGS / "ddp.yaml"), "--num_processes", "2",
               "--main_process_port", port, "--dynamo_backend", "no", "-m", "hf_attn.cli", *cli_args]
    # PYTHONPATH: the processes run in `cwd`, where `-m hf_attn.cli` would import the installed package (an editable
    # install of another checkout, say) instead of the one under test.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, cwd=cwd)
    assert result.returncode == 0, result.stderr[-4000:]
