"""Time `pipeline("text-classification")` on one text of 10 KB, 100 KB and 1 MB (IMDb sample reviews joined).

The model is a reference-size classifier (4 layers, d 384, 128 positions, RoPE) saved with `save_pretrained` and no
reading policy (`read_length` and `window_stride` unset), as a user's own model is: past `max_direct_length` it reads
windows. Read also with `read_length=8192` (the first 8,192 tokens) and, up to 100 KB, with `max_direct_length=None`
(one quadratic pass). Weights are random: only the time is measured.

    python scripts/bench_long_text.py --out results/long-text/pipeline.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import torch
from transformers import AutoTokenizer, pipeline
from transformers.utils import logging

from hf_attn import HfAttnConfig, HfAttnForSequenceClassification
from hf_attn.experiments.data import SAMPLE_PATH
from hf_attn.timing import this_cpu, timed

REPO = Path(__file__).resolve().parents[1]
SIZES = (10_000, 100_000, 1_000_000)
POLICIES = {"windows past 8192 (default)": {}, "read_length=8192": {"read_length": 8192},
            "one pass (max_direct_length=None)": {"max_direct_length": None}}
ONE_PASS_LIMIT = 100_000  # characters: a quadratic pass over 1 MB takes longer than this script should


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    logging.set_verbosity_error()
    reviews = " ".join(pq.read_table(SAMPLE_PATH, columns=["text"]).column("text").to_pylist())
    text = (reviews * (max(SIZES) // len(reviews) + 1))[: max(SIZES)]
    tokenizer = AutoTokenizer.from_pretrained(REPO / "checkpoints" / "rope-whole-reviews")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        torch.manual_seed(0)
        HfAttnForSequenceClassification(HfAttnConfig(vocab_size=len(tokenizer))).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        for policy, changes in POLICIES.items():
            classify = pipeline("text-classification", model=folder, model_kwargs=changes)
            for size in SIZES:
                if "max_direct_length" in changes and size > ONE_PASS_LIMIT:
                    continue
                tokens = len(tokenizer(text[:size])["input_ids"])
                seconds = timed(lambda: classify(text[:size]))  # noqa: B023 - called at once
                rows.append({"policy": policy, "characters": size, "tokens": tokens, "seconds": round(seconds, 2)})
                print(rows[-1], flush=True)
    record = {"command": "python scripts/bench_long_text.py --out " + str(args.out), "cpu": this_cpu(),
              "threads": torch.get_num_threads(), "torch": torch.__version__, "precision": "fp32",
              "cpu_count": os.cpu_count(), "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
