"""What the explore page shows of one classifier reading one text, computed without a browser.

One forward pass of the saved classifier gives the logits (the verdict) and the last hidden state of every
window it read (each window's share of the pooled decision); the attention weights (heatmaps, attention by
distance) come from a second, eager pass over only the windows drawn. The page (`page.py`) only draws these.
Its contextual-vector panel compares one word's vectors across sentences, layer by layer
(`analysis.probes.contextual_similarity`).

A windowed classifier (`window_stride`) pools its windows' vectors weighted by their real tokens
and applies one linear head, so its logits split exactly into one term per window plus the head's bias:
logits = sum_i (w_i / sum_j w_j) * (W @ pooled_i) + b. `window_contributions` reports those terms.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase, TextClassificationPipeline

from ..analysis.probes import HARD_REVIEWS, ContextualSimilarity, contextual_similarity
from ..modeling_hf_attn import HfAttnForSequenceClassification, pool
from ..positions import apply_rotary
from ..saved import classifier_pipeline

LONG_REVIEW = Path(__file__).with_name("long_review.json")
ATTENTION_TOKENS = 1024  # the longest window whose attention weights are computed (see `window_attentions`)


def sample_texts() -> dict[str, str]:
    """The page's samples by name: the six hard reviews, then a long review of the seed split's test part."""
    samples = {f"hard {number}: {tests}": review for number, (review, _, tests) in enumerate(HARD_REVIEWS, 1)}
    long_review = json.loads(LONG_REVIEW.read_text(encoding="utf-8"))
    samples[f"long test review ({len(long_review['text'].split())} words)"] = long_review["text"]
    return samples


@dataclass
class ExploredModel:
    """A saved classifier as the page holds it: its pipeline (strictly loaded) and a name."""

    name: str
    classifier: TextClassificationPipeline

    @property
    def model(self) -> HfAttnForSequenceClassification:
        return self.classifier.model

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        return self.classifier.tokenizer

    @property
    def scheme(self) -> str:
        return self.model.config.position_embedding_type


def load_explored(model_dir: str | os.PathLike[str]) -> ExploredModel:
    """The classifier in `model_dir`, loaded as `hf-attn predict` loads it; a ValueError when the folder is not
    an hf_attn classifier."""
    classifier = classifier_pipeline(model_dir)
    if not isinstance(classifier.model, HfAttnForSequenceClassification):
        raise ValueError(f"{model_dir} holds a {type(classifier.model).__name__}, not an hf_attn classifier; pass "
                         "a folder `hf-attn train` wrote")
    return ExploredModel(Path(model_dir).name or str(model_dir), classifier)


@dataclass
class Window:
    """One window the classifier read: its tokens from `start` on, and its share of the decision."""

    start: int
    ids: torch.Tensor  # (tokens,): its real tokens, padding left out
    characters: tuple[int, int]  # [begin, end) of the characters its tokens cover in the text
    contribution: torch.Tensor  # (labels,): its term of the logits, (w_i / sum w) * W @ pooled_i
    own_logits: torch.Tensor  # (labels,): the logits had the model read this window alone


@dataclass
class Reading:
    """One text read by one classifier."""

    text: str
    probabilities: torch.Tensor  # (labels,)
    logits: torch.Tensor  # (labels,)
    bias: torch.Tensor  # (labels,): the head's bias, the logits' part no window gives
    windows: list[Window]
    window_length: int  # the model's window (the text's length when it is read whole)

    @property
    def predicted(self) -> int:
        return int(self.probabilities.argmax())

    @property
    def runner_up(self) -> int:
        """The label the predicted one is weighed against (the other one of a binary classifier)."""
        if self.probabilities.numel() == 1:
            return 0
        return int(self.probabilities.topk(2).indices[1])


def read_text(explored: ExploredModel, text: str) -> Reading:
    """`text` read by the classifier as its pipeline reads it (the same tokens, windows and pooling): one forward
    pass without attention weights, so the model's own attention backend (SDPA) runs."""
    if not text.strip():
        raise ValueError("the text is empty; type a review or pick a sample")
    model, tokenizer = explored.model, explored.tokenizer
    encoded = tokenizer(text, return_offsets_mapping=True, return_tensors="pt")
    offsets = encoded.pop("offset_mapping")[0].tolist()
    model.eval()
    with torch.inference_mode():
        output = model(**encoded, output_hidden_states=True)
        last = output.hidden_states[-1]  # (windows, window, hidden): one row when the text is read whole
        count, length = last.shape[:2]
        tokens = encoded["input_ids"].shape[1]
        tokens = min(tokens, model.config.read_length or tokens)  # the model reads the first read_length
        stride = model.config.window_stride or length
        starts = [index * stride for index in range(count)]
        sizes = torch.tensor([min(length, tokens - start) for start in starts])
        pooled = pool(last, real_tokens(sizes, length), model.config.classifier_pooling)  # (windows, hidden)
        own_logits = model.classifier(pooled)
        shares = sizes.to(pooled.dtype) / sizes.sum()
        contributions = shares[:, None] * (own_logits - model.classifier.bias)
    ids = encoded["input_ids"][0]
    windows = [
        Window(start, ids[start : start + size], (offsets[start][0], offsets[start + size - 1][1]), contribution,
               window_logits)
        for start, size, contribution, window_logits in zip(starts, sizes.tolist(), contributions, own_logits)
    ]
    logits = output.logits[0]
    return Reading(text, logits.softmax(-1), logits, model.classifier.bias.detach(), windows, length)


def real_tokens(sizes: torch.Tensor, length: int) -> torch.Tensor:
    """(windows,) token counts -> (windows, length) attention mask: 1 on each window's first `size` slots."""
    return (torch.arange(length)[None, :] < sizes[:, None]).long()


def window_attentions(explored: ExploredModel, reading: Reading, numbers: list[int]) -> tuple[torch.Tensor, ...]:
    """The self-attention weights of the windows `numbers` of `reading`, per layer (windows, heads, length,
    length): the encoder run again on just those windows, as the classifier ran it, with eager attention.

    A model that reads its text whole (no windows) has one window as long as the text; its weights are those
    of its first `ATTENTION_TOKENS` tokens read alone, since the eager weights of every pair of a long text
    do not fit in memory (4,000 tokens: 64 MB per head and layer).
    """
    length = min(reading.window_length, ATTENTION_TOKENS)
    chosen = [reading.windows[number].ids[:length] for number in numbers]
    pad = explored.model.config.pad_token_id or 0
    input_ids = torch.full((len(chosen), length), pad, dtype=torch.long)
    for row, ids in enumerate(chosen):
        input_ids[row, : len(ids)] = ids
    attention_mask = real_tokens(torch.tensor([len(ids) for ids in chosen]), length)
    with torch.inference_mode():
        output = explored.model.model(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True)
    return output.attentions


def window_contributions(reading: Reading) -> list[float]:
    """Each window's push toward the predicted label against the runner-up: its logit-margin term. With the
    head's own bias margin they add up to the logit margin of the whole text."""
    toward, against = reading.predicted, reading.runner_up
    return [float(window.contribution[toward] - window.contribution[against]) for window in reading.windows]


def attention_by_distance(reading: Reading, numbers: list[int], attentions: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """(layers, window): the mean attention weight between a query and a key |i - j| tokens apart, over heads,
    the windows `numbers` (whose `window_attentions` are given) and every real (query, key) pair at that
    distance; NaN where no pair is that far apart."""
    length = attentions[0].shape[-1]
    sizes = torch.tensor([min(len(reading.windows[number].ids), length) for number in numbers])
    real = real_tokens(sizes, length).bool()
    pairs = (real[:, :, None] & real[:, None, :]).double()  # (windows, query, key)
    positions = torch.arange(length)
    distance = (positions[:, None] - positions[None, :]).abs().flatten()  # (query * key,)
    counts = torch.bincount(distance, weights=pairs.sum(dim=0).flatten(), minlength=length)
    rows = [
        torch.bincount(distance, weights=(weights.double().mean(dim=1) * pairs).sum(dim=0).flatten(),
                       minlength=length) / counts
        for weights in attentions
    ]
    return torch.stack(rows)


def position_similarity_by_offset(table: torch.Tensor) -> torch.Tensor:
    """(positions, dim) -> (positions,): the mean cosine similarity of rows `offset` apart, for every offset."""
    unit = torch.nn.functional.normalize(table.double(), dim=-1)
    similarity = unit @ unit.T
    return torch.stack([similarity.diagonal(offset).mean() for offset in range(table.shape[0])])


def scheme_curves(explored: ExploredModel, max_offset: int) -> tuple[str, str, dict[str, torch.Tensor]]:
    """The position scheme's own picture against the distance 0..max_offset: (title, y label, lines).

    Drawn from what the model's scheme hands its layers, so every scheme of the registry draws: a rotation
    (rope): q.k of an all-ones query and key after rotation (its long-range decay); an additive bias (alibi,
    t5, fire): each head's bias on a key that many tokens before the last query; vectors added to the
    embeddings (sinusoidal, learned): the cosine similarity of position vectors that far apart; positions counted
    from the attention scores (cope): no line, since they depend on the text; none of them (none): no line, since
    nothing in the model knows the distance.
    """
    config = explored.model.config
    scheme = explored.model.model.positions
    name, length = config.position_embedding_type, max_offset + 1
    position_ids = torch.arange(length)[None, :]
    with torch.no_grad():
        attention = scheme.attention_positions(position_ids, length)
        vectors = scheme.embed(torch.zeros(1, length, config.hidden_size), position_ids)[0]
    if attention.rotary:
        ones = torch.ones(1, 1, length, config.head_dim)
        rotary = next(iter(attention.rotary.values()))  # one layer type's
        rotated = apply_rotary(ones, rotary, config.rope_layout)[0, 0]  # (length, head_dim)
        scores = rotated @ rotated[0]  # the key at position 0, the query `offset` after it
        return f"{name}: rotated q.k against distance", "normalised q.k", {
            f"head_dim {config.head_dim}": scores / scores[0]}
    if attention.bias is not None:
        bias = attention.bias[0, :, -1].flip(-1)  # (heads, distance): the last query's row, nearest key first
        return f"{name}: bias added to the scores", "bias on a key that far back", {
            f"head {head}": line for head, line in enumerate(bias)}
    if vectors.any():
        return f"{name}: similarity of positions", "mean cosine similarity", {
            "positions": position_similarity_by_offset(vectors)}
    if scheme.reads_scores:
        return f"{name}: positions counted from the attention scores, no picture apart from a text", "", {}
    return f"{name}: no position signal", "", {}


def contextual_vectors(explored: ExploredModel, word: str, contexts: str) -> ContextualSimilarity:
    """`word` in the sentences of `contexts` (one per line, blank lines skipped) read by the classifier's encoder;
    a ValueError naming the problem when the word or a second sentence is missing."""
    if not word.strip():
        raise ValueError("the word is empty; type the word to compare (e.g. bank)")
    sentences = tuple(line.strip() for line in contexts.splitlines() if line.strip())
    return contextual_similarity(explored.model, explored.tokenizer, word.strip(), sentences)
