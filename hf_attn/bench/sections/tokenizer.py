"""The `tokenizer` part: the tokenizer's speed, as scripts/bench_tokenizer.py measured it, merged into the record.

Not one of `--sections`: its JSON (`tokenizer_json`) is read whenever the file exists.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..markdown import table
from .base import BenchSection, option

if TYPE_CHECKING:  # the settings gather every section's fields
    import torch

    from ..settings import BenchSettings

# Written by scripts/bench_tokenizer.py; merged into the report when present.
DEFAULT_TOKENIZER_JSON = "results/bench/bench_tokenizer.json"


@dataclasses.dataclass(frozen=True)
class TokenizerSection(BenchSection):
    """scripts/bench_tokenizer.py's JSON, as it wrote it."""

    name: ClassVar[str] = "tokenizer"
    selectable: ClassVar[bool] = False
    tokenizer_json: str | None = option(
        DEFAULT_TOKENIZER_JSON, "scripts/bench_tokenizer.py's JSON, merged into the report if it exists ('' to skip)")

    @classmethod
    def wanted(cls, settings: BenchSettings) -> bool:
        return bool(settings.tokenizer_json) and Path(settings.tokenizer_json).is_file()

    @classmethod
    def run(cls, settings: BenchSettings, device: torch.device) -> Any:
        return json.loads(Path(settings.tokenizer_json).read_text())

    @classmethod
    def report(cls, record: Any) -> list[str]:
        """scripts/bench_tokenizer.py's JSON: its top-level scalars as a caption and its `rows` records as a
        table; any other layout verbatim, so a change on that side never breaks this report."""
        out = ["## Tokenizer speed (from scripts/bench_tokenizer.py)", ""]
        rows = record.get("rows") if isinstance(record, dict) else None
        if not (isinstance(rows, list) and rows and all(isinstance(row, dict) for row in rows)):
            return out + ["```json", json.dumps(record, indent=2), "```", ""]
        caption = [f"{key} {value}" for key, value in record.items() if isinstance(value, (str, int, float))]
        header = list(dict.fromkeys(key for row in rows for key in row))
        body = [[row.get(key, "") for key in header] for row in rows]
        return out + ([", ".join(caption) + ".", ""] if caption else []) + [table(header, body), ""]
