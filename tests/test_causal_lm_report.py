"""scripts/causal_lm_report.py: the decoders' table over seeds and the ordering only where every seed agrees."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

NOT_APPLICABLE = "n/a (learned table)"
REPO = Path(__file__).resolve().parents[1]
REPORT = runpy.run_path(str(REPO / "scripts" / "causal_lm_report.py"))


def report(perplexities: dict[str, float | str], seconds: float = 100.0) -> dict[str, Any]:
    return {"training_length": 64, "evaluated_tokens": 1024, "unigram_perplexity": 804.47,
            "perplexity_by_length": {length: {"perplexity": value} for length, value in perplexities.items()},
            "training": {"optimizer_steps": 3000, "train_runtime_s": seconds}}


REPORTS = {
    "alibi": [report({"64": 100.0, "128": 99.0}, 90.0), report({"64": 102.0, "128": 101.0}, 110.0)],
    "rope": [report({"64": 101.0, "128": 104.0}), report({"64": 103.0, "128": 106.0})],
    "sinusoidal": [report({"64": 110.0, "128": 150.0}), report({"64": 111.0, "128": 160.0})],
    "learned": [report({"64": 103.5, "128": NOT_APPLICABLE}), report({"64": 104.0, "128": NOT_APPLICABLE})],
}


def test_ordering_ranks_only_where_every_seed_agrees() -> None:
    # 64: alibi 100/102, rope 101/103 (overlap), learned 103.5/104 (rope's 103 < 103.5), sinusoidal 110/111.
    assert REPORT["ordering"](REPORTS, "64") == "alibi ~ rope < learned < sinusoidal"
    # 128: alibi 99/101 < rope 104/106 < sinusoidal 150/160; learned cannot be read there.
    assert REPORT["ordering"](REPORTS, "128") == "alibi < rope < sinusoidal"


def test_table_shows_the_mean_each_seed_and_the_unigram_level() -> None:
    table = REPORT["table"](REPORTS)
    assert "| alibi | 101.0 (100.0, 102.0) | 100.0 (99.0, 101.0) | 3000 | 100 |" in table
    assert "| learned | 103.8 (103.5, 104.0) | n/a (learned table) | 3000 | 100 |" in table
    assert "Unigram level" in table and "804.5" in table
    assert "- 64: alibi ~ rope < learned < sinusoidal" in table


def test_one_seed_has_no_ordering() -> None:
    table = REPORT["table"]({scheme: runs[:1] for scheme, runs in REPORTS.items()})
    assert "| rope | 101.0 | 104.0 | 3000 | 100 |" in table and "Ordering" not in table


def test_samples_come_from_the_first_seed_whose_run_folder_is_here(tmp_path: Path) -> None:
    (tmp_path / "rope-seed43").mkdir()
    (tmp_path / "rope-seed43" / "config.json").write_text("{}")
    assert REPORT["run_folder"](tmp_path, "rope", (42, 43)) == tmp_path / "rope-seed43"
    with pytest.raises(SystemExit, match="none of .*alibi-seed42, .*alibi-seed43 holds a model"):
        REPORT["run_folder"](tmp_path, "alibi", (42, 43))
