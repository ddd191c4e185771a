"""Scheduled sampling (Bengio et al. 2015) for every run that trains a decoder on answers: the experiment's
`scheduled_sampling` section (`ScheduledSamplingSettings`: the schedule and its formulas).

Teacher forcing feeds a decoder the gold previous tokens, so the model never meets its own mistakes before
inference (exposure bias). Scheduled sampling replaces each gold input by the model's own token with a probability
p(i) = 1 - ε(i) that grows with the training step i. A Transformer decoder reads all positions in one pass, so the
classic two-pass approximation is used (`ScheduledSamplingTrainer.compute_loss`): a first pass with the gold inputs,
without gradients and in the model's training mode (its dropout on), gives the model's token at every position
(`model_tokens`: argmax, or drawn from its softmax); each replaceable gold input is replaced by the first pass's
token for that position with probability p (`replace_at_random`); a second pass on the mixed inputs gives the loss,
against the gold labels. The decoder thus sees its own one-step predictions, not a prefix it wrote freely: that is
the approximation.

What is replaceable, and where the model's token for a position comes from, is the one thing that differs between
the two kinds of decoder (`ScheduledSamplingTrainer.mixed_batch`):

* an encoder-decoder (`hf-attn seq2seq`, `seq2seq_training.Seq2SeqScheduledSamplingTrainer`): the decoder inputs are
  the labels shifted right behind the start token; every input after the start token up to the target's end;
* a decoder-only model with the loss on the answer (`hf-attn train` on a sequence task,
  `CausalScheduledSamplingTrainer`): `[BOS] input [SEP] target [EOS]` in one sequence; the answer's tokens only
  (where `labels` are not ignored), each replaced by the first pass's prediction from the position before it. The
  prompt, [SEP] and the padding stay gold.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import PreTrainedModel, Trainer

from .config import ScheduledSamplingSettings
from .pretraining import IGNORE_INDEX


def model_tokens(logits: torch.Tensor, sampled_tokens: str = "argmax",
                 generator: torch.Generator | None = None) -> torch.Tensor:
    """The model's token at each position of `logits` (batch, length, vocabulary): the argmax, or with
    `sampled_tokens="sample"` one draw from the softmax."""
    if sampled_tokens == "argmax":
        return logits.argmax(-1)
    draws = torch.multinomial(logits.float().softmax(-1).flatten(0, 1), 1, generator=generator)
    return draws.view(logits.shape[:2])


def replace_at_random(gold: torch.Tensor, own: torch.Tensor, replaceable: torch.Tensor, probability: float,
                      generator: torch.Generator | None = None) -> torch.Tensor:
    """`gold` with each `replaceable` position taken from `own` with `probability`: one uniform draw per position of
    `gold` (`torch.rand` of its shape, from `generator`), below `probability` replaces."""
    chosen = torch.rand(gold.shape, generator=generator, device=gold.device) < probability
    return torch.where(replaceable & chosen, own, gold)


def mixed_answer_inputs(model: PreTrainedModel, batch: dict[str, torch.Tensor], probability: float,
                        sampled_tokens: str = "argmax", generator: torch.Generator | None = None) -> torch.Tensor:
    """Scheduled sampling's `input_ids` for a causal LM's `batch` (`input_ids`, `attention_mask`, `labels` equal to
    the ids on the answer and ignored elsewhere, the task's `position_ids` if any): each answer token replaced with
    `probability` by the model's own token for that position, its prediction at the position before from a first
    pass on the gold ids (no gradients)."""
    gold = batch["input_ids"]
    with torch.no_grad():
        logits = model(input_ids=gold, attention_mask=batch["attention_mask"], position_ids=batch.get("position_ids"),
                       use_cache=False).logits
    predicted = model_tokens(logits, sampled_tokens, generator)  # at t: the model's token for position t + 1
    own = torch.cat([gold[:, :1], predicted[:, :-1]], dim=1)
    return replace_at_random(gold, own, batch["labels"] != IGNORE_INDEX, probability, generator)


class ScheduledSamplingTrainer(Trainer):
    """`Trainer` whose training loss is that of the batch `mixed_batch` makes with p = 1 - ε(global step) (the
    `scheduled_sampling` section); with the schedule `none`, and in evaluation, the batch is the gold one (teacher
    forcing), so validation losses compare across runs. The model is used as given: single-process training, as
    `hf-attn seq2seq` and `hf-attn train` run."""

    def __init__(self, *args: Any, scheduled_sampling: ScheduledSamplingSettings, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scheduled_sampling = scheduled_sampling

    def mixed_batch(self, model: Any, inputs: dict[str, torch.Tensor], probability: float
                    ) -> dict[str, torch.Tensor]:
        """The model's inputs with the model's own tokens mixed in with `probability` (0: the gold inputs)."""
        raise NotImplementedError(f"{type(self).__name__} must say which inputs scheduled sampling replaces.")

    def compute_loss(self, model: Any, inputs: dict[str, torch.Tensor], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:
        if model.training and self.scheduled_sampling.schedule != "none":
            probability = 1.0 - self.scheduled_sampling.teacher_forcing(self.state.global_step)
            inputs = self.mixed_batch(model, inputs, probability)
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)


class CausalScheduledSamplingTrainer(ScheduledSamplingTrainer):
    """Scheduled sampling for a decoder-only model with the loss on the answer: the answer's `input_ids` are mixed
    (`mixed_answer_inputs`; no first pass while p is 0), the labels stay gold."""

    def mixed_batch(self, model: Any, inputs: dict[str, torch.Tensor], probability: float
                    ) -> dict[str, torch.Tensor]:
        if probability == 0.0:
            return inputs
        mixed = mixed_answer_inputs(model, inputs, probability, self.scheduled_sampling.sampled_tokens)
        return {**inputs, "input_ids": mixed}
