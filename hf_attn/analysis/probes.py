"""Probes from the reference notebook: six hard reviews, paired-text cross-attention, heatmaps; and the course
notes' contextual vectors (one word in several sentences, its vectors compared layer by layer)."""

from __future__ import annotations

import copy
import itertools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..modeling_hf_attn import HfAttnModel
from .plots import plot_attention_grid, plot_attention_maps

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


# The reference notebook's paired-text records: a review as context, a question as query.
CROSS_ATTENTION_RECORDS: tuple[dict[str, str], ...] = (
    {"title": "Borrowed Summer", "sentiment": "mixed",
     "context": "review: Borrowed Summer is not a disaster; the cast is charming, although the script repeats "
                "scenes and loses energy.",
     "query": "which phrase softens the negative review ?"},
    {"title": "Iron Harbor", "sentiment": "negative",
     "context": "review: Iron Harbor looks expensive, but the dialogue is wooden and the ending makes no sense.",
     "query": "which phrase explains why the film fails ?"},
    {"title": "Paper Lanterns", "sentiment": "positive",
     "context": "review: Paper Lanterns starts slowly, yet the final act is moving and the lead performance is "
                "superb.",
     "query": "which phrase carries the praise ?"},
)


def token_labels(tokenizer: Any, input_ids: torch.Tensor) -> list[str]:
    """Readable axis labels: each id decoded on its own (Week 3 ids end words with `</w>`)."""
    return [tokenizer.decode([int(token_id)]) or "·" for token_id in input_ids]


def _encode(tokenizer: Any, text: str) -> dict[str, torch.Tensor]:
    return tokenizer([text], truncation=True, return_tensors="pt")


def self_attention_heatmaps(model: Any, tokenizer: Any, text: str, output_dir: str | os.PathLike[str]) -> list[Path]:
    """A PNG per layer (one panel per head) of a classifier's self-attention over `text`."""
    encoded = _encode(tokenizer, text)
    model.eval()
    with torch.no_grad():
        attentions = model(**encoded, output_attentions=True).attentions
    labels = token_labels(tokenizer, encoded["input_ids"][0])
    scheme = model.config.position_embedding_type
    return [
        plot_attention_grid(weights[0], labels, labels, Path(output_dir) / f"self_attention_layer{layer}.png",
                            f"{scheme}: self-attention, layer {layer}")
        for layer, weights in enumerate(attentions)
    ]


def paired_decoder(encoder: HfAttnModel, seed: int = 0) -> HfAttnModel:
    """A decoder-style twin of `encoder`: causal self-attention plus cross-attention, same embedding."""
    config = copy.deepcopy(encoder.config)
    config.is_decoder, config.add_cross_attention = True, True
    torch.manual_seed(seed)
    decoder = HfAttnModel(config)
    decoder.set_input_embeddings(encoder.get_input_embeddings())
    decoder.set_attn_implementation("eager")
    return decoder.eval()


def cross_attention_probe(
    encoder: HfAttnModel,
    tokenizer: Any,
    output_dir: str | os.PathLike[str],
    records: tuple[dict[str, str], ...] = CROSS_ATTENTION_RECORDS,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Encode each review with `encoder`, read it from the question through a paired decoder's
    cross-attention (RoPE stays out of that step), and save the last layer's heatmaps as PNG.

    Returns, per record, the PNG path and for every query token the review token it attends to most
    (mean over heads).
    """
    decoder = paired_decoder(encoder, seed)
    encoder.eval()
    results = []
    for record in records:
        context, query = _encode(tokenizer, record["context"]), _encode(tokenizer, record["query"])
        with torch.no_grad():
            memory = encoder(**context).last_hidden_state
            output = decoder(**query, encoder_hidden_states=memory, encoder_attention_mask=context["attention_mask"],
                             output_attentions=True)
        weights = output.cross_attentions[-1][0]  # (heads, query, review)
        query_labels = token_labels(tokenizer, query["input_ids"][0])
        review_labels = token_labels(tokenizer, context["input_ids"][0])
        slug = record["title"].lower().replace(" ", "_")
        png = plot_attention_grid(weights, query_labels, review_labels,
                                  Path(output_dir) / f"cross_attention_{slug}.png",
                                  f"{record['title']}: query tokens x review tokens (last layer)")
        strongest = weights.mean(0).argmax(-1).tolist()
        results.append({"title": record["title"], "png": str(png),
                        "top_review_token": [(q, review_labels[k]) for q, k in zip(query_labels, strongest)]})
    return results


def seq2seq_cross_attention_heatmaps(
    model: Any, tokenizer: Any, sources: list[str], output_dir: str | os.PathLike[str], max_new_tokens: int = 16
) -> list[Path]:
    """For each source, a PNG of an encoder-decoder's cross-attention: the tokens it outputs (greedy) down, the
    source tokens across, one panel per layer and one for all layers, each averaged over heads.

    Row i is the decoder step that outputs token i, so a model that aligns shows each output digit
    reading the source tokens it comes from.
    """
    model.eval()
    pictures = []
    for number, source in enumerate(sources):
        encoded = _encode(tokenizer, source)
        with torch.no_grad():
            generated = model.generate(**encoded, num_beams=1, do_sample=False, max_new_tokens=max_new_tokens)
            output = model(**encoded, decoder_input_ids=generated[:, :-1], output_attentions=True)
        layers = [weights[0].mean(0) for weights in output.cross_attentions]  # (output tokens, source tokens)
        maps = [(f"layer {layer}", weights) for layer, weights in enumerate(layers)]
        maps.append(("all layers", torch.stack(layers).mean(0)))
        scheme = model.config.decoder.position_embedding_type
        pictures.append(plot_attention_maps(
            maps, token_labels(tokenizer, generated[0, 1:]), token_labels(tokenizer, encoded["input_ids"][0]),
            Path(output_dir) / f"cross_attention_{number}_{source.split(':')[0]}.png",
            f"{scheme}: {source!r} -> output tokens (cross-attention, mean over heads)",
        ))
    return pictures


# A word and sentences in which it means different things: the course notes' "bank" pair, then a few more.
CONTEXT_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("bank", ("He sat on the river bank.", "She took a loan from the bank.")),
    ("bat", ("The bat flew out of the cave at night.", "He swung the bat and hit the ball.")),
    ("light", ("Turn on the light in the kitchen.", "The box was light enough to carry.")),
    ("play", ("We saw a play at the theatre.", "The children play in the park.")),
)


@dataclass
class ContextualSimilarity:
    """One word read in several contexts by an encoder, compared layer by layer.

    Entry 0 of each list is the input to the first layer (token embedding, plus the position vector for
    `sinusoidal` / `learned`), entry i the output of layer i, as `output_hidden_states=True` returns them.
    """

    word: str
    contexts: tuple[str, ...]
    tokens: list[str]  # the word's tokens, the same in every context
    between_contexts: list[float]  # mean cosine similarity over pairs of contexts, per layer
    to_input_embedding: list[float]  # mean over contexts of the cosine with the word's token embedding, per layer


def word_token_indices(tokenizer: Any, text: str, word: str) -> list[int]:
    """The indices of the tokens of `text` that cover the first occurrence of `word` as a whole word."""
    match = re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text)
    if match is None:
        raise ValueError(f"{word!r} is not a word of the context {text!r}; write a sentence that contains it")
    offsets = tokenizer(text, return_offsets_mapping=True)["offset_mapping"]
    return [index for index, (begin, end) in enumerate(offsets)
            if end > begin and begin < match.end() and end > match.start()]


def contextual_similarity(model: Any, tokenizer: Any, word: str, contexts: tuple[str, ...]) -> ContextualSimilarity:
    """How far an encoder's layers pull apart the vectors of `word` in `contexts` (two or more sentences).

    A word of several tokens is represented by the mean of its tokens' vectors at each layer (and its input
    embedding by the mean of their embedding rows). The word must have the same tokens in every context, so that
    without absolute positions (`none`, `rope`, `alibi`) its input vectors are identical: similarity exactly 1
    before the first layer. `sinusoidal` and `learned` add each token's position vector at the input, so there the
    similarity starts below 1 when the word sits at different positions.
    """
    if len(contexts) < 2:
        raise ValueError(f"give at least two contexts for {word!r}; the probe compares the word across them")
    encoder = model.base_model.eval()
    vectors, token_ids = [], []
    for context in contexts:
        indices = word_token_indices(tokenizer, context, word)
        encoded = tokenizer([context], return_tensors="pt")
        ids = encoded["input_ids"][0, indices]
        if token_ids and not torch.equal(ids, token_ids[0]):
            raise ValueError(f"{word!r} is tokenized differently in {context!r} than in {contexts[0]!r}; write the "
                             "contexts so that the word has the same neighbours of spacing and punctuation")
        token_ids.append(ids)
        with torch.no_grad():
            hidden_states = encoder(**encoded, output_hidden_states=True).hidden_states
        vectors.append(torch.stack([states[0, indices].double().mean(0) for states in hidden_states]))
    by_layer = torch.stack(vectors, dim=1)  # (layers + 1, contexts, hidden)
    embedding = encoder.get_input_embeddings().weight.detach()[token_ids[0]].double().mean(0)
    cosine = torch.nn.functional.cosine_similarity
    pairs = list(itertools.combinations(range(len(contexts)), 2))
    between = torch.stack([cosine(by_layer[:, a], by_layer[:, b], dim=-1) for a, b in pairs]).mean(0)
    to_input = cosine(by_layer, embedding.expand_as(by_layer), dim=-1).mean(1)
    return ContextualSimilarity(word, tuple(contexts), token_labels(tokenizer, token_ids[0]), between.tolist(),
                                to_input.tolist())


def contextual_probe(model: Any, tokenizer: Any,
                     words: tuple[tuple[str, tuple[str, ...]], ...] = CONTEXT_WORDS) -> list[ContextualSimilarity]:
    """`contextual_similarity` for each (word, contexts) of `words`."""
    return [contextual_similarity(model, tokenizer, word, contexts) for word, contexts in words]


def format_contextual(results: list[ContextualSimilarity]) -> str:
    """A markdown table: per word, the cosine similarity of its vectors across contexts at each layer."""
    layers = len(results[0].between_contexts)
    header = ["word", "tokens", "input", *(f"layer {layer}" for layer in range(1, layers))]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for result in results:
        cells = [result.word, " ".join(result.tokens), *(f"{value:.3f}" for value in result.between_contexts)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
