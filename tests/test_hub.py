"""Model cards and the Hub upload, tested at the huggingface_hub boundary (no Hub here)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from helpers import REPO, load_tool, tiny_config_kwargs
from huggingface_hub import HfApi, ModelCard
from safetensors.torch import load_file, save_file
from transformers import AutoTokenizer

from hf_attn import HfAttnConfig, HfAttnForMaskedLM, HfAttnForSequenceClassification, cli
from hf_attn.experiments.data import load_sample
from hf_attn.publishing.cards import build_model_card
from hf_attn.publishing.hub import push
from hf_attn.publishing.model_code import MODEL_CODE_FILES

transfer = load_tool("transfer")

REVIEWS = ["A wonderful, moving film.", "Dull, lifeless and far too long.", "not bad at all"]


def test_card_metadata_carries_the_measured_metrics(run_dir: Path, tmp_path: Path) -> None:
    push(run_dir, "someone/hf-attn-alibi", dry_run_dir=tmp_path / "upload")
    card = ModelCard.load(tmp_path / "upload" / "README.md")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    results = {(r.dataset_split, r.metric_type): r.metric_value for r in card.data.eval_results}
    assert results == {("test", "accuracy"): metrics["test_accuracy"], ("test", "f1"): metrics["test_f1"],
                       ("validation", "accuracy"): metrics["val_accuracy"],
                       ("validation", "f1"): metrics["val_f1"]}
    assert "position-alibi" in card.data.tags and "trust_remote_code=True" in card.text
    assert "0.8123" in card.text
    assert "2 epochs over 40000 reviews,\n2500 optimizer steps, 3600 s on 1 process;" in card.text
    config = json.loads((run_dir / "config.json").read_text())
    one_epoch = build_model_card({**metrics, "epochs": 1.0, "world_size": 2}, config, "x/y")
    assert "1 epoch over 40000 reviews,\n2500 optimizer steps, 3600 s on 2 processes;" in one_epoch.text


def test_card_says_which_steps_a_partly_timed_run_covers(run_dir: Path) -> None:
    """A run resumed from a checkpoint written before runs were timed across sessions."""
    metrics = json.loads((run_dir / "metrics.json").read_text())
    config = json.loads((run_dir / "config.json").read_text())
    card = build_model_card({**metrics, "timed_from_step": 936}, config, "someone/x")
    assert "3600 s for steps 937-2500 (the time of the first 936 steps was not recorded)" in card.text


@pytest.mark.parametrize(("train_window", "said"), [
    ("start", "input: the first 64 tokens of each review."),
    ("random", "input: the first 64 tokens of each review; trained on a random 64-token window of each whole review"),
])
def test_card_says_what_part_of_a_review_the_model_trained_on(run_dir: Path, train_window: str, said: str) -> None:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    metrics["experiment"]["train_window"] = train_window
    config = json.loads((run_dir / "config.json").read_text())
    assert said in build_model_card(metrics, config, "someone/x").text


def test_card_of_a_whole_review_classifier_says_it_reads_windows(run_dir: Path) -> None:
    """A run saved to read more than its positions (read_length, window_stride) reads windows; the card
    says so, and what the model trained on, instead of "the first 64 tokens"."""
    metrics = json.loads((run_dir / "metrics.json").read_text())
    metrics["experiment"].update(read_length=8192, train_window="random")
    config = json.loads((run_dir / "config.json").read_text())
    config.update(read_length=8192, window_stride=32)
    text = build_model_card(metrics, config, "someone/x").text
    window = config["max_position_embeddings"]
    reads = f"each review whole (up to 8192 tokens) as {window}-token windows every 32 tokens"
    trained = "trained on a random 64-token window"
    assert f"input: {reads}, encoded apart and averaged by their real tokens; {trained}" in text
    assert f"It reads\n{reads}" in text
    assert "first 64 tokens" not in text


@pytest.mark.parametrize(("precision", "said"), [
    ("bf16", "(NVIDIA H200, bfloat16 autocast, float32 weights);"), ("fp32", "(NVIDIA H200, float32);"),
    (None, "(NVIDIA H200);"),  # a run recorded before precision was
])
def test_card_names_the_hardware_and_precision_a_run_trained_in(run_dir: Path, precision: str | None,
                                                                said: str) -> None:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    config = json.loads((run_dir / "config.json").read_text())
    card = build_model_card({**metrics, "hardware": "NVIDIA H200", "precision": precision}, config, "someone/x")
    assert f"3600 s on 1 process {said}" in card.text


@pytest.mark.slow
def test_half_precision_shards_come_back_as_the_float16_rounded_model(run_dir: Path, tmp_path: Path) -> None:
    """The way a classifier returns from the GPU machine: float16 shards under a size limit, restored
    to float32 and scored again; the card then states the restored weights' own test scores."""
    shards = transfer.save_half_precision(run_dir, tmp_path / "shards", max_shard_size="40KB")
    assert len(shards) > 1 and all(path.stat().st_size < 45_000 for path in shards)
    restored_dir = tmp_path / "restored"
    restored_dir.mkdir()
    for path in run_dir.iterdir():
        if path.suffix in (".json", ".py"):
            (restored_dir / path.name).write_bytes(path.read_bytes())
    restored = transfer.restore_half_precision(tmp_path / "shards", restored_dir, dataset="sample", limit=32)

    trained = load_file(run_dir / "model.safetensors")
    back = load_file(restored_dir / "model.safetensors")
    assert back.keys() == trained.keys()
    for name, weight in trained.items():
        assert back[name].dtype == torch.float32
        assert torch.equal(back[name], weight.half().float()), name

    # The recorded score against a second path: the restored model run by hand on the same 32 reviews.
    test = load_sample()["test"].select(range(32))
    tokenizer = AutoTokenizer.from_pretrained(restored_dir)
    model = HfAttnForSequenceClassification.from_pretrained(restored_dir).eval()
    with torch.no_grad():
        logits = model(**tokenizer(list(test["text"]), truncation=True, max_length=64, padding=True,
                                   return_tensors="pt")).logits
    accuracy = (logits.argmax(-1) == torch.tensor(list(test["label"]))).float().mean().item()
    assert restored["test_accuracy"] == pytest.approx(accuracy)
    assert json.loads((restored_dir / "metrics.json").read_text())["restored_weights"] == restored

    card = build_model_card(json.loads((restored_dir / "metrics.json").read_text()),
                            json.loads((restored_dir / "config.json").read_text()), "someone/x")
    assert (f"restored to float32 (`tools/transfer.py`). These weights, as published, score test accuracy "
            f"{accuracy:.4f}") in card.text
    assert f"`hf-attn evaluate --model {restored_dir} --dataset sample --split test --limit 32`" in card.text


def test_a_pretrained_encoder_travels_the_same_way_unscored(tmp_path: Path) -> None:
    """The whole-review GPU flow brings its masked-LM encoder back too: the class comes from config.json,
    the weights are the float16-rounded ones, and the record says so without test scores (it classifies nothing)."""
    torch.manual_seed(0)
    encoder = HfAttnForMaskedLM(HfAttnConfig(**tiny_config_kwargs(tie_word_embeddings=False, sparse_prediction=True)))
    run = tmp_path / "pretrain-rope-whole"
    encoder.save_pretrained(run)
    (run / "metrics.json").write_text(json.dumps({"eval_mlm_loss": 2.5}))
    transfer.main(["save", str(run), str(tmp_path / "half")])
    (run / "model.safetensors").unlink()  # as after the trip: the run folder comes back without weights
    transfer.main(["restore", str(tmp_path / "half"), str(run), "--dataset", "sample"])

    back = HfAttnForMaskedLM.from_pretrained(run)
    assert back.dtype == torch.float32 and not back.config.tie_word_embeddings
    for name, weight in encoder.state_dict().items():
        assert torch.equal(back.state_dict()[name], weight.half().float()), name
    assert json.loads((run / "metrics.json").read_text()) == {"eval_mlm_loss": 2.5,
                                                              "restored_weights": {"from": "float16"}}


def test_missing_metrics_get_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="metrics.json is missing"):
        push(tmp_path, "someone/x", dry_run_dir=tmp_path / "upload")


def test_a_run_with_stale_code_pushes_the_packages_current_code(run_dir: Path, tmp_path: Path) -> None:
    """A run folder keeps the code of the day it trained (here edited since, plus a stray script): the dry run of
    `hf-attn push` holds the installed package's model code, file for file, and no other .py file."""
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    (run / "modeling_hf_attn.py").write_text("raise ImportError('stale code from training time')\n")
    (run / "positions.py").unlink()
    (run / "notes.py").write_text("print('a script left in the run folder')\n")
    cli.main(["push", "--model", str(run), "--repo-id", "someone/x", "--dry-run", str(tmp_path / "upload")])
    shipped = {path.name: path.read_bytes() for path in (tmp_path / "upload").glob("*.py")}
    assert shipped == {name: (REPO / "hf_attn" / name).read_bytes() for name in MODEL_CODE_FILES}


def test_a_run_whose_weights_do_not_fit_the_packages_code_is_refused_before_anything_is_written(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The code shipped is today's, so weights saved for another model (a renamed module, as after a change to the
    model code) would make a repo that fails to load: `hf-attn push` refuses in one line naming them."""
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    weights = load_file(run / "model.safetensors")
    renamed = {name.replace("classifier.", "old_classifier."): tensor for name, tensor in weights.items()}
    save_file(renamed, run / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["push", "--model", str(run), "--repo-id", "someone/x", "--dry-run", str(tmp_path / "upload")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "Traceback" not in error and "do not fit HfAttnForSequenceClassification" in error, error
    assert "old_classifier." in error and not (tmp_path / "upload").exists()


LOAD_AND_PREDICT = textwrap.dedent("""
    import json, sys
    sys.modules["hf_attn"] = None  # a Hub user has no hf_attn package
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline
    model = AutoModelForSequenceClassification.from_pretrained(sys.argv[1], trust_remote_code=True)
    tokenizer = AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=True)
    classify = pipeline("text-classification", model=model, tokenizer=tokenizer, top_k=None)
    print(json.dumps(classify(json.loads(sys.argv[2]))))
""")


@pytest.mark.slow
def test_uploaded_files_load_and_predict_without_hf_attn(run_dir: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    committed: dict[str, bytes] = {}

    def fake_upload_folder(self: HfApi, *, folder_path: str, repo_id: str, **kwargs: object) -> None:
        committed.update({p.name: p.read_bytes() for p in Path(folder_path).iterdir()})

    monkeypatch.setattr(HfApi, "create_repo", lambda self, repo_id, **kwargs: None)
    monkeypatch.setattr(HfApi, "upload_folder", fake_upload_folder)
    push(run_dir, "someone/hf-attn-alibi")
    assert {"config.json", "model.safetensors", "modeling_hf_attn.py", "positions.py", "tokenizer.json",
            "README.md"} <= set(committed)
    assert "training_args.bin" not in committed and "metrics.json" not in committed

    fresh = tmp_path / "from_hub"
    fresh.mkdir()
    for name, content in committed.items():
        (fresh / name).write_bytes(content)
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf_home"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    result = subprocess.run([sys.executable, "-c", LOAD_AND_PREDICT, str(fresh), json.dumps(REVIEWS)],
                            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    remote = json.loads(result.stdout.strip().splitlines()[-1])

    from transformers import pipeline

    local = pipeline("text-classification", model=str(run_dir), tokenizer=str(run_dir), top_k=None)(REVIEWS)
    for remote_scores, local_scores in zip(remote, local):
        assert {s["label"]: round(s["score"], 5) for s in remote_scores} == \
               {s["label"]: round(s["score"], 5) for s in local_scores}


def test_the_2x_import_paths_of_cards_push_and_checkpoints_still_work() -> None:
    """hf_attn.analysis.hub and .checkpoint moved to hf_attn.publishing; the old paths give the same objects."""
    from hf_attn.analysis import checkpoint as old_checkpoint
    from hf_attn.analysis import hub as old_hub
    from hf_attn.publishing import cards, checkpoint, hub, model_code

    for module, name in ((model_code, "MODEL_CODE_FILES"), (cards, "build_model_card"), (cards, "card_for_run"),
                         (hub, "push"), (model_code, "write_model_code")):
        assert getattr(old_hub, name) is getattr(module, name), name
    for name in ("CheckpointError", "committed_classifiers", "load_run_model", "write_checkpoint"):
        assert getattr(old_checkpoint, name) is getattr(checkpoint, name), name
