"""`make demo`'s last step: the committed classifier next to the smoke model the demo has just trained.

Every classifier in checkpoints/ and the smoke model classify the same texts: the demo's own two and the
first review of each class in the test part of the sample shipped in the package (offline, seconds), each
read as its model reads a text (`hf_attn.saved.classifier_pipeline`: the committed classifier may read
whole reviews, the smoke model reads 128 tokens). Until a classifier is committed it says so in one line.

    python scripts/demo_checkpoint.py --smoke outputs/demo [--checkpoints checkpoints] "text" ...
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hf_attn.experiments.data import LABEL_NAMES, load_sample
from hf_attn.publishing.checkpoint import committed_classifiers
from hf_attn.saved import classifier_pipeline

SHOWN_CHARACTERS = 60  # of each text in the table; the models read more


def shortened(text: str) -> str:
    """The text on one line, cut to SHOWN_CHARACTERS."""
    text = " ".join(text.split())
    return text if len(text) <= SHOWN_CHARACTERS else text[: SHOWN_CHARACTERS - 3] + "..."


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", required=True, help="the smoke model's folder (make demo: outputs/demo)")
    parser.add_argument("--checkpoints", default="checkpoints", help="the folder of committed checkpoints")
    parser.add_argument("texts", nargs="*", help="texts to classify before the sample's reviews")
    args = parser.parse_args(argv)
    classifiers = committed_classifiers(args.checkpoints)
    if not classifiers:
        print(f"{args.checkpoints}/ holds no classifier yet, so there is none to show next to the smoke model "
              f"({Path(args.checkpoints) / 'README.md'} says how one is made)")
        return
    test = load_sample()["test"]
    reviews = test.select([test["label"].index(label) for label in range(len(LABEL_NAMES))])
    texts = [*args.texts, *reviews["text"]]
    truths = ["" for _ in args.texts] + [LABEL_NAMES[label] for label in reviews["label"]]
    models = [args.smoke, *map(str, classifiers)]
    columns = [[f"{p['label']} {p['score']:.2f}" for p in classifier_pipeline(model)(texts)] for model in models]
    widths = [max(len(model), 13) for model in models]
    print("The committed classifier next to the smoke model: each one's label and score; truth: the sample's label")
    rows = [("text", "truth", models), *((shortened(text), truths[row], [column[row] for column in columns])
                                         for row, text in enumerate(texts))]
    for text, truth, cells in rows:
        line = f"{text:{SHOWN_CHARACTERS}}  {truth:5}  " + "  ".join(f"{c:{w}}" for c, w in zip(cells, widths))
        print(line.rstrip())


if __name__ == "__main__":
    main()
