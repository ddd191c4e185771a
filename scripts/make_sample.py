"""Regenerate hf_attn/sample/imdb_sample.parquet from a full copy of IMDb.

The sample is the first ``--per-class`` negative and the first ``--per-class`` positive reviews
met while walking the seed split's training indices in order. The permutation is already random,
so this is a random, balanced draw that needs no extra seed, and it never touches a validation
or test review of the full split. The ``imdb_index`` column records each review's row in IMDb
train+test, so the file's origin can be checked against split_indices.json.

    python scripts/make_sample.py --source ../shared/data/imdb
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pyarrow.parquet as pq

from hf_attn.experiments.data import LABEL_NAMES, SAMPLE_PATH, load_labelled, seed_split_indices


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--source",
        default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "imdb"),
        help="IMDb copy in any layout hf_attn.experiments.data.load_labelled accepts (default: ../shared/data/imdb)",
    )
    parser.add_argument("--per-class", type=int, default=1000, help="reviews per class (default: 1000)")
    parser.add_argument(
        "--output", type=Path, default=SAMPLE_PATH, help=f"parquet to write (default: {SAMPLE_PATH})"
    )
    args = parser.parse_args(argv)

    labelled = load_labelled(args.source)
    labels = labelled["label"]
    wanted = dict.fromkeys(range(len(LABEL_NAMES)), args.per_class)
    chosen: list[int] = []
    for row in seed_split_indices(len(labelled))["train"]:
        if wanted[labels[row]] > 0:
            wanted[labels[row]] -= 1
            chosen.append(row)
    if any(wanted.values()):
        raise SystemExit(f"{args.source} has too few training reviews for {args.per_class} per class")

    sample = labelled.select(chosen).add_column("imdb_index", chosen)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(sample.with_format("arrow")[:], args.output, compression="zstd", compression_level=19)
    print(f"wrote {len(sample)} reviews to {args.output} ({args.output.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
