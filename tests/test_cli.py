"""`hf-attn` on saved models: a `--model` that is not a model, or whose weights do not fit, and output paths that
cannot be written are one line naming them (exit status 2); predict, evaluate and `pipeline` read the same
tokens of a long review; predict reads texts from arguments, a file or standard input."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import pickle
import re
import time
from collections.abc import Callable
from pathlib import Path

import datasets
import pytest
import torch
from helpers import SMOKE, tiny_config_kwargs
from transformers import AutoTokenizer, BertConfig, PreTrainedTokenizerBase, pipeline

from hf_attn import (
    HfAttnConfig,
    HfAttnForCausalLM,
    HfAttnForMaskedLM,
    HfAttnForMultipleChoice,
    HfAttnForSequenceClassification,
    HfAttnForTokenClassification,
    HfAttnPreTrainedModel,
    cli,
)
from hf_attn.arguments import model_folder
from hf_attn.experiments.data import load_sample
from hf_attn.prediction_files import read_records
from hf_attn.saved import load_saved_classifier
from hf_attn.tasks import load_classification
from hf_attn.week3 import train_week3_tokenizer

SAVED = Path(__file__).parent / "fixtures" / "pre-1.0" / "alibi-gqa"


@pytest.mark.parametrize("command", ["predict", "evaluate", "probe", "card", "push"])
@pytest.mark.parametrize(("folder", "message"), [("missing", "does not exist"), ("empty", "holds no config.json")])
def test_a_model_folder_that_is_not_a_model_is_a_usage_error(
    command: str, folder: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    extra = {"predict": ["some text"], "card": ["--repo-id", "a/b", "--output", "x.md"], "push": ["--repo-id", "a/b"]}
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--model", str(tmp_path / folder), *extra.get(command, [])])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert str(tmp_path / folder) in error and message in error
    assert "Traceback" not in error


def test_a_folder_of_model_folders_is_refused_naming_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for scheme in ("rope", "alibi"):
        (tmp_path / scheme).mkdir()
        for name in ("config.json", "tokenizer.json"):
            (tmp_path / scheme / name).write_text("{}")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "config.json").write_text("{}")  # no tokenizer: not a folder `evaluate` reads
    with pytest.raises(SystemExit):
        cli.main(["evaluate", "--model", str(tmp_path)])
    error = capsys.readouterr().err
    assert "its subfolders alibi, rope are model folders" in error and str(tmp_path / "alibi") in error


def test_a_file_given_as_the_model_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "README.md").write_text("a card")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["evaluate", "--model", str(tmp_path / "README.md")])
    assert exit_info.value.code == 2 and "README.md is a file" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["predict", "evaluate", "probe"])
def test_a_classifier_folder_without_its_tokenizer_is_a_usage_error(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--model", str(SAVED), *(["some text"] if command == "predict" else [])])
    assert exit_info.value.code == 2
    assert "holds no tokenizer.json" in capsys.readouterr().err


@pytest.mark.parametrize("value", [str(SAVED), "someone/hf-attn-imdb-rope"])
def test_a_saved_folder_or_a_hub_repo_id_passes(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("huggingface_hub.is_offline_mode", lambda: False)  # online: the Hub is asked later
    assert model_folder(value) == value


@pytest.mark.parametrize(("argv", "option"), [
    (["evaluate", "--limit", "0"], "--limit"), (["evaluate", "--limit", "-3"], "--limit"),
    (["prepare", "--output-dir", "o", "--vocab-size", "0"], "--vocab-size"),
    (["prepare", "--output-dir", "o", "--max-seq", "-1"], "--max-seq"),
    (["generate", "--top-k", "0", "a prompt"], "--top-k"), (["baseline", "--max-tokens", "0"], "--max-tokens"),
])
def test_a_count_that_is_not_a_whole_number_above_zero_is_refused_by_name(
    argv: list[str], option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if argv[0] in {"evaluate", "generate"}:
        save_tiny_classifier(tmp_path)
        argv = [argv[0], "--model", str(tmp_path), *argv[1:]]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit_info.value.code == 2 and f"argument {option}: expected a whole number above 0" in error


@pytest.mark.parametrize("command", ["evaluate", "perplexity", "baseline"])
def test_the_default_hub_dataset_offline_names_the_flag_that_reads_a_local_copy(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    argv = {"evaluate": ["--model", str(tmp_path)], "perplexity": ["--model", str(tmp_path), "--lengths", "8"],
            "baseline": []}[command]
    if command == "evaluate":
        save_tiny_classifier(tmp_path)
    elif command == "perplexity":
        save_tiny_classifier(tmp_path, HfAttnForCausalLM, is_decoder=True)
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, *argv])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit_info.value.code == 2 and "stanfordnlp/imdb" in error and "--dataset" in error


@pytest.mark.parametrize(("argv", "resume_hint"), [
    (["train", "--config", "configs/smoke.yaml"], True), (["predict", "--model", "{model}", "a"], False)])
def test_ctrl_c_ends_a_command_in_one_line_that_says_how_to_continue(
    argv: list[str], resume_hint: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C (KeyboardInterrupt wherever the work is) exits 130, as shells expect, with one line and no
    traceback; a run's line names --resume."""
    def interrupted(args: object) -> None:
        raise KeyboardInterrupt

    save_tiny_classifier(tmp_path)
    monkeypatch.setattr(f"hf_attn.commands.{argv[0]}.run", interrupted)
    with pytest.raises(SystemExit) as exit_info:
        cli.main([part.format(model=tmp_path) for part in argv])
    error = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 130 and not any("Traceback" in line for line in error)
    assert error[-1] == f"hf-attn {argv[0]}: interrupted" + (
        "; the same command with --resume continues from its last checkpoint" if resume_hint else "")


MODEL_COMMANDS = {"predict": ["some text"], "evaluate": [], "probe": [], "generate": ["a prompt"],
                  "perplexity": ["--lengths", "8"], "card": ["--repo-id", "a/b", "--output", "x.md"],
                  "push": ["--repo-id", "a/b"], "checkpoint": ["--output", "out"]}


@pytest.mark.parametrize("command", list(MODEL_COMMANDS))
def test_a_missing_folder_that_looks_like_a_hub_id_is_one_line_offline(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offline (as every test runs), a relative path that does not exist is not looked up on the Hub: one line
    naming it (transformers would end in two tracebacks, LocalEntryNotFoundError and OSError)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--model", "runs/no-such-run", *MODEL_COMMANDS[command]])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "runs/no-such-run does not exist" in error and "Traceback" not in error


def test_a_hub_repo_that_cannot_be_loaded_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repo id that passes the argument check (online) but that transformers cannot fetch: its OSError, one line."""
    monkeypatch.setattr("huggingface_hub.is_offline_mode", lambda: False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["predict", "--model", "runs/no-such-run", "some text"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("hf-attn predict: error: ") and len(error.strip().splitlines()) == 1


def test_text_that_is_not_utf8_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytes that are not UTF-8 reach Python as lone surrogates (the command line, a file, standard input), which
    the tokenizer cannot encode: each source names the text or line and the byte; `pipeline` gets a ValueError."""
    save_tiny_classifier(tmp_path)
    latin1 = "caf\xe9".encode("latin-1").decode("utf-8", errors="surrogateescape")  # what Python makes of argv
    (tmp_path / "texts.txt").write_bytes(b"a good film\ncaf\xe9\n")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"caf\xe9\n"), encoding="utf-8"))
    for argv, named in (
        (["a good film", latin1], "text 2 is not UTF-8: the byte 0xe9 after 'caf'"),
        (["--input", str(tmp_path / "texts.txt")], "--input line 2 is not UTF-8: the byte 0xe9"),
        (["--input", "-"], "--input line 1 is not UTF-8: the byte 0xe9"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(["predict", "--model", str(tmp_path), *argv])
        assert exit_info.value.code == 2
        error = capsys.readouterr().err
        assert named in error and "Traceback" not in error
    with pytest.raises(SystemExit):
        cli.main(["generate", "--model", str(tmp_path), "a good", latin1])
    assert "prompt 2 is not UTF-8" in capsys.readouterr().err
    classify = pipeline("text-classification", model=str(tmp_path), tokenizer=str(tmp_path))
    with pytest.raises(ValueError, match=r"lone surrogate U\+D83D"):
        classify("a good film \ud83d")


def save_tiny_classifier(
    folder: Path, model_class: type[HfAttnPreTrainedModel] = HfAttnForSequenceClassification, **config: object
) -> HfAttnPreTrainedModel:
    """A 2-layer model that reads the first 16 tokens of a text (16 positions and `read_length` unless `config`
    says otherwise) and a Week 3 tokenizer trained on a few words, saved to `folder`."""
    tokenizer = train_week3_tokenizer(["a good film", "a bad film", "good good bad"] * 5, vocab_size=270, max_seq=16)
    settings = tiny_config_kwargs(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                  max_position_embeddings=16, read_length=16)
    torch.manual_seed(0)
    model = model_class(HfAttnConfig(**{**settings, **config}))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model


def truncate_weights(folder: Path) -> None:
    """Cut the saved model's weights file to its first half, as an interrupted download or save leaves it."""
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])


@pytest.mark.parametrize("outcome", ["success", "error"])
def test_a_command_leaves_the_process_group_it_ran_in(outcome: str, tmp_path: Path) -> None:
    """Under `accelerate launch` each process joins a gloo group, and one that exits still in it can abort after
    its work is done (which failed a two-process run); every command leaves the group, whether it ended well
    or in an error. A group of one process stands in for accelerate's here."""
    save_tiny_classifier(tmp_path)
    if outcome == "error":
        truncate_weights(tmp_path)
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        with contextlib.suppress(SystemExit):
            cli.main(["predict", "--model", str(tmp_path), "a good film"])
        assert not torch.distributed.is_initialized()
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def test_a_truncated_weights_file_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command and the API name the file (safetensors' own error does not)."""
    save_tiny_classifier(tmp_path)
    truncate_weights(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["predict", "--model", str(tmp_path), "a good film"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "truncated or corrupt" in error and "Traceback" not in error
    assert str(tmp_path / "model.safetensors") in error
    with pytest.raises(ValueError, match=f"^{re.escape(str(tmp_path / 'model.safetensors'))} cannot be read .* "
                                         "truncated or corrupt"):
        load_saved_classifier(tmp_path)


def test_empty_and_whitespace_texts_are_classified_by_the_bias_through_pipeline_and_predict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty review has no tokens: `pipeline` and `hf-attn predict` return the label the classifier's
    bias alone gives, with softmax(bias) as its score, instead of crashing."""
    model = save_tiny_classifier(tmp_path)
    expected = model.classifier.bias.softmax(dim=-1).max().item()
    classify = pipeline("text-classification", model=str(tmp_path), tokenizer=str(tmp_path))
    for text in ("", "   "):
        assert classify(text)[0]["score"] == pytest.approx(expected, abs=1e-6)
    cli.main(["predict", "--model", str(tmp_path), "", "a good film"])
    first_line = capsys.readouterr().out.splitlines()[0]
    assert first_line.split("\t")[1] == f"{expected:.3f}"


def first_tokens_probabilities(model: HfAttnPreTrainedModel, tokenizer: PreTrainedTokenizerBase, texts: list[str],
                               length: int | None) -> torch.Tensor:
    """The classifier's probabilities for each text's first `length` tokens (all for None), each text on its own:
    every token is asked for and the cut made here, not by the model's `read_length`."""
    model.eval()
    model.config.read_length = None
    with torch.no_grad():
        return torch.stack([
            model(torch.tensor([tokenizer(text, truncation=False)["input_ids"][:length]])).logits[0].softmax(-1)
            for text in texts
        ])


def predicted(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[tuple[str, float, str]]:
    """`hf-attn predict ARGV`'s lines as (label, score, text)."""
    cli.main(["predict", *argv])
    return [(label, float(score), text) for label, score, text in
            (line.split("\t", 2) for line in capsys.readouterr().out.splitlines())]


@pytest.mark.parametrize("read_length", [None, "40", "all"])
def test_predict_pipeline_and_evaluate_read_the_same_first_tokens(
    read_length: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --read-length, predict, evaluate and a `pipeline` with its defaults read the first `read_length`
    tokens of a review, as the saved config says (16 here; the RoPE model has 64 positions); with it, that many
    (`all`: every token)."""
    model = save_tiny_classifier(tmp_path, max_position_embeddings=64)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    reviews = load_sample()["test"][:6]
    length = {None: 16, "40": 40, "all": None}[read_length]
    expected = first_tokens_probabilities(model, tokenizer, reviews["text"], length)
    other = first_tokens_probabilities(model, tokenizer, reviews["text"], 20 if length is None else None)
    assert (expected - other).abs().max() > 1e-3  # reading another length would show
    option = [] if read_length is None else ["--read-length", read_length]

    (tmp_path / "reviews.jsonl").write_text("".join(json.dumps({"text": text}) + "\n" for text in reviews["text"]))
    cli.main(["predict", "--model", str(tmp_path), "--input", str(tmp_path / "reviews.jsonl"), *option])
    scores = [json.loads(line)["score"] for line in capsys.readouterr().out.splitlines()]
    assert scores == pytest.approx(expected.max(-1).values.tolist(), abs=1e-5)
    # float32, as predict computes: the reference is float32, and what is compared is the tokens read.
    cli.main(["evaluate", "--model", str(tmp_path), "--dataset", "sample", "--limit", "6", "--precision", "fp32",
              *option])
    loss = -expected[range(6), reviews["label"]].log().mean().item()
    assert json.loads(capsys.readouterr().out)["test_loss"] == pytest.approx(loss, abs=1e-5)
    if read_length is None:
        classify = pipeline("text-classification", model=str(tmp_path), tokenizer=str(tmp_path))
        pipeline_scores = [prediction["score"] for prediction in classify(reviews["text"])]
        assert pipeline_scores == pytest.approx(expected.max(-1).values.tolist(), abs=1e-5)


def test_a_classifier_saved_by_1_0_reads_its_tokenizers_length(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """hf_attn 1.0 kept the read length in the tokenizer's `model_max_length` (and named the stride
    `classifier_window_stride`): such a folder reads what it read then."""
    model = save_tiny_classifier(tmp_path, max_position_embeddings=64, window_stride=8)
    config = json.loads((tmp_path / "config.json").read_text())
    del config["read_length"]
    config["classifier_window_stride"] = config.pop("window_stride")
    (tmp_path / "config.json").write_text(json.dumps(config))
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    tokenizer.model_max_length = 24
    tokenizer.save_pretrained(tmp_path)
    assert HfAttnConfig.from_pretrained(tmp_path).window_stride == 8
    review = load_sample()["test"][0]["text"]
    expected = first_tokens_probabilities(model, tokenizer, [review], 24)[0]
    [(label, score, _)] = predicted(["--model", str(tmp_path), review], capsys)
    assert score == pytest.approx(float(expected.max()), abs=1e-3)


@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_a_learned_position_model_reads_its_length_and_no_more(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A long review reaches a learned-position model cut to its 16 tokens; asking for 17 is a one-line usage
    error naming the limit and the way on, before any review is read."""
    save_tiny_classifier(tmp_path, position_embedding_type="learned")
    review = load_sample()["test"][0]["text"]
    assert len(predicted(["--model", str(tmp_path), review], capsys)) == 1
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--model", str(tmp_path), "--read-length", "17",
                  *(["a good film"] if command == "predict" else ["--dataset", "nowhere/imdb"])])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "`read_length`=17" in error and "cover max_position_embeddings=16 tokens" in error
    assert "window_stride" in error and "Traceback" not in error


def test_evaluate_scores_a_run_on_the_data_it_trained_on_and_names_it_when_it_has_moved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run trained on a CSV records the file and its columns (metrics.json's experiment): `evaluate` without
    --dataset scores that file's test split (it loaded IMDb from the Hub); where the file has moved, one line names
    it and the --dataset with its columns that scores the run."""
    model = save_tiny_classifier(tmp_path / "run")
    with (tmp_path / "reviews.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["sentence", "sentiment"])
        writer.writerows([f"a {'good' if i % 2 else 'bad'} film {i}", "good" if i % 2 else "bad"] for i in range(40))
    spec = {"kind": "datasets", "path": str(tmp_path / "reviews.csv"), "text_column": "sentence",
            "label_column": "sentiment"}
    (tmp_path / "run" / "metrics.json").write_text(json.dumps({"experiment": {"dataset": spec}}))
    cli.main(["evaluate", "--model", str(tmp_path / "run"), "--precision", "fp32"])
    scored = json.loads(capsys.readouterr().out)
    test = load_classification(str(tmp_path / "reviews.csv"), text_column="sentence",
                               label_column="sentiment").splits["test"]
    probabilities = first_tokens_probabilities(model, AutoTokenizer.from_pretrained(tmp_path / "run"), test["text"], 16)
    loss = -probabilities[range(len(test)), test["label"]].log().mean().item()
    assert scored["test_reviews"] == 4 and scored["test_loss"] == pytest.approx(loss, abs=1e-5)

    (tmp_path / "reviews.csv").rename(tmp_path / "moved.csv")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["evaluate", "--model", str(tmp_path / "run")])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit_info.value.code == 2 and f"{tmp_path / 'run'} was trained on {tmp_path / 'reviews.csv'}" in error
    assert error.endswith("--dataset PATH --text-column sentence --label-column sentiment")


def test_predict_reads_a_file_or_standard_input_one_text_or_json_object_a_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """More texts than a batch, from a file, standard input and JSONL: one result per text in input order, each
    what `pipeline` gives the text on its own; a blank line is no text (skipped), a record's empty text is one."""
    save_tiny_classifier(tmp_path / "model")
    model = ["--model", str(tmp_path / "model")]
    texts = [f"{'good ' * (i % 7)}film{' bad' * (i % 5)}" for i in range(70)]
    texts[3] = ""
    classify = pipeline("text-classification", model=str(tmp_path / "model"), tokenizer=str(tmp_path / "model"))
    expected = [classify(text)[0] for text in texts]

    def assert_expected(results: list[tuple[str, float, str]], rows: list[int]) -> None:
        assert [(label, text) for label, _, text in results] == [(expected[row]["label"], texts[row]) for row in rows]
        assert [score for _, score, _ in results] == pytest.approx([expected[row]["score"] for row in rows], abs=6e-4)

    lines = [row for row, text in enumerate(texts) if text]
    (tmp_path / "reviews.txt").write_text("\n".join(texts) + "\n")
    assert_expected(predicted([*model, "--input", str(tmp_path / "reviews.txt")], capsys), lines)
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(texts)))
    assert_expected(predicted([*model, "--input", "-"], capsys), lines)

    records = [{"id": number, "text": text} for number, text in enumerate(texts)]
    (tmp_path / "reviews.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    monkeypatch.setattr("sys.stdin", io.StringIO((tmp_path / "reviews.jsonl").read_text()))
    for source in ([str(tmp_path / "reviews.jsonl")], ["-", "--jsonl"]):
        cli.main(["predict", *model, "--input", *source])
        written = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [{key: one[key] for key in ("id", "text")} for one in written] == records
        assert_expected([(one["label"], one["score"], one["text"]) for one in written], list(range(len(texts))))


@pytest.mark.parametrize(("suffix", "options"), [
    (".csv", []), (".tsv", []), ("", ["--format", "csv"]), (".jsonl", ["--text-key", "review"]),
])
def test_predict_reads_a_table_or_jsonl_by_its_text_column_and_writes_each_record_back_with_the_prediction(
    suffix: str, options: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CSV or TSV is read by its header and the text's column, not as lines (its header and gold labels were
    classified as texts), and a JSONL by the key --text-key names; each record comes back in its format, read here
    with the standard library, with the prediction beside its fields; a blank line is skipped."""
    save_tiny_classifier(tmp_path / "model")
    records = [{"review": f"a {'good' if i % 3 else 'bad'}, {'good ' * i}film", "stars": str(i % 5)}
               for i in range(40)]
    delimiter = "\t" if suffix == ".tsv" else ","
    text = io.StringIO()
    if suffix == ".jsonl":
        text.writelines(json.dumps(record) + "\n" + ("\n" if row == 5 else "") for row, record in enumerate(records))
    else:
        writer = csv.DictWriter(text, fieldnames=["review", "stars"], delimiter=delimiter, lineterminator="\n")
        writer.writeheader()
        writer.writerows(records[:5])
        text.write("\n")
        writer.writerows(records[5:])
    if suffix:
        (tmp_path / f"reviews{suffix}").write_text(text.getvalue())
        source = str(tmp_path / f"reviews{suffix}")
    else:
        monkeypatch.setattr("sys.stdin", io.StringIO(text.getvalue()))
        source = "-"
    cli.main(["predict", "--model", str(tmp_path / "model"), "--input", source, "--text-column", "review", *options,
              "--score-key", "probability"])
    output = capsys.readouterr().out
    written = [json.loads(line) for line in output.splitlines()] if suffix == ".jsonl" else \
        list(csv.DictReader(io.StringIO(output), delimiter=delimiter))
    assert [list(one) for one in written] == [["review", "stars", "label", "probability"]] * len(records)
    assert [{"review": one["review"], "stars": one["stars"]} for one in written] == records
    classify = pipeline("text-classification", model=str(tmp_path / "model"), tokenizer=str(tmp_path / "model"))
    expected = classify([record["review"] for record in records])
    assert [one["label"] for one in written] == [one["label"] for one in expected]
    assert [float(one["probability"]) for one in written] == pytest.approx([one["score"] for one in expected],
                                                                           abs=6e-4)


@pytest.mark.parametrize(("name", "content", "options", "message"), [
    ("reviews.csv", "review,stars\nfine,3\n", [], "--input has no column 'text' (its header: review, stars); name "
     "the text's column with --text-column"),
    ("reviews.csv", "review,label\nfine,3\n", ["--text-column", "review"], "--input's header already has \"label\""),
    ("reviews.csv", "review,stars\nfine,3\ngood, fun,4\n", ["--text-column", "review"],
     "--input line 3 has 3 fields where its header has 2; quote a field that holds a comma"),
    ("reviews.jsonl", '{"review": "fine"}\n', [], '--input line 1 has no "text" string; each line needs {"text": '
     '"..."}, or name the text\'s key with --text-key'),
    ("-", '{"text": "fine"}\n', [], "--input line 1 is a JSON object, and the input is read as one text per line; "
     "read JSONL with --format jsonl"),
    ("reviews.txt", "fine\n", ["--text-column", "review"], "--text-column review names a column of CSV, TSV or JSONL "
     "input, but the input is read as one text per line"),
])
def test_input_that_is_not_read_as_its_format_says_is_one_line_naming_the_option(
    name: str, content: str, options: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch
) -> None:
    save_tiny_classifier(tmp_path)
    (tmp_path / name).write_text(content)
    monkeypatch.setattr("sys.stdin", io.StringIO(content))
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["predict", "--model", str(tmp_path), "--input", name if name == "-" else str(tmp_path / name),
                  *options])
    output = capsys.readouterr()
    assert exit_info.value.code == 2 and message in output.err.strip().splitlines()[-1] and output.out == ""


@pytest.mark.parametrize(("lines", "message"), [
    (['{"text": "a good film"}', '{"text": "a bad'], "--input line 2 is not valid JSON"),
    (['{"text": "a good film"}', '{"review": "a bad film"}'], '--input line 2 has no "text" string'),
    (['["a good film"]'], '--input line 1 has no "text" string'),
])
def test_a_jsonl_line_that_is_not_a_text_record_is_an_error_naming_it(
    lines: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    save_tiny_classifier(tmp_path)
    (tmp_path / "texts.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["predict", "--model", str(tmp_path), "--input", str(tmp_path / "texts.jsonl")])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("clash", ["label", "score"])
def test_a_jsonl_record_with_a_field_the_prediction_would_overwrite_is_refused_and_a_named_key_keeps_it(
    clash: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Gold labels (or any "label"/"score" field) are the user's data: predict refuses in one line naming the line
    and the flag, before printing that record; with --label-key/--score-key the prediction sits beside them."""
    save_tiny_classifier(tmp_path)
    records = [{"text": "a good film", "stars": 5}, {"text": "a bad film", clash: "gold"}]
    (tmp_path / "texts.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    model = ["predict", "--model", str(tmp_path), "--input", str(tmp_path / "texts.jsonl")]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(model)
    output = capsys.readouterr()
    option = f"--{clash}-key"
    last_line = output.err.strip().splitlines()[-1]
    assert exit_info.value.code == 2 and f'line 2 already has "{clash}"' in last_line and option in last_line
    assert len(output.out.splitlines()) <= 1  # the first record only
    cli.main([*model, option, f"predicted_{clash}"])
    written = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [{key: one[key] for key in record} for one, record in zip(written, records, strict=True)] == records
    assert all(f"predicted_{clash}" in one for one in written)
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*model, "--label-key", "text"])
    assert exit_info.value.code == 2 and "--label-key and --score-key must differ" in capsys.readouterr().err


def test_blank_lines_of_a_jsonl_input_are_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A JSONL file ending in a blank line (as many editors write it), or with one between records, holds its
    records and nothing else; so does a plain text file (a blank line was classified as an empty text)."""
    save_tiny_classifier(tmp_path)
    (tmp_path / "texts.jsonl").write_text('{"text": "a good film"}\n\n  \n{"text": "a bad film"}\n\n')
    cli.main(["predict", "--model", str(tmp_path), "--input", str(tmp_path / "texts.jsonl")])
    written = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [one["text"] for one in written] == ["a good film", "a bad film"]
    assert list(read_records(io.StringIO("a\n\n  \nb\n"), "lines")) == [{"text": "a"}, {"text": "b"}]


@pytest.mark.parametrize(("argv", "message"), [
    ([], "one of the two"),
    (["a good film", "--input", "{folder}/texts.txt"], "one of the two"),
    (["--input", "{folder}"], "is not a file"),
])
def test_predict_takes_texts_or_an_input_file(argv: list[str], message: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    save_tiny_classifier(tmp_path)
    (tmp_path / "texts.txt").write_text("a good film\n")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["predict", "--model", str(tmp_path), *[arg.format(folder=tmp_path) for arg in argv]])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def save_bert_config_folder(folder: Path) -> None:
    """A folder whose config.json is BERT's, next to this package's classifier weights and tokenizer."""
    model = save_tiny_classifier(folder)
    config = model.config
    BertConfig(vocab_size=config.vocab_size, hidden_size=config.hidden_size, num_hidden_layers=2,
               num_attention_heads=4, intermediate_size=config.intermediate_size).save_pretrained(folder)


@pytest.mark.parametrize("command", ["predict", "evaluate", "probe"])
@pytest.mark.parametrize(("make_folder", "named"), [
    (save_bert_config_folder, ["model_type 'bert'", "bert.embeddings.", "model.embed_tokens.weight"]),
    (lambda folder: save_tiny_classifier(folder, HfAttnForMaskedLM),
     ["was saved as HfAttnForMaskedLM, which has no classifier head", "hf-attn train", "init_from"]),
])
def test_weights_that_do_not_fit_the_classifier_are_an_error_naming_them(
    command: str, make_folder: Callable[[Path], object], named: list[str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    """Another model type's config.json, or a masked-LM folder read as a classifier, would load with random
    weights where the folder has none; every command that loads a classifier refuses it instead."""
    make_folder(tmp_path)
    extra = {"predict": ["a good film"], "evaluate": ["--dataset", "sample", "--limit", "4"]}
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--model", str(tmp_path), *extra.get(command, [])])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert all(name in error for name in named), error
    assert "Traceback" not in error


@pytest.mark.parametrize("command", ["predict", "evaluate", "probe"])
@pytest.mark.parametrize("head", [HfAttnForTokenClassification, HfAttnForMultipleChoice])
def test_a_folder_saved_as_another_head_is_refused_in_one_line_naming_it(
    command: str, head: type[HfAttnPreTrainedModel], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 3-label token classifier's head has the shape of a 3-label sentence classifier's, and loaded into it
    would answer (`LABEL_1 0.35`); a multiple-choice head fails on its shape deep inside transformers. Both are
    refused by what config.json says they are, before anything is read."""
    save_tiny_classifier(tmp_path, head, num_labels=3)
    capsys.readouterr()  # the save's progress bar
    extra = {"predict": ["a good film"], "evaluate": ["--dataset", "sample", "--limit", "4"]}
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--model", str(tmp_path), *extra.get(command, [])])
    captured = capsys.readouterr()
    assert exit_info.value.code == 2 and captured.out == ""
    assert captured.err.startswith(f"hf-attn {command}: error: {tmp_path} does not hold a "
                                   f"HfAttnForSequenceClassification: it was saved as {head.__name__}, which has no "
                                   "classifier head for whole texts; pass a classifier folder"), captured.err
    assert len(captured.err.splitlines()) == 1, captured.err


def test_a_config_naming_no_architecture_is_read_as_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A hand-made config.json without `architectures` says nothing of its head: the classifier loads as before."""
    model = save_tiny_classifier(tmp_path).eval()
    config = json.loads((tmp_path / "config.json").read_text())
    del config["architectures"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    with torch.no_grad():
        probabilities = model(**tokenizer("a good film", return_tensors="pt")).logits.softmax(-1)[0]
    assert predicted(["--model", str(tmp_path), "a good film"], capsys) == [
        (model.config.id2label[probabilities.argmax().item()], pytest.approx(probabilities.max().item(), abs=1e-3),
         "a good film")]


def test_a_weight_of_another_shape_is_named_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A config.json whose num_labels was edited: transformers raises on the shapes with advice to pass
    `ignore_mismatched_sizes`; the command names the weights instead."""
    save_tiny_classifier(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config.update(num_labels=3, id2label={str(i): f"LABEL_{i}" for i in range(3)},
                  label2id={f"LABEL_{i}": i for i in range(3)})
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["predict", "--model", str(tmp_path), "a good film"])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit_info.value.code == 2
    assert error.startswith(f"hf-attn predict: error: the weights in {tmp_path} do not fit "
                            "HfAttnForSequenceClassification (mismatched classifier.bias, classifier.weight)"), error


class Unpickled:
    """What a hostile pickle holds: unpickling it calls `Path.touch` on a file the test looks for."""

    def __init__(self, witness: Path) -> None:
        self.witness = witness

    def __reduce__(self) -> tuple:
        return (Path.touch, (self.witness,))


def test_a_pickled_weights_file_is_refused_in_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch's `weights_only` loader runs none of a hostile `pytorch_model.bin`, but its error ends a 30-line
    traceback with the advice to load it with `weights_only=False`: the command says it refuses, in one line."""
    save_tiny_classifier(tmp_path / "model")
    (tmp_path / "model" / "model.safetensors").unlink()
    with open(tmp_path / "model" / "pytorch_model.bin", "wb") as file:
        pickle.dump({"classifier.weight": Unpickled(tmp_path / "code-ran")}, file)
    capsys.readouterr()  # the save's progress bar
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["predict", "--model", str(tmp_path / "model"), "a good film"])
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and not (tmp_path / "code-ran").exists()
    assert error.startswith(f"hf-attn predict: error: {tmp_path / 'model' / 'pytorch_model.bin'} holds pickled "
                            "objects besides tensors, and hf-attn refuses to unpickle it"), error
    assert len(error.splitlines()) == 1 and "weights_only=False" not in error and "safetensors" in error


def test_a_tokenizer_file_that_cannot_be_read_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A merge of a token the vocabulary lacks: `tokenizers` says which token, not which file."""
    save_tiny_classifier(tmp_path)
    tokenizer_file = tmp_path / "tokenizer.json"
    saved = json.loads(tokenizer_file.read_text())
    saved["model"]["merges"][0] = ["Ġzzqx", "y"]
    tokenizer_file.write_text(json.dumps(saved))
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["predict", "--model", str(tmp_path), "a good film"])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit_info.value.code == 2
    assert error.startswith(f"hf-attn predict: error: {tokenizer_file} cannot be read (Token `Ġzzqx` out of "
                            "vocabulary"), error


@pytest.mark.parametrize(("argv", "message"), [
    (["train", "--config", str(SMOKE), "--output-dir", "{run}", "--results", "{file}/smoke.json"],
     "{file} is a file, not a folder"),
    (["train", "--config", str(SMOKE), "--output-dir", "{run}", "--results", "{folder}"],
     "{folder} is a folder; pass a file path"),
    (["pretrain", "--config", str(SMOKE), "--output-dir", "{file}"], "{file} is a file; pass a folder path"),
    (["baseline", "--dataset", "sample", "--output", "{file}/tfidf/128.json"], "{file} is a file, not a folder"),
    (["card", "--model", str(SAVED), "--repo-id", "a/b", "--output", "{folder}"], "{folder} is a folder"),
    (["probe", "--model", "{folder}", "--output-dir", "{file}/pictures"], "{file} is a file, not a folder"),
    (["bench", "--output", "{file}/bench.json"], "{file} is a file, not a folder"),
    (["bench", "--markdown", "{folder}"], "{folder} is a folder"),
])
def test_an_output_path_that_cannot_be_written_is_a_usage_error_before_the_work(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--results, --output and --output-dir are checked when the arguments are read: nothing is trained,
    created or written (before, a run found out at its very end)."""
    save_tiny_classifier(tmp_path / "model")
    (tmp_path / "file").write_text("")
    paths = {"file": str(tmp_path / "file"), "folder": str(tmp_path / "model"), "run": str(tmp_path / "run")}
    started = time.perf_counter()
    with pytest.raises(SystemExit) as exit_info:
        cli.main([arg.format(**paths) for arg in argv])
    assert exit_info.value.code == 2 and time.perf_counter() - started < 5
    assert message.format(**paths) in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["file", "model"]


def test_resuming_from_a_checkpoint_cut_short_names_it_and_the_ways_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run killed while `Trainer` wrote checkpoint-50 (weights cut short, no trainer_state.json, which is
    written last): `--resume` names that checkpoint and what is wrong with it, the earlier checkpoint to resume
    from and --overwrite, in one line, before any data is read."""
    run = tmp_path / "run"
    for step in (40, 50):
        save_tiny_classifier(run / f"checkpoint-{step}")
    (run / "checkpoint-40" / "trainer_state.json").write_text("{}")
    truncate_weights(run / "checkpoint-50")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--config", str(SMOKE), "--output-dir", str(run), "--resume"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert f"{run / 'checkpoint-50'} is incomplete (trainer_state.json and model.safetensors missing or cut short)" \
        in error
    assert "resume from checkpoint-40" in error and "--overwrite" in error and "Traceback" not in error
    assert len(error.strip().splitlines()) == 1
