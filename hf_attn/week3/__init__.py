"""The IMDb tutorial's Week 3 files (format: ``shared/docs/week3-format.md``), read and written exactly.

* ``files``: the three tokenizer JSON files, their validation and ``Week3FormatError``;
* ``bpe``: the documented BPE trainer and the conversion to and from ``HfAttnTokenizerFast``;
* ``batch_encoding``: ``encode_batch``, the same ids for a large batch of texts, each distinct word encoded once
  (opt-in: the package's own bulk encoding uses it; a saved model's tokenizer does not need it);
* ``tensors``: the pickled dataset splits and the DAN embedding, loaded without running pickles;
* ``dan``: the Deep Averaging Network whose embedding starts the Transformers;
* ``prepare``: ``hf-attn prepare``, a whole Week 3 folder made from IMDb (imported on its own, as it
  needs the experiment data code).
"""

from .bpe import (
    learn_week3_merges,
    load_week3_tokenizer,
    save_week3,
    tokenizer_from_week3_files,
    train_week3_tokenizer,
    week3_files_from_tokenizer,
)
from .dan import DeepAveragingNetwork, train_dan
from .files import Week3Files, Week3FormatError, find_week3_files, read_week3_files, week3_vocab
from .tensors import (
    load_week3_embedding,
    load_week3_pickle,
    load_week3_split,
    read_embedding,
    read_embedding_width,
    save_week3_split,
)

__all__ = [
    "DeepAveragingNetwork",
    "Week3FormatError",
    "Week3Files",
    "find_week3_files",
    "learn_week3_merges",
    "load_week3_embedding",
    "load_week3_pickle",
    "load_week3_split",
    "load_week3_tokenizer",
    "read_embedding",
    "read_embedding_width",
    "read_week3_files",
    "save_week3",
    "save_week3_split",
    "tokenizer_from_week3_files",
    "train_dan",
    "train_week3_tokenizer",
    "week3_files_from_tokenizer",
    "week3_vocab",
]
