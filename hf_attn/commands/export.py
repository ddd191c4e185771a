"""`hf-attn export`: a saved classifier as ONNX (with --int8, also ONNX Runtime's dynamic int8) beside its
tokenizer and config (docs/serving.md)."""

from __future__ import annotations

import argparse
import json

from ..arguments import model_with_tokenizer, output_folder


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, type=model_with_tokenizer)
    parser.add_argument("--output", required=True, type=output_folder, help="the folder the ONNX files go to")
    parser.add_argument("--int8", action="store_true", help="also model.int8.onnx: int8 weights, dynamic activations")


def run(args: argparse.Namespace) -> None:
    """Export and print the record the export writes beside the ONNX files (export.json)."""
    from ..serving import export_classifier

    record = export_classifier(args.model, args.output, int8=args.int8)
    print(json.dumps(record, indent=2))
