"""Serve the committed classifier on CPUs four ways over the seed split's test reviews, read whole: PyTorch fp32,
PyTorch dynamic int8 (`torch.ao.quantization.quantize_dynamic`), ONNX Runtime fp32 and ONNX Runtime int8 (the
folder `hf-attn export --int8` writes). Accuracy of each, the time of each interleaved batch by batch (reviews sorted
by length, so every variant reads the same batches under the same load), and the weights' size.

    python scripts/bench_serving.py --model checkpoints/rope-whole-reviews --dataset ../shared/data/imdb \
        --out results/serving/rope-whole-reviews.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from hf_attn.bench.runner import this_cpu
from hf_attn.experiments.data import load_imdb
from hf_attn.saved import load_saved_classifier
from hf_attn.serving import OnnxClassifier, export_classifier
from hf_attn.serving.onnx import ONNX_FILES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--dataset", required=True, help="an IMDb copy (the seed split's test reviews are read)")
    parser.add_argument("--limit", type=int, help="only the first N test reviews")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--variants", default="torch_fp32,torch_int8,onnx_fp32,onnx_int8",
                        help="comma-separated; torch_fp32 is always run (the reference)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    model, tokenizer = load_saved_classifier(args.model)
    model.eval()
    with warnings.catch_warnings():  # torch.ao's dynamic quantization is deprecated in favour of torchao
        warnings.simplefilter("ignore")
        int8_model = torch.ao.quantization.quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear}, dtype=torch.qint8)
    test = load_imdb(args.dataset)["test"]
    if args.limit:
        test = test.select(range(args.limit))
    order = np.argsort([len(text) for text in test["text"]])
    texts, labels = [test["text"][i] for i in order], np.asarray(test["label"])[order]
    with tempfile.TemporaryDirectory() as folder:
        export_classifier(args.model, folder, int8=True)
        sizes = {f"onnx_{precision}": (Path(folder) / name).stat().st_size for precision, name in ONNX_FILES.items()}
        threads = torch.get_num_threads()
        onnx = {precision: OnnxClassifier(folder, precision, threads) for precision in ONNX_FILES}

        def torch_logits(network: torch.nn.Module, batch: list[str]) -> np.ndarray:
            encoded = tokenizer(batch, padding=True, return_tensors="pt")
            with torch.inference_mode():
                return network(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"]).logits.numpy()

        variants = {"torch_fp32": lambda batch: torch_logits(model, batch),
                    "torch_int8": lambda batch: torch_logits(int8_model, batch),
                    "onnx_fp32": onnx["fp32"].logits, "onnx_int8": onnx["int8"].logits}
        chosen = {"torch_fp32", *args.variants.split(",")}
        variants = {name: logits for name, logits in variants.items() if name in chosen}
        seconds = dict.fromkeys(variants, 0.0)
        predicted = {name: [] for name in variants}
        for start in range(0, len(texts), args.batch_size):
            batch = texts[start : start + args.batch_size]
            for name, logits in variants.items():
                began = time.perf_counter()
                predicted[name].extend(logits(batch).argmax(axis=-1).tolist())
                seconds[name] += time.perf_counter() - began
    parameters = sum(parameter.numel() * parameter.element_size() for parameter in model.parameters())
    sizes = {"torch_fp32": parameters, "torch_int8": len(_state_bytes(int8_model)), **sizes}
    rows = {name: {"accuracy": float(np.mean(np.asarray(predicted[name]) == labels)),
                   "seconds": round(seconds[name], 1),
                   "speed_vs_torch_fp32": round(seconds["torch_fp32"] / seconds[name], 3),
                   "weights_mb": round(sizes[name] / 1e6, 1),
                   "agreement_with_torch_fp32": float(np.mean(np.asarray(predicted[name]) ==
                                                              np.asarray(predicted["torch_fp32"])))}
            for name in variants}
    record = {"command": "python scripts/bench_serving.py " + " ".join(
                  f"--{key.replace('_', '-')} {value}" for key, value in vars(args).items() if value is not None),
              "cpu": this_cpu(), "threads": threads, "load_average": os.getloadavg(), "reviews": len(texts),
              "read": "whole (the model's own reading policy)", "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))


def _state_bytes(model: torch.nn.Module) -> bytes:
    """The serialized size of a quantized model's state (its packed int8 weights have no `.numel()` parameters)."""
    import io

    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getvalue()


if __name__ == "__main__":
    main()
