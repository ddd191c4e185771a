"""The registry of position-id rules: which position id each token gets, one small class and one line each.

Position ids are a dimension of their own beside the position scheme (`positions.py`): every scheme reads
`position_ids`, and the rule (the config's `position_id_rule`) decides what they are when the caller passes none.
Length-generalization papers change the ids, not the scheme: randomized positions (Ruoss et al., ACL 2023), Abacus
offsets (McLeish et al., NeurIPS 2024) and position coupling (Cho et al., NeurIPS 2024).

`generate()` hands `prepare_inputs_for_generation` the whole sequence at every step: `generation_ids` computes the ids
of all of it there and the model keeps the last ones, so a cached step gets the id a full forward pass would give.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch

if TYPE_CHECKING:
    from .configuration_hf_attn import HfAttnConfig


class PositionIdRule:
    """`sequential`: 0, 1, 2, ... after the cached tokens (`generate()` starts each left-padded row at 0)."""

    # Config fields of this rule alone: other rules refuse a value but the default.
    own_fields: ClassVar[tuple[str, ...]] = ()
    # The task passes the ids (the collator in training, the planned ids in `generate()`): the model computes none.
    from_task: ClassVar[bool] = False
    # Its ids differ from the slots' 0, 1, 2, ...: only a scheme that reads position ids sees them.
    renumbers: ClassVar[bool] = False
    # Outside training its ids are the sequential ones (a cached step's keys then sit at their slots' distances).
    sequential_in_evaluation: ClassVar[bool] = True

    def __init__(self, config: HfAttnConfig) -> None:
        self.config = config

    @classmethod
    def check_config(cls, config: HfAttnConfig) -> None:
        """Raise a `ValueError` naming the field that this rule cannot work with."""

    def position_ids(self, input_ids: torch.Tensor | None, shape: torch.Size, past_length: int, training: bool,
                     device: torch.device) -> torch.Tensor:
        """The ids (1|batch, length) of a batch of `shape` (batch, length) after `past_length` cached tokens."""
        return (torch.arange(shape[1], device=device) + past_length)[None, :]

    def generation_ids(self, input_ids: torch.Tensor, position_ids: torch.Tensor | None) -> torch.Tensor | None:
        """The ids of the whole sequence `input_ids` (batch, length) at a step of `generate()`, given the ids it
        carries (`position_ids`: transformers' sequential ones, or the caller's), of which the model keeps the last."""
        return position_ids

    def training_ids(self, position_ids: torch.Tensor) -> torch.Tensor:
        """The ids a training forward pass reads where the caller passes `position_ids`: those."""
        return position_ids


class RandomizedPositionIds(PositionIdRule):
    """`randomized` (Ruoss et al., ACL 2023): in training, each sequence's ids are a sorted random subset of
    range(`max_random_position`), so that the ids of longer test sequences were all seen in training; in
    evaluation and generation the sequential ids. Random in training only, like dropout."""

    own_fields = ("max_random_position",)
    renumbers = True

    @classmethod
    def check_config(cls, config: HfAttnConfig) -> None:
        if not config.position_scheme.extrapolates and cls.id_range(config) > config.max_position_embeddings:
            raise ValueError(
                f"HfAttnConfig: invalid `max_random_position`={config.max_random_position}; "
                f"position_embedding_type={config.position_embedding_type!r} has max_position_embeddings="
                f"{config.max_position_embeddings} positions, so the random ids must lie below it."
            )

    @staticmethod
    def id_range(config: HfAttnConfig) -> int:
        """The ids are drawn from range(this): `max_random_position`, else `max_position_embeddings`."""
        return config.max_random_position or config.max_position_embeddings

    def position_ids(self, input_ids: torch.Tensor | None, shape: torch.Size, past_length: int, training: bool,
                     device: torch.device) -> torch.Tensor:
        if not training:
            return super().position_ids(input_ids, shape, past_length, training, device)
        batch, length = shape
        id_range = self.id_range(self.config)
        if length > id_range:
            raise ValueError(
                f"position_id_rule='randomized' draws {length} distinct ids from range({id_range}); raise "
                "max_random_position to several times the training length."
            )
        # The `length` largest of `id_range` uniform draws: a uniform random subset, then sorted.
        chosen = torch.rand(batch, id_range, device=device).topk(length, dim=-1).indices
        return chosen.sort(dim=-1).values


class AbacusPositionIds(PositionIdRule):
    """`abacus` (McLeish et al., NeurIPS 2024): a digit's id is its offset inside its number (1, 2, 3, ...; every
    other token 0), so that digits of the same place share an id whatever the numbers' lengths; in training one
    random start k per sequence, uniform in [0, `max_abacus_start`], is added to every digit's offset, so that the
    offsets of longer test numbers were seen. `digit_token_ids` say which tokens are digits (a sequence task's run
    fills them from its tokenizer)."""

    own_fields = ("digit_token_ids", "max_abacus_start")
    renumbers = True
    sequential_in_evaluation = False

    @classmethod
    def check_config(cls, config: HfAttnConfig) -> None:
        ids = config.digit_token_ids or []
        if not all(isinstance(i, int) and 0 <= i < config.vocab_size for i in ids):
            raise ValueError(
                f"HfAttnConfig: invalid `digit_token_ids`={ids!r}; position_id_rule='abacus' numbers the digits: "
                f"list the digit tokens' ids, each in [0, {config.vocab_size})."
            )

    def position_ids(self, input_ids: torch.Tensor | None, shape: torch.Size, past_length: int, training: bool,
                     device: torch.device) -> torch.Tensor:
        if not self.config.digit_token_ids:  # a sequence task's run fills them from its tokenizer
            raise ValueError(
                "position_id_rule='abacus' numbers the digits, and the config's digit_token_ids lists none: set the "
                "digit tokens' ids (hf_attn.tasks.length.digit_token_ids(tokenizer))."
            )
        if input_ids is None or past_length:
            raise ValueError(
                "position_id_rule='abacus' numbers the digits of the whole sequence: pass input_ids (not "
                "inputs_embeds) and no cache, or the position_ids themselves (generate() computes them)."
            )
        offsets = self.digit_offsets(input_ids)
        if training:
            start = torch.randint(0, self.config.max_abacus_start + 1, (input_ids.shape[0], 1), device=device)
            offsets = torch.where(offsets > 0, offsets + start, offsets)
        return offsets

    def digit_offsets(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Each digit's place inside its run of digits, from 1; 0 for every other token."""
        digits = torch.isin(input_ids, torch.tensor(self.config.digit_token_ids, device=input_ids.device))
        counted = digits.long().cumsum(dim=-1)
        # The count at the latest token that is not a digit: where the current number started.
        before_number = torch.where(digits, 0, counted).cummax(dim=-1).values
        return (counted - before_number) * digits

    def generation_ids(self, input_ids: torch.Tensor, position_ids: torch.Tensor | None) -> torch.Tensor:
        return self.digit_offsets(input_ids)


class CoupledPositionIds(PositionIdRule):
    """`coupled` (Cho et al., NeurIPS 2024, position coupling): the task supplies the ids, so that tokens that
    belong together share one (for addition, digits of the same place in both operands and the answer; for copy
    and reverse, an answer token and the input token it copies). In training the collator passes them, and every
    id but 0 (special tokens) is shifted by one random start per sequence, uniform in [0, `max_coupled_start`], as
    Cho et al. do, so that the ids of longer test sequences were seen; in `generate()` the caller passes the ids of
    the prompt followed by the planned ids of the answer's positions, and each step takes the next (past the plan
    they go on by one); without them `generate()` refuses to guess."""

    own_fields = ("max_coupled_start",)
    renumbers = True
    sequential_in_evaluation = False
    from_task = True

    def training_ids(self, position_ids: torch.Tensor) -> torch.Tensor:
        start = torch.randint(0, self.config.max_coupled_start + 1, (position_ids.shape[0], 1),
                              device=position_ids.device)
        return torch.where(position_ids > 0, position_ids + start, position_ids)

    def position_ids(self, input_ids: torch.Tensor | None, shape: torch.Size, past_length: int, training: bool,
                     device: torch.device) -> torch.Tensor:
        raise ValueError(
            "position_id_rule='coupled' takes its ids from the task: pass position_ids (the task's coupling, e.g. "
            "hf_attn.tasks.length.coupled_position_ids)."
        )

    def generation_ids(self, input_ids: torch.Tensor, position_ids: torch.Tensor | None) -> torch.Tensor | None:
        # The caller's ids run past the sequence (the planned answer, then one more per step): those of its tokens.
        return position_ids[..., : input_ids.shape[-1]] if position_ids is not None else None


POSITION_ID_RULES: dict[str, type[PositionIdRule]] = {
    "sequential": PositionIdRule,
    "randomized": RandomizedPositionIds,
    "abacus": AbacusPositionIds,
    "coupled": CoupledPositionIds,
}
