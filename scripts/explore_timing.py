"""How long the explore page takes to answer a 3,000-word review, without the browser (docs/explore.md).

    OMP_NUM_THREADS=2 python scripts/explore_timing.py --model checkpoints/rope-whole-reviews

The review is the page's long test review, its words repeated until there are 3,000. The answer is what
Read shows first (every classifier's verdict and the windows of the chosen one); the pictures (a heatmap and
the scheme's panel) follow it. Each is the median of --repeats runs after one warm-up, in wall-clock and CPU
seconds; prints JSON with the load average it ran under.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from hf_attn import timing  # noqa: E402
from hf_attn.explore.analysis import load_explored, read_text, sample_texts  # noqa: E402
from hf_attn.explore.page import pictures, window_views  # noqa: E402


def median_seconds(work, repeats: int) -> tuple[float, float]:  # noqa: ANN001 - a function of no arguments
    """The median wall-clock and CPU seconds (all threads) of `work()` after one warm-up, each over `repeats` calls
    of its own: on a machine that other jobs share, the CPU time says what the work itself costs."""
    return tuple(round(timing.median_seconds({"work": work}, repeats=repeats, clock=clock)["work"], 3)
                 for clock in ("wall", "process"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="checkpoints/rope-whole-reviews")
    parser.add_argument("--words", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    explored = load_explored(args.model)
    words = list(sample_texts().values())[-1].split()
    text = " ".join((words * (args.words // len(words) + 1))[: args.words])
    folder = Path(tempfile.mkdtemp())

    def answer() -> None:
        window_views(explored, read_text(explored, text))

    reading = read_text(explored, text)

    def draw() -> None:
        pictures(explored, reading, 0, 0, 0, folder)

    print(json.dumps({
        "model": args.model, "words": args.words, "tokens": sum(len(window.ids) for window in reading.windows),
        "windows": len(reading.windows), "torch_threads": torch.get_num_threads(),
        "load_average": os.getloadavg()[0],
        "answer_wall_cpu_s": median_seconds(answer, args.repeats),
        "pictures_wall_cpu_s": median_seconds(draw, args.repeats),
    }))


if __name__ == "__main__":
    main()
