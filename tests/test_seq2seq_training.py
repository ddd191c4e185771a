"""The `seq2seq` section of an experiment and its training: scheduled sampling of the decoder inputs and the pooled
(bottleneck) decoder context (the schedule itself: test_scheduled_sampling.py).

References: teacher forcing's loss from `EncoderDecoderModel` itself
(the labels shifted by the model); the first pass's predictions shifted right by hand; the pooled vector as a
masked mean written out, fed to the decoder directly.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from helpers import tiny_config_kwargs
from transformers import TrainingArguments

pytest.importorskip("babel")
from hf_attn import HfAttnConfig  # noqa: E402
from hf_attn.experiments.config import (  # noqa: E402
    ExperimentConfigError,
    ScheduledSamplingSettings,
    load_experiment,
)
from hf_attn.experiments.pretraining import IGNORE_INDEX  # noqa: E402
from hf_attn.experiments.seq2seq import encoder_decoder_model, exact_match_scores  # noqa: E402
from hf_attn.experiments.seq2seq_training import (  # noqa: E402
    PooledContextEncoderDecoder,
    Seq2SeqScheduledSamplingTrainer,
    load_seq2seq,
    mixed_decoder_inputs,
)
from hf_attn.tasks.dates import DateGeneratorSettings, generate_date_pairs  # noqa: E402

CONFIG = Path(__file__).resolve().parent.parent / "configs" / "seq2seq" / "dates-rope.yaml"
PAD, EOS = 0, 1


@pytest.mark.parametrize(("override", "message"), [
    ("seq2seq.decoder_context=last", "`decoder_context` must be one of"),
    ("seq2seq.sampling=linear", "unknown key `sampling`"),
])
def test_an_experiment_checks_its_seq2seq_section(override: str, message: str) -> None:
    with pytest.raises(ExperimentConfigError, match=message):
        load_experiment(CONFIG, [override])
    assert load_experiment(CONFIG, ["seq2seq.decoder_context=pooled"]).seq2seq.decoder_context == "pooled"


def tiny_seq2seq(decoder_context: str = "attention") -> torch.nn.Module:
    config = HfAttnConfig(**tiny_config_kwargs(vocab_size=20, pad_token_id=PAD, position_embedding_type="rope"))
    torch.manual_seed(0)
    return encoder_decoder_model(config, eos_token_id=EOS, decoder_context=decoder_context)


def batch() -> dict[str, torch.Tensor]:
    """Two sources (the second padded) and two targets ending in `</s>` (the second padded with -100)."""
    return {
        "input_ids": torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, PAD, PAD]]),
        "attention_mask": torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]),
        "labels": torch.tensor([[3, 4, 5, 6, EOS], [7, 8, EOS, IGNORE_INDEX, IGNORE_INDEX]]),
    }


def trainer_with(model: torch.nn.Module, settings: ScheduledSamplingSettings, tmp_path: Path
                 ) -> Seq2SeqScheduledSamplingTrainer:
    arguments = TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True)
    return Seq2SeqScheduledSamplingTrainer(model=model, args=arguments, scheduled_sampling=settings)


def test_with_probability_zero_the_loss_is_teacher_forcings(tmp_path: Path) -> None:
    model = tiny_seq2seq().train()  # the tiny config has no dropout: both passes see the same model
    teacher_forcing = model(**batch()).loss  # the model shifts the labels itself
    never_sampled = ScheduledSamplingSettings(schedule="linear", min_teacher_forcing=1.0)
    assert torch.equal(trainer_with(model, never_sampled, tmp_path).compute_loss(model, batch()), teacher_forcing)
    gold = torch.tensor([[EOS, 3, 4, 5, 6], [EOS, 7, 8, EOS, PAD]])  # after the last label: padding
    assert torch.equal(mixed_decoder_inputs(model, batch(), probability=0.0), gold)


def test_with_probability_one_the_decoder_reads_the_first_passs_predictions_shifted(tmp_path: Path) -> None:
    model = tiny_seq2seq().train()
    predicted = model(**batch()).logits.argmax(-1)  # (2, 5): the prediction for each label
    expected = torch.tensor([[EOS, *predicted[0, :4].tolist()], [EOS, *predicted[1, :3].tolist(), PAD]])
    assert torch.equal(mixed_decoder_inputs(model, batch(), probability=1.0), expected)
    always_sampled = ScheduledSamplingSettings(schedule="linear", min_teacher_forcing=0.0, sampling_decay_steps=1)
    trainer = trainer_with(model, always_sampled, tmp_path)
    trainer.state.global_step = 1  # epsilon 0: p = 1
    by_hand = model(**batch(), decoder_input_ids=expected,
                    decoder_attention_mask=torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]])).loss
    torch.testing.assert_close(trainer.compute_loss(model, batch()), by_hand, rtol=0, atol=0)


def test_sampled_tokens_replace_about_p_of_the_real_inputs() -> None:
    model = tiny_seq2seq().eval()
    generator = torch.Generator().manual_seed(0)
    big = {key: value.repeat(200, 1) for key, value in batch().items()}
    mixed = mixed_decoder_inputs(model, big, probability=0.5, sampled_tokens="sample", generator=generator)
    gold = mixed_decoder_inputs(model, big, probability=0.0)
    assert torch.equal(mixed[:, 0], gold[:, 0]) and torch.equal(mixed[1::2, 4], gold[1::2, 4])  # start, padding
    replaced = (mixed != gold)[:, 1:].float().sum() / (big["labels"][:, :-1] != IGNORE_INDEX).sum()
    assert 0.3 < float(replaced) < 0.5  # p = 0.5, less the draws that equal the gold token


def pooled_by_hand(model: PooledContextEncoderDecoder, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """The decoder's logits given one vector: the encoder's states summed over real tokens over their count."""
    states = model.encoder(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).last_hidden_state
    mask = inputs["attention_mask"][..., None].float()
    pooled = (states * mask).sum(1, keepdim=True) / mask.sum(1, keepdim=True)
    decoder_inputs = torch.tensor([[EOS, 3, 4], [EOS, 7, 8]])
    return model.decoder(input_ids=decoder_inputs, encoder_hidden_states=pooled).logits


def test_the_pooled_decoder_sees_the_masked_mean_of_the_encoder_states_only(tmp_path: Path) -> None:
    model = tiny_seq2seq("pooled").eval()
    assert isinstance(model, PooledContextEncoderDecoder) and model.config.decoder_context == "pooled"
    inputs = {key: value for key, value in batch().items() if key != "labels"}
    logits = model(**inputs, decoder_input_ids=torch.tensor([[EOS, 3, 4], [EOS, 7, 8]])).logits
    torch.testing.assert_close(logits, pooled_by_hand(model, inputs))
    # what generate and beam search read is the same pooled vector; the saved folder loads pooled again
    generated = model.generate(**inputs, max_new_tokens=4, num_beams=2)
    model.save_pretrained(tmp_path)
    loaded = load_seq2seq(tmp_path).eval()
    assert isinstance(loaded, PooledContextEncoderDecoder)
    assert torch.equal(loaded.generate(**inputs, max_new_tokens=4, num_beams=2), generated)
    assert type(load_seq2seq(_saved(tiny_seq2seq(), tmp_path / "attention"))).__name__ == "EncoderDecoderModel"


def _saved(model: torch.nn.Module, folder: Path) -> Path:
    model.save_pretrained(folder)
    return folder


class WordCounts:
    """A stand-in tokenizer: one token per word."""

    def __call__(self, texts: list[str], add_special_tokens: bool = True) -> dict[str, list[list[str]]]:
        return {"input_ids": [text.split() for text in texts]}


def test_exact_match_by_source_and_target_length() -> None:
    pairs = generate_date_pairs(DateGeneratorSettings(n_train=10, n_validation=10, n_test=10), seed=0)["test"][:3]
    pairs = [dataclasses.replace(pair, source=source) for pair, source in zip(pairs, ("a b", "c d", "e f g"))]
    predictions = [pairs[0].target, "1900-01-01", pairs[2].target]
    scores = exact_match_scores(predictions, pairs, WordCounts())
    assert scores["by_source_tokens"] == {"2": {"n": 2, "exact_match": 0.5}, "3": {"n": 1, "exact_match": 1.0}}
    assert scores["by_target_tokens"] == {"1": {"n": 3, "exact_match": 2 / 3}}  # an ISO date is one word


@pytest.mark.slow
def test_a_tiny_pooled_run_with_scheduled_sampling_scores_by_length_and_generates_pooled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from test_seq2seq import tiny_experiment

    from hf_attn import cli
    from hf_attn.experiments.seq2seq import decode, train_seq2seq

    base = tiny_experiment()
    experiment = tiny_experiment(seq2seq=dataclasses.replace(base.seq2seq, decoder_context="pooled"),
                                 scheduled_sampling=ScheduledSamplingSettings(schedule="linear",
                                                                              sampling_decay_steps=2))
    metrics = train_seq2seq(experiment, tmp_path / "run")
    by_source = metrics["test_exact_match_greedy_by_source_tokens"]
    assert sum(row["n"] for row in by_source.values()) == metrics["n_test"]
    model = load_seq2seq(tmp_path / "run")
    assert isinstance(model, PooledContextEncoderDecoder)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "run")
    sources = ["de: Donnerstag, 5. März 1987", "en: 3/5/1987"]
    capsys.readouterr()
    cli.main(["generate", "--model", str(tmp_path / "run"), "--max-new-tokens", "16", *sources])
    assert capsys.readouterr().out.splitlines() == decode(model, tokenizer, sources)


def test_the_length_plot_reads_greedy_exact_match_by_length_leaving_out_rare_lengths(tmp_path: Path) -> None:
    import runpy

    script = runpy.run_path(str(CONFIG.parents[2] / "scripts" / "plot_seq2seq_lengths.py"))
    results = {"test_exact_match_greedy_by_source_tokens": {
        "10": {"n": 30, "exact_match": 0.5}, "7": {"n": 40, "exact_match": 1.0}, "15": {"n": 3, "exact_match": 0.0}}}
    assert script["length_series"](results, "test", "source", 20) == ([7, 10], [100.0, 50.0])
    png = tmp_path / "lengths.png"
    script["plot_line_panels"]([("t", "y", {"run": script["length_series"](results, "test", "source", 1)})], png, "x")
    assert png.read_bytes().startswith(b"\x89PNG")
