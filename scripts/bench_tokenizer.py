"""Encode the seed split's 40,000 training reviews with HfAttnTokenizerFast and with the reference.

The reference is the pure-Python encoder of tests/week3_reference.py with its per-word cache, the
way the Week 3 notebook tokenized. Both start cold and run in the same process, one after the
other, on the Week 3 output (``max_seq`` ids, padded, plus the mask); every result is compared id
for id with the reference's. Also timed: a second, warm call; the Rust tokenizer alone (without
the chunk cache, to show why the cache exists); and ``datasets.map`` over the whole split.

    python scripts/bench_tokenizer.py --out results/bench_tokenizer.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import datasets
import pyarrow.parquet as pq
import tokenizers
import torch
import transformers

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the reference lives with the tests, not in the package

from week3_reference import ReferenceTokenizer  # noqa: E402

from hf_attn.tokenization_hf_attn import HfAttnTokenizerFast  # noqa: E402

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


def encode_week3(tokenizer: HfAttnTokenizerFast, texts: list[str]) -> dict[str, list[list[int]]]:
    """The Week 3 encoding: ``max_seq`` ids per review, ``[PAD]``-padded, and the padding mask."""
    return tokenizer(texts, truncation=True, padding="max_length")


def timed(function: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = function()
    return result, time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument(
        "--week3", type=Path, default=SHARED / "week3-sample", help="Week 3 folder with the tokenizer files"
    )
    parser.add_argument("--imdb", type=Path, default=SHARED / "data" / "imdb", help="IMDb parquet folder")
    parser.add_argument("--limit", type=int, help="only the first N training reviews (default: all 40,000)")
    parser.add_argument("--map-batch-size", type=int, default=1000, help="datasets.map batch size")
    args = parser.parse_args(argv)

    texts = seed_train_reviews(args.imdb, args.limit)
    load_start = os.getloadavg()

    reference = ReferenceTokenizer.from_week3_folder(args.week3)
    expected, reference_seconds = timed(lambda: [reference.encode_padded(text) for text in texts])
    expected_ids = [ids for ids, _ in expected]
    expected_masks = [mask for _, mask in expected]

    def matches(encoded: dict[str, list[list[int]]]) -> bool:
        return encoded["input_ids"] == expected_ids and encoded["attention_mask"] == expected_masks

    tokenizer = HfAttnTokenizerFast.from_week3(args.week3)
    cold, cold_seconds = timed(lambda: encode_week3(tokenizer, texts))
    warm, warm_seconds = timed(lambda: encode_week3(tokenizer, texts))

    backend = HfAttnTokenizerFast.from_week3(args.week3).backend_tokenizer
    end_of_word = tokenizer.end_of_word_id
    rust, rust_seconds = timed(lambda: backend.encode_batch_fast(texts, add_special_tokens=False))
    rust_ids = [[i for i in encoding.ids if i != end_of_word][: tokenizer.model_max_length] for encoding in rust]

    mapped_tokenizer = HfAttnTokenizerFast.from_week3(args.week3)
    dataset = datasets.Dataset.from_dict({"text": texts})
    mapped, map_seconds = timed(
        lambda: dataset.map(
            lambda batch: encode_week3(mapped_tokenizer, batch["text"]),
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
            row("reference: pure Python, per-word cache, cold", reference_seconds, True),
            row("HfAttnTokenizerFast, one call, cold", cold_seconds, matches(cold)),
            row("HfAttnTokenizerFast, same call again, warm", warm_seconds, matches(warm)),
            row(
                "Rust tokenizer alone (encode_batch_fast; lone </w> dropped after)",
                rust_seconds,
                rust_ids == [ids[: sum(mask)] for ids, mask in zip(expected_ids, expected_masks)],
            ),
            row(
                f"datasets.map, batched ({args.map_batch_size}), cold",
                map_seconds,
                mapped["input_ids"] == expected_ids and mapped["attention_mask"] == expected_masks,
            ),
        ],
        "environment": {
            "python": platform.python_version(),
            "tokenizers": tokenizers.__version__,
            "transformers": transformers.__version__,
            "datasets": datasets.__version__,
            "cpu_count": os.cpu_count(),
            "tokenizers_parallelism": os.environ.get("TOKENIZERS_PARALLELISM", "unset (on)"),
            "load_average_start": list(load_start),
            "load_average_end": list(os.getloadavg()),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for entry in report["rows"]:
        print(
            f"{entry['method']:<70} {entry['seconds']:>8.2f} s {entry['reviews_per_s']:>7} reviews/s "
            f"x{entry['speedup_vs_reference']:<5} identical={entry['identical_ids']}"
        )


if __name__ == "__main__":
    main()
