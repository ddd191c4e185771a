"""The arena's measurements as committed JSON cells (their kinds are in `kinds`), started only with the time of the
stage's clock (`stages.StageClock`) they need left; and the claims of stages side by side."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ..stages import StageClock
from .kinds import Cell
from .schema import Arena, ArenaConfigError

NAMED_DIFFERENCES = 4  # the settings a refusal names before it counts the rest
MISSING = object()  # a key one stamp lacks


def changed_keys(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """The dotted names of the keys whose values differ between two mappings, down to the innermost mapping
    (`sequence.model.hidden_size`, not `sequence`)."""
    changed = []
    for key in sorted(old.keys() | new.keys()):
        before, after = old.get(key, MISSING), new.get(key, MISSING)  # a key set to null differs from none at all
        if isinstance(before, dict) and isinstance(after, dict):
            changed += changed_keys(before, after, f"{prefix}{key}.")
        elif before != after:
            changed.append(f"{prefix}{key}")
    return changed


class Cells:
    """The arena's finished measurements, one JSON file each under `root` (a `Cell`'s `path`): read back once, or
    measured and written at once (through a temporary file, so an interrupted write leaves no half cell).

    Each cell records its stamp, the settings its kind depends on (`Cell.stamp`); `pending` refuses a cell of other
    settings (or measures it again, for a kind `replaced_when_stale`), so that stages of one arena never mix with
    cells of another budget or code version, while an arena that grows keeps every cell it had. A cell is started
    only when the stage has time for it: as long as the slowest cell of its timing class measured so far (a training
    that checks the stage's time itself and resumes in a later stage, with any; `Cell.checks_its_own_time`).
    """

    def __init__(self, root: Path, arena: Arena, command: str | None, clock: StageClock) -> None:
        self.root = root
        self.arena = arena
        self.command = command
        self.clock = clock
        self.done: dict[Cell, dict[str, Any]] = {}
        self.measured: list[str] = []
        self.seconds_by_class: dict[str, float] = {}

    def pending(self, plan: Iterable[Cell]) -> list[Cell]:
        """The cells of `plan` left to measure, in order; the others are read into `done`. A cell measured with
        other settings is an `ArenaConfigError` naming them, unless its kind is measured again then."""
        return [cell for cell in plan if not self.finished(cell)]

    def finished(self, cell: Cell) -> bool:
        """Whether `cell` is measured with this arena's settings (read into `done` if so), by this stage or another."""
        if cell in self.done:
            return True
        path = self.root / f"{cell.path}.json"
        record = json.loads(path.read_text()) if path.is_file() else None
        if record is not None and record.get("stamp") != cell.stamp(self.arena):
            if not cell.replaced_when_stale:
                raise ArenaConfigError(f"{path} was measured with other settings ({self._differences(cell, record)}"
                                       "): cells of other settings, budgets or code do not mix; pass another "
                                       "--results folder, or delete the old cells")
            record = None
        if record is None:
            return False
        self.done[cell] = record
        self._note(cell, record["seconds"])
        return True

    def _differences(self, cell: Cell, record: dict[str, Any]) -> str:
        """What differs between a cell's recorded stamp and the arena's, in words."""
        old, new = record.get("stamp") or {}, cell.stamp(self.arena)
        if not isinstance(old.get("settings"), dict):
            return f"a stamp of another form: {old}"
        changed = changed_keys(old["settings"], new["settings"])
        if len(changed) > NAMED_DIFFERENCES:
            changed = changed[:NAMED_DIFFERENCES] + [f"{len(changed) - NAMED_DIFFERENCES} more"]
        changed += [f"{key} {old.get(key)} -> {new[key]}" for key in ("kind", "version") if old.get(key) != new[key]]
        return ", ".join(changed) + " differ"

    def check_fits(self, max_time: float | None, timing_classes: Iterable[str]) -> None:
        """Refuse a stage of `max_time` minutes shorter than a cell of `timing_classes` (what the stage has left to
        measure) this arena measured before: such a cell could never finish in one stage, and every stage would
        end without it."""
        if max_time is None:
            return
        too_long = {kind: seconds for kind, seconds in self.seconds_by_class.items()
                    if seconds >= 60.0 * max_time and kind in set(timing_classes)}
        if too_long:
            kind, seconds = max(too_long.items(), key=lambda item: item[1])
            raise ArenaConfigError(
                f"a {kind} cell of this arena took {seconds / 60:.1f} minutes, more than --max-time {max_time:g}: it "
                f"cannot finish in one stage; raise --max-time above {seconds / 60:.1f}, or lower the budget's "
                "eval_limit or lengths"
            )

    def seconds_of(self, cell: Cell) -> float:
        """How long `cell` is expected to take: the slowest of its timing class measured so far (0 if none)."""
        return self.seconds_by_class.get(cell.timing_class, 0.0)

    def measure(self, cell: Cell, measure: Callable[[], dict[str, Any]],
                needs_seconds: float | None = None) -> dict[str, Any]:
        """Measure `cell` now and write it, started only with `needs_seconds` (default `seconds_of`) left."""
        self.clock.check((self.seconds_of(cell) if needs_seconds is None else needs_seconds) / 60.0,
                         f"cell {cell.path}")
        stamp = cell.stamp(self.arena)  # the settings as the measurement starts: a file edited meanwhile is not its
        started = time.perf_counter()
        record = {**measure(), "seconds": time.perf_counter() - started, "command": self.command, "stamp": stamp}
        path = self.root / f"{cell.path}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(record, indent=2, default=str))
        temporary.replace(path)
        self.done[cell] = record
        self.measured.append(cell.path)
        self._note(cell, record["seconds"])
        return record

    def _note(self, cell: Cell, seconds: float) -> None:
        timing_class = cell.timing_class
        self.seconds_by_class[timing_class] = max(seconds, self.seconds_by_class.get(timing_class, 0.0))


class Claims:
    """What the stages running on this machine side by side are measuring or training, one file each under `folder`
    (`NAME.claim`, holding the host and process that took it), so that two stages of one arena into one output
    folder share its cells instead of measuring the same ones: a stage skips a cell another holds, or whose model
    another is training, and the next stage measures what is left.

    A claim is taken by creating its file exclusively, so two processes never both hold one; a claim whose process
    is gone (on this host) is stale and taken over. Claims are of one machine: stages on machines that share no
    output folder share only the committed cells.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.owner = f"{socket.gethostname()} {os.getpid()}"

    def _path(self, name: str) -> Path:
        return self.folder / f"{name.replace('/', '--')}.claim"

    def take(self, name: str) -> bool:
        """Take the claim `name` (True), or leave it to the live process holding it (False)."""
        path = self._path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                if not self._stale(path):
                    return False
                path.unlink(missing_ok=True)
                continue
            with os.fdopen(descriptor, "w") as file:
                file.write(self.owner)
            return True
        return False

    def _stale(self, path: Path) -> bool:
        """Whether the claim at `path` was taken by a process of this host that has ended."""
        try:
            owner = path.read_text()
            if not owner:  # being written, or its taker died before writing: stale after a minute
                return time.time() - path.stat().st_mtime > 60.0
            host, pid = owner.rsplit(" ", 1)
            if host == socket.gethostname():
                os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except (FileNotFoundError, PermissionError):  # released meanwhile; a live process of another user
            pass
        return False

    def release(self, name: str) -> None:
        """Give the claim `name` back (only one this process holds)."""
        path = self._path(name)
        with contextlib.suppress(FileNotFoundError):
            if path.read_text() == self.owner:
                path.unlink()

    @contextlib.contextmanager
    def holding(self, names: Iterable[str]) -> Iterator[bool]:
        """Take every claim of `names` for the block (True), or none (False) where another process holds one."""
        names, taken = list(names), []
        try:
            for name in names:
                if not self.take(name):
                    break
                taken.append(name)
            yield len(taken) == len(names)
        finally:
            for name in taken:
                self.release(name)
