"""hf-attn's classification metrics as an `evaluate` metric module: accuracy, and F1 of the positive class (label
1) for two labels or `macro_f1` (the unweighted mean of every class's F1) for more.

The file stands alone (numpy, datasets and evaluate only), so that `evaluate.load` can load it by its path with no
Hub, as `Trainer`'s `compute_metrics` and `evaluate.evaluator("text-classification")` do:

    >>> import evaluate
    >>> from hf_attn.evaluation import CLASSIFICATION_METRICS
    >>> metric = evaluate.load(CLASSIFICATION_METRICS, num_labels=2)
    >>> metric.compute(predictions=[0, 1, 1], references=[0, 1, 0])
    {'accuracy': 0.6666666666666666, 'f1': 0.6666666666666666}

The number of labels is the classifier's, given when the metric is loaded: which F1 to report follows from it,
and a class that neither the predictions nor the references hold still counts (F1 0) in the macro mean, which
the data alone could not tell.
"""

from __future__ import annotations

from typing import Any

import datasets
import evaluate
import numpy as np

_DESCRIPTION = """Accuracy, and F1: of the positive class (label 1) for two labels, `macro_f1` for more. A class
that neither labels nor predictions hold has F1 0."""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `int`): predicted label ids.
    references (`list` of `int`): gold label ids.
Returns:
    accuracy (`float`): the fraction of predictions equal to their reference.
    f1 (`float`, two labels): F1 of label 1.
    macro_f1 (`float`, three labels or more): the mean of every label's F1, from 0 to `num_labels - 1`.
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ClassificationMetrics(evaluate.Metric):
    """The metrics of `hf-attn train / evaluate` for a classifier of `num_labels` labels (two unless told)."""

    def __init__(self, num_labels: int = 2, **kwargs: Any) -> None:
        if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 2:
            raise ValueError(f"num_labels must be a whole number of at least 2, not {num_labels!r}: pass the "
                             "classifier's (model.config.num_labels)")
        self.num_labels = num_labels
        super().__init__(**kwargs)

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("int64"),
                                        "references": datasets.Value("int64")}),
        )

    def _compute(self, predictions: list[int], references: list[int]) -> dict[str, float]:
        predicted, labels = np.asarray(predictions), np.asarray(references)

        def f1(label: int) -> float:
            true_positives = np.sum((predicted == label) & (labels == label))
            either = np.sum(predicted == label) + np.sum(labels == label)
            return float(2 * true_positives / either) if either else 0.0

        scores = {"accuracy": float(np.mean(predicted == labels))}
        if self.num_labels == 2:
            return {**scores, "f1": f1(1)}
        return {**scores, "macro_f1": float(np.mean([f1(label) for label in range(self.num_labels)]))}
