"""Serve the committed classifier on CPUs four ways over the seed split's test reviews, read whole: PyTorch fp32,
PyTorch dynamic int8 (`torch.ao.quantization.quantize_dynamic`), ONNX Runtime fp32 and ONNX Runtime int8 (the
folder `hf-attn export --int8` writes).

Speed and accuracy: the reviews in a seeded random order, in chunks; each chunk sorted by length and cut into
batches, and every variant reads each batch in turn, so all of them read the same batches under the same load. The
record is rewritten after every chunk: a run stopped early leaves the record of a seeded random subset.

Memory: before the timing, each variant in a process of its own loads its model and reads the longest batch of
the test split; the peak resident memory above the process's own after its imports (`VmHWM`),
after loading and after reading, beside the size of the file each variant serves from.

    python scripts/bench_serving.py --model checkpoints/rope-whole-reviews --dataset ../shared/data/imdb \
        --threads 1 --out results/serving/four-backends.json
    python scripts/bench_serving.py --tables results/serving/four-backends.json   # a record's tables, as markdown
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

VARIANTS = ("torch_fp32", "torch_int8", "onnx_fp32", "onnx_int8")
TITLES = {"torch_fp32": "PyTorch fp32", "torch_int8": "PyTorch dynamic int8", "onnx_fp32": "ONNX Runtime fp32",
          "onnx_int8": "ONNX Runtime int8"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a saved classifier (required but with --tables)")
    parser.add_argument("--dataset", help="an IMDb copy (the seed split's test reviews are read)")
    parser.add_argument("--limit", type=int, help="only the first N reviews of the seeded order")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--chunk", type=int, default=500, help="reviews per chunk (sorted by length inside)")
    parser.add_argument("--seed", type=int, default=0, help="the order the reviews are read in")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="PyTorch and ONNX Runtime threads")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="comma-separated; torch_fp32 is always run (the reference)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--tables", type=Path, help="print the markdown tables of this record and stop")
    parser.add_argument("--memory-child", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--onnx-folder", help=argparse.SUPPRESS)
    parser.add_argument("--texts", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tables:
        print(markdown_tables(json.loads(args.tables.read_text())))
        return
    if args.memory_child:
        print(json.dumps(_peak_memory(args.memory_child, args.model, args.onnx_folder, args.texts, args.threads)))
        return
    if args.model is None or args.dataset is None or args.out is None:
        parser.error("--model, --dataset and --out are required")
    chosen = ["torch_fp32", *(name for name in args.variants.split(",") if name != "torch_fp32")]
    unknown = set(chosen) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variant(s) {sorted(unknown)}; choose from {', '.join(VARIANTS)}")
    _bench(args, chosen)


def _bench(args: argparse.Namespace, chosen: list[str]) -> None:
    import onnxruntime
    import torch

    from hf_attn.experiments.data import load_imdb
    from hf_attn.serving import OnnxClassifier, export_classifier
    from hf_attn.serving.onnx import ONNX_FILES
    from hf_attn.timing import this_cpu, timed, use_threads

    use_threads(args.threads)
    model, tokenizer = _load(args.model, "fp32")
    int8_model = _load(args.model, "int8")[0] if "torch_int8" in chosen else None
    test = load_imdb(args.dataset)["test"]
    texts, labels = list(test["text"]), np.asarray(test["label"])
    order = np.random.default_rng(args.seed).permutation(len(texts))[: args.limit]
    record: dict[str, Any] = {
        "command": "python scripts/bench_serving.py " + " ".join(
            f"--{key.replace('_', '-')} {value}" for key, value in vars(args).items()
            if value is not None and key not in ("memory_child", "onnx_folder", "texts")),
        "cpu": this_cpu(), "threads": args.threads, "torch": torch.__version__,
        "onnxruntime": onnxruntime.__version__, "load_average_at_start": os.getloadavg(),
        "read": "whole (the model's own reading policy)", "order": f"seeded permutation (seed {args.seed}) of the "
        f"seed split's {len(texts)} test reviews, chunks of {args.chunk} sorted by length, batches of "
        f"{args.batch_size}", "reviews_planned": len(order)}
    with tempfile.TemporaryDirectory() as folder:
        export_classifier(args.model, folder, int8=True)
        files = {"torch_fp32": (Path(args.model) / "model.safetensors").stat().st_size,
                 "torch_int8": len(_state_bytes(int8_model)) if int8_model is not None else None,
                 **{f"onnx_{precision}": (Path(folder) / name).stat().st_size
                    for precision, name in ONNX_FILES.items()}}
        longest = sorted(texts, key=len)[-args.batch_size:]
        record["memory"] = {"batch": f"the {len(longest)} longest test reviews, read once",
                            **{name: {**_memory_in_subprocess(name, args, folder, longest),
                                      "file_mb": None if files[name] is None else round(files[name] / 1e6, 1)}
                               for name in chosen}}
        onnx = {precision: OnnxClassifier(folder, precision, args.threads) for precision in ONNX_FILES}

        def torch_logits(network: torch.nn.Module, batch: list[str]) -> np.ndarray:
            encoded = tokenizer(batch, padding=True, return_tensors="pt")
            with torch.inference_mode():
                return network(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"]).logits.numpy()

        runners: dict[str, Callable[[list[str]], np.ndarray]] = {
            "torch_fp32": lambda batch: torch_logits(model, batch),
            "torch_int8": lambda batch: torch_logits(int8_model, batch),
            "onnx_fp32": onnx["fp32"].logits, "onnx_int8": onnx["int8"].logits}
        seconds = dict.fromkeys(chosen, 0.0)
        predicted: dict[str, list[int]] = {name: [] for name in chosen}
        read: list[int] = []
        for chunk_start in range(0, len(order), args.chunk):
            chunk = sorted(order[chunk_start : chunk_start + args.chunk], key=lambda index: len(texts[index]))
            for start in range(0, len(chunk), args.batch_size):
                batch = [texts[index] for index in chunk[start : start + args.batch_size]]
                for name in chosen:
                    seconds[name] += timed(lambda name=name: predicted[name].extend(  # noqa: B023 - called at once
                        runners[name](batch).argmax(axis=-1).tolist()))
            read.extend(chunk)
            record.update(reviews=len(read), load_average_at_end=os.getloadavg(),
                          rows=_rows(predicted, seconds, labels[read], files))
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(record, indent=1) + "\n")
            print(f"{len(read)}/{len(order)} reviews, seconds "
                  f"{ {name: round(value) for name, value in seconds.items()} }", flush=True)
    print(json.dumps(record, indent=1))


def markdown_tables(record: dict[str, Any]) -> str:
    """The speed and accuracy table and the memory table of a record, as docs/serving.md shows them."""
    reference = record["rows"]["torch_fp32"]["file_mb"]
    lines = ["| variant | test accuracy | agrees with fp32 | seconds | speed vs PyTorch fp32 | file |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, row in record["rows"].items():
        lines.append(f"| {TITLES[name]} | {row['accuracy']:.4f} | {row['agreement_with_torch_fp32']:.4f} | "
                     f"{row['seconds']:,.0f} | {row['speed_vs_torch_fp32']:.2f}x | {row['file_mb']} MB "
                     f"({row['file_mb'] / reference:.2f}x) |")
    memory = record["memory"]
    lines += ["", "| variant | after imports | + loading (peak) | + reading the batch (peak) | vs PyTorch fp32 |",
              "|---|---:|---:|---:|---:|"]
    for name in record["rows"]:
        row = memory[name]
        lines.append(f"| {TITLES[name]} | {row['baseline_after_imports_mb']:,.0f} MB | "
                     f"{row['peak_above_baseline_after_load_mb']:,.0f} MB | {row['peak_above_baseline_mb']:,.0f} MB | "
                     f"{row['peak_above_baseline_mb'] / memory['torch_fp32']['peak_above_baseline_mb']:.2f}x |")
    return "\n".join(lines)


def _rows(predicted: dict[str, list[int]], seconds: dict[str, float], labels: np.ndarray,
          files: dict[str, int | None]) -> dict[str, dict[str, Any]]:
    reference = np.asarray(predicted["torch_fp32"])
    return {name: {"accuracy": float(np.mean(np.asarray(predicted[name]) == labels)),
                   "agreement_with_torch_fp32": float(np.mean(np.asarray(predicted[name]) == reference)),
                   "seconds": round(seconds[name], 1),
                   "speed_vs_torch_fp32": round(seconds["torch_fp32"] / seconds[name], 3),
                   "file_mb": None if files[name] is None else round(files[name] / 1e6, 1)}
            for name in predicted}


def _load(model_dir: str, precision: str) -> tuple[Any, Any]:
    """The saved classifier in eval mode, with `torch.ao`'s dynamic int8 Linear layers for `precision` "int8"."""
    import torch

    from hf_attn.saved import load_saved_classifier

    model, tokenizer = load_saved_classifier(model_dir)
    model.eval()
    if precision == "int8":
        with warnings.catch_warnings():  # torch.ao's dynamic quantization is deprecated in favour of torchao
            warnings.simplefilter("ignore")
            torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
    return model, tokenizer


def _memory_in_subprocess(variant: str, args: argparse.Namespace, onnx_folder: str,
                          texts: list[str]) -> dict[str, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(texts, handle)
    try:
        finished = subprocess.run(
            [sys.executable, __file__, "--model", args.model, "--memory-child", variant, "--onnx-folder", onnx_folder,
             "--texts", handle.name, "--threads", str(args.threads)], check=True, capture_output=True, text=True)
    finally:
        os.unlink(handle.name)
    return json.loads(finished.stdout.strip().splitlines()[-1])


def _peak_memory(variant: str, model_dir: str, onnx_folder: str, texts_file: Path, threads: int) -> dict[str, float]:
    """In this process: the peak resident memory after the imports, then above it after loading `variant`'s model
    and after it reads `texts_file`'s texts as one batch (MB)."""
    import torch

    from hf_attn.serving import OnnxClassifier
    from hf_attn.timing import use_threads

    use_threads(threads)
    texts = json.loads(texts_file.read_text())
    after_imports = _peak_rss_mb()
    if variant.startswith("torch"):
        model, tokenizer = _load(model_dir, variant.removeprefix("torch_"))

        def read() -> None:
            encoded = tokenizer(texts, padding=True, return_tensors="pt")
            with torch.inference_mode():
                model(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"])
    else:
        classifier = OnnxClassifier(onnx_folder, variant.removeprefix("onnx_"), threads)

        def read() -> None:
            classifier.logits(texts)

    after_load = _peak_rss_mb()
    read()
    after_read = _peak_rss_mb()
    return {"baseline_after_imports_mb": round(after_imports, 1), "peak_above_baseline_after_load_mb":
            round(after_load - after_imports, 1), "peak_above_baseline_mb": round(after_read - after_imports, 1)}


def _peak_rss_mb() -> float:
    """This process's peak resident memory (MB): `VmHWM`, the high-water mark of its own address space.
    `getrusage`'s `ru_maxrss` would not do: Linux carries it across `execve`, so a child started by a large parent
    begins at the parent's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kilobytes
    raise RuntimeError("no VmHWM in /proc/self/status: peak memory is measured on Linux only")


def _state_bytes(model: Any) -> bytes:
    """The serialized size of a quantized model's state (its packed int8 weights have no `.numel()` parameters)."""
    import torch

    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getvalue()


if __name__ == "__main__":
    main()
