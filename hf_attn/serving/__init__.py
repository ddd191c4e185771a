"""Serving on CPUs: ONNX export of a saved classifier (`hf-attn export`), ONNX Runtime's dynamic int8 quantization,
a small ONNX Runtime classifier that reads texts as the saved model does (docs/serving.md), and compiled batch-1
decoding whose products stream the weights (`stream_single_row_products`, docs/benchmarks.md)."""

from .decoding import StreamingLinear, stream_single_row_products
from .onnx import OnnxClassifier, export_classifier

__all__ = ["OnnxClassifier", "StreamingLinear", "export_classifier", "stream_single_row_products"]
