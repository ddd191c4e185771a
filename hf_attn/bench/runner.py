"""Entry points: run the selected sections into one JSON-ready dict, and the `hf-attn bench` options.

Everything is measured in one process and one run, and reported as ratios, because absolute times
say more about the machine than about the model.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..arguments import output_file
from ..runtime.precision import COMPUTED_PRECISIONS, bf16_units
from ..timing import machine, use_threads
from .models import ANCHORS
from .report import format_markdown, update_records_table
from .sections import BENCH_SECTIONS, section_names
from .sections.base import refuse_unknown
from .sections.scaling import plot_attention_scaling
from .settings import BenchSettings


def _check(settings: BenchSettings) -> None:
    """Fail on a misspelt section, anchor, precision or a section's own setting before minutes of timing, not at
    its turn."""
    refuse_unknown("section", settings.sections, section_names())
    refuse_unknown("anchor", settings.anchors, ANCHORS)
    refuse_unknown("precision", settings.precision, COMPUTED_PRECISIONS)
    for section in BENCH_SECTIONS.values():
        section.check(settings)


def run_benchmark(settings: BenchSettings | None = None, **overrides: Any) -> dict[str, Any]:
    """Run the selected sections and return one JSON-ready dict (settings and environment included).

    `run_benchmark(repeats=2, seq_lengths=(16,))` overrides single fields of the defaults.
    """
    settings = dataclasses.replace(settings or BenchSettings(), **overrides)
    _check(settings)
    use_threads(settings.threads)
    device = torch.device(settings.device)
    results: dict[str, Any] = {
        "settings": dataclasses.asdict(settings),
        "environment": {**machine(device), "precision": list(settings.precision)},
    }
    results["environment"]["bf16_units"] = bf16_units(device)  # None: bf16 is emulated, and slower
    asked = [section.name for section in BENCH_SECTIONS.values() if not section.selectable and section.wanted(settings)]
    for name in [*settings.sections, *asked]:
        results[name] = BENCH_SECTIONS[name].run(settings, device)
    results["environment"]["load_average_end"] = os.getloadavg()
    return results


def _int_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part)


def _str_tuple(text: str) -> tuple[str, ...]:
    return tuple(part for part in text.split(",") if part)


def _bool(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.lower() == "true"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `hf-attn bench`: one per `BenchSettings` field (dashes for underscores), plus outputs.

    Generated from the dataclass so that a new setting cannot be forgotten on the command line.
    Tuples are comma-separated (`--seq-lengths 128,512`, `--variants ''` for none); defaults are
    `BenchSettings`'."""
    hints = typing.get_type_hints(BenchSettings)
    for settings_field in dataclasses.fields(BenchSettings):
        hint = hints[settings_field.name]
        default = settings_field.default
        if typing.get_origin(hint) is tuple:
            parse: Callable[[str], Any] = _int_tuple if typing.get_args(hint)[0] is int else _str_tuple
            shown = ",".join(map(str, default))
        elif hint is bool:
            parse, shown = _bool, str(default).lower()
        else:  # a plain type, or `X | None`: parse as X
            parse = next(arg for arg in (typing.get_args(hint) or (hint,)) if arg is not type(None))
            shown = default
        parser.add_argument("--" + settings_field.name.replace("_", "-"), type=parse, default=default,
                            help=settings_field.metadata["help"] + ("" if default is None else f" (default {shown})"))
    parser.add_argument("--output", default="results/bench/bench.json", type=output_file,
                        help="JSON results (default %(default)s)")
    parser.add_argument("--markdown", default="results/bench/bench.md", type=output_file,
                        help="markdown report (default %(default)s)")
    parser.add_argument("--plot", default="results/bench/bench_attention_scaling.png", type=output_file,
                        help="attention-scaling PNG, written when the scaling section runs (default %(default)s)")
    parser.add_argument("--records-only", action="store_true",
                        help="measure nothing: rewrite the records table of --records-docs from the bench records "
                             "(JSON) in --output's folder")
    parser.add_argument("--records-docs", default="docs/benchmarks.md",
                        help="document whose records table --records-only rewrites (default %(default)s)")


def run_from_args(args: argparse.Namespace) -> None:
    """Run with the parsed options, write JSON, markdown and plot, and print the markdown; with `records_only`,
    only rewrite the records table of `records_docs`."""
    if args.records_only:
        update_records_table(Path(args.output).parent, Path(args.records_docs))
        return
    names = {f.name for f in dataclasses.fields(BenchSettings)}
    settings = BenchSettings(**{name: value for name, value in vars(args).items() if name in names})
    results = run_benchmark(settings)
    results["command"] = shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])  # how these numbers were taken
    report = format_markdown(results)
    for path, text in ((args.output, json.dumps(results, indent=2)), (args.markdown, report)):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text + "\n")
    if "scaling" in results:
        plot_attention_scaling(results, args.plot)
    print(report)


def write_script_record(path: Path, record: dict[str, Any]) -> None:
    """Write a bench script's JSON record to `path` (its folder made if need be) and say where."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, default=str) + "\n")
    print(f"wrote {path}")
