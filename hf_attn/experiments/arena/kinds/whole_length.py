"""`whole-length` cells: the tokens of a split's longest review, the length a reading at `whole` reads."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar

from ....configuration_hf_attn import is_count
from .. import measure
from ..roles import Model
from ..settings import Setting
from .base import SPLITS, Cell, classifier_group, classifier_settings

if TYPE_CHECKING:
    from ..run import ArenaRun
    from ..schema import Arena

EVAL_LIMIT = Setting("eval_limit", lambda value: value is None or is_count(value), "a positive integer or null (all)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class WholeLengthCell(Cell):
    """Tokens of the longest review of a split (the first `eval_limit`): the length `whole` reads at. Measured with
    the tokenizer of the arena's first classifier (every scheme's is the same)."""

    kind: ClassVar[str] = "whole-length"
    section: ClassVar[str] = "whole_length"
    roles: ClassVar[tuple[str, ...]] = ("classifier",)
    budget_settings: ClassVar[tuple[Setting, ...]] = (EVAL_LIMIT,)
    plural: ClassVar[str] = "longest-review lengths"
    split: str

    @classmethod
    def of(cls, arena: Arena, task: str) -> list[Cell]:
        return [cls(task=task, split=split) for split in SPLITS]

    def group(self, arena: Arena) -> tuple[int, ...]:
        return classifier_group(arena, arena.schemes[0], arena.budget.seeds[0])

    def parts(self) -> tuple[str, ...]:
        return (self.split,)

    def depends_on(self, arena: Arena) -> tuple[str, ...]:
        return classifier_settings(arena) + ("budget.eval_limit",)

    def needs(self, arena: Arena) -> set[Model]:
        return {Model("classifier", arena.schemes[0], arena.budget.seeds[0])}

    def measure(self, run: ArenaRun) -> dict[str, Any]:
        (model,) = self.needs(run.arena)
        experiment = run.experiment("classifier", model.scheme, model.seed)
        return {"value": measure.longest_review(run.classifier(model.scheme, model.seed), experiment.dataset,
                                                run.arena.budget.eval_limit, self.split)}

    def report(self, record: dict[str, Any], cell: dict[str, Any]) -> None:
        record[self.section][self.split] = cell["value"]
