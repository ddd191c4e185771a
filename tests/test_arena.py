"""`hf-attn arena`: one command, every cell, resumable; RoPE factors, masked-LM loss by length, bad files."""

from __future__ import annotations

import copy
import dataclasses
import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
import torch
import yaml
from helpers import REPO, tiny_config_kwargs

from hf_attn import HfAttnConfig, HfAttnModel
from hf_attn.cli import main
from hf_attn.commands.arena import ARENA_LIMITS
from hf_attn.configuration_hf_attn import is_count
from hf_attn.experiments import arena as arena_module
from hf_attn.experiments import classification, pretraining
from hf_attn.experiments.arena import (
    ArenaConfigError,
    load_arena,
    masked_lm_loss,
    mlm_token_budget,
    run_arena,
    trained,
)
from hf_attn.experiments.arena.settings import Setting, counts
from hf_attn.experiments.config import FINE_TUNING_SETTINGS, Experiment
from hf_attn.experiments.pretraining import EVAL_SEED, IGNORE_INDEX, MaskedLMCollator
from hf_attn.experiments.records import ExperimentRecord
from hf_attn.modeling_hf_attn import HfAttnForMaskedLM

ARENA_FILE = REPO / "configs" / "arena" / "arena.yaml"


def write_arena(folder: Path, **changes: Any) -> Path:
    """The repository's arena file with `changes`, its experiment paths made absolute, written to `folder`."""
    raw = yaml.safe_load(ARENA_FILE.read_text())
    for key in ("classifier", "pretraining"):
        raw[key] = str((ARENA_FILE.parent / raw[key]).resolve())
    raw.update(changes)
    path = folder / "arena.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.fixture(scope="module")
def arena_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The tiny budget with two schemes (one that cannot read past 128, one with scalings) run twice in one
    folder, counting the trainings each run starts."""
    folder = tmp_path_factory.mktemp("arena")
    path = write_arena(folder, schemes=["learned", "rope"], read_lengths=[128, "whole"],
                       mlm_lengths=[128, 256], speed_lengths=[256])
    calls = {"train": 0, "pretrain": 0}

    def counted(name: str, function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return function(*args, **kwargs)
        return wrapper

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(classification, "train", counted("train", classification.train))
        patch.setattr(pretraining, "pretrain", counted("pretrain", pretraining.pretrain))
        arena = load_arena(path, "tiny", ["limit_train=64"])
        first = run_arena(arena, folder / "out", folder / "results")
        first_calls = dict(calls)
        second = run_arena(arena, folder / "out", folder / "results")
    return {"first": first, "second": second, "first_calls": first_calls, "calls": calls, "folder": folder}


def test_arena_measures_every_cell_and_writes_the_table(arena_runs: dict[str, Any]) -> None:
    record, results = arena_runs["first"], arena_runs["folder"] / "results"
    readings = {"learned": ["direct", "windows"], "rope": ["direct", "windows", "linear", "dynamic", "yarn"]}
    expected = {f"{scheme}/{reading}/{read}" for scheme, names in readings.items() for reading in names
                for read in (128, "whole") if not (reading == "windows" and read == 128)}
    assert set(record["reading"]) == expected
    for key, cell in record["reading"].items():
        if key.startswith("learned/direct/") and not key.endswith("/128"):
            assert cell["value"] is None and "128" in cell["reason"]
        else:
            assert 0.0 <= cell["value"] <= 1.0, key
    assert record["mlm"]["learned/256"]["value"] is None and "learned" in record["mlm"]["learned/256"]["reason"]
    assert all(record["mlm"][key]["value"] > 0 for key in ("learned/128", "rope/128", "rope/256"))
    speed = record["speed"]["256/1"]["candidates"]
    assert speed["learned/full"]["value"] is None and speed["learned/sliding"]["value"] is None
    assert all(speed[name]["value"] > 0 and speed[name]["peak_mib"] > 0
               for name in ("learned/windows", "rope/full", "rope/sliding", "rope/windows"))
    table = (results / "arena.md").read_text()
    assert "| rope | yarn |" in table and "| learned | windows |" in table and "n/a [1]" in table
    assert "- 128: " in table and "none yet" not in table  # the ranking at the training length
    assert json.loads((results / "arena.json").read_text())["reading"] == record["reading"]
    assert all((results / name).stat().st_size > 0 for name in ("accuracy.png", "mlm_loss.png", "speed.png"))
    assert arena_runs["first_calls"] == {"train": 2, "pretrain": 2}


def test_a_second_run_measures_nothing(arena_runs: dict[str, Any]) -> None:
    assert arena_runs["calls"] == arena_runs["first_calls"]  # no training started by the second run
    assert arena_runs["second"]["measured_now"] == []
    for section in ("reading", "mlm", "speed"):
        assert arena_runs["second"][section] == arena_runs["first"][section]


def test_rope_scalings_use_the_length_ratio(arena_runs: dict[str, Any]) -> None:
    """linear and yarn stretch by read length / 128; dynamic keeps factor 1 (its frequencies follow each input)."""
    record = arena_runs["first"]
    for read in (128, "whole"):
        tokens = record["reading"][f"rope/direct/{read}"]["tokens"]["test"]
        for reading in ("linear", "yarn"):
            parameters = record["reading"][f"rope/{reading}/{read}"]["by_seed"]["42"]["test"]["rope_parameters"]
            assert parameters["rope_type"] == reading and parameters["factor"] == pytest.approx(tokens / 128)
        assert record["reading"][f"rope/dynamic/{read}"]["by_seed"]["42"]["test"]["rope_parameters"]["factor"] == 1.0
    # The scaling reaches the model (its loss differs from plain RoPE's), and the saved folder stays as it was.
    cells = {reading: record["reading"][f"rope/{reading}/whole"]["by_seed"]["42"]["test"] for reading in ("direct",
                                                                                                     "linear")}
    assert cells["linear"]["loss"] != cells["direct"]["loss"]
    saved = HfAttnConfig.from_pretrained(arena_runs["folder"] / "out" / "runs" / "classifier" / "rope-seed42")
    assert saved.rope_parameters["rope_type"] == "default"


def test_an_interrupted_training_is_resumed(tmp_path: Path) -> None:
    seen = []

    def fake_train(experiment: Any, run_dir: Path, **options: Any) -> dict[str, Any]:
        seen.append(options)
        return {"test_accuracy": 0.5}

    (tmp_path / "checkpoint-3").mkdir()
    trained(tmp_path, fake_train, SimpleNamespace(name="toy"))
    assert seen == [{"resume": True, "overwrite": False, "max_time": None}]
    (tmp_path / "metrics.json").write_text(json.dumps({"test_accuracy": 0.7}))
    assert trained(tmp_path, fake_train, SimpleNamespace(name="toy")) == {"test_accuracy": 0.7} and len(seen) == 1


def test_an_interrupted_training_of_other_settings_is_trained_again(tmp_path: Path) -> None:
    """As a finished run of other settings is: resumed, the new settings would be recorded but not trained with."""
    seen = []

    def fake_train(experiment: Any, run_dir: Path, **options: Any) -> dict[str, Any]:
        seen.append(options)
        return {"test_accuracy": 0.5}

    interrupted = Experiment(name="toy", model={"hidden_size": 32})
    (tmp_path / "checkpoint-3").mkdir()
    ExperimentRecord(interrupted).on_save(SimpleNamespace(output_dir=str(tmp_path)),
                                          SimpleNamespace(global_step=3, is_world_process_zero=True), None)
    trained(tmp_path, fake_train, interrupted)
    trained(tmp_path, fake_train, dataclasses.replace(interrupted, model={"hidden_size": 48}))
    assert seen == [{"resume": True, "overwrite": False, "max_time": None},
                    {"resume": False, "overwrite": True, "max_time": None}]
    assert not (tmp_path / "checkpoint-3").exists()


class ToyTokenizer:
    """What `MaskedLMCollator` reads of a tokenizer: 64 ids, [PAD] = 0 (no mask token)."""

    pad_token_id, mask_token_id, all_special_ids = 0, None, [0]

    def __len__(self) -> int:
        return 64


def test_masked_lm_loss_equals_one_window_at_a_time() -> None:
    """Batched sparse-prediction loss == per-window cross-entropy on full logits, summed over masked tokens, with
    the stream masked once before it is cut (every length predicts the same tokens)."""
    torch.manual_seed(0)
    model = HfAttnForMaskedLM(HfAttnConfig(**tiny_config_kwargs(position_embedding_type="alibi",
                                                                 sparse_prediction=True))).eval()
    collator = MaskedLMCollator(ToyTokenizer(), 0.3)
    stream = torch.randint(1, 64, (100,)).tolist()
    n_tokens = mlm_token_budget(len(stream), [16, 32], 1000)
    assert n_tokens == 96
    ids = torch.tensor([stream[:n_tokens]])
    corrupted, labels = collator.mask(ids, torch.ones_like(ids), generator=torch.Generator().manual_seed(EVAL_SEED))
    for length in (16, 32):
        total, count = 0.0, 0
        for start in range(0, n_tokens, length):
            window_labels = labels[0, start : start + length]
            with torch.no_grad():
                logits = model(input_ids=corrupted[:, start : start + length]).logits[0]
            picked = window_labels != IGNORE_INDEX
            total += float(torch.nn.functional.cross_entropy(logits[picked], window_labels[picked], reduction="sum"))
            count += int(picked.sum())
        measured = masked_lm_loss(model, collator, stream, length, n_tokens, batch_tokens=40)
        assert measured["masked_tokens"] == count and measured["windows"] == n_tokens // length
        assert measured["value"] == pytest.approx(total / count, rel=1e-5)


def test_mlm_token_budget_refuses_a_stream_shorter_than_the_longest_window() -> None:
    with pytest.raises(ValueError, match="fewer than one window"):
        mlm_token_budget(100, [64, 128], 1000)


@pytest.mark.parametrize("budget", ["tiny", "small", "study", "full"])
def test_the_shipped_arena_file_loads_every_budget(budget: str) -> None:
    arena = load_arena(ARENA_FILE, budget)
    assert arena.schemes == ["none", "sinusoidal", "learned", "rope", "alibi"]
    assert arena_module.experiment_for(arena, "classifier", "alibi").model["position_embedding_type"] == "alibi"


@pytest.mark.parametrize(("changes", "message"), [
    ({"schemes": ["rope", "xpos"]}, "`schemes` must be"),
    ({"read_lengths": [128, 0]}, "`read_lengths` must be"),
    ({"window_stride": 512}, "`window_stride` 512 is longer than the training length"),
    ({"sliding_windw": 64}, r"unknown key `sliding_windw` for an arena. Did you mean sliding_window\?"),
    ({"budgets": {"tiny": {"eval_limit": 5, "mlm_tokns": 10}}},
     r"\[budgets.tiny\]: unknown key `mlm_tokns` for a budget. Did you mean mlm_tokens\?"),
    ({"budgets": {"tiny": {"classifier": {"model": {"hiden_size": 8}}}}}, "hiden_size"),
])
def test_bad_arena_files_name_the_key(tmp_path: Path, changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ArenaConfigError, match=message):
        load_arena(write_arena(tmp_path, **changes), "tiny")


def test_the_command_names_a_missing_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["arena", "--config", str(write_arena(tmp_path)), "--budget", "huge", "--output-dir", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "no budget 'huge'; choose one of ['full', 'small', 'study', 'tiny']" in capsys.readouterr().err


def test_cells_of_another_budget_are_refused_naming_the_settings_that_differ(tmp_path: Path) -> None:
    tiny, small = (load_arena(write_arena(tmp_path), budget) for budget in ("tiny", "small"))
    cell = arena_module.kinds.MaskedLMCell(scheme="rope", length=128)
    arena_module.Cells(tmp_path, tiny, None, arena_module.StageClock(None)).measure(cell, lambda: {"value": 1.0})
    with pytest.raises(ArenaConfigError, match=r"mlm/rope/128.json was measured with other settings "
                                               r"\(budget.mlm_tokens, budget.pretraining.dataset, "
                                               r"budget.pretraining.early_stopping_patience, "
                                               r"budget.pretraining.evals_per_epoch, \d+ more differ\)"):
        arena_module.Cells(tmp_path, small, None, arena_module.StageClock(None)).pending([cell])


def test_a_cell_follows_its_experiment_files_keys_not_their_path(tmp_path: Path) -> None:
    """An experiment file edited after a cell was measured makes the cell stale (named down to the key, a key set to
    null too); the same keys in a file moved elsewhere do not, nor an edit made while the cell was measured (the
    cell is of the keys it started with)."""
    pretraining_file = (ARENA_FILE.parent / yaml.safe_load(ARENA_FILE.read_text())["pretraining"]).resolve()
    cell = arena_module.kinds.MaskedLMCell(scheme="rope", length=128)

    def arena_with(folder: Path, keys: dict[str, Any]) -> Any:
        folder.mkdir()
        (folder / "pretraining.yaml").write_text(yaml.safe_dump({"base": str(pretraining_file), **keys}))
        return load_arena(write_arena(folder, pretraining=str(folder / "pretraining.yaml")), "tiny")

    def cells(arena: Any) -> Any:
        return arena_module.Cells(tmp_path / "results", arena, None, arena_module.StageClock(None))

    first = arena_with(tmp_path / "first", {})

    def measured_while_edited() -> dict[str, Any]:
        (tmp_path / "first" / "pretraining.yaml").write_text(yaml.safe_dump({"base": str(pretraining_file),
                                                                             "model": {"hidden_size": 8}}))
        return {"value": 1.0}

    cells(first).measure(cell, measured_while_edited)
    assert cells(arena_with(tmp_path / "moved", {})).pending([cell]) == []
    with pytest.raises(ArenaConfigError, match=r"other settings \(pretraining.model.hidden_size differ\)"):
        cells(first).pending([cell])
    with pytest.raises(ArenaConfigError, match=r"other settings \(pretraining.early_stopping_patience differ\)"):
        cells(arena_with(tmp_path / "nulled", {"early_stopping_patience": None})).pending([cell])


def test_a_reading_reports_both_splits_with_a_binomial_standard_error(arena_runs: dict[str, Any]) -> None:
    entry = arena_runs["first"]["reading"]["rope/direct/128"]
    for split in ("val", "test"):
        summary = entry[split]
        assert summary["n_reviews"] == 50 and summary["seeds"] == 1 and summary["spread"] == 0.0
        assert summary["se"] == pytest.approx((summary["value"] * (1 - summary["value"]) / 50) ** 0.5)
    assert entry["value"] == entry["test"]["value"]


def test_a_reading_not_yet_read_on_test_is_blank_never_its_validation_number(arena_runs: dict[str, Any]) -> None:
    record = copy.deepcopy(arena_runs["first"])
    entry = record["reading"]["rope/direct/whole"]
    for cells in entry["by_seed"].values():
        del cells["test"]
    del entry["test"]
    record["seeds"] = [42, 43]  # a second seed, not read yet
    arena_module.kinds.ReadingCell.summarize(record)
    assert entry["value"] is None and entry["val"]["value"] is not None
    table = arena_module.markdown_report(record)
    row = next(line for line in table.splitlines() if line.startswith("| rope | direct |"))
    at_128, at_whole = (cell.strip() for cell in row.strip("|").split("|")[2:4])
    assert at_whole == "" and at_128.endswith(" (1 of 2 seeds)")


def test_the_ranking_orders_only_gaps_beyond_noise() -> None:
    def entry(value: float) -> dict[str, Any]:
        return {"value": value, "se": arena_module.standard_error(value, 5000)}

    record = {"reading": {"rope/direct/128": entry(0.90), "alibi/direct/128": entry(0.895),
                          "none/direct/128": entry(0.80), "learned/direct/128": {"value": None, "reason": "x"}}}
    # 0.90 vs 0.895: gap 0.005 < 2 * hypot(0.0042, 0.0043); 0.895 vs 0.80: far beyond it.
    assert arena_module.ranking(record, "direct", 128) == "rope ~ alibi > none"
    assert arena_module.ranking({"reading": {"rope/direct/128": entry(0.90)}}, "direct", 128) == ""  # one is no order


def test_the_accuracy_plot_draws_each_reading_with_its_standard_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: dict[str, Any] = {}
    monkeypatch.setattr("hf_attn.analysis.plots.plot_line_panels",
                        lambda panels, path, *args, **kwargs: drawn.update({Path(path).name: panels[0][2]}))

    def reading(value: float | None, tokens: int) -> dict[str, Any]:
        se = None if value is None else (value * (1 - value) / 5000) ** 0.5
        return {"value": value, "se": se, "tokens": {"validation": tokens, "test": tokens}}

    record = {"reading": {"rope/direct/128": reading(0.82, 128), "rope/direct/256": reading(0.85, 256),
                          "rope/windows/256": reading(None, 256)},
              "mlm": {"rope/128": {"value": 4.1}, "rope/256": {"value": 4.6}}, "speed": {},
              "settings": {"classifier": "positions/sinusoidal.yaml"}}
    arena_module.report.arena_plots(record, tmp_path)
    xs, ys, errors = drawn["accuracy.png"]["rope/direct"]
    assert (xs, ys) == ([128, 256], [0.82, 0.85]) and "rope/windows" not in drawn["accuracy.png"]  # blank: no point
    assert errors == pytest.approx([(0.82 * 0.18 / 5000) ** 0.5, (0.85 * 0.15 / 5000) ** 0.5])
    assert drawn["mlm_loss.png"]["rope"] == ([128, 256], [4.1, 4.6])  # a loss has no bars


def test_a_fine_tune_budget_starts_each_seed_from_the_schemes_encoder(tmp_path: Path) -> None:
    encoder = tmp_path / "encoder"
    HfAttnForMaskedLM(HfAttnConfig(**tiny_config_kwargs(position_embedding_type="alibi", max_position_embeddings=128,
                                                        vocab_size=301, pad_token_id=300))).save_pretrained(encoder)
    arena = load_arena(write_arena(tmp_path), "tiny")
    experiment = arena_module.experiment_for(arena, "classifier", "alibi", seed=7, init_from=encoder)
    assert experiment.init_from == str(encoder) and experiment.seed == 7
    assert experiment.name == "arena-classifier-alibi-seed7"
    assert set(experiment.model) <= FINE_TUNING_SETTINGS  # the encoder's architecture stands


def test_an_arena_runs_in_stages_that_continue_on_another_machine(tmp_path: Path) -> None:
    """Stage 1 stops at its first pretraining step and commits the encoder's checkpoint; stage 2, in a new output
    folder (another machine) with the same results and checkpoints, continues it and measures the rest."""
    path = write_arena(tmp_path, schemes=["rope"], read_lengths=[128], mlm_lengths=[128], speed_lengths=[128],
                       rope_scalings=[])
    arena = load_arena(path, "tiny", ["limit_train=64"])
    results, committed = tmp_path / "results", tmp_path / "checkpoints"
    assert run_arena(arena, tmp_path / "machine-0", results, max_time=1e-6, checkpoints=committed)["stopped"]
    assert not committed.exists()  # out of time before the first training: nothing trained, nothing committed
    real_pretrain = pretraining.pretrain
    with pytest.MonkeyPatch.context() as patch:  # the stage's time runs out at the pretraining's first step
        patch.setattr(pretraining, "pretrain", lambda *args, **options: real_pretrain(*args, **{
            **options, "max_time": 1e-6}))
        first = run_arena(arena, tmp_path / "machine-1", results, checkpoints=committed)
    assert first["stopped"] and "arena-pretraining-rope stopped at step 1 of 5" in first["stopped"]
    assert json.loads((committed / "rope" / "stage.json").read_text())["step"] == 1
    table = (results / "arena.md").read_text()
    assert "Stage stopped by --max-time" in table and "- none yet: two schemes read on test are needed" in table
    second = run_arena(arena, tmp_path / "machine-2", results, checkpoints=committed)
    assert second["stopped"] is None and second["pretraining"]["rope"]["optimizer_steps"] == 5
    assert json.loads((tmp_path / "machine-2" / "runs" / "pretraining" / "rope" / "continued_from.json").read_text())[
        "from_step"] == 1
    assert (committed / "rope" / "metrics.json").is_file() and not (committed / "rope" / "stage.json").exists()
    assert 0.0 <= second["reading"]["rope/direct/128"]["value"] <= 1.0
    # A third machine finds every cell committed: the classifier (never committed itself) is not trained again.
    calls = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(classification, "train", lambda *args, **options: calls.append("train"))
        patch.setattr(pretraining, "pretrain", lambda *args, **options: calls.append("pretrain"))
        third = run_arena(arena, tmp_path / "machine-3", results, checkpoints=committed)
    assert calls == [] and third["measured_now"] == [] and third["stopped"] is None
    assert third["reading"] == second["reading"] and third["classifiers"] == second["classifiers"]
    assert third["classifiers"]["rope/42"]["test_accuracy"] == second["classifiers"]["rope/42"]["test_accuracy"]
    # A finished arena's encoders may leave checkpoints/ (at most three again): nothing is pretrained to replace them.
    shutil.rmtree(committed)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(classification, "train", lambda *args, **options: calls.append("train"))
        patch.setattr(pretraining, "pretrain", lambda *args, **options: calls.append("pretrain"))
        fourth = run_arena(arena, tmp_path / "machine-4", results, checkpoints=committed)
    assert calls == [] and fourth["measured_now"] == [] and not committed.exists()
    assert fourth["pretraining"] == second["pretraining"] and fourth["mlm"] == second["mlm"]


def write_cell(results: Path, arena: Any, cell: Any, seconds: float, **values: Any) -> None:
    """A cell as an earlier stage would have left it in `results/cells`: `values`, its time and its stamp."""
    path = results / "cells" / f"{cell.path}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**values, "seconds": seconds, "stamp": cell.stamp(arena)}))


def classifier_stage(tmp_path: Path, max_time: float) -> Any:
    """A stage of a tiny arena reading `none` and RoPE at 128 tokens only, whose cells hold everything but RoPE's
    training and test reading: `none`'s classifier trained in 20 minutes, and readings of 5 minutes each."""
    arena = load_arena(write_arena(tmp_path, schemes=["none", "rope"], read_lengths=[128], rope_scalings=[]), "tiny")
    kinds, results = arena_module.kinds, tmp_path / "results"
    write_cell(results, arena, kinds.ClassifierCell(scheme="none", seed=42), 1200.0)
    for split in ("validation", "test"):
        write_cell(results, arena, kinds.WholeLengthCell(split=split), 1.0, value=500)
        for scheme in ("none", "rope")[: 1 if split == "test" else 2]:
            write_cell(results, arena, kinds.ReadingCell(scheme=scheme, seed=42, split=split, reading="direct",
                                                         read=128), 300.0, value=0.5, n_reviews=50)
    for cell in arena_module.plan(arena):  # measured too
        if cell.kind in ("pretraining", "mlm"):
            write_cell(results, arena, cell, 1.0, value=1.0)
        elif cell.kind == "speed":
            write_cell(results, arena, cell, 1.0, length=cell.length, batch=cell.batch, device="cpu", candidates={})
    return arena_module.ArenaRun(arena, tmp_path / "out", results, max_time)


def fake_train(calls: list[str]) -> Any:
    def train(experiment: Any, run_dir: Path, **options: Any) -> dict[str, Any]:
        calls.append(experiment.name)
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "metrics.json").write_text(json.dumps({"test_accuracy": 0.75}))
        return {"test_accuracy": 0.75}
    return train


def test_a_classifier_starts_only_when_the_stage_has_time_for_its_training_and_readings(tmp_path: Path) -> None:
    """Its training is as long as the slowest measured (20 minutes), its reading 5: with 10 minutes left of a
    30-minute stage it waits for the next stage; a fresh 25-minute stage starts it (a classifier with its readings
    longer than a stage must start: it needs at most 90% of one)."""
    stage = classifier_stage(tmp_path, max_time=30)
    assert [cell.path for cell in stage.pending] == ["classifier/rope/seed42/train",
                                                     "read/rope/seed42/test/direct/128"]
    stage.clock.deadline -= 20 * 60  # 10 of the stage's 30 minutes left
    calls: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(classification, "train", fake_train(calls))
        patch.setattr(arena_module.measure, "read_accuracy", lambda *args: {"value": 0.625, "n_reviews": 50})
        patch.setattr(arena_module.report, "arena_plots", lambda *args: [])
        assert stage.measure_all()["stopped"].endswith("classifier rope seed 42 and its 1 readings left needs 25.0")
        assert calls == []
        record = classifier_stage(tmp_path, max_time=25).measure_all()
    assert calls == ["arena-classifier-rope-seed42"] and record["classifiers"]["rope/42"] == {"test_accuracy": 0.75}
    assert record["reading"]["rope/direct/128"]["by_seed"]["42"]["test"]["value"] == 0.625


def test_cells_of_another_measuring_code_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arena = load_arena(write_arena(tmp_path), "tiny")
    cell = arena_module.kinds.MaskedLMCell(scheme="rope", length=128)
    arena_module.Cells(tmp_path, arena, None, arena_module.StageClock(None)).measure(cell, lambda: {"value": 1.0})
    monkeypatch.setattr(arena_module.kinds.MaskedLMCell, "version", 3)
    with pytest.raises(ArenaConfigError, match="version 2 -> 3 differ.*do not mix"):
        arena_module.Cells(tmp_path, arena, None, arena_module.StageClock(None)).pending([cell])


def test_a_stage_shorter_than_a_cell_measured_before_is_refused_before_it_starts(tmp_path: Path) -> None:
    arena = load_arena(write_arena(tmp_path), "tiny")
    write_cell(tmp_path / "results", arena, arena_module.kinds.ReadingCell(
        scheme="rope", seed=42, split="test", reading="direct", read="whole"), 600.0, value=0.5, n_reviews=50)
    with pytest.raises(ArenaConfigError, match="a read:whole cell of this arena took 10.0 minutes, more than "
                                               "--max-time 5: it cannot finish in one stage; raise --max-time "
                                               "above 10.0"):
        run_arena(arena, tmp_path / "out", tmp_path / "results", max_time=5)


@pytest.mark.parametrize("trained_here", [False, True])
def test_a_long_classifier_training_refuses_a_short_stage_only_while_a_classifier_is_left_to_train(
    trained_here: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    arena = load_arena(write_arena(tmp_path, schemes=["rope"]), "tiny")
    for seed in arena.budget.seeds:
        write_cell(tmp_path / "results", arena, arena_module.kinds.ClassifierCell(scheme="rope", seed=seed), 600.0)
        if trained_here:  # the run folder a finished training leaves: only readings are left
            run_dir = tmp_path / "out" / "runs" / "classifier" / f"rope-seed{seed}"
            run_dir.mkdir(parents=True)
            (run_dir / "metrics.json").write_text("{}")

    def stopped(*args: Any, **kwargs: Any) -> None:
        raise arena_module.StageStopped("stopped where pretraining would start")

    monkeypatch.setattr(arena_module.run, "pretrained_encoder", stopped)
    if trained_here:
        record = run_arena(arena, tmp_path / "out", tmp_path / "results", max_time=5)
        assert record["stopped"] == "stopped where pretraining would start"
    else:
        with pytest.raises(ArenaConfigError, match="a classifier:train cell of this arena took 10.0 minutes"):
            run_arena(arena, tmp_path / "out", tmp_path / "results", max_time=5)


@pytest.fixture
def fake_measures(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every training and measuring function of the arena replaced by one that records (function, what) and returns
    at once: a training writes its metrics.json, a cell returns a number."""
    calls: list[tuple[str, str]] = []

    def training(name: str) -> Any:
        def train(experiment: Any, run_dir: Path, **options: Any) -> dict[str, Any]:
            calls.append((name, experiment.name))
            run_dir.mkdir(parents=True, exist_ok=True)
            (run_dir / "metrics.json").write_text(json.dumps({"test_accuracy": 0.75, "optimizer_steps": 5}))
            return {"test_accuracy": 0.75, "optimizer_steps": 5}
        return train

    def read_accuracy(model_dir: Path, reading: str, length: int, *args: Any) -> dict[str, Any]:
        calls.append(("read", f"{model_dir.name}/{reading}/{length}"))
        return {"value": 0.5, "n_reviews": 50}

    def mlm_cell(model_dir: Path, length: int, *args: Any) -> dict[str, Any]:
        calls.append(("mlm", f"{model_dir.name}/{length}"))
        return {"value": 4.0}

    def speed_cell(models: dict[str, Path], arena: Any, length: int, batch: int) -> dict[str, Any]:
        calls.append(("speed", f"{'+'.join(models)}/{length}"))
        return {"length": length, "batch": batch, "device": "cpu", "candidates": {}}

    def longest_review(model_dir: Path, dataset: str, limit: int | None, split: str) -> int:
        calls.append(("whole-length", split))
        return 700

    monkeypatch.setattr(classification, "train", training("train"))
    monkeypatch.setattr(pretraining, "pretrain", training("pretrain"))
    for function in (read_accuracy, mlm_cell, speed_cell, longest_review):
        monkeypatch.setattr(arena_module.measure, function.__name__, function)
    monkeypatch.setattr(arena_module.report, "arena_plots", lambda *args: [])
    return calls


GROWING_ARENA = {"schemes": ["none", "rope"], "rope_scalings": ["linear"], "read_lengths": [128, "whole"],
                 "mlm_lengths": [128, 256], "speed_lengths": [256, 512]}


def grown_arena(tmp_path: Path, calls: list[tuple[str, str]], **growth: Any) -> tuple[dict[str, Any], list[Any]]:
    """A finished tiny arena (`GROWING_ARENA`), then the same arena with `growth` in the same folders: the second
    run's record and the measuring calls it made."""
    first = run_arena(load_arena(write_arena(tmp_path, **GROWING_ARENA), "tiny"), tmp_path / "out",
                      tmp_path / "results")
    assert first["stopped"] is None and len(first["measured_now"]) == len(set(first["measured_now"])) > 0
    calls.clear()
    second = run_arena(load_arena(write_arena(tmp_path, **{**GROWING_ARENA, **growth}), "tiny"), tmp_path / "out",
                       tmp_path / "results")
    assert second["stopped"] is None
    return second, list(calls)


def test_an_arena_that_gains_a_scheme_measures_only_that_schemes_cells(
        tmp_path: Path, fake_measures: list[tuple[str, str]]) -> None:
    """The new scheme's encoder, classifier and every cell of theirs; speed again, as its schemes are timed
    together; nothing of the schemes the arena had."""
    record, calls = grown_arena(tmp_path, fake_measures, schemes=["none", "rope", "alibi"])
    reads = [(what, thing) for what, thing in calls if what == "read"]
    expected_reads = [f"alibi-seed42/{reading}/{length}" for length in (128, 700)
                      for reading in ("direct", "windows") if (reading, length) != ("windows", 128)] * 2
    assert sorted(reads) == sorted(("read", name) for name in expected_reads)  # validation and test
    assert [call for call in calls if call[0] != "read"] == [
        ("pretrain", "arena-pretraining-alibi"), ("mlm", "alibi/128"), ("mlm", "alibi/256"),
        ("train", "arena-classifier-alibi-seed42"), ("speed", "none+rope+alibi/256"), ("speed", "none+rope+alibi/512")]
    assert all("alibi" in path or path.startswith("speed/") for path in record["measured_now"])
    assert set(record["reading"]) >= {"none/direct/whole", "rope/linear/whole", "alibi/windows/whole"}


def test_a_stage_limited_to_a_scheme_measures_its_cells_and_the_next_stage_the_rest(
        tmp_path: Path, fake_measures: list[tuple[str, str]], capsys: pytest.CaptureFixture[str]) -> None:
    """`--schemes rope`: rope's encoder, classifier and cells, not none's, nor speed (of every scheme together), nor
    the readings of whole reviews (their length is measured with the first scheme's classifier); the same command
    without it measures exactly what is left."""
    config = str(write_arena(tmp_path, **GROWING_ARENA))
    command = ["arena", "--config", config, "--budget", "tiny", "--output-dir", str(tmp_path / "out")]
    main([*command, "--schemes", "rope"])
    limited = list(fake_measures)
    assert {name for call, name in limited if call in ("pretrain", "train")} == {
        "arena-pretraining-rope", "arena-classifier-rope-seed42"}
    assert all("none" not in what and call not in ("speed", "whole-length") and not what.endswith("/700")
               for call, what in limited)
    fake_measures.clear()
    main(command)
    assert {name for call, name in fake_measures if call in ("pretrain", "train")} == {
        "arena-pretraining-none", "arena-classifier-none-seed42"}
    assert [call for call in fake_measures if call[0] == "speed"] and all(
        "rope" not in what or call == "speed" or what.endswith("/700") for call, what in fake_measures)
    assert {what for call, what in fake_measures if call == "read" and "rope" in what} == {
        "rope-seed42/direct/700", "rope-seed42/windows/700", "rope-seed42/linear/700"}
    main(command)
    assert capsys.readouterr().out.splitlines()[-1].startswith("measured 0 new cell(s)")


def test_the_command_line_limits_a_stage_by_every_field_the_arena_does() -> None:
    assert tuple(ARENA_LIMITS) == arena_module.run.CELL_FIELDS


@pytest.mark.parametrize(("option", "message"), [
    (["--schemes", "rope,xpos"], "has no cell of scheme xpos; choose among none, sinusoidal, learned, rope, alibi"),
    (["--seeds", "7"], "has no cell of seed 7; choose among 42"),
    (["--tasks", "addition"], "has no cell of task addition; choose among imdb"),
    (["--schemes", "rope", "--report-only"], "--report-only measures nothing, so --schemes limits nothing"),
    (["--schemes", "rope", "alibi"], "'alibi' is not a key=value override; --schemes, --tasks, --seeds take one "
                                     "comma-separated list"),
])
def test_a_stage_limited_to_what_the_arena_lacks_is_refused_naming_what_it_has(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["arena", "--config", str(write_arena(tmp_path)), "--budget", "tiny", "--output-dir", str(tmp_path),
              *option])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_an_arena_that_gains_a_read_length_measures_only_its_readings(
        tmp_path: Path, fake_measures: list[tuple[str, str]]) -> None:
    record, calls = grown_arena(tmp_path, fake_measures, read_lengths=[128, 256, "whole"])
    readings = {"none-seed42": ("direct", "windows"), "rope-seed42": ("direct", "windows", "linear")}
    assert sorted(calls) == sorted(("read", f"{model}/{reading}/256") for model, names in readings.items()
                                   for reading in names for split in ("validation", "test"))
    assert all(path.endswith("/256") for path in record["measured_now"]) and len(record["measured_now"]) == 10


def test_the_pending_cells_decide_what_is_trained_and_which_encoders_are_needed(
        tmp_path: Path, fake_measures: list[tuple[str, str]]) -> None:
    """A finished arena that gains RoPE's scaling `yarn`: only RoPE's classifier has a cell left, and on a machine
    without run folders only it is trained again (no encoder: the budget does not fine-tune)."""
    grown_arena(tmp_path, fake_measures)
    path = write_arena(tmp_path, **{**GROWING_ARENA, "rope_scalings": ["linear", "yarn"]})
    stage = arena_module.ArenaRun(load_arena(path, "tiny"), tmp_path / "another-machine", tmp_path / "results")
    assert [cell.path for cell in stage.pending] == [f"read/rope/seed42/{split}/yarn/{read}"
                                                     for split in ("validation", "test") for read in (128, "whole")]
    assert stage.to_train == [arena_module.kinds.Model("classifier", "rope", 42)]
    fake_measures.clear()
    stage.measure_all()
    assert [call[0] for call in fake_measures] == ["train"] + ["read"] * 4


def test_a_cells_task_names_its_file_and_imdb_is_what_cells_without_one_mean() -> None:
    kinds = arena_module.kinds
    assert kinds.DEFAULT_TASK == "imdb"
    cell = kinds.ReadingCell(scheme="rope", seed=42, split="test", reading="direct", read="whole")
    assert cell.path == "read/rope/seed42/test/direct/whole" and cell.timing_class == "read:whole"
    other = dataclasses.replace(cell, task="reverse")
    assert other.path == "tasks/reverse/read/rope/seed42/test/direct/whole" and other != cell
    assert kinds.SpeedCell(length=512, batch=1).path == "speed/512-batch1"


def test_the_committed_study_table_is_redrawn_from_its_cells_unchanged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every committed cell of `results/arena/study` is read back (none measured, nothing trained) and the table
    they make is the committed one, written before the cells were stamped by kind."""
    study = REPO / "results" / "arena" / "study"
    shutil.copytree(study / "cells", tmp_path / "results" / "cells")
    monkeypatch.chdir(REPO)  # the study's arena file names its experiments relative to the repository
    arena = load_arena("configs/arena/arena.yaml", "study", ["week3=runs/week3-8k"])
    monkeypatch.setattr(arena_module.run, "cli_command", lambda: json.loads((study / "arena.json").read_text())[
        "command"])
    monkeypatch.setattr(arena_module.report, "arena_plots", lambda *args: [])
    for module, name in ((classification, "train"), (pretraining, "pretrain")):
        monkeypatch.setattr(module, name, lambda *args, **kwargs: pytest.fail("nothing is trained"))
    record = run_arena(arena, tmp_path / "out", tmp_path / "results")
    assert record["measured_now"] == [] and record["stopped"] is None
    assert len(list((tmp_path / "results" / "cells").rglob("*.json"))) == 233
    assert (tmp_path / "results" / "arena.md").read_text() == (study / "arena.md").read_text()


def test_an_arena_that_gains_a_kind_of_cell_measures_only_its_cells(
        tmp_path: Path, fake_measures: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    """A kind is one class and one line in the registry: a finished arena then measures its cells and nothing else,
    each with the classifier it needs, and the report reads them."""
    kinds = arena_module.kinds

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class ProbeCell(kinds.Cell):
        kind: ClassVar[str] = "probe"
        section: ClassVar[str] = "probe"
        scheme: str
        seed: int

        @classmethod
        def of(cls, arena: Any, task: str) -> list[Any]:
            return kinds.each_scheme_and_seed(cls, arena, task)

        def group(self, arena: Any) -> tuple[int, ...]:
            return kinds.classifier_group(arena, self.scheme, self.seed)

        def parts(self) -> tuple[str, ...]:
            return self.scheme, f"seed{self.seed}"

        def depends_on(self, arena: Any) -> tuple[str, ...]:
            return kinds.classifier_settings(arena)

        def needs(self, arena: Any) -> set[Any]:
            return {kinds.Model("classifier", self.scheme, self.seed)}

        def measure(self, run: Any) -> dict[str, Any]:
            fake_measures.append(("probe", run.classifier(self.scheme, self.seed).name))
            return {"value": 1.0}

        def report(self, record: dict[str, Any], cell: dict[str, Any]) -> None:
            record.setdefault("probe", {})[f"{self.scheme}/{self.seed}"] = cell["value"]

    before, _ = grown_arena(tmp_path, fake_measures)
    monkeypatch.setitem(kinds.CELL_KINDS, "probe", ProbeCell)
    fake_measures.clear()
    record = run_arena(load_arena(write_arena(tmp_path, **GROWING_ARENA), "tiny"), tmp_path / "out",
                       tmp_path / "results")
    assert record["measured_now"] == ["probe/none/seed42", "probe/rope/seed42"]
    assert fake_measures == [("probe", "none-seed42"), ("probe", "rope-seed42")]
    assert record["probe"] == {"none/42": 1.0, "rope/42": 1.0} and record["reading"] == before["reading"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ParametersCell(arena_module.kinds.Cell):
    """A kind of cell defined outside the package (docs/contributing.md, "Adding an arena kind"): the parameters of
    a tiny encoder of every scheme whose positions cover `length` tokens, and how many each position adds."""

    kind: ClassVar[str] = "parameters"
    section: ClassVar[str] = "parameters"
    settings: ClassVar[tuple[Setting, ...]] = (
        Setting("parameter_lengths", counts, "a non-empty list of positive integers", []),)
    budget_settings: ClassVar[tuple[Setting, ...]] = (Setting("parameter_width", is_count, "a positive integer", 32),)
    plural: ClassVar[str] = "parameter counts"
    length: int

    @classmethod
    def of(cls, arena: Any, task: str) -> list[Any]:
        return [cls(task=task, length=length) for length in arena.parameter_lengths]

    def parts(self) -> tuple[str, ...]:
        return (str(self.length),)

    def depends_on(self, arena: Any) -> tuple[str, ...]:
        return ("schemes", "budget.parameter_width")  # not the list of lengths: a new one keeps every cell there is

    def measure(self, run: Any) -> dict[str, Any]:
        width = run.arena.budget.parameter_width
        configs = {scheme: HfAttnConfig(**tiny_config_kwargs(hidden_size=width, max_position_embeddings=self.length,
                                                             position_embedding_type=scheme))
                   for scheme in run.arena.schemes}
        return {"by_scheme": {scheme: sum(parameter.numel() for parameter in HfAttnModel(config).parameters())
                              for scheme, config in configs.items()}}

    def report(self, record: dict[str, Any], cell: dict[str, Any]) -> None:
        record[self.section][self.length] = cell["by_scheme"]

    @classmethod
    def summarize(cls, record: dict[str, Any]) -> None:
        shortest, longest = min(record[cls.section]), max(record[cls.section])
        record["parameters_per_position"] = {
            scheme: (record[cls.section][longest][scheme] - count) / (longest - shortest)
            for scheme, count in record[cls.section][shortest].items()}

    @classmethod
    def table(cls, record: dict[str, Any], notes: Any) -> list[str]:
        return ["", "## Parameters each position adds", "", "| scheme | per position |", "|---|---|",
                *(f"| {scheme} | {value:g} |" for scheme, value in record["parameters_per_position"].items())]


def test_a_kind_defined_in_one_class_and_registered_in_one_line_runs_through_an_arena_and_its_report(
        tmp_path: Path, fake_measures: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    """`ParametersCell` declares its arena-file key, its budget key, its stamp, its measuring, its record section, its
    summary and its table: registered in `CELL_KINDS`, the arena file takes its keys (checked), a run measures its
    cells and the report shows them; an arena that gains one of its lengths measures only that cell. Reference:
    learned positions add one row of `hidden_size` per position, RoPE none."""
    arena_file = write_arena(tmp_path, **{**GROWING_ARENA, "schemes": ["learned", "rope"]},
                             parameter_lengths=[64, 128])
    with pytest.raises(ArenaConfigError, match=r"unknown key `parameter_lengths` for an arena"):
        load_arena(arena_file, "tiny")  # not a key of any kind yet
    monkeypatch.setitem(arena_module.kinds.CELL_KINDS, "parameters", ParametersCell)
    (tmp_path / "bad").mkdir()
    bad = write_arena(tmp_path / "bad", **GROWING_ARENA, parameter_lengths=[0])
    with pytest.raises(ArenaConfigError, match="`parameter_lengths` must be a non-empty list of positive integers"):
        load_arena(bad, "tiny")

    record = run_arena(load_arena(arena_file, "tiny"), tmp_path / "out", tmp_path / "results")
    assert [path for path in record["measured_now"] if path.startswith("parameters/")] == [
        "parameters/64", "parameters/128"]
    stamp = json.loads((tmp_path / "results" / "cells" / "parameters" / "64.json").read_text())["stamp"]
    assert stamp == {"kind": "parameters", "version": 2,
                     "settings": {"schemes": ["learned", "rope"], "budget.parameter_width": 32}}
    counts_by_length = record["parameters"]
    assert counts_by_length[128]["learned"] - counts_by_length[64]["learned"] == 64 * 32
    assert counts_by_length[128]["rope"] == counts_by_length[64]["rope"]
    assert record["parameters_per_position"] == {"learned": 32.0, "rope": 0.0}
    table = (tmp_path / "results" / "arena.md").read_text()
    assert "## Parameters each position adds\n\n| scheme | per position |\n|---|---|\n| learned | 32 |\n| rope | 0 |" \
        in table

    grown = write_arena(tmp_path, **{**GROWING_ARENA, "schemes": ["learned", "rope"]},
                        parameter_lengths=[64, 128, 256])
    record = run_arena(load_arena(grown, "tiny"), tmp_path / "out", tmp_path / "results")
    assert record["measured_now"] == ["parameters/256"]
    assert record["parameters_per_position"] == {"learned": 32.0, "rope": 0.0}
