"""Encode the seed split's 40,000 training reviews with HfAttnTokenizerFast, with the package's opt-in
``hf_attn.week3.batch_encoding.encode_batch`` and with the reference.

The reference is the pure-Python encoder of tests/week3_reference.py with its per-word cache, the
way the Week 3 notebook tokenized. All three start cold and run in the same process, one after the
other, ``--repeats`` times (the median time and the median of the per-repeat ratios are reported, in wall-clock
and in CPU time: with ``TOKENIZERS_PARALLELISM=false`` all three run on one thread, and CPU time stands on a
shared machine where wall-clock time does not),
and produce the Week 3 output: ``input_ids`` and ``padding_mask`` as ``[N, max_seq]`` int64
tensors (what the notebook stores in its ``TensorDataset``; the reference builds lists, then
tensors). Every result is compared id for id with the reference's. The tokenizer is also timed
returning Python lists, the default of a transformers tokenizer call. Also timed: the Rust tokenizer
alone (what the class adds on top: dropping the lone ``</w>``, truncating and padding); and
``datasets.map`` over the whole split; and, against a fresh reference, every token of every review
(neither truncated nor padded). ``--against FILE`` also times another version of ``tokenization_hf_attn.py``
(e.g. ``git show main:hf_attn/tokenization_hf_attn.py > /tmp/main_tokenization.py``) on the same call,
interleaved with this checkout's, in CPU time.

    python scripts/bench_tokenizer.py --out results/bench/bench_tokenizer.json

A script rather than a section of `hf-attn bench`: it is a test of the Week 3 reference as much as a benchmark
(every id is compared with the reference's), and the reference is the parity tests' oracle, which lives with the
tests (tests/week3_reference.py) and is no part of the package. `hf-attn bench` merges the JSON it writes into its
report (`--tokenizer-json`).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import platform
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import datasets
import pyarrow.parquet as pq
import tokenizers
import torch
import transformers

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # this checkout's hf_attn; the reference lives with the tests

from week3_reference import ReferenceTokenizer  # noqa: E402

from hf_attn.timing import this_cpu, timed  # noqa: E402
from hf_attn.tokenization_hf_attn import HfAttnTokenizerFast  # noqa: E402
from hf_attn.week3 import load_week3_tokenizer  # noqa: E402
from hf_attn.week3.batch_encoding import encode_batch  # noqa: E402

SHARED = REPO.parent / "shared"


def seed_train_reviews(imdb: Path, limit: int | None) -> list[str]:
    """The tutorial's training part: IMDb train then test, permuted with seed 42, first 80%."""
    texts = [
        text
        for split in ("train", "test")
        for text in pq.read_table(next(imdb.glob(f"{split}-*.parquet")), columns=["text"]).column("text").to_pylist()
    ]
    order = torch.randperm(len(texts), generator=torch.Generator().manual_seed(42)).tolist()
    rows = order[: len(texts) * 8 // 10]
    return [texts[i] for i in rows[:limit]]


def encode_week3(tokenizer: HfAttnTokenizerFast, texts: list[str], return_tensors: str | None = "pt") -> Any:
    """The Week 3 encoding: ``max_seq`` ids per review, ``[PAD]``-padded, and the padding mask."""
    return tokenizer(texts, truncation=True, padding="max_length", return_tensors=return_tensors)


def batch_week3(tokenizer: HfAttnTokenizerFast, texts: list[str]) -> Any:
    """The same Week 3 tensors from the package's opt-in word-level path."""
    return encode_batch(tokenizer, texts, truncation=True, padding="max_length", return_tensors="pt")


def reference_week3(reference: ReferenceTokenizer, texts: list[str]) -> dict[str, torch.Tensor]:
    """The notebook's way: per-text lists from the cached reference encoder, stacked into tensors."""
    encoded = [reference.encode_padded(text) for text in texts]
    return {"input_ids": torch.tensor([ids for ids, _ in encoded]),
            "attention_mask": torch.tensor([mask for _, mask in encoded])}


def tokenizer_of_file(tokenizer: HfAttnTokenizerFast, path: Path) -> HfAttnTokenizerFast:
    """``tokenizer`` (same files, same settings) as an instance of the ``HfAttnTokenizerFast`` of ``path``."""
    spec = importlib.util.spec_from_file_location("tokenization_against", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    other = copy.copy(tokenizer)
    other.__class__ = module.HfAttnTokenizerFast
    return other


def timed_result(function: Callable[[], Any], clock: str = "wall") -> tuple[Any, float]:
    """What `function()` returns, and its seconds on `clock` (`hf_attn.timing.CLOCKS`)."""
    results = []
    seconds = timed(lambda: results.append(function()), clock=clock)
    return results[0], seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument(
        "--week3", type=Path, default=SHARED / "week3-sample", help="Week 3 folder with the tokenizer files"
    )
    parser.add_argument("--imdb", type=Path, default=SHARED / "data" / "imdb", help="IMDb parquet folder")
    parser.add_argument("--limit", type=int, help="only the first N training reviews (default: all 40,000)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="interleaved repeats of the reference and the tokenizer's tensors (median)")
    parser.add_argument("--map-batch-size", type=int, default=1000, help="datasets.map batch size")
    parser.add_argument("--against", type=Path,
                        help="another tokenization_hf_attn.py to time against this checkout's (interleaved, CPU time)")
    args = parser.parse_args(argv)

    texts = seed_train_reviews(args.imdb, args.limit)
    load_start = os.getloadavg()

    tokenizer = load_week3_tokenizer(args.week3)
    reference_times, tensors_times, batch_times = [], [], []
    cpu_times: dict[str, list[float]] = {"reference": [], "HfAttnTokenizerFast": [], "encode_batch": []}
    for _ in range(args.repeats):  # interleaved, so that the load of a shared machine hits all alike
        reference = ReferenceTokenizer.from_week3_folder(args.week3)  # cold: an empty per-word cache
        (expected, cpu), seconds = timed_result(lambda: timed_result(lambda: reference_week3(reference, texts),
                                                                     clock="process"))
        reference_times.append(seconds)
        cpu_times["reference"].append(cpu)
        (tensors, cpu), seconds = timed_result(lambda: timed_result(lambda: encode_week3(tokenizer, texts),
                                                                    clock="process"))
        tensors_times.append(seconds)
        cpu_times["HfAttnTokenizerFast"].append(cpu)
        (batch, cpu), seconds = timed_result(lambda: timed_result(lambda: batch_week3(tokenizer, texts),
                                                                  clock="process"))
        batch_times.append(seconds)
        cpu_times["encode_batch"].append(cpu)
    reference_seconds, tensors_seconds = statistics.median(reference_times), statistics.median(tensors_times)
    tensors_speedup = statistics.median(ref / mine for ref, mine in zip(reference_times, tensors_times))
    batch_speedup = statistics.median(ref / mine for ref, mine in zip(reference_times, batch_times))
    expected_ids = expected["input_ids"].tolist()
    expected_masks = expected["attention_mask"].tolist()

    def matches(encoded: Any) -> bool:
        return all(torch.equal(torch.as_tensor(encoded[name]), expected[name]) for name in expected)

    lists, lists_seconds = timed_result(lambda: encode_week3(tokenizer, texts, return_tensors=None))

    whole_reference = ReferenceTokenizer.from_week3_folder(args.week3)
    whole_expected, whole_reference_seconds = timed_result(lambda: [whole_reference.encode(text) for text in texts])
    whole, whole_seconds = timed_result(lambda: tokenizer(texts)["input_ids"])

    against = None
    if args.against is not None:
        other = tokenizer_of_file(tokenizer, args.against)
        times: dict[str, list[float]] = {"this checkout": [], str(args.against): []}
        for _ in range(args.repeats):
            for name, one in (("this checkout", tokenizer), (str(args.against), other)):
                encoded, seconds = timed_result(lambda one=one: encode_week3(one, texts), clock="process")
                times[name].append(seconds)
        against = {
            "cpu_seconds_per_repeat": {name: [round(value, 3) for value in values] for name, values in times.items()},
            "speedup": round(statistics.median(theirs / ours for ours, theirs in zip(*times.values())), 2),
            "identical_ids": matches(encoded),
        }

    backend = tokenizer.backend_tokenizer
    end_of_word = tokenizer.end_of_word_id
    rust, rust_seconds = timed_result(lambda: backend.encode_batch_fast(texts, add_special_tokens=False))
    rust_ids = [[i for i in encoding.ids if i != end_of_word][: tokenizer.model_max_length] for encoding in rust]

    dataset = datasets.Dataset.from_dict({"text": texts})
    mapped, map_seconds = timed_result(
        lambda: dataset.map(
            lambda batch: encode_week3(tokenizer, batch["text"], return_tensors="np"),
            batched=True,
            batch_size=args.map_batch_size,
            remove_columns=["text"],
            load_from_cache_file=False,
        )
    )

    def row(method: str, seconds: float, identical: bool) -> dict[str, Any]:
        return {
            "method": method,
            "seconds": round(seconds, 3),
            "reviews_per_s": round(len(texts) / seconds),
            "speedup_vs_reference": round(reference_seconds / seconds, 2),
            "identical_ids": identical,
        }

    report = {
        "reviews": len(texts),
        "max_seq": tokenizer.model_max_length,
        "week3": str(args.week3),
        "rows": [
            row("reference: pure Python, per-word cache, cold (lists, then tensors)", reference_seconds, True),
            row("HfAttnTokenizerFast, one call (tensors)", tensors_seconds, matches(tensors))
            | {"speedup_vs_reference": round(tensors_speedup, 2),
               "seconds_per_repeat": [round(seconds, 3) for seconds in tensors_times],
               "reference_seconds_per_repeat": [round(seconds, 3) for seconds in reference_times]},
            row("encode_batch (hf_attn.week3.batch_encoding), one call (tensors)", statistics.median(batch_times),
                matches(batch))
            | {"speedup_vs_reference": round(batch_speedup, 2),
               "seconds_per_repeat": [round(seconds, 3) for seconds in batch_times]},
            row("HfAttnTokenizerFast, one call (Python lists)", lists_seconds, matches(lists)),
            row("reference, every token of every review (lists)", whole_reference_seconds, True)
            | {"speedup_vs_reference": 1.0},
            row("HfAttnTokenizerFast, every token of every review (lists)", whole_seconds, whole == whole_expected)
            | {"speedup_vs_reference": round(whole_reference_seconds / whole_seconds, 2)},
            row(
                "Rust tokenizer alone (encode_batch_fast; lone </w> dropped after)",
                rust_seconds,
                rust_ids == [ids[: sum(mask)] for ids, mask in zip(expected_ids, expected_masks)],
            ),
            row(
                f"datasets.map, batched ({args.map_batch_size})",
                map_seconds,
                matches(mapped.with_format("torch")[:]),
            ),
        ],
        "cpu_seconds_per_repeat": {name: [round(value, 3) for value in values] for name, values in cpu_times.items()},
        "cpu_speedup_vs_reference": {
            name: round(statistics.median(ref / mine for ref, mine in zip(cpu_times["reference"], values)), 2)
            for name, values in cpu_times.items()
        },
        "against": against,
        "environment": {
            "cpu": this_cpu(),
            "python": platform.python_version(),
            "tokenizers": tokenizers.__version__,
            "transformers": transformers.__version__,
            "datasets": datasets.__version__,
            "cpu_count": os.cpu_count(),
            "tokenizers_parallelism": os.environ.get("TOKENIZERS_PARALLELISM", "unset (on)"),
            "rayon_num_threads": os.environ.get("RAYON_NUM_THREADS", "unset (one per CPU)"),
            "load_average_start": list(load_start),
            "load_average_end": list(os.getloadavg()),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"CPU time, median of the per-repeat ratios to the reference's: {report['cpu_speedup_vs_reference']}")
    if against is not None:
        print(f"against {args.against}: {against['speedup']}x its CPU time, identical={against['identical_ids']}")
    for entry in report["rows"]:
        print(
            f"{entry['method']:<70} {entry['seconds']:>8.2f} s {entry['reviews_per_s']:>7} reviews/s "
            f"x{entry['speedup_vs_reference']:<5} identical={entry['identical_ids']}"
        )


if __name__ == "__main__":
    main()
