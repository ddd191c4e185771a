"""The serving section's latency part: small batches, as a server answers them, in interleaved rounds.

For each reading (`short`: each review cut to the classifier's window, `max_position_embeddings` tokens; `whole`: the
classifier's own reading policy) and each batch size of `serving_latency_batches`, the first
`serving_latency_reviews` reviews of the section's seeded order are cut into batches; one round reads all of them
with each variant in turn, the order rotated from round to round (`timing.interleaved_times`), after one untimed pass
of each variant (its seconds are recorded: for the compiled variant, they hold the compilation). Tokenization is
included on every side. Each round gives each variant's speed as a multiple of PyTorch fp32's in that round; the
report gives the median and the spread over `serving_latency_rounds` rounds.

Beside them, at the short reading: transformers' `BertForSequenceClassification` of the classifier's shape (random
weights, `hf_attn.serving.profiling.reference_bert`) eager and exported as `hf-attn export --int8` exports (fp32 and
int8), on the same token ids, as a multiple of its own eager time: the reference the issue's goals are set against.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ...timing import interleaved_times, timed
from .serving import TITLES, Reader, torch_reader

if TYPE_CHECKING:  # the settings gather every section's fields
    from ..settings import BenchSettings

READINGS = ("short", "whole")
BERT_TITLES = {"bert_fp32": "BERT fp32 (same shape)", "bert_onnx_fp32": "BERT ONNX Runtime fp32 (same shape)",
               "bert_onnx_int8": "BERT ONNX Runtime int8 (same shape)"}


def bert_readers(model_dir: str, folder: Path, threads: int, spinning: bool) -> dict[str, Reader]:
    """Same-shape BERT eager and in ONNX Runtime, fp32 and int8 (exported to `folder`/bert as `hf-attn export --int8`
    exports and quantizes, with the classifier's tokenizer), reading the classifier's token ids."""
    from transformers import AutoConfig

    from ...saved import load_tokenizer
    from ...serving.onnx import ONNX_FILES, OnnxClassifier, quantize_int8
    from ...serving.profiling import export_reference, reference_bert

    config, tokenizer = AutoConfig.from_pretrained(model_dir), load_tokenizer(model_dir)
    bert, bert_folder = reference_bert(config), folder / "bert"
    bert_folder.mkdir(parents=True, exist_ok=True)
    export_reference(config, bert_folder / ONNX_FILES["fp32"])
    quantize_int8(bert_folder / ONNX_FILES["fp32"], bert_folder / ONNX_FILES["int8"])
    tokenizer.save_pretrained(bert_folder)
    bert.config.save_pretrained(bert_folder)
    exported = {f"bert_onnx_{precision}": OnnxClassifier(bert_folder, precision, threads, spinning).logits
                for precision in ONNX_FILES}
    return {"bert_fp32": torch_reader(bert, tokenizer), **exported}


def time_cell(readers: dict[str, Reader], batches: list[list[str]], max_length: int | None,
              settings: BenchSettings) -> dict[str, Any]:
    """One reading at one batch size: each reader's first pass, seconds per batch and speed against its
    reference (PyTorch fp32; BERT's eager for BERT's export) round by round."""
    steps = {name: (lambda read=read: [read(batch, max_length) for batch in batches]) for name, read in readers.items()}
    first_pass = {name: round(timed(step), 3) for name, step in steps.items()}
    times = interleaved_times(steps, warmup=0, repeats=settings.serving_latency_rounds, clock=settings.serving_clock)
    rows = {}
    for name, seconds in times.items():
        reference = times["bert_fp32" if name.startswith("bert") else "torch_fp32"]
        ratios = [base / own for base, own in zip(reference, seconds, strict=True)]
        rows[name] = {"ms_per_batch": round(1e3 * statistics.median(seconds) / len(batches), 2),
                      "speed_median": round(statistics.median(ratios), 3), "speed_min": round(min(ratios), 3),
                      "speed_max": round(max(ratios), 3), "first_pass_seconds": first_pass[name]}
    return rows


def bench_latency(settings: BenchSettings, readers: dict[str, Reader], texts: list[str], order: np.ndarray,
                  window: int, bert: dict[str, Reader]) -> dict[str, Any]:
    """Every (reading, batch size) cell of the latency part (see the module)."""
    reviews = [texts[index] for index in order[: settings.serving_latency_reviews]]
    cells = []
    for reading in READINGS:
        chosen = {**readers, **bert} if reading == "short" else readers
        for batch_size in settings.serving_latency_batches:
            batches = [reviews[start : start + batch_size] for start in range(0, len(reviews), batch_size)]
            rows = time_cell(chosen, batches, window if reading == "short" else None, settings)
            cells.append({"reading": reading, "batch": batch_size, "batches": len(batches), "rows": rows})
            print(f"serving latency: {reading} reviews, batch {batch_size}: "
                  f"{ {name: row['speed_median'] for name, row in rows.items()} }", flush=True)
    return {"reviews": len(reviews), "rounds": settings.serving_latency_rounds, "clock": settings.serving_clock,
            "window": window, "cells": cells}


def latency_record(settings: BenchSettings, readers: dict[str, Reader], texts: list[str], order: np.ndarray,
                   onnx_folder: Path | None) -> dict[str, Any]:
    """The compiled variant's first call (its compilation) and the latency part, as the section's record keys; BERT's
    pair beside them where ONNX variants are measured (its export goes to `onnx_folder`)."""
    from transformers import AutoConfig

    record: dict[str, Any] = {}
    model_dir, batch_size = settings.serving_model, settings.serving_batch_size
    if "torch_compiled" in readers:  # compiled at its first call
        record["compile_seconds"] = round(timed(lambda: readers["torch_compiled"](texts[:batch_size])), 1)
    if settings.serving_latency_batches:
        threads = torch.get_num_threads()
        bert = bert_readers(model_dir, onnx_folder, threads, settings.serving_spinning) if onnx_folder else {}
        window = AutoConfig.from_pretrained(model_dir).max_position_embeddings
        record["latency"] = bench_latency(settings, readers, texts, order, window, bert)
    return record


def format_latency(latency: dict[str, Any], spinning: bool | None) -> list[str]:
    """One table of every cell: ms per batch and the speed against PyTorch fp32 (BERT's export: its eager)."""
    lines = ["### Latency: batches of 1 and 8, reviews cut to one window or read whole", "",
             f"The first {latency['reviews']} reviews of that order, {latency['rounds']} interleaved rounds "
             f"({latency['clock']} clock), short = the first {latency['window']} tokens; ONNX Runtime's threads "
             f"{'spinning' if spinning else 'not spinning' if spinning is False else 'as it chooses'}. Speed: "
             "multiple of PyTorch fp32's time in the same round (BERT's export: of BERT eager), median [slowest "
             "round, fastest round]; first pass: the untimed first reading of the cell's batches, seconds.", "",
             "| reading | batch | variant | ms per batch | speed | first pass |", "|---|---:|---|---:|---:|---:|"]
    for cell in latency["cells"]:
        for name, row in cell["rows"].items():
            lines.append(f"| {cell['reading']} | {cell['batch']} | {TITLES.get(name) or BERT_TITLES[name]} | "
                         f"{row['ms_per_batch']:,.1f} | {row['speed_median']:.2f}x [{row['speed_min']:.2f}-"
                         f"{row['speed_max']:.2f}] | {row['first_pass_seconds']:,.1f} |")
    return [*lines, ""]
