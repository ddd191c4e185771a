"""A Week 3 folder's tokenized splits (`datasets/{train,val,test}_ds.pt`) as labelled texts.

The splits hold the first `max_seq` token ids of each review, not its text; the folder's own tokenizer decodes
them, words joined by single spaces, so a classifier reads the reviews the DAN was trained on, cut where the DAN's
were. The ids keep every character but not every word boundary (an end-of-word no merge absorbed has no id:
`shared/docs/week3-format.md`, encoding step 4), so "TV pilot" may read "TVpilot".
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import ClassVar

import datasets

from ..week3.bpe import load_week3_tokenizer
from ..week3.tensors import SPLIT_FILES, load_week3_split
from .imdb import FEATURES, LABEL_NAMES
from .sources import ClassificationData, LabelledTexts


@dataclasses.dataclass(frozen=True)
class Week3Splits(LabelledTexts):
    """The `.pt` splits of the Week 3 folder `folder` (what `hf-attn prepare` writes), decoded by its tokenizer;
    labels 0 and 1 are IMDb's `neg` and `pos`."""

    kind: ClassVar[str] = "week3"
    folder: str

    def load(self) -> ClassificationData:
        tokenizer = load_week3_tokenizer(self.folder)
        splits = datasets.DatasetDict()
        for name, filename in SPLIT_FILES.items():
            rows = load_week3_split(Path(self.folder) / "datasets" / filename)
            texts = tokenizer.batch_decode(rows[:]["input_ids"], skip_special_tokens=True)
            splits[name] = datasets.Dataset.from_dict({"text": texts, "label": rows[:]["labels"]}, features=FEATURES)
        return ClassificationData(splits, LABEL_NAMES, None, f"Week 3 splits of {Path(self.folder).name}")
