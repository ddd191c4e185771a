"""How `hf-attn seq2seq` trains and what its decoder sees: the experiment's `seq2seq` section.

Two measurements of the course notes on attention live here:

* **The bottleneck** (`decoder_context: pooled`): the decoder reads the source through one vector, the mean of
  the encoder's states over the source's real tokens, passed as `encoder_hidden_states` of length 1 (the
  fixed-size context vector of an RNN encoder-decoder) instead of every encoder state. The hf_attn model code is
  unchanged: `PooledContextEncoderDecoder` pools in `forward`, so training, `generate` and beam search all see
  the pooled vector.
* **Scheduled sampling** (Bengio et al. 2015, `scheduled_sampling: linear | inverse_sigmoid`): teacher forcing
  feeds the decoder the gold previous tokens, so the model never meets its own mistakes before inference
  (exposure bias). Scheduled sampling replaces each gold decoder input by the model's own token with a
  probability that grows during training. A Transformer decoder reads all positions in one pass, so the
  classic two-pass approximation is used (`ScheduledSamplingTrainer.compute_loss`): a first pass with the gold
  inputs, without gradients and in the model's training mode (its dropout on), gives the model's token at every
  position (argmax, or drawn from its softmax); each gold input is replaced by the first pass's token for that
  position with probability p (the start token and the positions after the target's end are never replaced);
  a second pass on the mixed inputs gives the loss, against the gold labels. The decoder thus sees its own
  one-step predictions, not a prefix it wrote freely: that is the approximation.

The schedule is written, as in the paper, as ε(i), the probability of the gold token at training step i,
floored at `min_teacher_forcing`; the probability of the model's token is p(i) = 1 - ε(i):

* linear: ε(i) = max(ε_min, 1 - (1 - ε_min) · i / `sampling_decay_steps`);
* inverse sigmoid: ε(i) = max(ε_min, k / (k + exp(i / k))), k = `inverse_sigmoid_k` (at least 1).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AutoConfig, EncoderDecoderModel, Trainer
from transformers.models.encoder_decoder.modeling_encoder_decoder import shift_tokens_right

from ..modeling_hf_attn import pool
from ..saved import load_strictly
from .config import Seq2SeqSettings
from .pretraining import IGNORE_INDEX


class PooledContextEncoderDecoder(EncoderDecoderModel):
    """An `EncoderDecoderModel` whose decoder sees one vector of the source: the encoder's states averaged over
    the real tokens (`attention_mask`), as `encoder_hidden_states` of length 1. Its config records
    `decoder_context="pooled"`; `load_seq2seq` picks this class for such a folder."""

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                decoder_input_ids: torch.Tensor | None = None, decoder_attention_mask: torch.Tensor | None = None,
                encoder_outputs: Any = None, labels: torch.Tensor | None = None, **kwargs: Any) -> Any:
        # The arguments are named (not left in **kwargs) because Trainer keeps only the dataset columns that
        # `forward` names.
        if encoder_outputs is None:
            encoder_outputs = self.encoder(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        states = encoder_outputs[0]
        pooled = pool(states, attention_mask, "mean")[:, None, :]  # (batch, 1, hidden)
        one_vector = torch.ones(states.shape[0], 1, dtype=torch.long, device=states.device)
        return super().forward(encoder_outputs=(pooled,), attention_mask=one_vector,
                               decoder_input_ids=decoder_input_ids, decoder_attention_mask=decoder_attention_mask,
                               labels=labels, **kwargs)


def load_seq2seq(model_dir: Any, **kwargs: Any) -> EncoderDecoderModel:
    """The encoder-decoder saved in `model_dir`, with the pooled context if it was trained with one."""
    pooled = getattr(AutoConfig.from_pretrained(model_dir), "decoder_context", "attention") == "pooled"
    return load_strictly(PooledContextEncoderDecoder if pooled else EncoderDecoderModel, model_dir, **kwargs)


def gold_decoder_inputs(model: EncoderDecoderModel, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Teacher forcing's decoder inputs and their attention mask, as `EncoderDecoderModel` makes them from the
    labels: the labels shifted right behind the start token, ignored positions as padding."""
    inputs = shift_tokens_right(labels, model.config.pad_token_id, model.config.decoder_start_token_id)
    return inputs, (inputs != model.config.pad_token_id).long()


def mixed_decoder_inputs(model: EncoderDecoderModel, batch: dict[str, torch.Tensor], probability: float,
                         sampled_tokens: str = "argmax", generator: torch.Generator | None = None) -> torch.Tensor:
    """Scheduled sampling's decoder inputs for `batch` (`input_ids`, `attention_mask`, `labels`): each gold input
    after the start token, up to the target's end, replaced with `probability` by the model's own token for that
    position from a first pass with the gold inputs (no gradients)."""
    gold, gold_mask = gold_decoder_inputs(model, batch["labels"])
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                       decoder_input_ids=gold, decoder_attention_mask=gold_mask).logits
    if sampled_tokens == "argmax":
        predicted = logits.argmax(-1)
    else:
        draws = torch.multinomial(logits.float().softmax(-1).flatten(0, 1), 1, generator=generator)
        predicted = draws.view(logits.shape[:2])
    own = shift_tokens_right(predicted, model.config.pad_token_id, model.config.decoder_start_token_id)
    replaceable = torch.zeros_like(gold, dtype=torch.bool)
    replaceable[:, 1:] = batch["labels"][:, :-1] != IGNORE_INDEX  # the input at t is the label at t - 1
    chosen = torch.rand(gold.shape, generator=generator, device=gold.device) < probability
    return torch.where(replaceable & chosen, own, gold)


class ScheduledSamplingTrainer(Trainer):
    """`Trainer` whose training loss feeds the decoder scheduled sampling's mixed inputs (`mixed_decoder_inputs`)
    with p = 1 - ε(global step) (no first pass while p is 0); evaluation keeps teacher forcing, so validation
    losses compare across runs. The model is used as given: single-process training, as `hf-attn seq2seq` runs."""

    def __init__(self, *args: Any, seq2seq: Seq2SeqSettings, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seq2seq = seq2seq

    def compute_loss(self, model: Any, inputs: dict[str, torch.Tensor], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:
        if not model.training or self.seq2seq.scheduled_sampling == "none":
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        probability = 1.0 - self.seq2seq.teacher_forcing(self.state.global_step)
        gold, decoder_mask = gold_decoder_inputs(model, inputs["labels"])
        decoder_inputs = gold if probability == 0.0 else mixed_decoder_inputs(
            model, inputs, probability, self.seq2seq.sampled_tokens)
        outputs = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"],
                        decoder_input_ids=decoder_inputs, decoder_attention_mask=decoder_mask, labels=inputs["labels"])
        return (outputs.loss, outputs) if return_outputs else outputs.loss
