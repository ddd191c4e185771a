"""Perplexity of a causal LM at its training length and beyond: the ALiBi paper's Figure 1 for decoders.

The evaluation is the paper's "nonoverlapping" one (Press et al., 2022, section 2): the validation text is one
token stream (each review tokenized whole, `truncation=False`, the reviews' ids concatenated in split order),
cut into consecutive windows of L tokens that do not overlap; each window is read on its own, from position
0, and every token of it but the first is predicted from the ones before it in the window. The perplexity at L
is exp of the mean next-token NLL over all predicted tokens. Every L reads the same tokens (the first
`max_tokens` of the stream, rounded down to a multiple of the longest L), so the curves differ only in how far
each token is allowed to look back and how far positions run past training.

Beside the model, the stream's perplexity under a context-free model (`unigram_perplexity`: each token's
smoothed frequency in the seed split's training reviews) is the level a causal LM sits at when it learned token
frequencies and nothing of the context: a budget has trained a decoder when its perplexity is well below it.

A `learned` position table has `max_position_embeddings` rows and no row for a later position: its
perplexity past that length is reported as `NOT_APPLICABLE` with the reason, not computed.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ..runtime.precision import autocast, default_device, resolve_precision
from ..saved import beyond_learned_table, load_saved_causal_lm
from ..tasks.imdb import load_imdb

NOT_APPLICABLE = "n/a (learned table)"
TOKENS_PER_BATCH = 16_384  # windows are batched up to this many tokens: the memory of one forward pass


def token_stream(tokenizer: PreTrainedTokenizerBase, texts: Iterable[str], max_tokens: int) -> torch.Tensor:
    """The ids of `texts`, each tokenized whole (no special tokens, no truncation), concatenated in order
    until `max_tokens` ids are read (fewer if the texts run out)."""
    ids: list[int] = []
    for text in texts:
        ids.extend(tokenizer(text, add_special_tokens=False, truncation=False, verbose=False)["input_ids"])
        if len(ids) >= max_tokens:
            break
    return torch.tensor(ids[:max_tokens], dtype=torch.long)


def unigram_perplexity(tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], stream: torch.Tensor) -> float:
    """Perplexity of `stream` under the unigram model of `texts` (each review tokenized whole), with add-one
    smoothing so that a token never seen there still has a probability."""
    ids = tokenizer(list(texts), add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
    counts = torch.bincount(torch.tensor(list(itertools.chain.from_iterable(ids))), minlength=len(tokenizer))
    log_probs = torch.log((counts.double() + 1) / (counts.sum() + len(tokenizer)))
    return math.exp(-log_probs[stream].mean().item())


@torch.no_grad()
def windowed_nll(model: PreTrainedModel, stream: torch.Tensor, length: int) -> tuple[float, int]:
    """(summed next-token NLL, predicted tokens) over the non-overlapping `length`-token windows of `stream`
    (a tail shorter than `length` is left out). Each window predicts its tokens 2..length."""
    if length < 2:
        raise ValueError(f"a window of {length} token predicts nothing; evaluate at lengths of 2 or more.")
    windows = stream[: len(stream) // length * length].view(-1, length)
    if not len(windows):
        raise ValueError(f"the stream has {len(stream)} tokens, fewer than one window of {length}; pass more text.")
    was_training = model.training
    model.eval()
    total = 0.0
    per_batch = max(1, TOKENS_PER_BATCH // length)
    for batch in windows.split(per_batch):
        batch = batch.to(model.device)
        # Every position is scored at once: no cache of past keys (a decoder keeps one by default).
        logits = model(input_ids=batch, attention_mask=torch.ones_like(batch), use_cache=False).logits[:, :-1]
        total += float(F.cross_entropy(logits.float().flatten(0, 1), batch[:, 1:].flatten(), reduction="sum"))
    model.train(was_training)
    return total, windows.numel() - len(windows)


def extrapolation_perplexity(
    model: PreTrainedModel, stream: torch.Tensor, lengths: Sequence[int]
) -> dict[str, dict[str, Any]]:
    """Per evaluation length (a string key, for JSON): `perplexity`, `nll` (mean per predicted token),
    `predicted_tokens` and `windows`; past a learned table, `perplexity` is `NOT_APPLICABLE` and `reason` says
    why. All lengths read the same first tokens of `stream`: as many as fill whole windows of the longest."""
    stream = stream[: len(stream) // max(lengths) * max(lengths)]
    results: dict[str, dict[str, Any]] = {}
    for length in lengths:
        if beyond_learned_table(model.config, length):
            results[str(length)] = {
                "perplexity": NOT_APPLICABLE,
                "reason": f"position_embedding_type='learned' has {model.config.max_position_embeddings} trained "
                          f"positions and no embedding for positions {model.config.max_position_embeddings}-"
                          f"{length - 1}",
            }
            continue
        total, predicted = windowed_nll(model, stream, length)
        results[str(length)] = {"perplexity": math.exp(total / predicted), "nll": total / predicted,
                                "predicted_tokens": predicted, "windows": len(stream) // length}
    return results


def evaluate_perplexity(
    model_dir: str | os.PathLike[str],
    lengths: Sequence[int],
    dataset: str = "stanfordnlp/imdb",
    max_tokens: int = 65_536,
    precision: str = "auto",
) -> dict[str, Any]:
    """`extrapolation_perplexity` of a saved causal LM (strictly loaded, with its tokenizer) on the seed split's
    validation reviews, computed in `precision` (an experiment's: `auto`, `bf16`, `fp32`), with what it was
    measured on and the unigram level of the same tokens; the training run's `metrics.json`, when the folder has
    one, goes under `training`."""
    device = default_device()
    computed_in = resolve_precision(precision, device)
    model, tokenizer = load_saved_causal_lm(model_dir)
    reviews = load_imdb(dataset)
    stream = token_stream(tokenizer, reviews["validation"]["text"], max_tokens)
    if len(stream) < max(lengths):
        raise ValueError(f"the validation text has {len(stream)} tokens, fewer than one window of {max(lengths)}; "
                         "lower --lengths or raise --max-tokens.")
    stream = stream[: len(stream) // max(lengths) * max(lengths)]  # whole windows of every length
    metrics_file = Path(model_dir) / "metrics.json"
    with autocast(computed_in, model.device):
        by_length = extrapolation_perplexity(model, stream, lengths)
    return {
        "model": str(model_dir),
        "position_embedding_type": model.config.position_embedding_type,
        "training_length": model.config.max_position_embeddings,
        "evaluation": "nonoverlapping windows (Press et al. 2022) of the seed split's validation reviews, "
                      "concatenated into one token stream",
        "evaluated_tokens": len(stream),
        "precision": computed_in,
        "perplexity_by_length": by_length,
        "unigram_perplexity": unigram_perplexity(tokenizer, reviews["train"]["text"], stream),
        "training": json.loads(metrics_file.read_text()) if metrics_file.is_file() else None,
    }

