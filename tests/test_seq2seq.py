"""The date-normalisation task (`hf_attn.tasks.dates`) and its encoder-decoder run (`hf-attn seq2seq`).

The targets are checked against independent readings of the sources (babel's own parser, `strptime`, the
month names of CLDR), the metric against hand-written examples, and the saved folder against `hf-attn generate`.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import re
from pathlib import Path

import pytest

pytest.importorskip("babel")
from babel.dates import get_month_names, parse_date  # noqa: E402

from hf_attn.experiments.config import Experiment, ExperimentConfigError, load_experiment  # noqa: E402
from hf_attn.experiments.seq2seq import (  # noqa: E402
    decode,
    exact_match,
    exact_match_scores,
    tokenize_pairs,
    train_seq2seq,
)
from hf_attn.tasks.dates import (  # noqa: E402
    FORMATS,
    LOCALES,
    DateGeneratorSettings,
    date_pattern,
    generate_date_pairs,
    write_date,
)

SMALL = DateGeneratorSettings(n_train=300, n_validation=40, n_test=60)
CONFIG = Path(__file__).resolve().parent.parent / "configs" / "seq2seq" / "dates-rope.yaml"


def test_the_generator_is_deterministic_for_a_seed() -> None:
    assert generate_date_pairs(SMALL, seed=3) == generate_date_pairs(SMALL, seed=3)
    assert generate_date_pairs(SMALL, seed=3)["train"] != generate_date_pairs(SMALL, seed=4)["train"]


def test_splits_have_their_sizes_and_share_no_source_nor_date_locale_format() -> None:
    splits = generate_date_pairs(SMALL, seed=0)
    assert [len(splits[name]) for name in ("train", "validation", "test")] == [300, 40, 60]
    for first, second in itertools.combinations(splits.values(), 2):
        assert not {pair.source for pair in first} & {pair.source for pair in second}
        assert not {(p.date, p.locale, p.format) for p in first} & {(p.date, p.locale, p.format) for p in second}
    every = [pair for split in splits.values() for pair in split]
    assert {pair.locale for pair in every} == set(LOCALES) and {pair.format for pair in every} == set(FORMATS)
    assert all(1900 <= pair.date.year <= 2099 for pair in every)


def test_targets_are_the_iso_date_the_source_reads_as() -> None:
    """Short sources read back with babel's parser, dotted ones with `strptime`; long ones hold the year, the day
    and the month's CLDR name."""
    checked = {"short": 0, "dotted": 0, "long": 0}
    for pair in generate_date_pairs(DateGeneratorSettings(n_train=1500, n_validation=1, n_test=1), seed=1)["train"]:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", pair.target)
        target = datetime.date.fromisoformat(pair.target)
        locale, text = pair.source.split(": ", 1)
        assert locale == pair.locale
        if pair.format == "short":
            assert parse_date(text, locale=locale, format="short") == target, pair
        elif pair.format == "dotted":
            assert datetime.datetime.strptime(text, "%d.%m.%Y").date() == target, pair
        elif pair.format == "long":
            month = get_month_names("wide", context="format", locale=locale)[target.month]
            assert month in text and str(target.year) in text, pair
            assert str(target.day) in re.findall(r"\d+", text), pair
        else:
            continue
        checked[pair.format] += 1
    assert min(checked.values()) > 50


def test_no_source_reads_as_two_dates() -> None:
    """Day and month both 1-12 in every locale and format: the locale prefix and four-digit years keep sources
    apart (`3/5/1987` is March 5 in `en`, May 3 in `es`; `3/5/87` would also be 2087)."""
    seen: dict[str, datetime.date] = {}
    for year, month, day in itertools.product((1987, 2087), range(1, 13), range(1, 13)):
        date = datetime.date(year, month, day)
        for locale, format_name in itertools.product(LOCALES, FORMATS):
            assert seen.setdefault(write_date(date, locale, format_name), date) == date


def test_two_digit_years_are_widened_and_the_locale_leads() -> None:
    assert date_pattern("en", "short") == "M/d/y"
    assert date_pattern("de", "short") == "dd.MM.y"
    assert write_date(datetime.date(1987, 3, 5), "en", "short") == "en: 3/5/1987"
    assert write_date(datetime.date(1987, 3, 5), "de", "long") == "de: 5. März 1987"
    assert write_date(datetime.date(2024, 12, 1), "fr", "month-first") == "fr: décembre 1, 2024"


def test_exact_match_against_hand_written_examples() -> None:
    # Week 3 decoding spaces words ("1987 - 03 - 05"): still a match; a wrong day or an extra token is not
    assert exact_match(["1987 - 03 - 05", "1987-03-06", "2001-01-01 -"], ["1987-03-05"] * 2 + ["2001-01-01"]) == 1 / 3
    pairs = generate_date_pairs(SMALL, seed=0)["test"][:3]
    pairs = [dataclasses.replace(pair, locale=locale) for pair, locale in zip(pairs, ("en", "de", "en"))]
    predictions = [pairs[0].target, pairs[1].target, "1900-01-01"]
    assert exact_match_scores(predictions, pairs) == {"overall": 2 / 3, "by_locale": {"de": 1.0, "en": 0.5}}
    with pytest.raises(ValueError, match="2 predictions for 3 targets"):
        exact_match(predictions[:2], [pair.target for pair in pairs])


@pytest.mark.parametrize(("settings", "message"), [
    (dict(locales=["en", "xx_nowhere"]), "not a CLDR locale"),
    (dict(formats=["short", "shortest"]), "unknown"),
    (dict(n_train=0), "positive integer"),
    (dict(n_train=10**6, first_year=2000, last_year=2000), "too many"),
])
def test_bad_generator_settings_are_clear_errors(settings: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        generate_date_pairs(DateGeneratorSettings(**settings), seed=0)


def test_an_experiment_checks_its_generator_section() -> None:
    with pytest.raises(ExperimentConfigError, match="unknown key `n_trian`"):
        load_experiment(CONFIG, ["seq2seq.generator.n_trian=10"])
    with pytest.raises(ExperimentConfigError, match="not a CLDR locale"):
        load_experiment(CONFIG, ["seq2seq.generator.locales=[en, qq_zz]"])
    assert load_experiment(CONFIG).seq2seq.generator["n_train"] > 0


def tiny_experiment(**changes: object) -> Experiment:
    experiment = load_experiment(CONFIG, [
        "seq2seq.generator.n_train=200", "seq2seq.generator.n_validation=16", "seq2seq.generator.n_test=24",
        "tokenizer_vocab_size=300",
        "model.hidden_size=32", "model.num_hidden_layers=1", "model.num_attention_heads=2",
        "model.intermediate_size=64", "training.num_train_epochs=1", "training.per_device_train_batch_size=32",
        "training.logging_steps=100", "training.disable_tqdm=true", "seq2seq.num_beams=2",
    ])
    return dataclasses.replace(experiment, **changes)


def test_a_tiny_run_saves_a_folder_that_hf_attn_generate_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from transformers import AutoTokenizer, EncoderDecoderModel

    from hf_attn import cli

    metrics = train_seq2seq(tiny_experiment(), tmp_path / "run")
    for key in ("test_exact_match_greedy", "test_exact_match_beam", "val_exact_match_greedy", "val_exact_match_beam"):
        assert 0.0 <= metrics[key] <= 1.0
    assert set(metrics["test_exact_match_beam_by_locale"]) <= set(LOCALES)
    assert (metrics["n_train"], metrics["n_test"], metrics["num_beams"]) == (200, 24, 2)
    assert metrics["heatmaps"] and all(0 < Path(png).stat().st_size < 1_000_000 for png in metrics["heatmaps"])

    model = EncoderDecoderModel.from_pretrained(tmp_path / "run").eval()
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "run")
    assert model.config.decoder_start_token_id == tokenizer.eos_token_id
    assert model.generation_config.eos_token_id in (tokenizer.eos_token_id, [tokenizer.eos_token_id])
    assert model.config.decoder.is_decoder and model.config.decoder.add_cross_attention
    assert not model.config.encoder.is_decoder
    sources = [pair.source for pair in generate_date_pairs(SMALL, seed=5)["test"][:3]]
    # teacher forcing's labels: the target's ids and `</s>`
    (labels,) = tokenize_pairs(generate_date_pairs(SMALL, seed=5)["test"][:1], tokenizer, 48)["labels"]
    assert labels[-1] == tokenizer.eos_token_id
    assert "".join(tokenizer.decode(labels[:-1]).split()) == generate_date_pairs(SMALL, seed=5)["test"][0].target
    # one source at a time through the command line = the batched, padded decoding of the three
    capsys.readouterr()  # the training log
    for beams in (1, 2):
        cli.main(["generate", "--model", str(tmp_path / "run"), "--num-beams", str(beams), "--max-new-tokens", "16",
                  *sources])
        assert capsys.readouterr().out.splitlines() == decode(model, tokenizer, sources, num_beams=beams)


def test_a_run_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    """`run` rebuilds the encoder-decoder from a checkpoint's config and continues to the new epoch count."""
    first = train_seq2seq(tiny_experiment(), tmp_path / "run")
    longer = tiny_experiment(training={**tiny_experiment().training, "num_train_epochs": 2})
    resumed = train_seq2seq(longer, tmp_path / "run", resume=True)
    assert resumed["optimizer_steps"] == 2 * first["optimizer_steps"]


@pytest.mark.parametrize("change", [dict(week3="week3-folder"), dict(init_from="pretrained-folder")])
def test_a_run_refuses_another_tokenizer_or_model(change: dict) -> None:
    from hf_attn.experiments.seq2seq import seq2seq_task

    with pytest.raises(ValueError, match="drop init_from and --week3"):
        seq2seq_task(tiny_experiment(**change))
