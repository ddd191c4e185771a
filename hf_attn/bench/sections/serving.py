"""The `serving` section: a saved classifier served on CPUs in several ways over the seed split's test reviews.

PyTorch fp32, bf16 (autocast, where the CPU has bfloat16 units), dynamic int8 (`torch.ao.quantization.
quantize_dynamic`) and fp32 compiled (`torch.compile(dynamic=True)`), ONNX Runtime fp32 and int8 (the folder
`hf-attn export --int8` writes, its threads spinning or not as `serving_spinning` says), of `serving_variants`
(PyTorch fp32, the reference, always).

Speed and accuracy: the reviews in a seeded random order (`seed`), `serving_limit` of them, in chunks of
`serving_chunk`; each chunk sorted by length and cut into batches of `serving_batch_size`, and every variant reads
each batch in turn, so all of them read the same batches under the same load.

Memory: before the timing, each variant in a process of its own (`in_fresh_process`) loads its model and reads the
longest batch of the test split; the peak resident memory above the process's own after its imports (`VmHWM`),
after loading and after reading, beside the size of the file each variant serves from (not the compiled variant's:
compiling again in a fresh process takes minutes).

Latency (`serving_latency.py`): batches of `serving_latency_batches` reviews, cut to one window or read whole, every
variant and same-shape BERT in interleaved rounds. Asked for by name: `hf-attn bench --sections serving`.
"""

from __future__ import annotations

import dataclasses
import io
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch

from ...timing import in_fresh_process, resident_mib, timed, use_threads
from .base import BenchSection, option, refuse_unknown

if TYPE_CHECKING:  # the settings gather every section's fields
    from ..settings import BenchSettings

# The ways to serve a saved classifier (PyTorch fp32, the reference, always runs).
SERVING_VARIANTS = ("torch_fp32", "torch_bf16", "torch_int8", "torch_compiled", "onnx_fp32", "onnx_int8")
TITLES = {"torch_fp32": "PyTorch fp32", "torch_bf16": "PyTorch bf16 (autocast)", "torch_int8": "PyTorch dynamic int8",
          "torch_compiled": "PyTorch fp32 compiled", "onnx_fp32": "ONNX Runtime fp32", "onnx_int8": "ONNX Runtime int8"}
# Texts (and the tokens each is cut to, None: whole) -> logits as numpy.
Reader = Callable[..., np.ndarray]


def load_variant(model_dir: str, precision: str) -> tuple[Any, Any]:
    """The saved classifier in eval mode, with `torch.ao`'s dynamic int8 Linear layers for `precision` "int8"."""
    from ...saved import load_saved_classifier

    model, tokenizer = load_saved_classifier(model_dir)
    model.eval()
    if precision == "int8":
        with warnings.catch_warnings():  # torch.ao's dynamic quantization is deprecated in favour of torchao
            warnings.simplefilter("ignore")
            torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
    return model, tokenizer


def variant_logits(variant: str, model_dir: str, onnx_folder: str | None, threads: int,
                   spinning: bool = True) -> Reader:
    """`logits(texts, max_length=None)` of one variant (`SERVING_VARIANTS`), tokenization included."""
    if variant.startswith("onnx"):
        from ...serving import OnnxClassifier

        return OnnxClassifier(onnx_folder, variant.removeprefix("onnx_"), threads, spinning).logits
    model, tokenizer = load_variant(model_dir, "int8" if variant == "torch_int8" else "fp32")
    if variant == "torch_compiled":
        model = torch.compile(model, fullgraph=True, dynamic=True)
    return torch_reader(model, tokenizer, bf16=variant == "torch_bf16")


def torch_reader(model: torch.nn.Module, tokenizer: Any, bf16: bool = False) -> Reader:
    """`logits(texts, max_length=None)` of a PyTorch classifier (fp32 logits; `bf16`: under bfloat16 autocast)."""

    def logits(texts: list[str], max_length: int | None = None) -> np.ndarray:
        encoded = tokenizer(texts, padding=True, truncation=max_length is not None, max_length=max_length,
                            return_tensors="pt")
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            output = model(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"])
        return output.logits.float().numpy()

    return logits


def peak_memory(variant: str, model_dir: str, onnx_folder: str | None, texts: list[str],
                threads: int) -> dict[str, float]:
    """In this process (a fresh one): the peak resident memory after the imports, then above it after loading
    `variant`'s model and after it reads `texts` as one batch (MB)."""
    use_threads(threads)
    after_imports = resident_mib()
    read = variant_logits(variant, model_dir, onnx_folder, threads)
    after_load = resident_mib()
    read(texts)
    after_read = resident_mib()
    return {"baseline_after_imports_mb": round(after_imports, 1), "peak_above_baseline_after_load_mb":
            round(after_load - after_imports, 1), "peak_above_baseline_mb": round(after_read - after_imports, 1)}


def state_bytes(model: torch.nn.Module) -> int:
    """The serialized size of a quantized model's state (its packed int8 weights have no `.numel()` parameters)."""
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return len(buffer.getvalue())


def serving_rows(predicted: dict[str, list[int]], seconds: dict[str, float], labels: np.ndarray,
                 files: dict[str, int | None]) -> dict[str, dict[str, Any]]:
    reference = np.asarray(predicted["torch_fp32"])
    return {name: {"accuracy": float(np.mean(np.asarray(predicted[name]) == labels)),
                   "agreement_with_torch_fp32": float(np.mean(np.asarray(predicted[name]) == reference)),
                   "seconds": round(seconds[name], 1),
                   "speed_vs_torch_fp32": round(seconds["torch_fp32"] / seconds[name], 3),
                   "file_mb": None if files[name] is None else round(files[name] / 1e6, 1)}
            for name in predicted}


def read_in_turn(settings: BenchSettings, runners: dict[str, Callable[[list[str]], Any]], texts: list[str],
                 order: np.ndarray) -> tuple[dict[str, list[int]], dict[str, float], list[int]]:
    """Each variant's predicted labels and seconds over the reviews of `order`, chunk by chunk (see the module), and
    the reviews read, in their order."""
    seconds = dict.fromkeys(runners, 0.0)
    predicted: dict[str, list[int]] = {name: [] for name in runners}
    read: list[int] = []
    for chunk_start in range(0, len(order), settings.serving_chunk):
        chunk = sorted(order[chunk_start : chunk_start + settings.serving_chunk], key=lambda index: len(texts[index]))
        for start in range(0, len(chunk), settings.serving_batch_size):
            batch = [texts[index] for index in chunk[start : start + settings.serving_batch_size]]
            for name, logits in runners.items():
                seconds[name] += timed(lambda name=name, logits=logits: predicted[name].extend(  # noqa: B023
                    logits(batch).argmax(axis=-1).tolist()))
        read.extend(chunk)
        print(f"serving: {len(read)}/{len(order)} reviews, seconds "
              f"{ {name: round(value) for name, value in seconds.items()} }", flush=True)
    return predicted, seconds, read


@dataclasses.dataclass(frozen=True)
class ServingSection(BenchSection):
    """A saved classifier served by PyTorch and ONNX Runtime, fp32 and int8, over the test reviews."""

    name: ClassVar[str] = "serving"
    serving_model: str = option("checkpoints/rope-whole-reviews", "saved classifier of the serving section")
    serving_dataset: str = option(
        "../shared/data/imdb", "IMDb copy whose seed split's test reviews the serving section reads ('sample': the "
        "packaged sample)")
    serving_limit: int | None = option(None, "only the first N reviews of the serving section's seeded order")
    serving_batch_size: int = option(32, "reviews per batch of the serving section")
    serving_chunk: int = option(500, "reviews per chunk of the serving section (sorted by length inside)")
    serving_variants: tuple[str, ...] = option(
        SERVING_VARIANTS, "ways to serve in the serving section; torch_fp32 (the reference) always runs, torch_bf16 "
        "where the CPU has bfloat16 units")
    serving_spinning: bool = option(
        True, "ONNX Runtime's threads spin between runs in the serving section (a server's choice; off for a shared "
        "CPU)")
    serving_latency_batches: tuple[int, ...] = option(
        (1, 8), "batch sizes of the serving section's latency part (empty: no latency part)")
    serving_latency_reviews: int = option(
        32, "reviews each variant reads per round and batch size in the serving section's latency part")
    serving_latency_rounds: int = option(5, "interleaved rounds of the serving section's latency part")
    serving_clock: str = option(
        "wall", "clock of the latency part: wall, or thread (CPU time of the calling thread: with --threads 1 and no "
        "spinning, the work done whatever else runs on the machine)")

    @classmethod
    def check(cls, settings: BenchSettings) -> None:
        refuse_unknown("serving variant", settings.serving_variants, SERVING_VARIANTS)

    @classmethod
    def run(cls, settings: BenchSettings, device: torch.device) -> dict[str, Any]:
        """Accuracy, agreement with PyTorch fp32, seconds and file size of each variant, and its peak memory (on the
        CPU: `device` is not used)."""
        from ...experiments.data import load_imdb
        from ...runtime.precision import bf16_units
        from ...serving import export_classifier
        from ...serving.onnx import ONNX_FILES
        from .serving_latency import latency_record

        skipped = {"torch_bf16": "the CPU has no bfloat16 units"} if bf16_units(torch.device("cpu")) is None else {}
        chosen = ["torch_fp32", *(name for name in settings.serving_variants if name not in ("torch_fp32", *skipped))]
        model_dir, threads, batch_size = settings.serving_model, torch.get_num_threads(), settings.serving_batch_size
        test = load_imdb(settings.serving_dataset)["test"]
        texts, labels = list(test["text"]), np.asarray(test["label"])
        order = np.random.default_rng(settings.seed).permutation(len(texts))[: settings.serving_limit]
        record: dict[str, Any] = {
            "read": "whole (the model's own reading policy)",
            "order": f"seeded permutation (seed {settings.seed}) of the seed split's {len(texts)} test reviews, chunks "
            f"of {settings.serving_chunk} sorted by length, batches of {batch_size}", "reviews_planned": len(order),
            "spinning": settings.serving_spinning,
            "skipped": {name: reason for name, reason in skipped.items() if name in settings.serving_variants}}
        with tempfile.TemporaryDirectory() as folder:
            onnx_folder = folder if any(name.startswith("onnx") for name in chosen) else None
            if onnx_folder:
                import onnxruntime

                export_classifier(model_dir, onnx_folder, int8=True)
                record["onnxruntime"] = onnxruntime.__version__
            runners = {name: variant_logits(name, model_dir, onnx_folder, threads, settings.serving_spinning)
                       for name in chosen}
            record.update(latency_record(settings, runners, texts, order, Path(folder) if onnx_folder else None))
            safetensors = (Path(model_dir) / "model.safetensors").stat().st_size
            files = {"torch_fp32": safetensors, "torch_bf16": safetensors, "torch_compiled": safetensors,
                     "torch_int8": state_bytes(load_variant(model_dir, "int8")[0]) if "torch_int8" in runners else None,
                     **{f"onnx_{precision}": (Path(folder) / name).stat().st_size if onnx_folder else None
                        for precision, name in ONNX_FILES.items()}}
            longest = sorted(texts, key=len)[-batch_size:]
            record["memory"] = {"batch": f"the {len(longest)} longest test reviews, read once",
                                **{name: {**in_fresh_process(peak_memory, name, model_dir, onnx_folder, longest,
                                                             threads),
                                          "file_mb": None if files[name] is None else round(files[name] / 1e6, 1)}
                                   for name in chosen if name != "torch_compiled"}}  # compiling again: minutes
            predicted, seconds, read = read_in_turn(settings, runners, texts, order)
        return {**record, "reviews": len(read), "rows": serving_rows(predicted, seconds, labels[read], files)}

    @classmethod
    def report(cls, record: dict[str, Any]) -> list[str]:
        """The speed and accuracy table and the memory table, as docs/serving.md shows them."""
        from .serving_latency import format_latency

        reference = record["rows"]["torch_fp32"]["file_mb"]
        notes = [f"{TITLES[name]} not measured: {reason}." for name, reason in record.get("skipped", {}).items()]
        if "compile_seconds" in record:
            notes.append(f"PyTorch fp32 compiled: {record['compile_seconds']:,.1f} s for its first batch (compiling).")
        lines = ["## Serving: PyTorch and ONNX Runtime, fp32 and int8", "",
                 f"{record['reviews']} reviews, {record['order']}. {' '.join(notes)}".rstrip(), "",
                 "| variant | test accuracy | agrees with fp32 | seconds | speed vs PyTorch fp32 | file |",
                 "|---|---:|---:|---:|---:|---:|"]
        for name, row in record["rows"].items():
            lines.append(f"| {TITLES[name]} | {row['accuracy']:.4f} | {row['agreement_with_torch_fp32']:.4f} | "
                         f"{row['seconds']:,.0f} | {row['speed_vs_torch_fp32']:.2f}x | {row['file_mb']} MB "
                         f"({row['file_mb'] / reference:.2f}x) |")
        memory = record["memory"]
        fp32_peak = memory["torch_fp32"]["peak_above_baseline_mb"]
        lines += ["", "| variant | after imports | + loading (peak) | + reading the batch (peak) | vs PyTorch fp32 |",
                  "|---|---:|---:|---:|---:|"]
        for name in (name for name in record["rows"] if name in memory):
            row = memory[name]
            ratio = f"{row['peak_above_baseline_mb'] / fp32_peak:.2f}x" if fp32_peak else ""
            lines.append(f"| {TITLES[name]} | {row['baseline_after_imports_mb']:,.0f} MB | "
                         f"{row['peak_above_baseline_after_load_mb']:,.0f} MB | "
                         f"{row['peak_above_baseline_mb']:,.0f} MB | {ratio} |")
        lines.append("")
        if "latency" in record:
            lines += format_latency(record["latency"], record.get("spinning"))
        return lines
