"""A saved classifier as an ONNX folder: `model.onnx` (fp32, batch and length dynamic), optionally `model.int8.onnx`
(ONNX Runtime's dynamic int8 quantization of every MatMul's weights), the tokenizer, the config, and `export.json`
with the exported models' largest logit difference from the PyTorch model on texts of several lengths.

The graph reads what the saved model reads: its `read_length` cuts the input, and a model with `window_stride`
reads any length as windows (a captured graph always cuts windows, docs/export.md).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..saved import load_saved_classifier

INPUT_NAMES = ("input_ids", "attention_mask")
ONNX_FILES = {"fp32": "model.onnx", "int8": "model.int8.onnx"}
# Texts the export is checked on: short, a window or so, and many windows of a long review.
CHECK_TEXTS = ("Dull.", "A wonderful, moving film with a great cast. " * 12, "Too long and far too slow; " * 150)


def export_classifier(model_dir: str | os.PathLike[str], output_dir: str | os.PathLike[str],
                      int8: bool = False) -> dict[str, Any]:
    """Export the classifier of `model_dir` to `output_dir` (see the module docstring); returns `export.json`."""
    import onnxruntime  # noqa: F401 - fail now, naming the extra, not after the export

    model, tokenizer = load_saved_classifier(model_dir)
    model.eval()
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    example = tokenizer(["a first review", "and a second, longer one"], padding=True, return_tensors="pt")
    export_onnx(model, {name: example[name] for name in INPUT_NAMES}, output_dir / ONNX_FILES["fp32"])
    if int8:
        quantize_int8(output_dir / ONNX_FILES["fp32"], output_dir / ONNX_FILES["int8"])
    files = {precision: name for precision, name in ONNX_FILES.items() if precision == "fp32" or int8}
    tokenizer.save_pretrained(output_dir)
    model.config.save_pretrained(output_dir)
    encoded = tokenizer(list(CHECK_TEXTS), padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = model(**{name: encoded[name] for name in INPUT_NAMES}).logits.numpy()
    record = {"source": str(model_dir), "files": files, "max_abs_logit_difference": {}}
    for precision in files:
        actual = OnnxClassifier(output_dir, precision).logits(list(CHECK_TEXTS))
        record["max_abs_logit_difference"][precision] = float(np.abs(actual - expected).max())
    (output_dir / "export.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def export_onnx(model: torch.nn.Module, inputs: dict[str, torch.Tensor], path: Path) -> None:
    """`model` (input_ids, attention_mask -> logits) as one ONNX file with torch's dynamo exporter, batch and length
    dynamic: the export of `hf-attn export`, and of the reference models it is profiled against."""
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    with torch.no_grad(), _exporters_quiet():
        torch.onnx.export(model, (), str(path), kwargs=inputs, input_names=list(inputs), output_names=["logits"],
                          dynamic_shapes={name: {0: batch, 1: sequence} for name in inputs}, dynamo=True,
                          external_data=False, verbose=False)


def quantize_int8(fp32_path: Path, int8_path: Path) -> None:
    """ONNX Runtime's dynamic int8 quantization of the fp32 file at `fp32_path` (every MatMul's weights int8, the
    activations quantized at run time): the int8 file of `hf-attn export --int8`, and of its reference models."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _exporters_quiet():
        quantize_dynamic(fp32_path, int8_path, weight_type=QuantType.QInt8)


@contextlib.contextmanager
def _exporters_quiet() -> Iterator[None]:
    """Keep a good export's chatter off the terminal; errors still raise.

    torch.onnx logs a warning for every torchvision operator it cannot register (torchvision is no dependency),
    and warns that the dynamic axes keep their names and that a pytree type is deprecated; ONNX Runtime's
    quantizer logs on the root logger a pre-processing hint and a protobuf dump for the tensors it leaves in
    float (the padding mask's booleans). None of it concerns the exported model, whose parity `export.json` records.
    """
    loggers = [logging.getLogger(name) for name in ("torch.onnx", "")]
    levels = [logger.level for logger in loggers]
    try:
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        with warnings.catch_warnings():
            for message in ("# The axis name", r"`isinstance\(treespec, LeafSpec\)` is deprecated"):
                warnings.filterwarnings("ignore", message=message)
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def session_options(threads: int | None = None, spinning: bool = True) -> Any:
    """ONNX Runtime's session options for serving: `threads` intra-op threads (None: ONNX Runtime's choice, one per
    physical core), and whether they spin while waiting for work. Spinning (ONNX Runtime's default) answers a
    server's next request sooner; on a CPU shared with other work it takes cores from everything else: turn it off
    there."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    return options


class OnnxClassifier:
    """Texts -> labels and scores with an exported folder and ONNX Runtime, as `pipeline("text-classification")`
    answers with the PyTorch model (the softmax's top label and its probability). `threads` and `spinning` are the
    session's (`session_options`): spinning threads by default, as a server wants; `spinning=False` on a CPU shared
    with other work."""

    def __init__(self, folder: str | os.PathLike[str], precision: str = "fp32", threads: int | None = None,
                 spinning: bool = True) -> None:
        import onnxruntime
        from transformers import AutoConfig, AutoTokenizer

        path = Path(folder) / ONNX_FILES[precision]
        if not path.is_file():
            raise ValueError(f"{folder} holds no {precision} model ({path.name}); export it with "
                             f"hf-attn export{' --int8' if precision == 'int8' else ''}")
        self.session = onnxruntime.InferenceSession(str(path), session_options(threads, spinning),
                                                    providers=["CPUExecutionProvider"])
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.id2label = AutoConfig.from_pretrained(folder).id2label

    def logits(self, texts: list[str], max_length: int | None = None) -> np.ndarray:
        """(texts, labels) logits; `max_length`: read only each text's first `max_length` tokens."""
        encoded = self.tokenizer(texts, padding=True, truncation=max_length is not None, max_length=max_length,
                                 return_tensors="np")
        (logits,) = self.session.run(["logits"], {name: encoded[name].astype(np.int64) for name in INPUT_NAMES})
        return logits

    def __call__(self, texts: list[str]) -> list[dict[str, Any]]:
        logits = self.logits(texts)
        probabilities = np.exp(logits - logits.max(axis=-1, keepdims=True))
        probabilities /= probabilities.sum(axis=-1, keepdims=True)
        return [{"label": self.id2label[int(row.argmax())], "score": float(row.max())} for row in probabilities]
