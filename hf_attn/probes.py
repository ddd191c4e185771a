"""Probes from the reference notebook: six hard reviews that bag-of-words models get wrong."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# (review, label, what it tests); label 1 = positive. From the reference notebook's hard-review probe.
HARD_REVIEWS: tuple[tuple[str, int, str], ...] = (
    ("This movie was not bad at all, I actually enjoyed every minute.", 1, "negation that flips to positive"),
    ("The acting was excellent, but the movie itself was tedious and far too long.", 0, "contrast, verdict last"),
    ("I expected to hate it, yet by the end I was completely won over.", 1, "late sentiment reversal"),
    ("It was fine, I guess. Nothing memorable, nothing worth recommending.", 0, "faint praise"),
    ("A stunning cast and a big budget could not save this dull, lifeless script.", 0,
     "positive words, negative verdict"),
    ("Never have I been so moved by a film; it is simply wonderful.", 1,
     "inverted word order, 'never' without negation"),
)


@dataclass
class ProbeResult:
    review: str
    label: int
    predicted: int
    probability_positive: float
    tests: str

    @property
    def correct(self) -> bool:
        return self.predicted == self.label


def run_hard_probe(classifier: Any) -> list[ProbeResult]:
    """Score the six hard reviews with a `text-classification` pipeline (label index 1 = positive)."""
    reviews = [review for review, _, _ in HARD_REVIEWS]
    outputs = classifier(reviews, top_k=None)
    label2id = classifier.model.config.label2id
    results = []
    for (review, label, tests), scores in zip(HARD_REVIEWS, outputs):
        by_id = {label2id[item["label"]]: item["score"] for item in scores}
        positive = by_id[1]
        results.append(ProbeResult(review, label, int(positive >= 0.5), positive, tests))
    return results


def format_probe(results: list[ProbeResult]) -> str:
    """A markdown table with a score line, as the reference notebook printed it."""
    lines = ["| # | review | label | predicted | P(positive) | |", "|---|---|---|---|---|---|"]
    for number, result in enumerate(results, 1):
        mark = "right" if result.correct else "WRONG"
        lines.append(f"| {number} | {result.review} | {result.label} | {result.predicted} | "
                     f"{result.probability_positive:.3f} | {mark} |")
    lines.append(f"\nScore: {sum(r.correct for r in results)}/{len(results)}")
    return "\n".join(lines)
