"""How `hf-attn seq2seq` trains and what its decoder sees: the experiment's `seq2seq` section.

Two measurements of the course notes on attention live here:

* **The bottleneck** (`decoder_context: pooled`): the decoder reads the source through one vector, the mean of
  the encoder's states over the source's real tokens, passed as `encoder_hidden_states` of length 1 (the
  fixed-size context vector of an RNN encoder-decoder) instead of every encoder state. The hf_attn model code is
  unchanged: `PooledContextEncoderDecoder` pools in `forward`, so training, `generate` and beam search all see
  the pooled vector.
* **Scheduled sampling** (the experiment's `scheduled_sampling` section, `hf_attn.experiments.scheduled_sampling`):
  `Seq2SeqScheduledSamplingTrainer` mixes the model's own tokens into the decoder inputs (`mixed_decoder_inputs`).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AutoConfig, EncoderDecoderModel
from transformers.models.encoder_decoder.modeling_encoder_decoder import shift_tokens_right

from ..modeling_hf_attn import pool
from ..saved import load_strictly
from .pretraining import IGNORE_INDEX
from .scheduled_sampling import ScheduledSamplingTrainer, model_tokens, replace_at_random


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
    own = shift_tokens_right(model_tokens(logits, sampled_tokens, generator), model.config.pad_token_id,
                             model.config.decoder_start_token_id)
    replaceable = torch.zeros_like(gold, dtype=torch.bool)
    replaceable[:, 1:] = batch["labels"][:, :-1] != IGNORE_INDEX  # the input at t is the label at t - 1
    return replace_at_random(gold, own, replaceable, probability, generator)


class Seq2SeqScheduledSamplingTrainer(ScheduledSamplingTrainer):
    """Scheduled sampling for an encoder-decoder: the decoder inputs are mixed (`mixed_decoder_inputs`; no first
    pass while p is 0), the labels stay gold."""

    def mixed_batch(self, model: Any, inputs: dict[str, torch.Tensor], probability: float
                    ) -> dict[str, torch.Tensor]:
        gold, decoder_mask = gold_decoder_inputs(model, inputs["labels"])
        decoder_inputs = gold if probability == 0.0 else mixed_decoder_inputs(
            model, inputs, probability, self.scheduled_sampling.sampled_tokens)
        return {**inputs, "decoder_input_ids": decoder_inputs, "decoder_attention_mask": decoder_mask}
