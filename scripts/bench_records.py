"""Regenerate the records table of docs/benchmarks.md ("Where each record ran") from results/bench/*.json.

    python scripts/bench_records.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's hf_attn

from hf_attn.bench.report import read_records, records_table, with_records_table  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=Path, default=REPO / "results" / "bench", help="folder of bench records")
    parser.add_argument("--docs", type=Path, default=REPO / "docs" / "benchmarks.md", help="document to update")
    args = parser.parse_args(argv)
    args.docs.write_text(with_records_table(args.docs.read_text(), records_table(read_records(args.records))))


if __name__ == "__main__":
    main()
