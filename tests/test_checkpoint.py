"""`hf-attn checkpoint`: a run folder as a small `from_pretrained` folder (float16 on disk, float32 on load),
loadable with remote code, refused with one clear line when too large or in the way; tools/commit_checkpoint.py
and the committed checkpoints keep the repository's rules; `make demo` shows a committed classifier next to the
smoke model."""

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
from helpers import REPO, SMOKE, SMOKE_TINY_MODEL, load_tool, tiny_config_kwargs
from safetensors.torch import load_file
from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer, PreTrainedModel

from hf_attn import (
    POSITION_SCHEMES,
    HfAttnConfig,
    HfAttnForMaskedLM,
    HfAttnForReplacedTokenDetection,
    HfAttnForSequenceClassification,
    HfAttnTokenizerFast,
    cli,
)
from hf_attn.experiments.config import load_experiment
from hf_attn.experiments.data import LABEL_NAMES, load_sample
from hf_attn.experiments.pretraining import MaskedLMCollator
from hf_attn.experiments.records import init_from_metrics
from hf_attn.experiments.run import build_model, load_tokenizer
from hf_attn.publishing import checkpoint
from hf_attn.publishing.cards import build_model_card
from hf_attn.publishing.hub import push
from hf_attn.publishing.model_code import MODEL_AUTO_MAP, MODEL_CODE_FILES, TOKENIZER_AUTO_MAP
from hf_attn.week3 import train_week3_tokenizer

commit_checkpoint = load_tool("commit_checkpoint")

TEXTS = ["A wonderful, moving film.", "Dull, lifeless and far too long.", "not bad at all"]
CLASSIFIER_METRICS = {
    "test_accuracy": 0.8123, "test_f1": 0.8011, "test_loss": 0.41, "val_accuracy": 0.8234, "val_f1": 0.8199,
    "val_loss": 0.4, "n_train": 1600, "n_validation": 200, "n_test": 200, "epochs": 2.0, "optimizer_steps": 100,
    "train_runtime_s": 60.0, "world_size": 1, "max_length": 64, "command": "hf-attn train --config x.yaml",
    "experiment": {"dataset": "sample", "training": {"learning_rate": 1e-3}},
}
PRETRAINING_METRICS = {
    "objective": "mlm", "eval_mlm_loss": 4.321, "chunks_seen": 640, "optimizer_steps": 20, "max_length": 64,
    "n_train_reviews": 1600, "n_unlabelled_reviews": 0, "n_eval_chunks": 50, "command": "hf-attn pretrain -c p.yaml",
    "experiment": {"dataset": "sample", "mlm_probability": 0.15},
}
RTD_METRICS = {
    **PRETRAINING_METRICS, "objective": "rtd", "eval_detection_accuracy": 0.876, "eval_detection_loss": 0.3,
    "eval_replaced_share": 0.1, "eval_generator_mlm_loss": 5.0,
}


def save_run(
    folder: Path, model_class: type[PreTrainedModel], metrics: dict | None, **config: object
) -> PreTrainedModel:
    """A folder shaped like a finished run: a tiny model (64 positions, reading 64 tokens) of `model_class`, a BPE
    trained on sample reviews, and `metrics` as its metrics.json (none when None)."""
    tokenizer = train_week3_tokenizer(load_sample()["train"]["text"][:200], vocab_size=300, max_seq=64)
    torch.manual_seed(0)
    model = model_class(HfAttnConfig(**tiny_config_kwargs(
        vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, max_position_embeddings=64, read_length=64,
        **config)))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if metrics is not None:
        (folder / "metrics.json").write_text(json.dumps(metrics))
    return model


@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("classifier-run")
    save_run(folder, HfAttnForSequenceClassification, CLASSIFIER_METRICS)
    return folder


def logits(model: PreTrainedModel, folder: Path, texts: list[str]) -> torch.Tensor:
    """The classifier's logits for the first 64 tokens of `texts` (tokenized by the tokenizer saved in `folder`),
    padded to one batch."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    with torch.no_grad():
        batch = tokenizer(texts, padding=True, truncation=True, max_length=64, return_tensors="pt")
        return model.eval()(**batch).logits


def rounded_through_float16(model: PreTrainedModel) -> PreTrainedModel:
    """`model` with every parameter rounded to float16 and back, in place: what float16 storage keeps of it."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(parameter.half().float())
    return model


def test_a_classifier_checkpoint_is_float16_on_disk_float32_on_load_and_the_rounded_model(
    classifier_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "checkpoints" / "classifier"
    cli.main(["checkpoint", "--model", str(classifier_run), "--output", str(output)])
    assert f"wrote {output}" in capsys.readouterr().out

    stored = load_file(output / "model.safetensors")
    assert stored and {tensor.dtype for tensor in stored.values()} == {torch.float16}
    loaded = AutoModelForSequenceClassification.from_pretrained(output)
    assert {parameter.dtype for parameter in loaded.parameters()} == {torch.float32}
    as_asked = AutoModelForSequenceClassification.from_pretrained(output, dtype=torch.float16)
    assert {parameter.dtype for parameter in as_asked.parameters()} == {torch.float16}

    texts = [*TEXTS, *load_sample()["test"]["text"][:5]]
    original = HfAttnForSequenceClassification.from_pretrained(classifier_run)
    trained = logits(original, classifier_run, texts)
    reference = logits(rounded_through_float16(original), classifier_run, texts)
    checkpointed = logits(loaded, output, texts)
    torch.testing.assert_close(checkpointed, reference, rtol=0, atol=1e-6)
    assert 0 < (checkpointed - trained).abs().max() < 1e-2  # float16 rounding shows, and stays small

    card = (output / "README.md").read_text()
    assert "0.8123" in card and "stored as float16 safetensors" in card and f'repo = "{output}"' in card
    assert f"```python\n{checkpoint.IMPORT_LINE}\n" in card  # the card's code loads it as the folder needs
    assert json.loads((output / "metrics.json").read_text()) == CLASSIFIER_METRICS
    assert (output / "tokenizer.json").is_file()
    assert not list(output.parent.glob(".*"))  # no staging folder left behind


RUN_WITHOUT_HF_ATTN = textwrap.dedent("""
    import json, sys
    sys.modules["hf_attn"] = None  # a user without the package
    import torch, transformers
    folder, auto_class, output, texts = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    model = getattr(transformers, auto_class).from_pretrained(folder, trust_remote_code=True).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    with torch.no_grad():
        values = getattr(model(**tokenizer(texts, padding=True, return_tensors="pt")), output)
    print(json.dumps({"dtype": str(model.dtype), "module": type(model).__module__, "values": values.tolist()}))
""")


def run_without_hf_attn(folder: Path, auto_class: str, output: str, tmp_path: Path) -> dict:
    """`auto_class.from_pretrained(folder, trust_remote_code=True)`'s `output` for TEXTS, in a fresh process that
    cannot import hf_attn, with the model's dtype and the module its class came from."""
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf_home"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    result = subprocess.run(
        [sys.executable, "-c", RUN_WITHOUT_HF_ATTN, str(folder), auto_class, output, json.dumps(TEXTS)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    remote = json.loads(result.stdout.strip().splitlines()[-1])
    assert not remote["module"].startswith("hf_attn"), remote["module"]
    return remote


def test_a_checkpoint_pushed_loads_with_remote_code_where_hf_attn_is_not_installed(classifier_run: Path,
                                                                                    tmp_path: Path) -> None:
    """A checkpoint holds no code; the folder `push` uploads (its dry run) carries the package's, and loads."""
    output = tmp_path / "classifier"
    checkpoint.write_checkpoint(classifier_run, output)
    push(output, "someone/classifier", dry_run_dir=tmp_path / "upload")
    remote = run_without_hf_attn(tmp_path / "upload", "AutoModelForSequenceClassification", "logits", tmp_path)
    assert remote["dtype"] == "torch.float32"
    reference = logits(rounded_through_float16(HfAttnForSequenceClassification.from_pretrained(classifier_run)),
                       classifier_run, TEXTS)
    torch.testing.assert_close(torch.tensor(remote["values"]), reference, rtol=0, atol=1e-5)


@pytest.mark.parametrize(("model_class", "metrics", "said"), [
    (HfAttnForMaskedLM, PRETRAINING_METRICS, "masked-LM loss 4.321"),
    (HfAttnForReplacedTokenDetection, RTD_METRICS, "detection accuracy 0.876"),
])
def test_a_pretrained_encoder_checkpoint_starts_a_classifier_with_init_from(
    model_class: type[PreTrainedModel], metrics: dict, said: str, tmp_path: Path
) -> None:
    """`init_from: checkpoints/NAME`: the encoder starts from the stored float16 weights, in float32, and the
    fine-tuned run records the pretraining (the checkpoint keeps metrics.json)."""
    pretrained = save_run(tmp_path / "run", model_class, metrics)
    output = tmp_path / "checkpoints" / "encoder"
    checkpoint.write_checkpoint(tmp_path / "run", output)
    card = (output / "README.md").read_text()
    assert "## Pretraining" in card and said in card and f"init_from: {output}" in card

    reloaded = model_class.from_pretrained(output)
    expected = {name: value.half().float() for name, value in pretrained.state_dict().items()}
    assert reloaded.state_dict().keys() == expected.keys()
    for name, value in reloaded.state_dict().items():
        assert value.dtype == torch.float32 and torch.equal(value, expected[name]), name

    experiment = load_experiment(SMOKE, [*SMOKE_TINY_MODEL, f"init_from={output}", "max_length=64"])
    classifier = build_model(experiment, load_tokenizer(experiment, train_texts=[]))
    encoder = {name: value for name, value in classifier.state_dict().items() if name.startswith("model.")}
    assert encoder and all(value.dtype == torch.float32 and torch.equal(value, expected[name])
                           for name, value in encoder.items())
    assert init_from_metrics(experiment) == metrics


def test_the_encoder_alone_of_an_electra_run_starts_a_classifier(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """--encoder-only keeps the encoder without ELECTRA's generator and detection head (an `HfAttnModel`), so
    that the reference-size ELECTRA encoder fits the limit; a classifier fine-tunes from it as from the whole."""
    pretrained = save_run(tmp_path / "run", HfAttnForReplacedTokenDetection, RTD_METRICS)
    output = tmp_path / "encoder"
    cli.main(["checkpoint", "--model", str(tmp_path / "run"), "--output", str(output), "--encoder-only"])
    encoder = {name.removeprefix("model."): value.half() for name, value in pretrained.state_dict().items()
               if name.startswith("model.")}
    stored = load_file(output / "model.safetensors")
    assert stored.keys() == encoder.keys() and all(torch.equal(stored[name], encoder[name]) for name in stored)
    card = (output / "README.md").read_text()
    assert "Only the encoder of the run's `HfAttnForReplacedTokenDetection` is stored" in card
    assert "detection accuracy 0.876" in card and "AutoModel.from_pretrained" in card

    experiment = load_experiment(SMOKE, [*SMOKE_TINY_MODEL, f"init_from={output}", "max_length=64"])
    classifier = build_model(experiment, load_tokenizer(experiment, train_texts=[]))
    started = {name.removeprefix("model."): value for name, value in classifier.state_dict().items()
               if name.startswith("model.")}
    assert started.keys() == encoder.keys()
    assert all(value.dtype == torch.float32 and torch.equal(value, encoder[name].float())
               for name, value in started.items())


def test_a_run_without_metrics_gets_a_card_that_says_what_the_model_is(tmp_path: Path) -> None:
    save_run(tmp_path / "run", HfAttnForMaskedLM, None, position_embedding_type="alibi")
    checkpoint.write_checkpoint(tmp_path / "run", tmp_path / "encoder")
    card = (tmp_path / "encoder" / "README.md").read_text()
    assert "# hf-attn masked-LM encoder (alibi positions)" in card
    assert "left no `metrics.json`" in card and "AutoModelForMaskedLM.from_pretrained" in card
    assert not (tmp_path / "encoder" / "metrics.json").exists()


def test_a_masked_lm_card_predicts_a_token_masked_as_pretraining_masked_it(tmp_path: Path) -> None:
    """A Week 3 vocabulary has no mask token, so the fill-mask pipeline cannot use these encoders (no Hub widget
    for it); the card's code masks a token with the id pretraining's collator masks with, and its logits are the
    model's on the collator-masked ids."""
    save_run(tmp_path / "run", HfAttnForMaskedLM, None)
    checkpoint.write_checkpoint(tmp_path / "run", tmp_path / "encoder")
    card = (tmp_path / "encoder" / "README.md").read_text()
    assert "pipeline_tag" not in card
    code = card.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(code, namespace)  # the card names the folder it was written to
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "encoder")
    masked = tokenizer("This movie was terrible. I hated every minute of it.", return_tensors="pt")["input_ids"]
    masked[0, 3] = MaskedLMCollator(tokenizer).mask_token_id
    assert torch.equal(namespace["inputs"]["input_ids"], masked)
    model = HfAttnForMaskedLM.from_pretrained(tmp_path / "encoder").eval()
    with torch.no_grad():
        torch.testing.assert_close(namespace["logits"].detach(), model(masked).logits)


def checkpoint_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The error `hf-attn checkpoint ARGV` prints, exiting with status 2 (a usage error or one line, no traceback)."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["checkpoint", *argv])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "Traceback" not in error, error
    return error


def test_a_checkpoint_over_the_size_limit_is_refused_naming_its_size(
    classifier_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "checkpoints" / "classifier"
    error = checkpoint_error(["--model", str(classifier_run), "--output", str(output), "--max-mb", "0.05"], capsys)
    written = checkpoint.write_checkpoint(classifier_run, tmp_path / "unlimited")
    assert written > 50_000 and f"would take {written / 1e6:.2f} MB, over the limit of 0.05 MB" in error
    assert "--encoder-only" in error and "smaller model" in error
    size = sum(path.stat().st_size for path in (tmp_path / "checkpoints").rglob("*") if path.is_file())
    assert size == 0 and not output.exists()  # nothing left behind


def test_an_existing_checkpoint_is_replaced_only_with_overwrite(
    classifier_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "checkpoints" / "classifier"
    output.mkdir(parents=True)
    (output / "old-notes.txt").write_text("from an earlier checkpoint")
    error = checkpoint_error(["--model", str(classifier_run), "--output", str(output)], capsys)
    assert f"{output} already holds files; pass --overwrite" in error
    cli.main(["checkpoint", "--model", str(classifier_run), "--output", str(output), "--overwrite"])
    assert not (output / "old-notes.txt").exists() and (output / "model.safetensors").is_file()


def test_the_repositorys_tool_refuses_a_fourth_checkpoint_but_not_a_replacement_or_an_interrupted_write(
    classifier_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("a", "b", "c"):
        checkpoint.write_checkpoint(classifier_run, tmp_path / name)
    (tmp_path / "not-a-checkpoint").mkdir()
    shutil.copytree(tmp_path / "a", tmp_path / ".d.partial")  # as an interrupted write of d leaves it
    with pytest.raises(SystemExit) as exit_info:
        commit_checkpoint.main(["--model", str(classifier_run), "--output", str(tmp_path / "d")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "already holds 3 checkpoints (a, b, c)" in error and "replace one" in error and "Traceback" not in error
    assert not (tmp_path / "d").exists()
    commit_checkpoint.main(["--model", str(classifier_run), "--output", str(tmp_path / "b"), "--overwrite"])
    shutil.rmtree(tmp_path / "c")
    commit_checkpoint.main(["--model", str(classifier_run), "--output", str(tmp_path / "d")])
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a", "b", "d", "not-a-checkpoint"]
    cli.main(["checkpoint", "--model", str(classifier_run), "--output", str(tmp_path / "e")])  # the package: no rule
    assert checkpoint.is_checkpoint(tmp_path / "e")


@pytest.mark.parametrize(("damage", "message"), [
    (lambda folder: (folder / "model.safetensors").unlink(), "holds no saved model"),
    (lambda folder: (folder / "tokenizer.json").unlink(), "holds no tokenizer.json"),
    (lambda folder: (folder / "config.json").write_text(json.dumps({"model_type": "bert"})), "'bert', not 'hf_attn'"),
])
def test_a_run_folder_that_is_not_a_saved_model_is_refused(
    damage: object, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    save_run(tmp_path / "run", HfAttnForSequenceClassification, None)
    damage(tmp_path / "run")
    error = checkpoint_error(["--model", str(tmp_path / "run"), "--output", str(tmp_path / "out")], capsys)
    assert message in error and not (tmp_path / "out").exists()


# Every committed model: the folders of checkpoints/ holding a config.json, the study's encoders kept in
# checkpoints/arena/SCHEME included.
COMMITTED = sorted(path.parent for path in (REPO / "checkpoints").rglob("config.json"))
STUDY_ENCODERS = REPO / "checkpoints" / "arena"


def test_the_committed_checkpoints_keep_the_rules() -> None:
    """checkpoints/ (checkpoints/README.md, tools/commit_checkpoint.py): at most 3 large models in all, the study's
    encoders (one folder per position scheme in checkpoints/arena/) included now that the study is done, beside
    small task models (at most 5 MB each, uncounted); each a folder of at most 30 MB whose weights are float16 on
    disk and float32 by the config, with its card and tokenizer; only a classifier's config names the task's
    labels."""
    study = [folder for folder in COMMITTED if folder.parent == STUDY_ENCODERS]
    assert {folder.name for folder in study} <= set(POSITION_SCHEMES), study
    large = [folder for folder in COMMITTED
             if checkpoint.folder_bytes(folder) > commit_checkpoint.MAX_TASK_MODEL_MB * 1_000_000]
    assert len(large) <= commit_checkpoint.MAX_CHECKPOINTS, large
    for folder in COMMITTED:
        assert checkpoint.folder_bytes(folder) <= commit_checkpoint.MAX_CHECKPOINT_MB * 1_000_000, folder
        assert {tensor.dtype for tensor in load_file(folder / "model.safetensors").values()} == {torch.float16}
        assert json.loads((folder / "config.json").read_text())["dtype"] == "float32"
        assert (folder / "README.md").is_file() and (folder / "tokenizer.json").is_file()
        assert not list(folder.glob("*.py")), "no generated code in git: `hf-attn push` writes it"
        config = json.loads((folder / "config.json").read_text())
        assert "auto_map" not in config, "no auto_map pointing at code the folder does not hold"
        is_classifier = config["architectures"] == ["HfAttnForSequenceClassification"]
        assert ("neg" in config.get("id2label", {}).values()) == is_classifier, "only a classifier names labels"


def test_the_model_code_a_folder_ships_is_every_file_save_pretrained_writes(classifier_run: Path) -> None:
    """`write_model_code` writes the files and `auto_map`s transformers' `save_pretrained` writes for a model and its
    tokenizer (the modules their `auto_map` loads), so no pushed folder misses one that remote code imports."""
    assert {path.name for path in classifier_run.glob("*.py")} == set(MODEL_CODE_FILES)
    assert json.loads((classifier_run / "config.json").read_text())["auto_map"] == MODEL_AUTO_MAP
    assert json.loads((classifier_run / "tokenizer_config.json").read_text())["auto_map"] == TOKENIZER_AUTO_MAP


def test_a_checkpoint_holds_no_code_and_loads_with_the_installed_package(classifier_run: Path,
                                                                        tmp_path: Path) -> None:
    """No generated code in a checkpoint, not even a run folder's own (the code of the day it trained), and no
    `auto_map` pointing at code that is not there: the installed package's classes load it, with
    `trust_remote_code=True` too, as a classifier and its tokenizer."""
    run = tmp_path / "run"
    shutil.copytree(classifier_run, run)
    for name in MODEL_CODE_FILES:
        (run / name).write_text("raise ImportError('stale code from training time')\n")
    checkpoint.write_checkpoint(run, tmp_path / "out")
    assert not list((tmp_path / "out").glob("*.py"))
    for name in ("config.json", "tokenizer_config.json"):
        assert "auto_map" not in json.loads((tmp_path / "out" / name).read_text()), name
    for trust in (False, True):
        model = AutoModelForSequenceClassification.from_pretrained(tmp_path / "out", trust_remote_code=trust)
        tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out", trust_remote_code=trust)
        assert isinstance(model, HfAttnForSequenceClassification) and isinstance(tokenizer, HfAttnTokenizerFast)


@pytest.mark.slow
@pytest.mark.parametrize("folder", COMMITTED, ids=lambda folder: folder.name)
def test_a_committed_checkpoint_pushed_loads_with_remote_code_where_hf_attn_is_not_installed(folder: Path,
                                                                                             tmp_path: Path) -> None:
    """Today's package code, written beside the committed weights by a push, runs them where hf_attn is not
    installed: the encoder's last hidden states through remote code equal the package's own model's."""
    push(folder, "someone/checkpoint", dry_run_dir=tmp_path / "upload")
    remote = run_without_hf_attn(tmp_path / "upload", "AutoModel", "last_hidden_state", tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    with torch.no_grad():
        expected = AutoModel.from_pretrained(folder).eval()(
            **tokenizer(TEXTS, padding=True, return_tensors="pt")).last_hidden_state
    torch.testing.assert_close(torch.tensor(remote["values"]), expected, rtol=0, atol=1e-5)


def demo(checkpoints: Path, smoke: Path, texts: list[str]) -> list[str]:
    """The output lines of `make demo`'s last step, run as the Makefile runs it."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "scripts/demo_checkpoint.py", "--smoke", str(smoke), "--checkpoints", str(checkpoints),
         *texts], capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.splitlines()


@pytest.mark.slow
def test_the_demo_skips_in_one_line_without_a_committed_classifier(classifier_run: Path, tmp_path: Path) -> None:
    save_run(tmp_path / "mlm", HfAttnForMaskedLM, None)
    checkpoint.write_checkpoint(tmp_path / "mlm", tmp_path / "checkpoints" / "encoder")  # an encoder is no classifier
    lines = demo(tmp_path / "checkpoints", classifier_run, TEXTS[:2])
    assert len(lines) == 1 and "holds no classifier yet" in lines[0]


def test_the_demo_shows_the_committed_classifier_next_to_the_smoke_model(classifier_run: Path, tmp_path: Path) -> None:
    """Each model's label and score for the demo's texts and a review of each class, against the models run by
    hand on the tokens their tokenizers keep."""
    smoke = tmp_path / "smoke"
    save_run(smoke, HfAttnForSequenceClassification, None, position_embedding_type="alibi")
    committed = tmp_path / "checkpoints" / "classifier"
    checkpoint.write_checkpoint(classifier_run, committed)
    lines = demo(tmp_path / "checkpoints", smoke, TEXTS[:2])
    assert lines[1].split()[-2:] == [str(smoke), str(committed)]
    rows = lines[2:]
    assert len(rows) == 4 and [row.split()[:2] for row in rows[:2]] == [text.split()[:2] for text in TEXTS[:2]]

    test = load_sample()["test"]
    reviews = [next(text for text, label in zip(test["text"], test["label"]) if label == wanted) for wanted in (0, 1)]
    for folder, model, first_column in ((smoke, HfAttnForSequenceClassification.from_pretrained(smoke), 0),
                                        (committed, AutoModelForSequenceClassification.from_pretrained(committed), 2)):
        probabilities = logits(model, folder, [*TEXTS[:2], *reviews]).softmax(-1)
        expected = [[model.config.id2label[int(p.argmax())], f"{p.max():.2f}"] for p in probabilities]
        assert [row.split()[-4:][first_column:first_column + 2] for row in rows] == expected
    assert [row.split()[-5] for row in rows[2:]] == list(LABEL_NAMES)  # the truth column


def test_a_classifier_fine_tuned_from_a_committed_classifier_has_a_card(classifier_run: Path) -> None:
    """`init_from` a classifier checkpoint: the new run's card names the classifier it continued and its scores
    (its record holds a classifier's metrics, which have no pretraining objective)."""
    experiment = {"init_from": "checkpoints/classifier", "training": {}}
    metrics = {**CLASSIFIER_METRICS, "experiment": experiment, "pretraining": {**CLASSIFIER_METRICS, "name": "rope"}}
    config = json.loads((classifier_run / "config.json").read_text())
    card = build_model_card(metrics, config, "someone/x").text
    assert ("continued the fine-tuning of an IMDb classifier (`rope`: validation accuracy 0.8234, test 0.8123), whose "
            "token embedding was randomly initialised. Reproduce it: `hf-attn train --config x.yaml`") in card


def test_a_run_saved_in_shards_becomes_one_float16_file(classifier_run: Path, tmp_path: Path) -> None:
    """A run folder whose weights are split (`save_pretrained(max_shard_size=...)`, as the float16 transfer from
    the GPU machine writes them) is read through its index."""
    model = HfAttnForSequenceClassification.from_pretrained(classifier_run)
    model.save_pretrained(tmp_path / "run", max_shard_size="20KB")
    AutoTokenizer.from_pretrained(classifier_run).save_pretrained(tmp_path / "run")
    assert len(list((tmp_path / "run").glob("*.safetensors"))) > 1
    checkpoint.write_checkpoint(tmp_path / "run", tmp_path / "checkpoint")
    stored = load_file(tmp_path / "checkpoint" / "model.safetensors")
    expected = {name: value.half() for name, value in model.state_dict().items()}
    assert stored.keys() == expected.keys() and all(torch.equal(stored[name], expected[name]) for name in stored)


@pytest.mark.slow
def test_at_the_reference_size_electra_fits_only_as_its_encoder(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The sizes docs/checkpoints.md states: at the reference size (4 layers, d 384, 8,000 tokens) the ELECTRA
    pair with its generator is over the 30 MB limit, and its encoder alone fits, as a classifier does."""
    tokenizer = train_week3_tokenizer(load_sample()["train"]["text"][:200], vocab_size=300, max_seq=128)
    config = HfAttnConfig(vocab_size=8001, pad_token_id=tokenizer.pad_token_id)
    HfAttnForReplacedTokenDetection(config).save_pretrained(tmp_path / "run")
    tokenizer.save_pretrained(tmp_path / "run")
    with pytest.raises(SystemExit):
        commit_checkpoint.main(["--model", str(tmp_path / "run"), "--output", str(tmp_path / "electra")])
    error = capsys.readouterr().err
    assert "would take 30." in error and "pass --encoder-only" in error
    size = checkpoint.write_checkpoint(tmp_path / "run", tmp_path / "encoder", encoder_only=True)
    assert 20_000_000 < size < 21_000_000
