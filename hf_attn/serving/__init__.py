"""Serving a saved classifier on CPUs: ONNX export (`hf-attn export`), ONNX Runtime's dynamic int8 quantization,
and a small ONNX Runtime classifier that reads texts as the saved model does (docs/serving.md)."""

from .onnx import OnnxClassifier, export_classifier

__all__ = ["OnnxClassifier", "export_classifier"]
