"""Graph capture: `torch.compile(fullgraph=True)` and the default (dynamo) ONNX exporter, for every scheme.

The forward pass must read no tensor value back to the host while a graph is captured (a graph break
under `fullgraph=True`, an export failure), and the captured graph must serve batch sizes, lengths and
padding other than the example it was captured with. The reference is the same model run eagerly.

Compiling with inductor and exporting to ONNX take tens of seconds each, so those tests are `slow`; the
default suite keeps the capture itself (dynamo's trace with the `eager` backend, and `torch.export`) for the
schemes whose positions act inside attention.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from helpers import assert_gradients_close, tiny_config_kwargs

from hf_attn import (
    POSITION_SCHEMES,
    HfAttnConfig,
    HfAttnForCausalLM,
    HfAttnForMaskedLM,
    HfAttnForSequenceClassification,
    HfAttnModel,
)

MAX_POSITIONS = 64


def classifier(scheme: str, attn_implementation: str = "sdpa") -> HfAttnForSequenceClassification:
    config = HfAttnConfig(**tiny_config_kwargs(position_embedding_type=scheme, max_position_embeddings=MAX_POSITIONS))
    config._attn_implementation = attn_implementation
    torch.manual_seed(0)
    return HfAttnForSequenceClassification(config).eval()


def batch(size: int, length: int, padded: bool) -> dict[str, torch.Tensor]:
    """Random ids; with `padded`, the last row keeps only half its tokens (padding id 0 after them)."""
    generator = torch.Generator().manual_seed(size * 1000 + length)
    input_ids = torch.randint(1, 64, (size, length), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    if padded:
        attention_mask[-1, length // 2 :] = 0
        input_ids[-1, length // 2 :] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


# The example a graph is captured with, then other shapes: more rows, longer (beyond max_position_embeddings
# for the schemes that extrapolate), no padding at all.
EXAMPLE = (2, 12, True)
OTHERS = ((5, 40, True), (1, 7, False))
LONG = (3, 3 * MAX_POSITIONS, True)


def shapes(scheme: str) -> tuple[tuple[int, int, bool], ...]:
    return OTHERS if scheme == "learned" else (*OTHERS, LONG)


# The default suite captures RoPE and ALiBi (rotations, a fixed bias); the learned biases of t5 and fire in the slow
# one, beside their compiled and ONNX runs.
@pytest.mark.parametrize("scheme", ["rope", "alibi", pytest.param("t5", marks=pytest.mark.slow),
                                    pytest.param("fire", marks=pytest.mark.slow)])
def test_the_forward_pass_captures_as_one_graph_that_serves_other_shapes(scheme: str) -> None:
    """The graph-capture rule without inductor's code generation: dynamo traces the whole forward pass
    (`fullgraph=True`, no host sync) and the traced graph, run by the `eager` backend, serves other shapes."""
    torch._dynamo.reset()
    model = classifier(scheme)
    traced = torch.compile(model, fullgraph=True, dynamic=True, backend="eager")
    with torch.no_grad():
        for shape in (EXAMPLE, *OTHERS):
            inputs = batch(*shape)
            torch.testing.assert_close(traced(**inputs).logits, model(**inputs).logits, atol=1e-5, rtol=1e-5)


def dynamic_batch_and_length() -> dict[str, dict[int, torch.export.Dim]]:
    """The dynamic shapes of docs/export.md: batch and sequence length of both inputs."""
    batch_size, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    return {"input_ids": {0: batch_size, 1: sequence}, "attention_mask": {0: batch_size, 1: sequence}}


def test_torch_export_with_dynamic_batch_and_length_serves_other_shapes() -> None:
    """What the ONNX exporter captures first (`torch.export`), for RoPE: one program for any batch and length."""
    model = classifier("rope")
    exported = torch.export.export(model, (), kwargs=batch(*EXAMPLE), dynamic_shapes=dynamic_batch_and_length())
    with torch.no_grad():
        for shape in OTHERS:
            inputs = batch(*shape)
            torch.testing.assert_close(exported.module()(**inputs).logits, model(**inputs).logits,
                                       atol=1e-5, rtol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scheme", "attn_implementation"), [(scheme, "sdpa") for scheme in POSITION_SCHEMES] + [("rope", "eager")]
)
def test_compile_fullgraph_matches_eager_for_other_shapes(scheme: str, attn_implementation: str) -> None:
    torch._dynamo.reset()
    model = classifier(scheme, attn_implementation)
    compiled = torch.compile(model, fullgraph=True, dynamic=True)
    with torch.no_grad():
        for shape in (EXAMPLE, *shapes(scheme)):
            inputs = batch(*shape)
            torch.testing.assert_close(compiled(**inputs).logits, model(**inputs).logits, atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_compiled_training_step_matches_eager_gradients() -> None:
    """A training step (no dropout, so both runs see the same function) under `fullgraph=True`."""
    torch._dynamo.reset()
    model = classifier("rope")
    model.train()
    inputs = {**batch(*EXAMPLE), "labels": torch.tensor([0, 1])}
    model(**inputs).loss.backward()
    expected = {name: parameter.grad.clone() for name, parameter in model.named_parameters()}
    model.zero_grad()
    torch.compile(model, fullgraph=True)(**inputs).loss.backward()
    assert_gradients_close({name: parameter.grad for name, parameter in model.named_parameters()}, expected)


def export_onnx(model: HfAttnForSequenceClassification, path: Path, example: tuple[int, int, bool] = EXAMPLE) -> None:
    """The recipe of docs/export.md: the default exporter, batch and sequence length dynamic."""
    torch.onnx.export(model, (), str(path), kwargs=batch(*example), dynamic_shapes=dynamic_batch_and_length(),
                      input_names=["input_ids", "attention_mask"], output_names=["logits"], dynamo=True)


def assert_onnxruntime_matches_eager(
    model: HfAttnForSequenceClassification, path: Path, shapes: tuple[tuple[int, int, bool], ...]
) -> None:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for shape in shapes:
        inputs = batch(*shape)
        (logits,) = session.run(["logits"], {name: tensor.numpy() for name, tensor in inputs.items()})
        with torch.no_grad():
            expected = model(**inputs, return_dict=True).logits
        torch.testing.assert_close(torch.from_numpy(logits), expected, atol=1e-5, rtol=1e-4, msg=f"shape {shape}")


needs_onnx = pytest.mark.skipif(
    importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("onnxscript") is None,
    reason="the ONNX export needs onnxscript and the parity check onnxruntime: pip install 'hf-attn[export]'",
)


@pytest.mark.slow
@needs_onnx
@pytest.mark.parametrize("scheme", list(POSITION_SCHEMES))
def test_onnx_export_runs_in_onnxruntime_like_eager(scheme: str, tmp_path: Path) -> None:
    model = classifier(scheme)
    export_onnx(model, tmp_path / "model.onnx")
    assert_onnxruntime_matches_eager(model, tmp_path / "model.onnx", (EXAMPLE, *shapes(scheme)))


@pytest.mark.slow
@needs_onnx
@pytest.mark.parametrize("dynamo", [True, False], ids=["dynamo", "legacy"])
@pytest.mark.parametrize("scheme", list(POSITION_SCHEMES))
def test_onnx_recipes_that_set_return_dict_false_export_every_scheme(scheme: str, dynamo: bool, tmp_path: Path) -> None:
    """The common recipe sets `model.config.return_dict = False` so the graph returns a tuple; both exporters
    (dynamo's, and the TorchScript one with `dynamic_axes`) then give onnxruntime the eager model's logits."""
    model = classifier(scheme)
    model.config.return_dict = False
    path = tmp_path / "model.onnx"
    if dynamo:
        export_onnx(model, path)
    else:
        inputs = batch(*EXAMPLE)
        torch.onnx.export(model, (inputs["input_ids"], inputs["attention_mask"]), str(path), dynamo=False,
                          input_names=["input_ids", "attention_mask"], output_names=["logits"],
                          dynamic_axes={name: {0: "batch", 1: "sequence"} for name in inputs})
    assert_onnxruntime_matches_eager(model, path, (EXAMPLE, *shapes(scheme)))


WINDOW = 16  # the windowed classifiers' positions: the example and the other shapes fall on both sides of it


@pytest.mark.slow
@needs_onnx
@pytest.mark.parametrize(
    ("scheme", "example", "read_length"),
    [("rope", EXAMPLE, None), ("learned", (2, 2 * WINDOW + 3, True), None), ("learned", EXAMPLE, 3 * WINDOW),
     ("alibi", (2, WINDOW, False), None)],
)
def test_windowed_classifier_exports_and_matches_eager_at_every_length(
    scheme: str, example: tuple[int, int, bool], read_length: int | None, tmp_path: Path
) -> None:
    """A classifier with `window_stride` (as committed in checkpoints/) exported from an example shorter
    than, as long as, or longer than its positions: onnxruntime reads shorter texts whole and longer ones as
    windows, as the eager model does, including learned positions, which have no row past the window, and a
    `read_length` (shorter than the longest input) cuts the exported model's input as it cuts the eager one's."""
    config = HfAttnConfig(**tiny_config_kwargs(position_embedding_type=scheme, max_position_embeddings=WINDOW,
                                               window_stride=WINDOW // 2 + 1, read_length=read_length))
    torch.manual_seed(0)
    model = HfAttnForSequenceClassification(config).eval()
    export_onnx(model, tmp_path / "model.onnx", example)
    lengths = (example, (3, 5, True), (1, WINDOW, False), (2, WINDOW + 1, True), (3, 40, True), (1, 7 * WINDOW, False))
    assert_onnxruntime_matches_eager(model, tmp_path / "model.onnx", lengths)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model_class", "settings"),
    [
        (HfAttnModel, {"position_embedding_type": "alibi"}),
        (HfAttnForMaskedLM, {"position_embedding_type": "rope"}),
        (HfAttnForCausalLM, {"position_embedding_type": "rope", "is_decoder": True, "num_key_value_heads": 1}),
        (HfAttnForSequenceClassification, {"position_embedding_type": "learned", "sliding_window": 4,
                                           "layer_types": ["sliding_attention", "full_attention"]}),
        (HfAttnForSequenceClassification, {"position_embedding_type": "rope", "max_position_embeddings": 8,
                                           "window_stride": 3}),
    ],
)
def test_other_heads_and_attention_variants_compile_fullgraph(model_class: type, settings: dict) -> None:
    """The same graph-capture rule for the encoder alone, the masked LM, a GQA decoder, sliding windows, and a
    classifier reading inputs past its positions as windows (in eager mode it encodes only the windows a text
    needs, a data-dependent count; in a captured graph all of them, masked out)."""
    torch._dynamo.reset()
    config = HfAttnConfig(**tiny_config_kwargs(**{"max_position_embeddings": MAX_POSITIONS, **settings}))
    torch.manual_seed(0)
    model = model_class(config).eval()
    compiled = torch.compile(model, fullgraph=True, dynamic=True)
    with torch.no_grad():
        for shape in (EXAMPLE, *OTHERS):
            inputs = batch(*shape)
            actual, expected = compiled(**inputs)[0], model(**inputs)[0]
            if expected.dim() == 3:  # per token: the padding's states are computed in a captured graph, unpadded
                real = inputs["attention_mask"].bool()  # (zeros) in eager mode; the real tokens' must agree
                actual, expected = actual[real], expected[real]
            torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)

