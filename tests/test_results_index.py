"""The results index: built from a folder of JSON files, its table says what the files say."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hf_attn.experiments.results_index import build_index, main

RECORDS = {
    "positions/rope.json": {"name": "rope", "test_accuracy": 0.85264, "val_accuracy": 0.8486, "test_f1": 0.9,
                            "command": "hf-attn train --config configs/positions/rope.yaml x='a|b'"},
    "pretraining/pretrain-rope.json": {"objective": "mlm", "eval_mlm_loss": 2.51594, "command": "hf-attn pretrain"},
    "pretraining/pretrain-rope-rtd.json": {"eval_generator_mlm_loss": 4.0, "eval_detection_accuracy": 0.88531},
    "baselines/week3-8k.json": {"dan": {"val_accuracy": 0.8228, "test_accuracy": 0.819}, "command": "hf-attn prepare"},
    "probes/probe-rope/probe.json": {"hard_probe_score": 4},
    "bench/bench.json": {"settings": {"threads": 2}, "throughput": {"rows": []}},
}


def table_rows(index: str) -> list[list[str]]:
    """The cells of each body row of the index's table (a `|` escaped as `\\|` stays inside its cell)."""
    rows = [line for line in index.splitlines() if line.startswith("| ")][1:]  # without the header row
    return [[cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]


def test_the_index_lists_every_json_with_the_numbers_it_holds(tmp_path: Path) -> None:
    for name, record in RECORDS.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(json.dumps(record))
    (tmp_path / "bench" / "bench.md").write_text("# report")
    (tmp_path / "probes" / "probe-rope.md").write_text("Score: 4/6")
    main([str(tmp_path)])
    index = (tmp_path / "README.md").read_text()
    assert index == build_index(tmp_path)  # generated, and the same every time

    rows = {re.search(r"\]\(([^)]+\.json)\)", row[1]).group(1): row for row in table_rows(index)}
    assert set(rows) == set(RECORDS)
    for name, (study, result, metric, test, validation, command) in rows.items():
        record = RECORDS[name]
        assert study == name.split("/")[0]
        expected = {  # each kind of record's key metric, read from the record itself
            "positions/rope.json": lambda r: ("accuracy", r["test_accuracy"], r["val_accuracy"]),
            "pretraining/pretrain-rope.json": lambda r: ("masked-LM loss", None, r["eval_mlm_loss"]),
            "pretraining/pretrain-rope-rtd.json": lambda r: ("detection accuracy", None, r["eval_detection_accuracy"]),
            "baselines/week3-8k.json": lambda r: ("DAN accuracy", r["dan"]["test_accuracy"], r["dan"]["val_accuracy"]),
            "probes/probe-rope/probe.json": lambda r: ("hard reviews right, of 6", r["hard_probe_score"], None),
            "bench/bench.json": lambda r: ("", None, None),
        }[name](record)
        assert metric == expected[0]
        for cell, value in ((test, expected[1]), (validation, expected[2])):
            assert (cell == "") if value is None else float(cell) == pytest.approx(value, abs=5e-5)
        assert command == (f"`{record['command']}`" if "command" in record else "")
        for target in re.findall(r"\]\(([^)]+)\)", result):
            assert (tmp_path / target).is_file()
    assert "[report](bench/bench.md)" in rows["bench/bench.json"][1]
    assert "[report](probes/probe-rope.md)" in rows["probes/probe-rope/probe.json"][1]



def test_a_command_that_runs_a_script_the_repository_no_longer_has_is_marked(tmp_path: Path) -> None:
    results = tmp_path / "results"
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "kept.py").write_text("")
    for name, command in (("kept", "python scripts/kept.py --output x.json"),
                          ("gone", "python scripts/gone.py --threads 2"),
                          ("cli", "hf-attn bench --output results/bench/cli.json")):
        (results / "bench").mkdir(parents=True, exist_ok=True)
        (results / "bench" / f"{name}.json").write_text(json.dumps({"command": command}))
    commands = {row[1].split("]")[0].lstrip("["): row[5] for row in table_rows(build_index(results))}
    assert commands == {"kept": "`python scripts/kept.py --output x.json`",
                        "gone": "`python scripts/gone.py --threads 2` (script removed)",
                        "cli": "`hf-attn bench --output results/bench/cli.json`"}


def test_an_arenas_cells_are_left_to_its_report(tmp_path: Path) -> None:
    results = tmp_path / "results"
    cell = results / "arena" / "study" / "cells" / "mlm" / "rope" / "128.json"
    cell.parent.mkdir(parents=True)
    cell.write_text(json.dumps({"value": 4.1, "command": "hf-attn arena"}))
    (results / "arena" / "study" / "arena.json").write_text(json.dumps({"command": "hf-attn arena"}))
    names = [row[1].split("]")[0].lstrip("[") for row in table_rows(build_index(results))]
    assert names == ["study/arena"]
