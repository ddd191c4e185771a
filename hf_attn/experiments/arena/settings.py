"""How an arena file's keys are declared: each `Setting` names a key, what a valid value is and what it means (for the
error message), and its value where the file leaves it out. The kinds of cells and the roles declare their own."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from ...configuration_hf_attn import is_count
from ...settings import Rule
from ..config import ExperimentConfigError


class ArenaConfigError(ExperimentConfigError):
    """An arena file (or budget) that cannot describe an arena."""


@dataclasses.dataclass(frozen=True)
class Setting:
    """One key of an arena file (or of its budgets): `valid` says whether a value is good, `meaning` what it must
    be (`... must be {meaning}, got ...`), `default` its value where the file has none. A named `Rule` rather than
    a dataclass field, as experiments' settings are, because an arena's keys are those its registered kinds and
    roles declare."""

    name: str
    valid: Callable[[Any], bool]
    meaning: str
    default: Any = None

    @property
    def rule(self) -> Rule:
        return Rule(self.valid, self.meaning)


def counts(value: Any) -> bool:
    """A non-empty list of positive integers."""
    return isinstance(value, list) and bool(value) and all(is_count(item) for item in value)


def subset(allowed: Sequence[str]) -> Callable[[Any], bool]:
    """A list of some of `allowed`."""
    return lambda value: isinstance(value, list) and all(item in allowed for item in value)


def is_file_name(value: Any) -> bool:
    return isinstance(value, str)


def is_mapping(value: Any) -> bool:
    return isinstance(value, dict)
