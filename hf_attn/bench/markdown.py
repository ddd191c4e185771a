"""The report's shared formatting: a markdown table and a speed-up ratio, as every section writes them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

NOT_RECORDED = "not recorded"
"""What a report shows for a field its record predates."""


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table of `rows` under `header`, every cell as `str` gives it."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def ratio(value: float | None) -> str:
    """A speed-up as the tables show it ("1.23x"), empty where there is none."""
    return "" if value is None else f"{value:.2f}x"
