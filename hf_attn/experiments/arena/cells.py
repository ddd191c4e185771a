"""The arena's measurements as committed JSON cells, and the clock of one stage (`--max-time`)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..stages import check_max_time
from .schema import Arena, ArenaConfigError

ARENA_RECORD = "settings.json"  # in the results folder: the settings its cells were measured with


MEASUREMENT_VERSION = 2  # raised when a change to the measuring code makes earlier cells incomparable


class StageStopped(Exception):
    """The arena stage's --max-time is up: it ends here, with what it finished kept."""


class StageClock:
    """The minutes left to one arena stage (`--max-time`; unlimited without one)."""

    def __init__(self, max_time: float | None) -> None:
        check_max_time(max_time)
        self.max_time = max_time
        self.deadline = None if max_time is None else time.time() + 60.0 * max_time

    def minutes_left(self) -> float | None:
        return None if self.deadline is None else (self.deadline - time.time()) / 60.0

    def check(self, needs_minutes: float = 0.0, what: str = "the next piece") -> None:
        """Raise `StageStopped` when the stage has not `needs_minutes` left for `what`."""
        left = self.minutes_left()
        if left is not None and left <= needs_minutes:
            raise StageStopped(f"{left:.1f} minutes of --max-time left, {what} needs {max(needs_minutes, 0):.1f}")


class Cells:
    """The arena's finished measurements, one JSON file each under `root`: read back if there, else measured
    and written at once (through a temporary file, so an interrupted write leaves no half cell).

    Each cell records the arena's `stamp` (budget, settings, measuring code); a cell with another stamp is
    refused, so that stages of one arena never mix with cells of another budget or code version. A cell is
    started only when the stage has time for it: as long as the slowest cell of its kind measured so far.
    """

    def __init__(self, root: Path, command: str | None, stamp: dict[str, Any], clock: StageClock) -> None:
        self.root = root
        self.command = command
        self.stamp = stamp
        self.clock = clock
        self.measured: list[str] = []
        self.seconds_by_kind: dict[str, float] = {}
        for path in sorted(root.rglob("*.json")) if root.is_dir() else ():
            self._note(self.kind(path.relative_to(root).with_suffix("").as_posix()),
                       json.loads(path.read_text()).get("seconds", 0.0))

    @staticmethod
    def kind(key: str) -> str:
        """Cells that take about as long: the measurement and its length (`read/.../whole` -> `read:whole`)."""
        parts = key.split("/")
        return f"{parts[0]}:{parts[-1]}"

    def check_fits(self, max_time: float | None, done_kinds: Iterable[str] = ()) -> None:
        """Refuse a stage of `max_time` minutes shorter than a cell this arena measured before: such a cell
        could never finish in one stage, and every stage would end without it. Kinds in `done_kinds` are not
        measured again by this stage (a classifier already trained on this machine), so they do not count."""
        if max_time is None:
            return
        too_long = {kind: seconds for kind, seconds in self.seconds_by_kind.items()
                    if seconds >= 60.0 * max_time and kind not in done_kinds}
        if too_long:
            kind, seconds = max(too_long.items(), key=lambda item: item[1])
            raise ArenaConfigError(
                f"a {kind} cell of this arena took {seconds / 60:.1f} minutes, more than --max-time {max_time:g}: it "
                f"cannot finish in one stage; raise --max-time above {seconds / 60:.1f}, or lower the budget's "
                "eval_limit or lengths"
            )

    def recorded(self, key: str) -> dict[str, Any] | None:
        """The cell `key` if an earlier run measured it (refused if another arena did), else None."""
        path = self.root / f"{key}.json"
        if not path.is_file():
            return None
        record = json.loads(path.read_text())
        if record.get("stamp") != self.stamp:
            raise ArenaConfigError(
                f"{path} was measured with {record.get('stamp')}, not this arena's {self.stamp}: cells of other "
                "settings, budgets or code do not mix; pass another --results folder, or delete the old cells"
            )
        return record

    def seconds_of(self, key: str) -> float:
        """How long the cell `key` is expected to take: the slowest cell of its kind measured so far (0 if none)."""
        return self.seconds_by_kind.get(self.kind(key), 0.0)

    def get(self, key: str, measure: Callable[[], dict[str, Any]],
            needs_seconds: float | None = None) -> dict[str, Any]:
        """The cell `key`, measured now if no run has; started only with `needs_seconds` (default `seconds_of`)
        left of the stage."""
        path = self.root / f"{key}.json"
        kind = self.kind(key)
        record = self.recorded(key)
        if record is not None:
            self._note(kind, record["seconds"])
            return record
        self.clock.check((self.seconds_of(key) if needs_seconds is None else needs_seconds) / 60.0, f"cell {key}")
        started = time.perf_counter()
        record = {**measure(), "seconds": time.perf_counter() - started, "command": self.command, "stamp": self.stamp}
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(record, indent=2, default=str))
        temporary.replace(path)
        self.measured.append(key)
        self._note(kind, record["seconds"])
        return record

    def _note(self, kind: str, seconds: float) -> None:
        self.seconds_by_kind[kind] = max(seconds, self.seconds_by_kind.get(kind, 0.0))


def claim_arena_dir(results_dir: Path, arena: Arena) -> None:
    """Record the arena's settings in `results_dir`, or refuse a folder whose cells were measured with others."""
    record = results_dir / ARENA_RECORD
    settings = json.loads(json.dumps({**arena.settings(), "measurement_version": MEASUREMENT_VERSION}, default=str))
    if record.is_file():
        previous = json.loads(record.read_text())
        if previous != settings:
            changed = sorted(key for key in settings.keys() | previous.keys()
                             if settings.get(key) != previous.get(key))
            raise ArenaConfigError(f"{results_dir} holds an arena measured with other settings ({', '.join(changed)} "
                                   "differ); pass another --results folder, or the same file, budget and overrides.")
        return
    results_dir.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(settings, indent=2))


def arena_stamp(arena: Arena) -> dict[str, Any]:
    """What every cell of `arena` records, to refuse cells of another arena: budget, settings digest, code."""
    settings = json.dumps(arena.settings(), sort_keys=True, default=str)
    return {"budget": arena.budget_name, "settings_sha256": hashlib.sha256(settings.encode()).hexdigest()[:16],
            "measurement_version": MEASUREMENT_VERSION}
