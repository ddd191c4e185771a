"""The kinds of arena cells, a file each (`encoder`: the two of a scheme's encoder), `base.Cell` saying what a kind
declares, and their registry.

Adding a kind is one file here and one line in `CELL_KINDS`. The registry's order is the order of the arena file's
keys the kinds declare, of the sections of the report's record, of its tables and plots, and of a stage's cells
within one model's group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..roles import Model
from .base import (
    CLASSIFIER_SETTINGS,
    DEFAULT_TASK,
    ENCODER_SETTINGS,
    EVERY_SCHEME,
    SPLITS,
    Cell,
    Notes,
    cell_summary,
    classifier_group,
    classifier_settings,
    each_scheme_and_seed,
    encoder_group,
    run_summary,
    settings_of,
)
from .classifier import ClassifierCell
from .encoder import MaskedLMCell, PretrainingCell
from .reading import ReadingCell
from .sequence import SequenceCell, sequence_summary
from .speed import SpeedCell
from .whole_length import WholeLengthCell

if TYPE_CHECKING:  # the arena file names the kinds' settings: its schema imports this registry
    from ..schema import Arena

CELL_KINDS: dict[str, type[Cell]] = {kind.kind: kind for kind in (
    ClassifierCell,
    PretrainingCell,
    WholeLengthCell,
    ReadingCell,
    MaskedLMCell,
    SpeedCell,
    SequenceCell,
)}


def plan(arena: Arena) -> list[Cell]:
    """Every cell of `arena` in the order a stage measures them: each scheme's pretraining and masked-LM losses,
    each classifier (its training timed as its cell; the longest reviews' lengths after the first) with its
    readings, then speed; then the sequence tasks' decoders, seed by seed and task by task."""
    cells = [cell for kind in CELL_KINDS.values() for task in kind.tasks(arena) for cell in kind.of(arena, task)]
    return sorted(cells, key=lambda cell: cell.group(arena))  # stable: within a group, the registry's order


__all__ = [
    "CELL_KINDS",
    "CLASSIFIER_SETTINGS",
    "DEFAULT_TASK",
    "ENCODER_SETTINGS",
    "EVERY_SCHEME",
    "SPLITS",
    "Cell",
    "ClassifierCell",
    "MaskedLMCell",
    "Model",
    "Notes",
    "PretrainingCell",
    "ReadingCell",
    "SequenceCell",
    "SpeedCell",
    "WholeLengthCell",
    "cell_summary",
    "classifier_group",
    "classifier_settings",
    "each_scheme_and_seed",
    "encoder_group",
    "plan",
    "run_summary",
    "sequence_summary",
    "settings_of",
]
