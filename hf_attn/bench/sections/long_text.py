"""The `long-text` section: `pipeline("text-classification")` on one long text, under each reading policy.

The model is a classifier of the bench's shape (`HfAttnConfig`'s 128 positions, RoPE) saved with `save_pretrained`
and no reading policy (`read_length` and `window_stride` unset), as a user's own model is: past `max_direct_length`
it reads windows. It also reads with `read_length=8192` (the first 8,192 tokens) and, up to
`long_text_one_pass_limit` characters, with `max_direct_length=None` (one quadratic pass). The text is the packaged
IMDb sample's reviews joined and cut to each of `long_text_sizes` characters; each call is timed once, tokenizing
included. Weights are random: only the time is measured. Asked for by name: `hf-attn bench --sections long-text`.
"""

from __future__ import annotations

import dataclasses
import tempfile
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from ...configuration_hf_attn import HfAttnConfig
from ...modeling_hf_attn import HfAttnForSequenceClassification
from ...timing import timed
from .base import BenchSection, option

if TYPE_CHECKING:  # the settings gather every section's fields
    from ..settings import BenchSettings

POLICIES = {"windows past 8192 (default)": {}, "read_length=8192": {"read_length": 8192},
            "one pass (max_direct_length=None)": {"max_direct_length": None}}


def long_text(characters: int) -> str:
    """The packaged IMDb sample's reviews joined, repeated to `characters` characters and cut there."""
    import pyarrow.parquet as pq

    from ...experiments.data import SAMPLE_PATH

    reviews = " ".join(pq.read_table(SAMPLE_PATH, columns=["text"]).column("text").to_pylist())
    return (reviews * (characters // len(reviews) + 1))[:characters]


@dataclasses.dataclass(frozen=True)
class LongTextSection(BenchSection):
    """One long text through `pipeline`, under each reading policy."""

    name: ClassVar[str] = "long-text"
    long_text_sizes: tuple[int, ...] = option(
        (10_000, 100_000, 1_000_000), "characters of the long-text section's text")
    long_text_tokenizer: str = option(
        "checkpoints/rope-whole-reviews", "tokenizer folder of the long-text section's classifier")
    long_text_one_pass_limit: int = option(
        100_000, "longest text (characters) the long-text section reads in one quadratic pass")

    @classmethod
    def run(cls, settings: BenchSettings, device: torch.device) -> dict[str, Any]:
        """Seconds of one `pipeline` call per reading policy and text size, with the text's length in tokens."""
        from transformers import AutoTokenizer, pipeline
        from transformers.utils import logging

        text = long_text(max(settings.long_text_sizes))
        tokenizer = AutoTokenizer.from_pretrained(settings.long_text_tokenizer)
        config = HfAttnConfig(vocab_size=len(tokenizer), hidden_size=settings.hidden_size,
                              num_hidden_layers=settings.num_hidden_layers,
                              num_attention_heads=settings.num_attention_heads,
                              intermediate_size=settings.intermediate_size)
        rows = []
        verbosity = logging.get_verbosity()
        logging.set_verbosity_error()  # a long text read as windows warns on every call
        try:
            with tempfile.TemporaryDirectory() as folder:
                torch.manual_seed(settings.seed)
                HfAttnForSequenceClassification(config).save_pretrained(folder)
                tokenizer.save_pretrained(folder)
                for policy, changes in POLICIES.items():
                    classify = pipeline("text-classification", model=folder, model_kwargs=changes, device=device)
                    for size in settings.long_text_sizes:
                        if "max_direct_length" in changes and size > settings.long_text_one_pass_limit:
                            continue
                        seconds = timed(lambda: classify(text[:size]), device)  # noqa: B023 - called at once
                        rows.append({"policy": policy, "characters": size,
                                     "tokens": len(tokenizer(text[:size])["input_ids"]), "seconds": seconds})
        finally:
            logging.set_verbosity(verbosity)
        return {"tokenizer": settings.long_text_tokenizer, "precision": "fp32", "rows": rows}

    @classmethod
    def report(cls, record: dict[str, Any]) -> list[str]:
        body = [f"| {row['policy']} | {row['characters']:,} | {row['tokens']:,} | {row['seconds']:.2f} |"
                for row in record["rows"]]
        return ["## One long text through `pipeline`, by reading policy", "",
                "Seconds of one call (tokenizing included), a classifier saved without a reading policy, random "
                "weights.", "", "| policy | characters | tokens | seconds |", "|---|---:|---:|---:|", *body, ""]
