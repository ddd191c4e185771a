"""The length study through the arena: sequence tasks as arena cells, seed by seed and task by task, their table
(exact match by length bucket over seeds) and the mean reciprocal rank across the tasks every scheme learned."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import math
import os
import runpy
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import REPO

from hf_attn.experiments import sequence
from hf_attn.experiments.arena import Arena, ArenaConfigError, experiment_for, load_arena, run_arena, trained
from hf_attn.experiments.arena.kinds import SequenceCell
from hf_attn.experiments.config import ExperimentConfigError, load_experiment

LENGTH_ARENA = REPO / "configs" / "length" / "arena.yaml"
ENCODER_ARENA = REPO / "configs" / "length" / "encoder-arena.yaml"
SCAN_FOLDER = REPO.parent / "shared" / "data" / "scan"


def write_length_arena(folder: Path, **changes: Any) -> Path:
    """The repository's length arena file with `changes`, its experiment path made absolute, written to `folder`."""
    raw = yaml.safe_load(LENGTH_ARENA.read_text())
    raw["sequence"] = str((LENGTH_ARENA.parent / raw["sequence"]).resolve())
    raw.update(changes)
    path = folder / "arena.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize("budget", ["tiny", "study"])
def test_the_shipped_length_arena_loads_every_budget(budget: str) -> None:
    arena = load_arena(LENGTH_ARENA, budget)
    assert arena.schemes == ["none", "sinusoidal", "learned", "rope", "alibi", "t5", "fire"]
    base = yaml.safe_load((LENGTH_ARENA.parent / "base.yaml").read_text())["dataset"]
    experiment = experiment_for(arena, "sequence", "fire", seed=1, task="copy")
    # The task states only its name: the rest of the dataset is base.yaml's (or the tiny budget's sizes).
    expected = {**base, "name": "copy", **(arena.budget.sequence.get("dataset", {}))}
    assert experiment.dataset == expected
    assert (experiment.seed, experiment.model["position_embedding_type"]) == (1, "fire")
    assert experiment_for(arena, "sequence", "rope", seed=0, task="reverse").dataset["name"] == "reverse"
    scan = experiment_for(arena, "sequence", "none", seed=0, task="scan")
    assert scan.dataset["kind"] == "scan" and scan.max_length == 64
    # SCAN's and addition's longer schedules are the study's; the tiny budget's few steps go after every task's keys
    assert scan.training["max_steps"] == {"tiny": 2, "study": 4000}[budget]
    addition = experiment_for(arena, "sequence", "t5", seed=0, task="addition")
    assert addition.dataset["name"] == "addition_reversed_hints_random" and addition.max_length == 200
    assert addition.training["max_steps"] == {"tiny": 2, "study": 20_000}[budget]


@pytest.mark.parametrize("budget", ["tiny", "study"])
def test_the_encoder_arena_is_the_decoder_arena_on_copy_reverse_and_sort_with_an_encoder(budget: str) -> None:
    decoders, encoders = load_arena(LENGTH_ARENA, budget), load_arena(ENCODER_ARENA, budget)
    assert encoders.schemes == decoders.schemes and encoders.budget.seeds == decoders.budget.seeds
    assert list(encoders.tasks) == ["copy", "reverse", "sort"]
    for scheme in encoders.schemes:
        for task in encoders.tasks:
            encoder = experiment_for(encoders, "sequence", scheme, seed=2, task=task)
            decoder = experiment_for(decoders, "sequence", scheme, seed=2, task=task)
            assert encoder.model == {**decoder.model, "is_decoder": False}
            assert dataclasses.replace(encoder, name="", model={}) == dataclasses.replace(decoder, name="", model={})


def test_scheme_settings_reach_that_schemes_experiments_and_stamps_only(tmp_path: Path) -> None:
    arena = load_arena(LENGTH_ARENA, "study")
    assert experiment_for(arena, "sequence", "sinusoidal", seed=0, task="copy").model["scale_embeddings"] is True
    assert "scale_embeddings" not in experiment_for(arena, "sequence", "none", seed=0, task="copy").model
    sinusoidal, none = (SequenceCell(task="copy", scheme=scheme, seed=0) for scheme in ("sinusoidal", "none"))
    plain = load_arena(write_length_arena(tmp_path, scheme_settings={}), "study")
    assert none.stamp(arena) == none.stamp(plain)  # another scheme's settings leave a cell's stamp as it was
    assert sinusoidal.stamp(arena) != sinusoidal.stamp(plain)
    with pytest.raises(ArenaConfigError, match=r"`scheme_settings` names \['xpos'\], not in `schemes`"):
        load_arena(write_length_arena(tmp_path, scheme_settings={"xpos": {}}), "study")


def test_a_task_of_the_arena_sets_its_position_id_rule_and_its_cells_stamps(tmp_path: Path) -> None:
    tasks = {"addition": {"dataset": {"name": "addition_reversed"}, "max_length": 200},
             "addition-abacus": {"dataset": {"name": "addition_reversed"}, "max_length": 200,
                                 "model": {"position_id_rule": "abacus"}},
             "reverse-coupled": {"dataset": {"name": "reverse"}, "model": {"position_id_rule": "coupled"}}}
    schemes = ["sinusoidal", "learned", "rope"]  # schemes that read the ids: with the others a rule is refused
    arena = load_arena(write_length_arena(tmp_path, tasks=tasks, schemes=schemes), "study")
    for task, rule in (("addition", None), ("addition-abacus", "abacus"), ("reverse-coupled", "coupled")):
        experiment = experiment_for(arena, "sequence", "rope", seed=0, task=task)
        assert (experiment.model.get("position_id_rule"), experiment.model["position_embedding_type"]) == (rule, "rope")
    (tmp_path / "sequential").mkdir()
    sequential = load_arena(write_length_arena(tmp_path / "sequential", schemes=schemes, tasks={
        **tasks, "addition-abacus": tasks["addition"]}), "study")
    cell = SequenceCell(task="addition-abacus", scheme="rope", seed=0)
    assert cell.stamp(arena) != cell.stamp(sequential)  # a cell is measured again when its task's rule changes
    with pytest.raises(ExperimentConfigError, match="position_embedding_type='none' ignores position ids"):
        load_arena(write_length_arena(tmp_path, tasks=tasks, schemes=[*schemes, "none"]), "study")


def test_a_task_of_another_kind_replaces_the_dataset_whole(tmp_path: Path) -> None:
    scan = {"kind": "scan", "folder": str(SCAN_FOLDER), "n_validation": 10}
    arena = load_arena(write_length_arena(tmp_path, tasks={"scan": {"dataset": scan, "max_length": 80}}), "study")
    experiment = experiment_for(arena, "sequence", "none", seed=0, task="scan")
    assert experiment.dataset == scan
    assert experiment.max_length == 80


def test_an_experiment_file_of_another_dataset_kind_replaces_its_bases_dataset_whole(tmp_path: Path) -> None:
    scan_file = LENGTH_ARENA.parent / "scan.yaml"
    stated = yaml.safe_load(scan_file.read_text())["dataset"]
    experiment = load_experiment(scan_file, ["model.position_embedding_type=rope"])
    assert experiment.dataset == stated  # none of base.yaml's generated-task settings left in it
    assert (experiment.max_length, experiment.training["max_steps"]) == (64, 4000)
    assert experiment.model["hidden_size"] == yaml.safe_load((LENGTH_ARENA.parent / "base.yaml").read_text())[
        "model"]["hidden_size"]  # the rest is base.yaml's
    same_kind = tmp_path / "copy.yaml"
    same_kind.write_text(f"base: {LENGTH_ARENA.parent / 'base.yaml'}\ndataset: {{name: copy}}\n")
    assert load_experiment(same_kind).dataset["max_train_length"] == 8  # a dataset of the same kind merges


@pytest.mark.parametrize(("changes", "message"), [
    ({"sequence": None, "tasks": None}, r"name a `classifier` .* or a `sequence` experiment"),
    ({"tasks": None}, r"missing key\(s\) \['tasks'\]"),
    ({"tasks": {"copy": {"dataset": {"name": "copi"}}}}, r"task copy, scheme none\]: .*unknown length task 'copi'"),
    ({"tasks": {"copy": {"max_lenght": 9}}},
     r"task copy, scheme none\]: .*unknown key `max_lenght` for Experiment. Did you mean max_length"),
])
def test_bad_length_arenas_name_the_problem(tmp_path: Path, changes: dict[str, Any], message: str) -> None:
    path = write_length_arena(tmp_path)
    raw = yaml.safe_load(path.read_text())
    raw.update(changes)
    path.write_text(yaml.safe_dump({key: value for key, value in raw.items() if value is not None}))
    with pytest.raises(ArenaConfigError, match=message):
        load_arena(path, "tiny")


# Exact match a fake training reports: (val 1..8, test 9..16, test 32) by task and scheme, plus 0.01 per seed.
ACCURACIES = {"copy": {"none": (1.0, 0.6, 0.1), "rope": (1.0, 0.2, 0.0), "alibi": (0.99, 0.4, 0.0)},
              "sort": {"none": (1.0, 0.5, 0.2), "rope": (1.0, 0.7, 0.3), "alibi": (0.90, 0.9, 0.9)}}
COUNTS = (500, 800, 100)


def bucket_rows(values: tuple[float, ...], buckets: list[tuple[int, int]]) -> list[dict[str, Any]]:
    return [{"low": low, "high": high, "correct": round(value * count), "count": count, "accuracy": value,
             "standard_error": math.sqrt(value * (1 - value) / count)}
            for value, (low, high), count in zip(values, buckets, COUNTS)]


def fake_training(calls: list[tuple[str, str, int]], seconds: float = 0.0) -> Callable[..., dict[str, Any]]:
    """A training that records (task, scheme, seed) in `calls`, takes `seconds` and reports `ACCURACIES`."""

    def train(experiment: Any, run_dir: Path, **options: Any) -> dict[str, Any]:
        task, scheme = experiment.dataset["name"], experiment.model["position_embedding_type"]
        calls.append((task, scheme, experiment.seed))
        time.sleep(seconds)
        values = tuple(min(1.0, value + 0.01 * experiment.seed) for value in ACCURACIES[task][scheme])
        metrics = {"val_exact_match_by_length": bucket_rows(values[:1], [(1, 8)]),
                   "test_exact_match_by_length": bucket_rows(values[1:], [(9, 16), (32, 32)])[:2],
                   "val_loss": 0.1, "optimizer_steps": 2000, "test_errors": [{"input": "a"}] * 9, "precision": "fp32",
                   "experiment": {"precision": "auto"}}
        metrics["test_exact_match_by_length"][1]["count"] = COUNTS[2]
        run_dir.mkdir(parents=True)
        (run_dir / "metrics.json").write_text(json.dumps(metrics))
        return metrics

    return train


def fake_arena(folder: Path) -> Arena:
    """The length arena with three schemes, two tasks (copy, sort) and two seeds."""
    path = write_length_arena(folder, schemes=["none", "rope", "alibi"], scheme_settings={},
                              tasks={"copy": {"dataset": {"name": "copy"}}, "sort": {"dataset": {"name": "sort"}}})
    arena = load_arena(path, "tiny")
    return dataclasses.replace(arena, budget=dataclasses.replace(arena.budget, seeds=[0, 1]))


ALL_CELLS = [(task, scheme, seed)  # in the arena's order: seed by seed, task by task
             for seed in (0, 1) for task in ("copy", "sort") for scheme in ("none", "rope", "alibi")]


@pytest.fixture(scope="module")
def fake_sequence_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`fake_arena`, its trainings replaced by `fake_training`; run twice into one folder."""
    calls: list[tuple[str, str, int]] = []
    tmp_path = tmp_path_factory.mktemp("length-arena")
    arena = fake_arena(tmp_path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sequence, "train_sequence", fake_training(calls))
        patch.setattr(SequenceCell, "plots", classmethod(lambda cls, record, folder: [folder / "exact_match.png"]))
        first = run_arena(arena, tmp_path / "out", tmp_path / "results")
        first_calls = list(calls)
        second = run_arena(arena, tmp_path / "out", tmp_path / "results")
    return {"first": first, "second": second, "first_calls": first_calls, "calls": calls,
            "results": tmp_path / "results"}


def test_sequence_cells_come_seed_by_seed_then_task_by_task_and_are_kept(fake_sequence_runs: dict[str, Any]) -> None:
    assert fake_sequence_runs["first_calls"] == ALL_CELLS
    assert fake_sequence_runs["calls"] == ALL_CELLS  # the second run trains nothing: every cell is committed
    cell = json.loads((fake_sequence_runs["results"] / "cells/tasks/sort/sequence/rope/seed1.json").read_text())
    assert cell["test_exact_match_by_length"][0]["accuracy"] == pytest.approx(0.71)
    assert len(cell["test_errors"]) == 5
    assert cell["precision"] == "fp32" and "experiment" not in cell  # what `auto` meant there, not the whole run


def test_stages_limited_to_tasks_schemes_and_seeds_measure_those_cells_in_the_arenas_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str, int]] = []
    monkeypatch.setattr(sequence, "train_sequence", fake_training(calls))
    monkeypatch.setattr(SequenceCell, "plots", classmethod(lambda cls, record, folder: [folder / "exact_match.png"]))
    arena, measured = fake_arena(tmp_path), []
    for only in ({"task": ["sort"], "seed": [1]}, {"scheme": ["alibi", "none"]}, {}):
        calls.clear()
        record = run_arena(arena, tmp_path / "out", tmp_path / "results", only=only)
        limited = [cell for cell in ALL_CELLS if all(value in only.get(field, [value])
                                                     for field, value in zip(("task", "scheme", "seed"), cell))]
        assert calls == [cell for cell in limited if cell not in measured]
        measured += calls
    assert sorted(measured) == sorted(ALL_CELLS) and len(record["sequence"]["sort"]["rope"]) == 2


def test_the_table_is_the_mean_of_the_seeds_with_their_standard_error(fake_sequence_runs: dict[str, Any]) -> None:
    buckets = fake_sequence_runs["second"]["sequence_summary"]["copy"]["alibi"]
    for bucket, base in zip(buckets, ACCURACIES["copy"]["alibi"]):
        seeds = [base, min(1.0, base + 0.01)]
        assert bucket["value"] == pytest.approx(statistics.mean(seeds))
        assert bucket["se"] == pytest.approx(statistics.stdev(seeds) / math.sqrt(2))
        assert bucket["seeds"] == 2
    table = (fake_sequence_runs["results"] / "arena.md").read_text()
    assert "| alibi | 2 | 0.995 ± 0.005 | 0.405 ± 0.005 | 0.005 ± 0.005 |" in table


def test_each_task_says_what_its_cells_took(fake_sequence_runs: dict[str, Any]) -> None:
    cells = fake_sequence_runs["results"] / "cells" / "tasks" / "sort" / "sequence"
    seconds = [json.loads(path.read_text())["seconds"] for path in cells.glob("*/seed*.json")]
    table = (fake_sequence_runs["results"] / "arena.md").read_text()
    assert len(seconds) == 6 and (f"6 cells, {statistics.median(seconds) / 60:.1f} minutes each (median; "
                                  f"{min(seconds) / 60:.1f}-{max(seconds) / 60:.1f}), training (over every stage) "
                                  "and scoring.") in table


def test_a_cell_resumed_over_stages_counts_its_training_over_every_stage(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cell whose training began in an earlier stage took this stage's seconds only; the task's minutes count the
    training's whole time, which Trainer's clock keeps over the stages (`train_runtime_s`)."""
    train = fake_training([])

    def resumed(experiment: Any, run_dir: Path, **options: Any) -> dict[str, Any]:
        metrics = train(experiment, run_dir, **options)
        if experiment.model["position_embedding_type"] == "rope":
            metrics["train_runtime_s"] = 3000.0  # fifty minutes over two stages, a second in this one
        return metrics

    monkeypatch.setattr(sequence, "train_sequence", resumed)
    monkeypatch.setattr(SequenceCell, "plots", classmethod(lambda cls, record, folder: [folder / "exact_match.png"]))
    run_arena(fake_arena(tmp_path), tmp_path / "out", tmp_path / "results", only={"task": ["copy"], "seed": [0]})
    assert "3 cells, 0.0 minutes each (median; 0.0-50.0), training" in (tmp_path / "results" / "arena.md").read_text()


def test_the_mean_reciprocal_rank_counts_only_tasks_every_scheme_learned(fake_sequence_runs: dict[str, Any]) -> None:
    rank = fake_sequence_runs["second"]["mean_reciprocal_rank"]
    # sort: alibi reaches 0.905 in distribution (below 0.95), so sort ranks nothing; copy ranks none > alibi > rope.
    assert rank["not_learned"] == {"sort": ["alibi"]}
    assert rank["tasks"] == ["copy"]
    assert rank["by_scheme"] == {"none": 1.0, "alibi": 0.5, "rope": pytest.approx(1 / 3)}
    table = (fake_sequence_runs["results"] / "arena.md").read_text()
    assert "Not ranked: sort (alibi below 0.95 in distribution)." in table


def test_report_only_redraws_the_table_from_the_cells_and_measures_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SequenceCell, "plots", classmethod(lambda cls, record, folder: [folder / "exact_match.png"]))
    arena = fake_arena(tmp_path)
    monkeypatch.setattr(sequence, "train_sequence", fake_training([]))
    run_arena(arena, tmp_path / "out", tmp_path / "results", max_time=60)
    (tmp_path / "results" / "arena.md").unlink()
    (tmp_path / "results" / "cells" / "tasks" / "sort" / "sequence" / "rope" / "seed1.json").unlink()

    def refuse(*args: Any, **options: Any) -> None:
        raise AssertionError("report_only trained a model")

    monkeypatch.setattr(sequence, "train_sequence", refuse)
    record = run_arena(arena, tmp_path / "out2", tmp_path / "results", max_time=0.001, report_only=True)
    assert record["measured_now"] == [] and not record["stopped"]
    assert set(record["sequence"]["sort"]["rope"]) == {"0"} and set(record["sequence"]["copy"]["rope"]) == {"0", "1"}
    table = (tmp_path / "results" / "arena.md").read_text()
    assert "| alibi | 2 | 0.995 ± 0.005 | 0.405 ± 0.005 | 0.005 ± 0.005 |" in table


def test_the_ranking_seed_by_seed_gives_the_rankings_spread() -> None:
    # Past the training length: seed 0 ranks a over b on both tasks; seed 1 ranks b first on copy, a on sort.
    past = {("copy", "a"): (0.5, 0.2), ("copy", "b"): (0.3, 0.4), ("sort", "a"): (0.9, 0.8), ("sort", "b"): (0.1, 0.3)}
    record = {"settings": {"schemes": ["a", "b"]}, "sequence": {
        task: {scheme: {seed: {"val_exact_match_by_length": bucket_rows((1.0,), [(1, 8)]),
                               "test_exact_match_by_length": bucket_rows((past[task, scheme][seed],), [(9, 16)]),
                               "seconds": 60.0}
                        for seed in (0, 1)} for scheme in ("a", "b")} for task in ("copy", "sort")}}
    SequenceCell.summarize(record)
    rank = record["mean_reciprocal_rank"]
    # by hand: seed 0 a 1, b 1/2; seed 1 a (1/2 + 1) / 2, b (1 + 1/2) / 2
    assert rank["by_seed"] == {0: {"a": 1.0, "b": 0.5}, 1: {"a": 0.75, "b": 0.75}}
    for scheme, values in (("a", [1.0, 0.75]), ("b", [0.5, 0.75])):
        mean, error = rank["seed_mean_and_error"][scheme]
        assert mean == pytest.approx(statistics.mean(values))
        assert error == pytest.approx(statistics.stdev(values) / math.sqrt(2))


def test_cells_scored_at_each_length_give_a_curve_and_the_2l_point(tmp_path: Path) -> None:
    # L = 2: validation scores lengths 1-2, test 3-8; two seeds of one scheme, one of another (its binomial error)
    def each(values: dict[int, float]) -> list[dict[str, Any]]:
        return [{"low": n, "high": n, "correct": round(value * 10), "count": 10, "accuracy": value,
                 "standard_error": math.sqrt(value * (1 - value) / 10)} for n, value in values.items()]

    def cell(val: tuple[float, float], test: tuple[float, ...]) -> dict[str, Any]:
        return {"val_exact_match_by_length": bucket_rows((sum(val) / 2,), [(1, 2)]),
                "test_exact_match_by_length": bucket_rows((sum(test[:2]) / 2, test[-1]), [(3, 4), (8, 8)]),
                "val_exact_match_by_each_length": each(dict(zip((1, 2), val))),
                "test_exact_match_by_each_length": each(dict(zip(range(3, 9), test))), "seconds": 60.0}

    record = {"seeds": [0, 1], "settings": {"schemes": ["a", "b"]}, "sequence": {"copy": {
        "a": {"0": cell((1.0, 1.0), (0.9, 0.5, 0.3, 0.2, 0.1, 0.0)),
              "1": cell((1.0, 0.9), (0.7, 0.3, 0.1, 0.0, 0.0, 0.0))},
        "b": {"0": cell((1.0, 1.0), (0.6, 0.2, 0.0, 0.0, 0.0, 0.0))}}}}
    SequenceCell.summarize(record)
    curve = record["sequence_by_length"]["copy"]
    assert [point["length"] for point in curve["a"]] == list(range(1, 9))
    at_4 = curve["a"][3]  # lengths 4 of seeds 0 and 1: 0.5 and 0.3
    assert at_4["value"] == pytest.approx(0.4)
    assert at_4["se"] == pytest.approx(statistics.stdev([0.5, 0.3]) / math.sqrt(2))
    assert curve["b"][3]["se"] == pytest.approx(math.sqrt(0.2 * 0.8 / 10))
    table = "\n".join(SequenceCell.table(record, notes=None))
    assert "| 1..2 | 3..4 | 8 | 2L (one length) |" in table
    assert f"| a | 2 | 0.975 ± 0.025 | 0.600 ± 0.100 | 0.000 ± 0.000 | 0.400 ± {at_4['se']:.3f} |" in table
    assert [path.name for path in SequenceCell.plots(record, tmp_path)] == ["exact_match.png",
                                                                           "exact_match_by_length.png"]


def test_a_finished_run_of_other_settings_is_trained_again(tmp_path: Path) -> None:
    arena = load_arena(LENGTH_ARENA, "study")
    experiment = experiment_for(arena, "sequence", "sinusoidal", seed=0, task="copy")
    calls: list[str] = []

    def train(experiment: Any, run_dir: Path, **options: Any) -> dict[str, Any]:
        calls.append(experiment.name)
        run_dir.mkdir(parents=True, exist_ok=True)
        return {"trained": True}

    record = json.loads(json.dumps(dataclasses.asdict(experiment), default=str))
    record["model"] = {**record["model"], "is_decoder": True}  # a default the task adds: the same run
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.json").write_text(json.dumps({"experiment": record}))
    assert trained(run_dir, train, experiment) == {"experiment": record} and calls == []
    del record["model"]["scale_embeddings"]  # the run before sinusoidal scaled its embeddings: another model
    (run_dir / "metrics.json").write_text(json.dumps({"experiment": record}))
    assert trained(run_dir, train, experiment) == {"trained": True}
    assert calls == [experiment.name]


def test_a_stage_shorter_than_a_sequence_cell_trains_the_next_one_within_its_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sequence cell took 10 minutes; a 5-minute stage is not refused (its training stops at the stage's end and
    a later stage resumes it) and gives the next cell's training the time the stage has left."""
    calls: list[tuple[str, str, int]] = []
    monkeypatch.setattr(sequence, "train_sequence", fake_training(calls))
    monkeypatch.setattr(SequenceCell, "plots", classmethod(lambda cls, record, folder: [folder / "exact_match.png"]))
    arena = fake_arena(tmp_path)
    run_arena(arena, tmp_path / "out", tmp_path / "results")
    cells = tmp_path / "results" / "cells" / "tasks" / "copy" / "sequence"
    measured = json.loads((cells / "none" / "seed0.json").read_text())
    (cells / "none" / "seed0.json").write_text(json.dumps({**measured, "seconds": 600.0}))
    (cells / "rope" / "seed0.json").unlink()
    shutil.rmtree(tmp_path / "out" / "runs" / "sequence" / "copy" / "rope-seed0")
    given: list[float] = []
    train = fake_training(calls)
    monkeypatch.setattr(sequence, "train_sequence",
                        lambda experiment, run_dir, **options: given.append(options["max_time"]) or train(
                            experiment, run_dir, **options))
    record = run_arena(arena, tmp_path / "out", tmp_path / "results", max_time=5)
    assert record["measured_now"] == ["tasks/copy/sequence/rope/seed0"] and record["stopped"] is None
    assert len(given) == 1 and 4.9 < given[0] <= 5.0


def test_two_stages_side_by_side_share_the_cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str, int]] = []
    monkeypatch.setattr(sequence, "train_sequence", fake_training(calls, seconds=0.05))
    monkeypatch.setattr(SequenceCell, "plots", classmethod(lambda cls, record, folder: [folder / "exact_match.png"]))
    arena = fake_arena(tmp_path)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # one process, two stages: their claims still exclude
        records = list(pool.map(lambda _: run_arena(arena, tmp_path / "out", tmp_path / "results"), range(2)))
    assert sorted(calls) == sorted(ALL_CELLS)  # each cell measured once, by one stage or the other
    assert all(record["skipped_as_claimed"] or record["measured_now"] for record in records)
    assert sorted(path for record in records for path in record["measured_now"]) == sorted(
        f"tasks/{task}/sequence/{scheme}/seed{seed}" for task, scheme, seed in ALL_CELLS)
    assert not list((tmp_path / "out" / "claims").rglob("*.claim"))  # every claim given back
    # the stage that wrote the table last read every cell, the other stage's included
    table = (tmp_path / "results" / "arena.md").read_text()
    assert "| alibi | 2 | 0.995 ± 0.005 | 0.405 ± 0.005 | 0.005 ± 0.005 |" in table


def test_a_cell_another_live_process_holds_is_left_and_a_dead_ones_claim_taken_over(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str, int]] = []
    monkeypatch.setattr(sequence, "train_sequence", fake_training(calls))
    monkeypatch.setattr(SequenceCell, "plots", classmethod(lambda cls, record, folder: [folder / "exact_match.png"]))
    arena = fake_arena(tmp_path)
    claims = tmp_path / "out" / "claims"
    claims.mkdir(parents=True)
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    host = socket.gethostname()
    (claims / "cells--tasks--copy--sequence--rope--seed0.claim").write_text(f"{host} {os.getppid()}")  # alive
    (claims / "cells--tasks--sort--sequence--none--seed1.claim").write_text(f"{host} {ended.pid}")  # ended
    record = run_arena(arena, tmp_path / "out", tmp_path / "results")
    assert record["skipped_as_claimed"] == ["tasks/copy/sequence/rope/seed0"]
    assert sorted(calls) == sorted(cell for cell in ALL_CELLS if cell != ("copy", "rope", 0))
    assert (claims / "cells--tasks--copy--sequence--rope--seed0.claim").is_file()  # not ours to give back
    assert not (claims / "cells--tasks--sort--sequence--none--seed1.claim").exists()


def test_loss_curves_of_finished_runs_come_from_their_last_checkpoint(tmp_path: Path) -> None:
    script = runpy.run_path(str(REPO / "scripts" / "sequence_loss_curves.py"))
    for run, checkpoints in (("none-seed0", (8000, 10000)), ("rope-seed0", (2000,))):
        for step in checkpoints:  # an earlier checkpoint's history is a prefix of the last one's
            folder = tmp_path / run / f"checkpoint-{step}"
            folder.mkdir(parents=True)
            history = [{"step": 1, "loss": 2.0}, *({"step": done, "eval_loss": 1.0 / done}
                                                   for done in range(2000, step + 1, 2000))]
            (folder / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    (tmp_path / "none-seed0" / "metrics.json").write_text("{}")  # rope-seed0 is not finished: left out
    curves = script["loss_curves"](tmp_path)
    assert list(curves) == ["none-seed0"]
    assert curves["none-seed0"] == [{"step": step, "loss": 1.0 / step} for step in range(2000, 10001, 2000)]
