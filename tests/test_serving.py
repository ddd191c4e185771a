"""`hf-attn export`: an ONNX folder whose ONNX Runtime answers are the PyTorch model's (fp32) or close (int8)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from test_cli import save_tiny_classifier
from test_export import needs_onnx
from transformers import pipeline

from hf_attn import cli

TEXTS = ["a good film", "a bad film but a good ending " * 9, "bad bad bad", "good " * 70]


@pytest.mark.slow
@needs_onnx
def test_an_exported_folder_answers_as_the_pytorch_model_at_every_length(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A windowed classifier (16 positions, texts up to 70 tokens): fp32 logits within 1e-5 of eager, int8 within a
    tenth with the same labels, and `OnnxClassifier` gives the pipeline's labels and scores. The exporters' chatter
    on a good export (torchvision, renamed axes, the quantizer's protobuf dumps) stays off the terminal."""
    from hf_attn.serving import OnnxClassifier

    model = save_tiny_classifier(tmp_path / "model", read_length=None, window_stride=8).eval()
    cli.main(["export", "--model", str(tmp_path / "model"), "--output", str(tmp_path / "onnx"), "--int8"])
    record = json.loads((tmp_path / "onnx" / "export.json").read_text())
    printed = capfd.readouterr()
    assert json.dumps(record, indent=2) in printed.out  # the command prints the record
    for noise in ("torchvision", "The axis name", "LeafSpec", "pre-processing before quantization", "elem_type"):
        assert noise not in printed.out + printed.err
    assert record["files"] == {"fp32": "model.onnx", "int8": "model.int8.onnx"}
    assert record["max_abs_logit_difference"]["fp32"] < 1e-5
    classify = pipeline("text-classification", model=str(tmp_path / "model"))
    encoded = classify.tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = model(**encoded).logits.numpy()
    fp32, int8 = OnnxClassifier(tmp_path / "onnx"), OnnxClassifier(tmp_path / "onnx", "int8")
    np.testing.assert_allclose(fp32.logits(TEXTS), expected, atol=1e-5, rtol=1e-5)
    assert np.abs(int8.logits(TEXTS) - expected).max() < 0.1
    for onnx, reference in zip(fp32(TEXTS), classify(TEXTS), strict=True):
        assert onnx["label"] == reference["label"] and onnx["score"] == pytest.approx(reference["score"], abs=1e-5)


@needs_onnx
def test_a_folder_without_the_asked_precision_names_the_flag_that_writes_it(tmp_path: Path) -> None:
    from hf_attn.serving import OnnxClassifier

    with pytest.raises(ValueError, match=r"no int8 model \(model.int8.onnx\); export it with hf-attn export --int8"):
        OnnxClassifier(tmp_path, "int8")


@needs_onnx
def test_a_token_classifier_is_refused_instead_of_exported_as_a_sentence_classifier(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its 3-label head has the shape of a 3-label sentence head: loaded as one, it exported (batch, 3) logits with a
    parity of 3e-8 against that wrong model. The export refuses it by what it was saved as, writing nothing."""
    from hf_attn import HfAttnForTokenClassification

    save_tiny_classifier(tmp_path / "model", HfAttnForTokenClassification, num_labels=3)
    capsys.readouterr()  # the save's progress bar
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["export", "--model", str(tmp_path / "model"), "--output", str(tmp_path / "onnx"), "--int8"])
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and not (tmp_path / "onnx").exists()
    assert error.startswith(f"hf-attn export: error: {tmp_path / 'model'} does not hold a "
                            "HfAttnForSequenceClassification: it was saved as HfAttnForTokenClassification"), error


def write_logits_graph(path: Path) -> None:
    """A stand-in model.onnx with the export's inputs and output: logits (batch, 2), the mask's sums."""
    import onnx
    from onnx import TensorProto, helper

    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
              for name in ("input_ids", "attention_mask")]
    logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 2])
    nodes = [helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
             helper.make_node("Concat", ["mask", "mask"], ["both"], axis=1),
             helper.make_node("ReduceSum", ["both", "axes"], ["sums"], keepdims=1),
             helper.make_node("Concat", ["sums", "sums"], ["logits"], axis=1)]
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    graph = helper.make_graph(nodes, "logits", inputs, [logits], initializer=[axes])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)


@needs_onnx
@pytest.mark.parametrize(("threads", "spinning"), [(None, True), (3, False), (1, True)])
def test_the_sessions_threads_and_spinning_are_the_callers_choice_spinning_by_default(
    tmp_path: Path, threads: int | None, spinning: bool
) -> None:
    """What `OnnxClassifier` is given is what its session runs with (read back from the session's own options):
    ONNX Runtime's thread count unless told (0), and spinning threads unless turned off."""
    from hf_attn.serving import OnnxClassifier

    save_tiny_classifier(tmp_path)
    write_logits_graph(tmp_path / "model.onnx")
    classify = OnnxClassifier(tmp_path) if threads is None else OnnxClassifier(tmp_path, threads=threads,
                                                                               spinning=spinning)
    options = classify.session.get_session_options()
    assert options.intra_op_num_threads == (threads or 0)
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == ("1" if spinning else "0")
    assert classify.logits(["a good film"]).shape == (1, 2)
