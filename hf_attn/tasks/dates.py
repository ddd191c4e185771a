"""A seeded generator of date-normalisation pairs: a date written in one of many locales and formats -> `YYYY-MM-DD`.

Why this task: it is a real sequence-to-sequence problem (month names in twelve languages, day/month/year in
any order, weekdays to skip, digits to copy) whose answer is exact, so greedy and beam decoding can be
scored by exact match, and whose alignment is known (the year digits of the target come from the year of
the source), so cross-attention heatmaps can be read against it. `babel` (the CLDR data) writes the dates,
so the formats are the ones real software prints.

Two choices keep every source readable in one way only:

* Two-digit years (`yy`, the short format of `en`, `de`, `es`, ...) are widened to four digits: with
  years 1900-2099, `3/5/87` could be 1987 or 2087.
* The source starts with its locale (`en: 3/5/1987`): `3/5/1987` is March 5 in `en` but May 3 in `es`,
  as a reader who knows the writer's locale reads it.

Splits are disjoint by source text (so also by date, locale and format): no held-out source was trained on.
`DateNormalisation` is the task's entry in the dataset registry (kind `dates`): `hf-attn seq2seq` reads its pairs.
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import re
from collections.abc import Sequence
from typing import ClassVar

from babel import Locale, UnknownLocaleError
from babel.dates import format_date
from datasets import Dataset, DatasetDict

from ..configuration_hf_attn import is_count
from ..settings import Settings, setting
from .sources import PairsSource

# Latin-script locales of CLDR with their own month names and date orders.
LOCALES = ("en", "de", "fr", "es", "it", "nl", "pt", "sv", "pl", "cs", "fi", "tr")
# CLDR's own formats of each locale.
STANDARD_FORMATS = ("short", "medium", "long", "full")
# Patterns beyond CLDR's: month first, abbreviated weekday and month, zero-padded digits, year first.
CUSTOM_PATTERNS = {
    "month-first": "MMMM d, y",
    "weekday-abbreviated": "EEE d MMM y",
    "dotted": "dd.MM.y",
    "year-first": "y MMMM d",
}
FORMATS = STANDARD_FORMATS + tuple(CUSTOM_PATTERNS)
SPLITS = ("train", "validation", "test")
_TWO_DIGIT_YEAR = re.compile(r"(?<!y)yy(?!y)")


@dataclasses.dataclass(frozen=True)
class DatePair:
    """One example: `source` (locale prefix + written date) and `target` (ISO `YYYY-MM-DD`), with how it was made."""

    source: str
    target: str
    locale: str
    format: str
    date: datetime.date


@dataclasses.dataclass(frozen=True)
class DateGeneratorSettings(Settings):
    """What `generate_date_pairs` draws: how many pairs per split, from which locales, formats and years.

    These are the keys of an experiment's `generator` section (`hf-attn seq2seq`).
    """

    n_train: int = setting(50_000, accepts=is_count, meaning="a positive integer")
    n_validation: int = setting(1_000, accepts=is_count, meaning="a positive integer")
    n_test: int = setting(2_000, accepts=is_count, meaning="a positive integer")
    locales: Sequence[str] = LOCALES
    formats: Sequence[str] = FORMATS
    first_year: int = 1900
    last_year: int = 2099

    def check(self) -> None:
        for locale in self.locales:
            try:
                Locale.parse(locale)
            except (UnknownLocaleError, ValueError, TypeError):
                raise ValueError(f"generator.locales: {locale!r} is not a CLDR locale; use codes such as "
                                 f"{', '.join(LOCALES[:4])}.") from None
        unknown = [name for name in self.formats if name not in FORMATS]
        if unknown:
            raise ValueError(f"generator.formats: unknown {unknown}; choose among {list(FORMATS)}.")
        if not datetime.MINYEAR <= self.first_year <= self.last_year <= datetime.MAXYEAR:
            raise ValueError(f"generator: need first_year <= last_year (years 1-9999), got {self.first_year} and "
                             f"{self.last_year}.")


def date_pattern(locale: str, format_name: str) -> str:
    """The CLDR pattern of `format_name` (a standard width or a `CUSTOM_PATTERNS` key), two-digit years widened."""
    if format_name in CUSTOM_PATTERNS:
        return CUSTOM_PATTERNS[format_name]
    return _TWO_DIGIT_YEAR.sub("y", Locale.parse(locale).date_formats[format_name].pattern)


def write_date(date: datetime.date, locale: str, format_name: str) -> str:
    """The source text of `date`: the locale, a colon and the date as `babel` writes it in that format."""
    return f"{locale}: {format_date(date, date_pattern(locale, format_name), locale=locale)}"


def generate_date_pairs(settings: DateGeneratorSettings, seed: int) -> dict[str, list[DatePair]]:
    """`n_train` / `n_validation` / `n_test` pairs (keys `train`, `validation`, `test`), the same for the same seed.

    Each pair draws a uniform date of the year range, a locale and a format; a source text already drawn
    (for any split) is drawn again, so the splits share no source. A ValueError when the range, locales and
    formats cannot give that many different sources.
    """
    first = datetime.date(settings.first_year, 1, 1).toordinal()
    last = datetime.date(settings.last_year, 12, 31).toordinal()
    wanted = {"train": settings.n_train, "validation": settings.n_validation, "test": settings.n_test}
    total = sum(wanted.values())
    if total > (last - first + 1) * len(settings.locales) * len(settings.formats) // 2:
        raise ValueError(f"generator: {total} pairs are too many for {settings.first_year}-{settings.last_year} in "
                         f"{len(settings.locales)} locales and {len(settings.formats)} formats; ask for fewer.")
    rng = random.Random(seed)
    seen: set[str] = set()
    pairs: list[DatePair] = []
    while len(pairs) < total:
        date = datetime.date.fromordinal(rng.randint(first, last))
        locale, format_name = rng.choice(settings.locales), rng.choice(settings.formats)
        source = write_date(date, locale, format_name)
        if source not in seen:
            seen.add(source)
            pairs.append(DatePair(source, date.isoformat(), locale, format_name, date))
    splits, start = {}, 0
    for name in SPLITS:
        splits[name] = pairs[start : start + wanted[name]]
        start += wanted[name]
    return splits


@dataclasses.dataclass(frozen=True)
class DateNormalisation(DateGeneratorSettings, PairsSource):
    """The date-normalisation pairs `generate_date_pairs` draws with these settings and `seed`: `input` the written
    date, `target` its ISO form, with the `locale` and `format` it was written in."""

    kind: ClassVar[str] = "dates"
    seed: int = 0

    def date_pairs(self) -> dict[str, list[DatePair]]:
        """The pairs of each split, with how each was made (`hf-attn seq2seq` scores them per locale)."""
        return generate_date_pairs(self, self.seed)

    def load_pairs(self) -> DatasetDict:
        return DatasetDict({split: Dataset.from_dict({
            "input": [pair.source for pair in pairs], "target": [pair.target for pair in pairs],
            "locale": [pair.locale for pair in pairs], "format": [pair.format for pair in pairs],
        }) for split, pairs in self.date_pairs().items()})
