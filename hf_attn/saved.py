"""A saved folder as the package's own commands read it: a classifier loaded strictly, at one length, in batches;
a causal LM loaded strictly, or refused with what the folder holds instead.

`from_pretrained` starts every weight it does not find in the folder from a random init and only logs it:
a folder whose `config.json` is another model type, or a pretraining folder read as a classifier, would
then print labels and accuracies from random weights; and it loads a head's weights into another head of
the same shape (a 3-label token classifier's into a 3-label sentence classifier). `load_strictly` (behind
`hf-attn predict`, `evaluate`, `probe`, `explore`, `export`, `generate`, `perplexity`, `checkpoint`,
`--continue-from` and `build_model`'s `init_from`) refuses a folder saved as another head than the one
asked for (its config.json's `architectures`) and makes every missing, unexpected or mismatched weight an
error naming them and the likely cause. Only the core install is needed (`predict` works without the extras).
"""

from __future__ import annotations

import itertools
import os
import pickle
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from safetensors import SafetensorError
from transformers import (
    MODEL_FOR_CAUSAL_LM_MAPPING,
    MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING,
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    TextClassificationPipeline,
    pipeline,
)
from transformers.tokenization_utils_base import LARGE_INTEGER

from .configuration_hf_attn import HfAttnConfig
from .positions import POSITION_SCHEMES

SHOWN_NAMES = 3  # weight names an error lists of each kind, before the count
SHOWN_WORDS = 30  # words of a vocabulary an error lists (all of a length task's)
BATCH_SIZE = 32  # texts per pipeline call of `classify_in_batches`: a large input is never held whole
CLASSIFIER_FOLDER = "a classifier folder, such as one `hf-attn train` writes"
CAUSAL_LM_FOLDER = "a causal-LM folder, such as one `hf-attn pretrain --config configs/causal-lm/rope.yaml` writes"


def load_saved_classifier(
    model_dir: str | os.PathLike[str], **config_changes: Any
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The classifier and tokenizer of a saved folder (or Hub repo); a ValueError when a weight does not fit.

    `config_changes` replace saved config fields, as `from_pretrained`'s keyword arguments do (`read_length`,
    `window_stride`: the reading policy; `rope_parameters`), and are checked as the config checks its own.
    A classifier saved by hf_attn 1.0 kept its read length in the tokenizer's `model_max_length`; it reads
    what it read then.
    """
    _, model_class = _check_loadable(AutoModelForSequenceClassification, MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING,
                                     model_dir, CLASSIFIER_FOLDER)
    model = load_strictly(model_class, model_dir, **config_changes)
    tokenizer = load_tokenizer(model_dir)
    config = model.config
    if not isinstance(config, HfAttnConfig):
        if config_changes:
            raise ValueError(f"{', '.join(config_changes)} need an hf_attn model; {model_dir} holds a "
                             f"{config.model_type}")
        return model, tokenizer
    saved, _ = HfAttnConfig.get_config_dict(model_dir)
    if "read_length" not in saved and "read_length" not in config_changes \
            and tokenizer.model_max_length < LARGE_INTEGER:
        config.read_length = tokenizer.model_max_length
    try:
        config.validate_fields()
    except ValueError as error:
        raise ValueError(f"{model_dir}: {error}") from None
    return model, tokenizer


def load_saved_causal_lm(model_dir: str | os.PathLike[str]) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The causal LM and tokenizer of a saved folder (or Hub repo), loaded strictly.

    An hf_attn encoder's folder (a classifier, a masked LM) is refused by what it holds, before the model is
    built: built as a causal LM, it would fail inside the model with advice meant for code that constructs a
    decoder.
    """
    config, model_class = _check_loadable(AutoModelForCausalLM, MODEL_FOR_CAUSAL_LM_MAPPING, model_dir,
                                          CAUSAL_LM_FOLDER)
    if isinstance(config, HfAttnConfig) and not config.is_decoder:
        saved_as = ", ".join(config.architectures or []) or "is_decoder false"
        raise ValueError(f"{model_dir} holds an encoder ({saved_as}): it reads text but does not continue it; "
                         f"pass {CAUSAL_LM_FOLDER}")
    return load_strictly(model_class, model_dir), load_tokenizer(model_dir)


def load_tokenizer(model_dir: str | os.PathLike[str]) -> PreTrainedTokenizerBase:
    """`AutoTokenizer.from_pretrained(model_dir)`, or a one-line ValueError naming the tokenizer file `tokenizers`
    cannot read (a merge of a token the vocabulary lacks, say): its own error names no file."""
    try:
        return AutoTokenizer.from_pretrained(model_dir)
    except Exception as error:
        if type(error) is not Exception:  # `tokenizers` raises what it cannot read of a file as a bare Exception
            raise
        raise ValueError(f"{_files(model_dir, 'tokenizer.json')} cannot be read ({error}); it was edited or is "
                         "damaged: save or download the tokenizer again") from None


def _check_loadable(
    auto_class: type, mapping: Any, model_dir: str | os.PathLike[str], wanted: str
) -> tuple[PretrainedConfig, type]:
    """The folder's config and the class `auto_class` builds for it (`auto_class` itself where only the config's
    `auto_map` names one), or a one-line ValueError when it has none (an encoder-decoder read as a classifier):
    transformers' own error lists every model type the Auto class knows."""
    config = AutoConfig.from_pretrained(model_dir)
    if type(config) in mapping:
        return config, mapping[type(config)]
    if auto_class.__name__ in (getattr(config, "auto_map", None) or {}):
        return config, auto_class
    saved_as = ", ".join(config.architectures or []) or config.model_type
    holds = (f"an encoder-decoder ({saved_as}): it writes an output for a source text" if config.is_encoder_decoder
             else f"a {config.model_type} model ({saved_as}), which {auto_class.__name__} has no class for")
    raise ValueError(f"{model_dir} holds {holds}; pass {wanted}")


def load_strictly(
    model_class: type, source: str | os.PathLike[str], new_head: bool = False, **from_pretrained_kwargs: Any
) -> PreTrainedModel:
    """`model_class.from_pretrained(source, **from_pretrained_kwargs)` (a model class or an Auto class), or a
    ValueError naming the weights `source` lacked, had left over or had in another shape, and the likely cause.

    A `model_class` (not an Auto class) must be what `source` was saved as (`_check_saved_head`). With `new_head`
    (a model started from a pretrained encoder, `init_from`), it need not be, and only the encoder must load
    whole: the weights outside it are the new head, and the weights of another head are dropped.
    """
    if not new_head and issubclass(model_class, PreTrainedModel):
        _check_saved_head(model_class, source)
    # `ignore_mismatched_sizes`: a weight of another shape is reported (and refused below), not raised from deep
    # inside transformers with advice to pass this very option.
    try:
        with warnings.catch_warnings():  # torch's note on a pickle's protocol, before the refusal below
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            model, info = model_class.from_pretrained(source, output_loading_info=True, ignore_mismatched_sizes=True,
                                                      **from_pretrained_kwargs)
    except SafetensorError as error:
        raise ValueError(f"{_files(source, 'model*.safetensors')} cannot be read ({error}); it is truncated or "
                         "corrupt: save or download the model again") from None
    except pickle.UnpicklingError:  # torch's `weights_only` loader met more than tensors (its advice: unpickle it)
        raise ValueError(f"{_files(source, 'pytorch_model*.bin')} holds pickled objects besides tensors, and hf-attn "
                         "refuses to unpickle it (that can run any code it holds); convert it to model.safetensors "
                         "where you trust its source, or download the model in safetensors") from None
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
    return model


def _check_saved_head(model_class: type[PreTrainedModel], source: str | os.PathLike[str]) -> None:
    """A one-line ValueError when the config.json of `source` names architectures other than `model_class`.

    Built as another class, a folder's head would be dropped, fail on its shape (a multiple-choice head read as a
    3-label classifier), or load into a head that means something else (a 3-label token classifier's into a
    3-label sentence classifier, which then answers from it). A config that names none (a hand-made one) is read
    as asked, and its weights decide.
    """
    saved, _ = PretrainedConfig.get_config_dict(source)
    saved_as = saved.get("architectures") or []
    if saved_as and model_class.__name__ not in saved_as:
        raise ValueError(f"{source} does not hold a {model_class.__name__}: "
                         f"{_saved_as(source, saved_as, model_class.__name__, saved.get('model_type'))}")


def _saved_as(source: str | os.PathLike[str], saved_as: list[str], wanted: str, model_type: str | None) -> str:
    """What a folder saved as `saved_as` (none: a hand-made config) holds instead of a `wanted`, and what to do."""
    holds = ", ".join(saved_as) or "a model without a head"
    if wanted.endswith("ForSequenceClassification") and model_type == HfAttnConfig.model_type:
        return (f"it was saved as {holds}, which has no classifier head for whole texts; pass {CLASSIFIER_FOLDER}, "
                f"or fine-tune one from it with `hf-attn train` and `init_from: {source}` in the experiment")
    return f"it was saved as {holds}; pass a folder saved as {wanted}"


def _files(source: str | os.PathLike[str], pattern: str) -> str:
    """The files of the folder `source` that match `pattern`, or the pattern in `source` (a Hub repo)."""
    files = sorted(Path(source).glob(pattern)) if Path(source).is_dir() else []
    return ", ".join(map(str, files)) or f"{pattern} of {source}"


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
        return _saved_as(source, saved_as, model.__class__.__name__, config.model_type)
    return "the weights file belongs to another model or was edited; save or download the model again"


def check_known_words(
    tokenizer: PreTrainedTokenizerBase, text: str, where: str, model_dir: str | os.PathLike[str], advice: str
) -> None:
    """A one-line ValueError naming the words of `text` that `tokenizer` reads as its unknown token, with the
    vocabulary and `advice`: the model can neither read those words nor write them (a word-level tokenizer, as a
    length task's, knows only its task's words). A tokenizer without an unknown token (byte-level BPE) reads any
    text whole. `where` names the text (`prompt 2`, say)."""
    if tokenizer.unk_token_id is None:
        return
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    unknown = list(dict.fromkeys(text[start:end] for token, (start, end) in  # each word once, in order
                                 zip(encoded["input_ids"], encoded["offset_mapping"], strict=True)
                                 if token == tokenizer.unk_token_id))
    if not unknown:
        return
    special = set(tokenizer.all_special_ids)
    words = [word for word, index in sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
             if index not in special]
    vocabulary = " ".join(words[:SHOWN_WORDS]) + (f" ... ({len(words)} words)" if len(words) > SHOWN_WORDS else "")
    named = f"the word {unknown[0]!r} is" if len(unknown) == 1 else f"the words {', '.join(map(repr, unknown))} are"
    raise ValueError(f"{where}: {named} not in {model_dir}'s vocabulary ({vocabulary}); {advice}")


def beyond_learned_table(config: Any, length: int) -> bool:
    """Whether reading `length` tokens at once needs positions a table (`learned`'s) was never given."""
    scheme = POSITION_SCHEMES.get(getattr(config, "position_embedding_type", None))
    return scheme is not None and not scheme.extrapolates and length > config.max_position_embeddings


def classifier_pipeline(model_dir: str | os.PathLike[str], **config_changes: Any) -> TextClassificationPipeline:
    """A `text-classification` pipeline of the strictly loaded folder (`hf-attn predict` and `probe`, `make demo`).

    It reads what the saved config's reading policy says (`read_length`, `window_stride`; applied by the
    model, so this pipeline and `pipeline("text-classification", model=model_dir)` read the same tokens), or
    the policy `config_changes` set instead. Models of other types read at most their tokenizer's
    `model_max_length` tokens, as transformers' pipelines do with `truncation=True`.
    """
    model, tokenizer = load_saved_classifier(model_dir, **config_changes)
    return pipeline("text-classification", model=model, tokenizer=tokenizer,
                    truncation=not isinstance(model.config, HfAttnConfig))


def classify_in_batches(
    classifier: Any, records: Iterable[dict[str, Any]], text: str = "text", batch_size: int = BATCH_SIZE
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each record with a `text-classification` pipeline's prediction for its text (under the key `text`), in
    order, `batch_size` records at a time: records are read as they are needed, so an input larger than memory
    streams through."""
    records = iter(records)
    while batch := list(itertools.islice(records, batch_size)):
        yield from zip(batch, classifier([record[text] for record in batch], batch_size=batch_size))
