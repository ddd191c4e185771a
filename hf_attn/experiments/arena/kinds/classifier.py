"""`classifier` cells: a classifier's training (one scheme and seed), summarized from its metrics."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar

from ..roles import Model
from .base import Cell, cell_summary, classifier_group, classifier_settings, each_scheme_and_seed, run_summary

if TYPE_CHECKING:
    from ..run import ArenaRun
    from ..schema import Arena


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClassifierCell(Cell):
    """A classifier's training (one scheme and seed), summarized from its metrics; the cell's time is the
    training's. A `fine_tune` budget starts it from the scheme's encoder: both experiments are the arena's."""

    kind: ClassVar[str] = "classifier"
    section: ClassVar[str] = "classifiers"
    roles: ClassVar[tuple[str, ...]] = ("classifier", "encoder")
    plural: ClassVar[str] = "classifier trainings"
    scheme: str
    seed: int

    @classmethod
    def of(cls, arena: Arena, task: str) -> list[Cell]:
        return each_scheme_and_seed(cls, arena, task)

    def group(self, arena: Arena) -> tuple[int, ...]:
        return classifier_group(arena, self.scheme, self.seed)

    def parts(self) -> tuple[str, ...]:
        return self.scheme, f"seed{self.seed}", "train"

    def depends_on(self, arena: Arena) -> tuple[str, ...]:
        return classifier_settings(arena)

    def trains(self) -> Model | None:
        return Model("classifier", self.scheme, self.seed)

    def measure(self, run: ArenaRun) -> dict[str, Any]:
        return run_summary(run.classifier_metrics(self.scheme, self.seed))

    def report(self, record: dict[str, Any], cell: dict[str, Any]) -> None:
        record[self.section][f"{self.scheme}/{self.seed}"] = cell_summary(cell)
