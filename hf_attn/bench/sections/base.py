"""What every bench section is: `BenchSection`, one class that owns its name, its settings, its run and its report
lines; and `option`, how a section (or the settings every section shares) declares one of its settings.

A section's dataclass fields are its settings: `BenchSettings` gains each one as a field (so a record's `settings`
keeps it and `run(settings, device)` reads it as `settings.NAME`), and `hf-attn bench` an option `--NAME` (dashes for
underscores), whose help is the field's. Names are global across sections, so a section's own start with its name
(`dropout_batch`; the throughput section's, the first, are the bare `repeats`, `seq_lengths`, ...); what several
sections read is declared once, by the settings every section shares, and a name declared twice is refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # the settings are built from the sections' fields: `bench.settings` imports the registry
    import torch

    from ..settings import BenchSettings


def option(default: Any, help_text: str) -> Any:
    """A setting: a dataclass field whose help text `hf-attn bench` shows for its option."""
    return dataclasses.field(default=default, metadata={"help": help_text})


def refuse_unknown(what: str, chosen: Collection[str], allowed: Collection[str]) -> None:
    """Fail on a misspelt name among `chosen` before minutes of timing, not at its turn."""
    unknown = set(chosen) - set(allowed)
    if unknown:
        raise ValueError(f"unknown benchmark {what}(s) {sorted(unknown)}; allowed: {', '.join(allowed)}")


@dataclasses.dataclass(frozen=True)
class BenchSection:
    """One section of `hf-attn bench`: what it measures (`run`) and how the report shows it (`report`).

    What the class declares: `name` (its `--sections` name and its key in the record), `by_default` (run when
    `--sections` is not given) and `selectable` (False for a part that its own settings ask for, not `--sections`:
    the profile, the tokenizer's JSON); its dataclass fields are its settings (the module's doc)."""

    name: ClassVar[str]
    by_default: ClassVar[bool] = False
    selectable: ClassVar[bool] = True

    @classmethod
    def wanted(cls, settings: BenchSettings) -> bool:
        """Whether a run of `settings` has this section: named in `sections`, or what a part's own settings say."""
        return cls.name in settings.sections

    @classmethod
    def check(cls, settings: BenchSettings) -> None:
        """Refuse values of this section's settings that no run could use (a `ValueError`), before any timing; every
        section is checked, chosen or not."""

    @classmethod
    def run(cls, settings: BenchSettings, device: torch.device) -> dict[str, Any]:
        """Measure; the result is the section's record (JSON-ready), kept under `name`."""
        raise NotImplementedError

    @classmethod
    def report(cls, record: dict[str, Any]) -> list[str]:
        """The report's markdown lines of the section's record (fresh, or written by an earlier version)."""
        raise NotImplementedError
