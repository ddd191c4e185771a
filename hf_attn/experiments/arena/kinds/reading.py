"""`read` cells: a classifier's accuracy on a split read at a length past its training length (directly, as windows,
or RoPE scaled at inference), its seeds summarized with standard errors and ranked only beyond noise."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ....configuration_hf_attn import is_count
from .. import measure
from ..measure import SCALINGS, WHOLE, na, readings_of
from ..roles import Model
from ..settings import Setting, subset
from .base import SPLITS, Cell, Notes, classifier_group, classifier_settings, plot_series
from .whole_length import EVAL_LIMIT, WholeLengthCell

if TYPE_CHECKING:
    from ..run import ArenaRun
    from ..schema import Arena


def standard_error(accuracy: float, reviews: int) -> float:
    """The standard error of an accuracy measured on `reviews` reviews (binomial): the test set's own noise."""
    return math.sqrt(accuracy * (1.0 - accuracy) / reviews)


def read_tokens(run: ArenaRun, read: int | str, split: str) -> int | None:
    """The tokens a reading at `read` reads of `split`: `whole` is the split's longest review (None until its cell is
    measured)."""
    if read != WHOLE:
        return int(read)
    cell = run.cells.done.get(WholeLengthCell(split=split))
    return None if cell is None else cell["value"]


def ranking(record: dict[str, Any], reading: str, read: int | str) -> str:
    """The schemes read `reading` at `read`, by mean test accuracy, `>` where the gap to the next exceeds twice the
    standard error of a difference (both accuracies' errors combined) and `~` where it does not; empty while
    fewer than two schemes are read."""
    scored = sorted(((entry["value"], entry["se"], key.split("/")[0]) for key, entry in record["reading"].items()
                     if key.endswith(f"/{reading}/{read}") and entry.get("value") is not None), reverse=True)
    if len(scored) < 2:
        return ""
    words = [scored[0][2]]
    for (value, se, _), (next_value, next_se, name) in zip(scored, scored[1:]):
        words += [">" if value - next_value > 2 * math.hypot(se, next_se) else "~", name]
    return " ".join(words)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReadingCell(Cell):
    """A classifier's accuracy on a split read at `read` tokens (`whole`: the split's longest review): directly,
    as windows (of the `window_stride` the speed cells declare), or (RoPE) scaled at inference."""

    kind: ClassVar[str] = "read"
    section: ClassVar[str] = "reading"
    roles: ClassVar[tuple[str, ...]] = ("classifier",)
    settings: ClassVar[tuple[Setting, ...]] = (
        Setting("rope_scalings", subset(SCALINGS), f"a list of {list(SCALINGS)}", []),
        Setting("read_lengths", lambda value: isinstance(value, list) and bool(value)
                and all(is_count(item) or item == WHOLE for item in value),
                f"a non-empty list of positive integers and {WHOLE!r}", []),
    )
    budget_settings: ClassVar[tuple[Setting, ...]] = (EVAL_LIMIT,)
    plural: ClassVar[str] = "readings"
    scheme: str
    seed: int
    split: str
    reading: str
    read: int | str

    @classmethod
    def of(cls, arena: Arena, task: str) -> list[Cell]:
        return [cls(task=task, scheme=scheme, seed=seed, split=split, reading=reading, read=read)
                for scheme in arena.schemes for seed in arena.budget.seeds for split in SPLITS
                for read in arena.read_lengths for reading in readings_of(scheme, arena.rope_scalings)]

    def group(self, arena: Arena) -> tuple[int, ...]:
        return classifier_group(arena, self.scheme, self.seed)

    def parts(self) -> tuple[str, ...]:
        return self.scheme, f"seed{self.seed}", self.split, self.reading, str(self.read)

    def depends_on(self, arena: Arena) -> tuple[str, ...]:
        windows = ("window_stride",) if self.reading == "windows" else ()
        return classifier_settings(arena) + ("budget.eval_limit",) + windows

    def needs(self, arena: Arena) -> set[Model]:
        return {Model("classifier", self.scheme, self.seed)}

    def wanted(self, run: ArenaRun) -> bool:
        """Windows only past the training length (one window is the direct reading); a `whole` of unknown length
        counts as past it where this stage measures that length first, and waits for a stage that does where it is
        limited to other cells (`run.only`)."""
        length = read_tokens(run, self.read, self.split)
        if length is None:
            return run.selected(WholeLengthCell(task=self.task, split=self.split))
        return self.reading != "windows" or length > run.training_length

    def measure(self, run: ArenaRun) -> dict[str, Any]:
        experiment = run.experiment("classifier", self.scheme, self.seed)
        return measure.read_accuracy(run.classifier(self.scheme, self.seed), self.reading,
                                     read_tokens(run, self.read, self.split), run.arena, experiment.dataset,
                                     self.split, experiment.precision)

    def report(self, record: dict[str, Any], cell: dict[str, Any]) -> None:
        entry = record[self.section].setdefault(f"{self.scheme}/{self.reading}/{self.read}",
                                                {"tokens": {}, "by_seed": {}})
        entry["tokens"][self.split] = record["whole_length"][self.split] if self.read == WHOLE else self.read
        entry["by_seed"].setdefault(str(self.seed), {})[self.split] = cell

    @classmethod
    def summarize(cls, record: dict[str, Any]) -> None:
        """Each reading's seeds in one number per split: the mean accuracy (`value` is the test one), its standard
        error on the reviews read (the seeds read the same reviews, so it does not shrink with them), and the
        seeds' spread; n/a with the reason where a seed's cell is n/a. `value` is the test mean, None (not measured
        yet) until a seed's test reading is in."""
        for entry in record[cls.section].values():
            for split in SPLITS:
                seeds = [cells[split] for cells in entry["by_seed"].values() if split in cells]
                if not seeds:
                    continue
                if any(cell["value"] is None for cell in seeds):
                    summary = na(next(cell["reason"] for cell in seeds if cell["value"] is None))
                else:
                    values = [cell["value"] for cell in seeds]
                    mean = sum(values) / len(values)
                    reviews = seeds[0]["n_reviews"]
                    summary = {"value": mean, "se": standard_error(mean, reviews),
                               "spread": max(values) - min(values), "seeds": len(values), "n_reviews": reviews}
                entry["val" if split == "validation" else "test"] = summary
            test = entry.get("test", {})  # the table's number: none yet while only validation is read
            entry["value"], entry["reason"], entry["se"] = test.get("value"), test.get("reason"), test.get("se")

    @classmethod
    def table(cls, record: dict[str, Any], notes: Notes) -> list[str]:
        """Test accuracy by read length, each scheme and reading, then the ranking of the direct readings."""
        settings = record["settings"]
        reads = settings["read_lengths"]
        longest = next((entry["tokens"]["test"] for key, entry in record[cls.section].items()
                        if key.endswith(f"/{WHOLE}") and "test" in entry["tokens"]), None)
        header = [f"{read} (longest: {longest})" if read == WHOLE and longest else str(read) for read in reads]
        seeds = record["seeds"]

        def accuracy(entry: dict[str, Any]) -> str:
            read_by = entry["test"]["seeds"]
            partial = f" ({read_by} of {len(seeds)} seeds)" if read_by < len(seeds) else ""
            return f"{entry['value']:.3f} ± {entry['se']:.3f}{partial}"

        eval_limit = settings["budget"]["eval_limit"] or "all"
        lines = [
            "",
            f"## Test accuracy by read length (trained at {record['training_length']} tokens; {eval_limit} test "
            f"reviews; mean of {len(seeds)} seed(s) ± one standard error)",
            "",
            "`direct`: the whole read length at once; `windows`: windows of the training length every "
            f"{settings['window_stride']} tokens, pooled; `linear` / `dynamic` / `yarn`: RoPE scaled at inference. "
            "Validation accuracies are in arena.json (`val`).",
            "",
            "| scheme | reading | " + " | ".join(header) + " |",
            "|---|---|" + "---|" * len(reads),
        ]
        for scheme in settings["schemes"]:
            for reading in readings_of(scheme, settings["rope_scalings"]):
                row = [notes.cell(record[cls.section].get(f"{scheme}/{reading}/{read}"), accuracy) for read in reads]
                lines.append(f"| {scheme} | {reading} | " + " | ".join(row) + " |")
        lines += ["", "Ranking of the direct readings (`>`: ahead by more than twice the standard error of the "
                  "difference; `~`: within it, no ranking):", ""]
        orders = {read: ranking(record, "direct", read) for read in reads}
        return lines + ([f"- {read}: {order}" for read, order in orders.items() if order]
                        or ["- none yet: two schemes read on test are needed"])

    @classmethod
    def plots(cls, record: dict[str, Any], results_dir: Path) -> list[Path]:
        """accuracy.png: test accuracy by read length (log-2 axis), each scheme and reading, with standard errors."""
        from ....analysis.plots import plot_line_panels  # matplotlib: only when plots are drawn

        accuracy = plot_series(record[cls.section], lambda key: key.rsplit("/", 1)[0],
                               lambda key, cell: cell["tokens"].get("test", cell["tokens"].get("validation")),
                               lambda cell: cell["value"], error_of=lambda cell: cell["se"])
        return [plot_line_panels([("Test accuracy by read length", "accuracy", accuracy)],
                                 results_dir / "accuracy.png", "tokens read per review", log_x=True)]
