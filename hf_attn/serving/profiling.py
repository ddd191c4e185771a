"""Where an exported classifier's time goes in ONNX Runtime, node type by node type, beside transformers'
`BertForSequenceClassification` of the same shape (random weights) exported with the same exporter.

ONNX Runtime's profiler (`SessionOptions.enable_profiling`) times every node of every run; the runs after the
first (warm-up) are summed by operator type and divided by their number. The operator types are grouped into the
compute a Transformer needs (`COMPUTE`) and the machinery around it: shapes and layout, casts, masks and windows
(`MACHINERY`), so that the share of each shows what the package's graph adds to BERT's.

    python -m hf_attn.serving.profiling --model checkpoints/rope-whole-reviews --output results/serving/profile.md
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .onnx import ONNX_FILES, export_classifier, export_onnx, session_options

# What each operator type does in an exported Transformer classifier. Everything not named here is "other".
COMPUTE = ("MatMul", "Gemm", "FusedMatMul", "MatMulInteger", "DynamicQuantizeMatMul", "MatMulIntegerToFloat",
           "DynamicQuantizeLinear", "Attention", "MultiHeadAttention", "Softmax", "LayerNormalization",
           "SkipLayerNormalization", "EmbedLayerNormalization", "Gelu", "BiasGelu", "FastGelu", "Erf", "Tanh",
           "RotaryEmbedding", "Add", "Mul", "Sub", "Div", "Sqrt", "Pow", "ReduceMean")
MACHINERY = {
    "shape and layout": ("Shape", "Size", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Split", "Slice",
                         "Gather", "GatherElements", "Expand", "Range", "ConstantOfShape", "Identity", "Flatten"),
    "cast": ("Cast",),
    "mask and window": ("Where", "Equal", "Not", "Or", "And", "Less", "Greater", "LessOrEqual", "IsNaN", "Clip",
                        "Min", "Max", "ReduceMax", "ReduceSum", "Trilu", "ScatterND", "NonZero"),
}


def reference_bert(config: Any) -> torch.nn.Module:
    """transformers' BERT classifier of `config`'s width, depth, heads, FFN and vocabulary, random weights, eval."""
    from transformers import BertConfig, BertForSequenceClassification

    bert = BertConfig(vocab_size=config.vocab_size, hidden_size=config.hidden_size,
                      num_hidden_layers=config.num_hidden_layers, num_attention_heads=config.num_attention_heads,
                      intermediate_size=config.intermediate_size, max_position_embeddings=512,
                      num_labels=config.num_labels)
    torch.manual_seed(0)
    return BertForSequenceClassification(bert).eval()


def export_reference(config: Any, path: Path) -> None:
    """`reference_bert(config)` exported as `hf-attn export` exports (dynamo, batch and length dynamic)."""
    example = torch.randint(0, config.vocab_size - 1, (2, 16))
    mask = torch.ones_like(example)
    mask[0, 10:] = 0  # traced with a mask that masks something, as the package's export
    export_onnx(reference_bert(config), {"input_ids": example, "attention_mask": mask}, path)


def node_times(path: Path, batch: int, length: int, vocab_size: int, runs: int = 20,
               threads: int | None = None) -> dict[str, float]:
    """Microseconds per run of each operator type of the ONNX file at `path`, on `batch` random texts of `length`
    tokens (no padding), over `runs` runs after one warm-up run; "run" is the whole run as the session times it."""
    import onnxruntime

    options = session_options(threads=threads)
    with tempfile.TemporaryDirectory() as folder:
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(folder) / "profile")
        session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        ids = np.random.default_rng(0).integers(0, vocab_size - 1, (batch, length), dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        for _ in range(runs + 1):
            session.run(None, feed)
        events = json.loads(Path(session.end_profiling()).read_text())
    run_events = sorted((event for event in events if event.get("name") == "model_run"), key=lambda e: e["ts"])
    warm_from = run_events[0]["ts"] + run_events[0]["dur"]
    totals: dict[str, float] = defaultdict(float)
    for event in events:
        if event.get("cat") == "Node" and event["ts"] >= warm_from and event["name"].endswith("_kernel_time"):
            totals[event["args"]["op_name"]] += event["dur"]
    totals["run"] = sum(event["dur"] for event in run_events[1:])
    return {name: value / runs for name, value in sorted(totals.items(), key=lambda item: -item[1])}


def group_of(op_type: str) -> str:
    """"compute", a `MACHINERY` group, or "other"."""
    if op_type in COMPUTE:
        return "compute"
    return next((group for group, types in MACHINERY.items() if op_type in types), "other")


def profile_exports(model_dir: str | os.PathLike[str], batches: Sequence[int] = (1, 8), length: int = 128,
                    runs: int = 20, threads: int | None = None,
                    precisions: Sequence[str] = ("fp32",)) -> dict[str, Any]:
    """The node times (`node_times`) of `model_dir` exported by `export_classifier` and of `reference_bert` exported
    alike, at each of `batches` and `length`."""
    import onnxruntime
    from transformers import AutoConfig

    from ..timing import this_cpu

    config = AutoConfig.from_pretrained(model_dir)
    record: dict[str, Any] = {"model": str(model_dir), "length": length, "runs": runs, "threads": threads,
                              "onnxruntime": onnxruntime.__version__,
                              "cpu": this_cpu(), "times": {}}
    with tempfile.TemporaryDirectory() as folder:
        export_classifier(model_dir, Path(folder) / "hf-attn", int8="int8" in precisions)
        export_reference(config, Path(folder) / "bert.onnx")
        files = {f"hf-attn {precision}": Path(folder) / "hf-attn" / ONNX_FILES[precision] for precision in precisions}
        files["BERT fp32"] = Path(folder) / "bert.onnx"
        for batch in batches:
            for name, path in files.items():
                record["times"][f"{name}, batch {batch}"] = node_times(path, batch, length, config.vocab_size, runs,
                                                                       threads)
    return record


def format_profile(record: dict[str, Any], top: int = 12) -> list[str]:
    """Per profiled graph: the run's time, each group's share of the node time, and the `top` operator types."""
    lines = [f"Node times from ONNX Runtime's profiler, {record['length']} tokens, mean of {record['runs']} runs after "
             f"a warm-up, microseconds per run, {record['threads'] or 'the default'} threads.", "",
             "| graph | run | compute | shape and layout | cast | mask and window | other |", "|---|" + "---:|" * 6]
    for name, times in record["times"].items():
        groups: dict[str, float] = defaultdict(float)
        for op_type, value in times.items():
            if op_type != "run":
                groups[group_of(op_type)] += value
        total = sum(groups.values())
        shares = " | ".join(f"{groups[group] / total:.0%}" for group in ("compute", *MACHINERY, "other"))
        lines.append(f"| {name} | {times['run']:,.0f} | {shares} |")
    for name, times in record["times"].items():
        ops = [(op_type, value) for op_type, value in times.items() if op_type != "run"][:top]
        lines += ["", f"{name}: " + ", ".join(f"{op_type} {value:,.0f}" for op_type, value in ops)]
    return [*lines, ""]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a saved classifier")
    parser.add_argument("--output", required=True, help="the markdown file the tables go to (and .json beside)")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--int8", action="store_true", help="profile the int8 export too")
    args = parser.parse_args(argv)
    record = profile_exports(args.model, runs=args.runs, threads=args.threads,
                             precisions=("fp32", "int8") if args.int8 else ("fp32",))
    record["command"] = shlex.join(["python", "-m", "hf_attn.serving.profiling", *(sys.argv[1:] if argv is None
                                                                                      else argv)])
    output = Path(args.output)
    output.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    output.write_text("\n".join(format_profile(record)))
    print("\n".join(format_profile(record)))


if __name__ == "__main__":
    main()
