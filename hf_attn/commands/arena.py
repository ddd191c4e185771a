"""`hf-attn arena`: every position scheme through the same data, budget and seed, one resumable stage at a time
(docs/arena.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..arguments import minutes, names_list, output_folder, seeds_list
from .common import DATASET_HELP, add_column_arguments, experiment_overrides

# What `hf-attn arena` can limit a stage to (the arena module's `CELL_FIELDS`), with how each option is read.
ARENA_LIMITS = {"scheme": names_list, "task": names_list, "seed": seeds_list}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="arena YAML (configs/arena/arena.yaml)")
    parser.add_argument("--budget", default="small", help="a budget the arena file defines (tiny, small, full)")
    parser.add_argument("--output-dir", type=output_folder, default="runs/arena",
                        help="training runs and measured cells; run the same command again to resume")
    parser.add_argument("--results", type=output_folder,
                        help="where arena.md, arena.json and the plots go (default: OUTPUT_DIR/results)")
    parser.add_argument("--week3", help="Week 3 folder for both experiments: tokenizer files and the DAN embedding")
    parser.add_argument("--dataset", help=DATASET_HELP + ", for every experiment of the arena")
    add_column_arguments(parser)
    parser.add_argument("--max-time", type=minutes, metavar="MINUTES",
                        help="end this stage when the time is up (a training at a step boundary, or before a cell "
                        "there is no time for); the same command continues")
    parser.add_argument("--checkpoints", type=output_folder, metavar="DIR",
                        help="commit each scheme's encoder here as float16 (DIR/SCHEME) at the end of every stage, "
                        "for a stage on another machine to continue or fine-tune from")
    parser.add_argument("--report-only", action="store_true",
                        help="measure nothing: redraw the table, JSON and plots from the cells in --results (after "
                        "pulling another machine's stage, say)")
    for field, parse in ARENA_LIMITS.items():
        parser.add_argument(f"--{field}s", type=parse, metavar=f"{field.upper()}S",
                            help=f"measure only the cells of these {field}s, comma-separated, and the models they "
                            f"need (a cell of no {field} waits for a stage without it); the table still shows every "
                            "cell there is")
    parser.add_argument("overrides", nargs="*", help="key=value overrides of both experiments")


def run(args: argparse.Namespace) -> None:
    """Run the stage the arena's cells call for (or, with --report-only, only redraw the report) and say what it
    measured and how to continue a stage that --max-time stopped."""
    from ..experiments.arena import load_arena, run_arena

    if loose := [word for word in args.overrides if "=" not in word]:
        limits = ", ".join(f"--{field}s" for field in ARENA_LIMITS)
        raise ValueError(f"{loose[0]!r} is not a key=value override; {limits} take one comma-separated list "
                         f"(--tasks abacus,coupled, not --tasks abacus coupled)")
    arena = load_arena(args.config, args.budget, experiment_overrides(args))
    results = args.results or str(Path(args.output_dir) / "results")
    only = {field: values for field in ARENA_LIMITS if (values := getattr(args, f"{field}s"))}
    if only and args.report_only:
        raise ValueError(f"--report-only measures nothing, so --{next(iter(only))}s limits nothing: leave one out")
    record = run_arena(arena, args.output_dir, results, max_time=args.max_time, checkpoints=args.checkpoints,
                       report_only=args.report_only, only=only)
    if args.report_only and not any((Path(results) / "cells").rglob("*.json")):
        print(f"{results}/cells/ holds no cells: the table is empty; point --results at an arena's results folder")
    print(f"measured {len(record['measured_now'])} new cell(s); table, JSON and plots in {results}/")
    if record["stopped"]:
        print(f"stage stopped by --max-time ({record['stopped']}); commit {results}/"
              + (f" and {args.checkpoints}/" if args.checkpoints else "") + " and run the same command to continue")
