"""Scheduled sampling (`hf_attn.experiments.scheduled_sampling`): the schedule, its section, and the causal LM's
mixed answer inputs (the encoder-decoder's: test_seq2seq_training.py).

References: the schedules' formulas evaluated by hand; the model's greedy token for each answer position read one
example at a time, unpadded, from its gold prefix (a slow loop); the random draw rebuilt from the same seed; teacher
forcing's loss from the model itself.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch
from test_sequence_tasks import random_decoder, tiny_experiment
from transformers import TrainingArguments

from hf_attn import HfAttnConfig
from hf_attn.experiments.config import ExperimentConfigError, ScheduledSamplingSettings, load_experiment
from hf_attn.experiments.pretraining import IGNORE_INDEX
from hf_attn.experiments.scheduled_sampling import CausalScheduledSamplingTrainer, mixed_answer_inputs
from hf_attn.experiments.sequence import sequence_task
from hf_attn.modeling_hf_attn import HfAttnForCausalLM

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def test_the_linear_schedule_falls_from_one_to_its_floor_over_the_decay_steps() -> None:
    settings = ScheduledSamplingSettings(schedule="linear", min_teacher_forcing=0.2, sampling_decay_steps=100)
    assert [settings.teacher_forcing(step) for step in (0, 50, 100, 200)] == pytest.approx([1.0, 0.6, 0.2, 0.2])


def test_the_inverse_sigmoid_schedule_is_k_over_k_plus_exp_step_over_k() -> None:
    settings = ScheduledSamplingSettings(schedule="inverse_sigmoid", inverse_sigmoid_k=10.0)
    assert settings.teacher_forcing(0) == pytest.approx(10 / 11)
    assert settings.teacher_forcing(10 * math.log(10)) == pytest.approx(0.5)  # exp(i / k) = k
    assert settings.teacher_forcing(10**6) == pytest.approx(0.0, abs=1e-12)  # no overflow far out
    floored = dataclasses.replace(settings, min_teacher_forcing=0.25)
    assert floored.teacher_forcing(100) == 0.25 and floored.teacher_forcing(0) == pytest.approx(10 / 11)
    assert ScheduledSamplingSettings().teacher_forcing(10**6) == 1.0  # none: teacher forcing throughout


@pytest.mark.parametrize(("override", "message"), [
    ("scheduled_sampling.schedule=cosine", "`schedule` must be one of"),
    ("scheduled_sampling.min_teacher_forcing=1.5", "probability in"),
    ("scheduled_sampling.inverse_sigmoid_k=0.5", "at least 1"),
    ("scheduled_sampling.sampling_decay_steps=0", "positive integer"),
    ("scheduled_sampling.sampled_tokens=top_k", "`sampled_tokens` must be one of"),
    ("scheduled_sampling.decay=10", "unknown key `decay`"),
    ("scheduled_sampling=linear", "`scheduled_sampling` must be a mapping"),
    # the keys the seq2seq section held before causal-LM training read them too
    ("seq2seq.scheduled_sampling=linear", r"`seq2seq.scheduled_sampling` is now `scheduled_sampling.schedule`"),
    ("seq2seq.min_teacher_forcing=0.5", r"is now `scheduled_sampling.min_teacher_forcing`"),
])
def test_an_experiment_checks_its_scheduled_sampling_section(override: str, message: str) -> None:
    with pytest.raises(ExperimentConfigError, match=message):
        load_experiment(CONFIGS / "length" / "none.yaml", [override])


@pytest.mark.parametrize(("name", "floor"), [("scheduled-sampling", 0.5), ("scheduled-sampling-to-own", 0.0)])
def test_the_study_configs_are_teacher_forcings_config_with_a_linear_schedule(name: str, floor: float) -> None:
    teacher_forcing = load_experiment(CONFIGS / "length" / "none.yaml")
    scheduled = load_experiment(CONFIGS / "length" / f"{name}.yaml")
    assert teacher_forcing.scheduled_sampling.schedule == "none"
    assert scheduled.scheduled_sampling == ScheduledSamplingSettings(schedule="linear", min_teacher_forcing=floor,
                                                                     sampling_decay_steps=1000)
    differences = {field.name for field in dataclasses.fields(scheduled)
                   if getattr(scheduled, field.name) != getattr(teacher_forcing, field.name)}
    assert differences == {"name", "scheduled_sampling"}


# ------------------------------------------------------------------------------------- the causal LM's inputs


@pytest.fixture(scope="module")
def task_batch():  # noqa: ANN201 - (tokenizer, padded batch of six training rows)
    task = sequence_task(tiny_experiment())
    rows = [task.train_dataset[index] for index in range(6)]
    batch = task.data_collator(rows)
    assert len({len(row["input_ids"]) for row in rows}) > 1  # the batch is padded
    return task.tokenizer, {key: batch[key] for key in ("input_ids", "attention_mask", "labels")}


@torch.no_grad()
def greedy_for_each_answer_position(model: torch.nn.Module, ids: list[int], answer_start: int) -> list[int]:
    """The model's greedy token for each position from `answer_start` on, given the gold tokens before it: one
    unpadded forward pass per position."""
    return [int(model(input_ids=torch.tensor([ids[:position]])).logits[0, -1].argmax())
            for position in range(answer_start, len(ids))]


def mixed_by_hand(model: torch.nn.Module, tokenizer, batch: dict[str, torch.Tensor],  # noqa: ANN001
                  replaced: torch.Tensor) -> torch.Tensor:
    """The batch's ids with each answer position (after [SEP], through [EOS]) where `replaced` holds set to the
    model's greedy token for it; prompts and padding untouched."""
    expected = batch["input_ids"].clone()
    for row, (ids, mask) in enumerate(zip(batch["input_ids"].tolist(), batch["attention_mask"].tolist())):
        start = mask.index(1)  # the first real token, whichever side the padding is on
        real = ids[start : start + sum(mask)]
        answer_start = real.index(tokenizer.sep_token_id) + 1
        for offset, token in enumerate(greedy_for_each_answer_position(model, real, answer_start)):
            position = start + answer_start + offset
            if replaced[row, position]:
                expected[row, position] = token
    return expected


def test_probability_zero_gives_the_gold_ids_and_one_the_models_greedy_answer_tokens(task_batch) -> None:  # noqa: ANN001
    tokenizer, batch = task_batch
    model = random_decoder(tokenizer)
    assert torch.equal(mixed_answer_inputs(model, batch, probability=0.0), batch["input_ids"])
    everywhere = torch.ones_like(batch["input_ids"], dtype=torch.bool)
    expected = mixed_by_hand(model, tokenizer, batch, everywhere)
    assert not torch.equal(expected, batch["input_ids"])  # the random model's tokens differ from the gold ones
    assert torch.equal(mixed_answer_inputs(model, batch, probability=1.0), expected)
    # only the answer changes: the prompt ([BOS] input [SEP]) and the padding stay gold
    changed = expected != batch["input_ids"]
    assert not changed[batch["labels"] == IGNORE_INDEX].any()


def test_a_fixed_random_draw_replaces_exactly_the_answer_positions_it_falls_below_p_on(task_batch) -> None:  # noqa: ANN001
    tokenizer, batch = task_batch
    model = random_decoder(tokenizer)
    draws = torch.rand(batch["input_ids"].shape, generator=torch.Generator().manual_seed(7))
    expected = mixed_by_hand(model, tokenizer, batch, draws < 0.5)
    mixed = mixed_answer_inputs(model, batch, probability=0.5, generator=torch.Generator().manual_seed(7))
    assert torch.equal(mixed, expected)
    always = mixed_answer_inputs(model, batch, probability=1.0)
    answer = batch["labels"] != IGNORE_INDEX
    assert (mixed != always)[answer].any() and (mixed != batch["input_ids"]).any()  # some kept, some replaced


def decoder_without_dropout(tokenizer) -> HfAttnForCausalLM:  # noqa: ANN001
    """`random_decoder`'s model without dropout: in training mode both passes then see the same function."""
    config = HfAttnConfig.from_dict(random_decoder(tokenizer).config.to_dict(), hidden_dropout=0.0,
                                    attention_dropout=0.0)
    torch.manual_seed(1)
    return HfAttnForCausalLM(config).train()


def trainer_with(model: torch.nn.Module, settings: ScheduledSamplingSettings, tmp_path: Path
                 ) -> CausalScheduledSamplingTrainer:
    arguments = TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True)
    return CausalScheduledSamplingTrainer(model=model, args=arguments, scheduled_sampling=settings)


def test_the_training_loss_reads_the_mixed_ids_against_the_gold_labels_and_evaluation_teacher_forcing(
    task_batch, tmp_path: Path  # noqa: ANN001
) -> None:
    tokenizer, batch = task_batch
    model = decoder_without_dropout(tokenizer)
    teacher_forcing = model(**batch).loss
    always = ScheduledSamplingSettings(schedule="linear", min_teacher_forcing=0.0, sampling_decay_steps=1)
    trainer = trainer_with(model, always, tmp_path)
    trainer.state.global_step = 1  # epsilon 0: p = 1
    own = mixed_by_hand(model, tokenizer, batch, torch.ones_like(batch["input_ids"], dtype=torch.bool))
    by_hand = model(input_ids=own, attention_mask=batch["attention_mask"], labels=batch["labels"]).loss
    torch.testing.assert_close(trainer.compute_loss(model, dict(batch)), by_hand)
    assert not torch.allclose(by_hand, teacher_forcing)
    trainer.state.global_step = 0  # epsilon 1: p = 0, no first pass
    torch.testing.assert_close(trainer.compute_loss(model, dict(batch)), teacher_forcing)
    never = trainer_with(model, ScheduledSamplingSettings(), tmp_path)
    never.state.global_step = 1
    torch.testing.assert_close(never.compute_loss(model, dict(batch)), teacher_forcing)
    model.eval()
    torch.testing.assert_close(trainer.compute_loss(model, dict(batch)), model(**batch).loss)


def test_a_sequence_task_trains_with_the_experiments_schedule(tmp_path: Path) -> None:
    experiment = tiny_experiment("scheduled_sampling.schedule=inverse_sigmoid",
                                 "scheduled_sampling.inverse_sigmoid_k=5")
    task = sequence_task(experiment)
    model = random_decoder(task.tokenizer)
    trainer = task.trainer_class(model=model, args=TrainingArguments(output_dir=str(tmp_path), report_to=[]))
    assert isinstance(trainer, CausalScheduledSamplingTrainer)
    assert trainer.scheduled_sampling == experiment.scheduled_sampling


def test_the_report_pools_each_conditions_seeds_length_by_length() -> None:
    import runpy

    script = runpy.run_path(str(CONFIGS.parent / "scripts" / "scheduled_sampling_report.py"))

    def record(test: list[tuple[int, int, int]]) -> dict:
        rows = [{"low": length, "high": length, "correct": correct, "count": count} for length, correct, count in test]
        return {"validation_exact_match_by_length": rows[:1], "test_exact_match_by_length": rows[1:]}

    runs = {"tf/seed 1": record([(8, 10, 10), (9, 3, 4), (32, 0, 4)]),
            "tf/seed 2": record([(8, 9, 10), (9, 1, 4), (32, 1, 4)]),
            "ss/seed 1": record([(8, 10, 10), (9, 4, 4), (32, 0, 4)])}
    pooled = script["pooled_by_condition"](runs)
    assert [(row["low"], row["correct"], row["count"]) for row in pooled["tf"]["test"]] == [(9, 4, 8), (32, 1, 8)]
    assert pooled["tf"]["validation"][0]["accuracy"] == 19 / 20
    assert pooled["ss"]["test"][0]["standard_error"] == 0.0  # 4 of 4


def test_the_error_profile_counts_answers_right_again_after_their_first_slip() -> None:
    import runpy

    script = runpy.run_path(str(CONFIGS.parent / "scripts" / "scheduled_sampling_report.py"))
    targets = ["a b c d", "a b c d", "a b c d", "a b c d", "a b"]
    answers = ["a b c d", "a x c d", "a x y d", "a b c", "a b"]  # right, one slip, compounding, short, right
    assert script["error_profile"](answers, targets) == {"wrong": 3, "right_length": 2, "right_after_first_error": 1}


@pytest.mark.parametrize("kind", ["classification", "pretraining"])
def test_a_run_with_no_answers_refuses_a_schedule_rather_than_ignore_it(kind: str) -> None:
    from hf_attn.experiments.classification import classification_task
    from hf_attn.experiments.pretraining import pretraining_task

    make_task = {"classification": classification_task, "pretraining": pretraining_task}[kind]
    experiment = load_experiment(CONFIGS / "smoke.yaml", ["scheduled_sampling.schedule=linear"])
    with pytest.raises(ValueError, match="has no answers to sample: scheduled_sampling is read by hf-attn seq2seq"):
        make_task(experiment)
