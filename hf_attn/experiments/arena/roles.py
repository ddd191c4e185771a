"""The roles of the models an arena trains, one class each: which experiment of the arena file makes them, how a
stage gets one (pretrained and committed, trained on this machine, ...) and what its training starts from. Cells
name the models they need as `Model(role, scheme, seed)`; the run asks the role (`ROLES[model.role]`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, NamedTuple

from .settings import Setting, is_file_name, is_mapping

if TYPE_CHECKING:  # an arena and its run ask the roles; both import this module
    from ..config import Experiment
    from .run import ArenaRun
    from .schema import Arena


class Model(NamedTuple):
    """A trained model a cell is measured with: a scheme's `encoder`, or its `classifier` of one seed."""

    role: str
    scheme: str
    seed: int | None = None


class Role:
    """A kind of model: `experiment` is the arena file's key naming its experiment file (and the budget's section of
    that experiment's keys); `arena` says, for a role an arena is built around, how the error of a file naming none
    describes it."""

    name: ClassVar[str]
    experiment: ClassVar[str]
    meaning: ClassVar[str]  # what the experiment key must be
    arena: ClassVar[str | None] = None
    retrained: ClassVar[bool] = False  # not committed: trained again on a machine without it while cells need it

    @classmethod
    def setting(cls) -> Setting:
        return Setting(cls.experiment, is_file_name, f"a {cls.meaning} experiment file, relative to the arena file")

    @classmethod
    def budget_setting(cls) -> Setting:
        return Setting(cls.experiment, is_mapping, f"a mapping of {cls.meaning} experiment keys", {})

    def experiments(self, arena: Arena, scheme: str) -> list[Experiment]:
        """The experiments of `scheme`'s models of this role, loaded (and so checked) before anything trains."""
        from .schema import experiment_for  # the arena's experiments: the schema imports this module

        return [experiment_for(arena, self.experiment, scheme)]

    def folder(self, run: ArenaRun, model: Model) -> Path:
        """The folder of `model` on this machine, pretrained, trained or read first if need be."""
        raise NotImplementedError(f"a stage does not read {self.name} models by folder")

    def finished_here(self, run: ArenaRun, model: Model) -> bool:
        """Whether this machine holds `model` trained to the end."""
        return False

    def starts_from(self, arena: Arena, model: Model) -> set[Model]:
        """The models the training of `model` starts from."""
        return set()


class EncoderRole(Role):
    """A scheme's pretrained masked-LM encoder, committed (`--checkpoints`) so that any machine reads it."""

    name = "encoder"
    experiment = "pretraining"
    meaning = "pretraining"

    def folder(self, run: ArenaRun, model: Model) -> Path:
        return run.encoder(model.scheme)


class ClassifierRole(Role):
    """A scheme's classifier of one seed: trained on this machine (only its cells are committed), from the scheme's
    encoder on a `fine_tune` budget."""

    name = "classifier"
    experiment = "classifier"
    meaning = "classifier"
    arena = "a `classifier` (with `pretraining`: an IMDb arena)"
    retrained = True

    def folder(self, run: ArenaRun, model: Model) -> Path:
        return run.classifier(model.scheme, model.seed)

    def finished_here(self, run: ArenaRun, model: Model) -> bool:
        return (run.classifier_dir(model.scheme, model.seed) / "metrics.json").is_file()

    def starts_from(self, arena: Arena, model: Model) -> set[Model]:
        return {Model("encoder", model.scheme)} if arena.budget.fine_tune else set()


class DecoderRole(Role):
    """A scheme's decoder of one seed on one of the arena's sequence tasks, trained within its cell."""

    name = "decoder"
    experiment = "sequence"
    meaning = "sequence-task"
    arena = "a `sequence` experiment (with `tasks`)"

    def experiments(self, arena: Arena, scheme: str) -> list[Experiment]:
        from .schema import experiment_for  # the arena's experiments: the schema imports this module

        return [experiment_for(arena, self.experiment, scheme, task=task) for task in arena.tasks]


ROLES: dict[str, Role] = {role.name: role() for role in (ClassifierRole, EncoderRole, DecoderRole)}
