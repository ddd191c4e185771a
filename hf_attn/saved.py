"""A saved classifier folder as the package's own commands read it: loaded strictly, at one length, in batches.

`from_pretrained` starts every weight it does not find in the folder from a random init and only logs it:
a folder whose `config.json` is another model type, or a pretraining folder read as a classifier, would
then print labels and accuracies from random weights. `load_saved_classifier` (behind `hf-attn predict`,
`evaluate` and `probe`) and `build_model`'s `init_from` make every missing, unexpected or mismatched
weight an error naming them and the likely cause. Only the core install is needed (`predict` works
without the extras).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator
from typing import Any

from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    TextClassificationPipeline,
    pipeline,
)
from transformers.tokenization_utils_base import LARGE_INTEGER

from .configuration_hf_attn import HfAttnConfig

SHOWN_NAMES = 3  # weight names an error lists of each kind, before the count
BATCH_SIZE = 32  # texts per pipeline call of `classify_in_batches`: a large input is never held whole


def load_saved_classifier(
    model_dir: str | os.PathLike[str], window_stride: int | None = None, **config_changes: Any
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The classifier and tokenizer of a saved folder (or Hub repo); a ValueError when a weight does not fit.

    `window_stride` reads texts longer than the model's positions as windows that far apart, whatever the
    saved `classifier_window_stride` says (see `HfAttnConfig`); `config_changes` replace other saved config
    fields (as `from_pretrained`'s keyword arguments do).
    """
    model, info = AutoModelForSequenceClassification.from_pretrained(model_dir, output_loading_info=True,
                                                                     **config_changes)
    check_loaded_weights(model_dir, model, info)
    if window_stride is not None:
        if not isinstance(model.config, HfAttnConfig):
            raise ValueError(f"--window-stride needs an hf_attn model; {model_dir} holds a {model.config.model_type}")
        model.config.classifier_window_stride = window_stride
        model.config.validate_fields()
    return model, AutoTokenizer.from_pretrained(model_dir)


def check_loaded_weights(
    source: str | os.PathLike[str], model: PreTrainedModel, info: dict[str, Any], new_head: bool = False
) -> None:
    """Raise a ValueError naming the weights `source` lacked, had left over or had in another shape for `model`
    (`info` is `from_pretrained(..., output_loading_info=True)`'s).

    With `new_head` (a model started from a pretrained encoder, `init_from`), only the encoder must load
    whole: the weights outside it are the new head, and the weights of another head are dropped.
    """
    missing = sorted(info["missing_keys"])
    unexpected = sorted(info["unexpected_keys"])
    if new_head:
        missing = [name for name in missing if name.startswith(f"{model.base_model_prefix}.")]
        unexpected = []
    mismatched = sorted(name for name, *_ in info["mismatched_keys"])
    problems = [
        f"{kind} {_listed(names)}"
        for kind, names in (("missing", missing), ("unexpected", unexpected), ("mismatched", mismatched))
        if names
    ]
    if problems:
        raise ValueError(
            f"the weights in {source} do not fit {type(model).__name__} ({'; '.join(problems)}): "
            f"{_likely_cause(source, model)}"
        )


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN_NAMES])
    return f"{shown} ({len(names)} in all)" if len(names) > SHOWN_NAMES else shown


def _likely_cause(source: str | os.PathLike[str], model: PreTrainedModel) -> str:
    config = model.config
    if config.model_type != HfAttnConfig.model_type:
        return (f"its config.json says model_type {config.model_type!r}, not {HfAttnConfig.model_type!r}; pass the "
                "folder `hf-attn train` wrote, with its own config.json")
    saved_as = config.architectures or []
    if model.__class__.__name__.endswith("ForSequenceClassification") and not any(
        name.endswith("ForSequenceClassification") for name in saved_as
    ):
        return (f"it was saved as {', '.join(saved_as) or 'a model without a head'}, which has no classifier head; "
                f"fine-tune it first with `hf-attn train` and `init_from: {source}` in the experiment")
    return "the weights file belongs to another model or was edited; save or download the model again"


def beyond_learned_table(config: Any, length: int) -> bool:
    """Whether reading `length` tokens at once needs positions a `learned` table was never given."""
    return getattr(config, "position_embedding_type", None) == "learned" and length > config.max_position_embeddings


def reading_length(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, max_length: int | None = None) -> int:
    """How many tokens of each text a command reads: `max_length`, else the tokenizer's `model_max_length` (the
    length the model was trained at), else, for a tokenizer without one, the model's `max_position_embeddings`.

    A ValueError, before any text is read, when that is more than a learned-position model has positions for
    and it does not read windows (`classifier_window_stride`): its forward would fail on the first long text.
    """
    config = model.config
    length = tokenizer.model_max_length if max_length is None else max_length
    if length >= LARGE_INTEGER:
        length = config.max_position_embeddings
    positions = config.max_position_embeddings
    windowed = getattr(config, "classifier_window_stride", None) is not None
    if beyond_learned_table(config, length) and not windowed:
        raise ValueError(
            f"the model's learned positions cover {positions} tokens, so it cannot read {length}; pass "
            f"--max-length {positions} or less, or --window-stride N to read windows of {positions} tokens "
            "(only sinusoidal, rope and alibi read past their training length directly)"
        )
    return length


def classifier_pipeline(
    model_dir: str | os.PathLike[str], max_length: int | None = None, window_stride: int | None = None
) -> TextClassificationPipeline:
    """A `text-classification` pipeline of the strictly loaded folder, reading `max_length` tokens of each text
    (default: the length the model was trained at, the tokenizer's `model_max_length`), as windows
    `window_stride` apart past the model's positions if given (`hf-attn predict` and `probe`, `make demo`).

    The pipeline truncates (`truncation=True`, to that `model_max_length`): a tokenizer keeps every token
    unless asked, and a text longer than the model's positions would otherwise fail or read past its training.
    """
    model, tokenizer = load_saved_classifier(model_dir, window_stride)
    tokenizer.model_max_length = reading_length(model, tokenizer, max_length)
    return pipeline("text-classification", model=model, tokenizer=tokenizer, truncation=True)


def classify_in_batches(
    classifier: Any, records: Iterable[dict[str, Any]], batch_size: int = BATCH_SIZE
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each record with a `text-classification` pipeline's prediction for its `text`, in order, `batch_size`
    records at a time: records are read as they are needed, so an input larger than memory streams through."""
    records = iter(records)
    while batch := list(itertools.islice(records, batch_size)):
        yield from zip(batch, classifier([record["text"] for record in batch], batch_size=batch_size))
