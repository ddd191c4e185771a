"""The validation loss at each evaluation of finished sequence-task runs, from their last checkpoint's
`trainer_state.json`, as one JSON: for runs whose cells were measured before sequence runs recorded
`val_loss_by_step` themselves (the length study's reversed addition, stages 10 and 11).

    python scripts/sequence_loss_curves.py --runs runs/length/runs/sequence/addition \
        --output results/length/study/addition-validation-loss.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from transformers.trainer_utils import get_last_checkpoint

from hf_attn.experiments.sequence import validation_loss_by_step


def loss_curves(runs: Path) -> dict[str, list[dict[str, Any]]]:
    """Each finished run's (a folder with `metrics.json`) validation loss by step, from its last checkpoint."""
    curves = {}
    for run in sorted(path for path in runs.iterdir() if (path / "metrics.json").is_file()):
        checkpoint = get_last_checkpoint(str(run))
        if checkpoint is not None:
            state = json.loads((Path(checkpoint) / "trainer_state.json").read_text())
            curves[run.name] = validation_loss_by_step(state["log_history"])
    return curves


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, required=True, help="a folder of run folders (SCHEME-seedN)")
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    if not args.runs.is_dir():
        parser.error(f"--runs {args.runs} is not a folder of runs")
    record = {"runs_folder": str(args.runs), "command": "python scripts/sequence_loss_curves.py --runs "
              f"{args.runs} --output {args.output}", "validation_loss_by_step": loss_curves(args.runs)}
    args.output.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{args.output}: {', '.join(record['validation_loss_by_step'])}")


if __name__ == "__main__":
    main()
