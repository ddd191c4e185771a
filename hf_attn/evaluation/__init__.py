"""Evaluation with Hugging Face `evaluate`, offline: the package's metrics as metric modules loaded by their path.

`evaluate.load("accuracy")` fetches a Hub Space (the evaluate wheel ships no metric), so it fails offline; a metric
module in a local folder loads with no network, and this package ships its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import evaluate

# The folder of the classification metric module, for `evaluate.load(CLASSIFICATION_METRICS, num_labels=...)`.
CLASSIFICATION_METRICS = str(Path(__file__).parent / "classification_metrics")


def f1_key(num_labels: int) -> str:
    """The name of the F1 the metric module reports for a classifier of `num_labels` labels."""
    return "f1" if num_labels == 2 else "macro_f1"


def classification_metric(num_labels: int) -> evaluate.EvaluationModule:
    """hf-attn's classification metrics (accuracy, and `f1` for two labels or `macro_f1` beyond) for a classifier
    of `num_labels` labels, loaded by path and kept in memory (no cache files, so every process of a distributed
    run computes its own)."""
    import evaluate  # the `experiments` extra: the core package does not need it

    return evaluate.load(CLASSIFICATION_METRICS, num_labels=num_labels, keep_in_memory=True)
