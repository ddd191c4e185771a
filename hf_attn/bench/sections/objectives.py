"""The `objectives` section: one pretraining step of each objective, masked LM against replaced-token detection.

ELECTRA's step runs a generator and a per-token detector on top of the encoder, so it costs more than a masked-LM
step; this measures how much, for the model of one pretraining config (`objectives_config`), with both models'
steps interleaved so that drift of the machine hits them alike. Asked for by name: `hf-attn bench --sections
objectives`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from ...configuration_hf_attn import HfAttnConfig
from ...timing import interleaved_times, summarize
from .base import BenchSection, option

if TYPE_CHECKING:  # the settings gather every section's fields
    from ..settings import BenchSettings


def objective_steps(settings: BenchSettings, device: torch.device) -> dict[str, Callable[[], None]]:
    """A training step (forward, backward, AdamW) of each of `PRETRAINING_MODELS` on one masked batch."""
    from ...experiments.config import load_experiment
    from ...experiments.pretraining import PRETRAINING_MODELS, mask_tokens

    experiment = load_experiment(settings.objectives_config)
    vocab_size, batch, length = settings.objectives_vocab_size, settings.objectives_batch, settings.objectives_length
    pad_id = vocab_size - 1
    config = HfAttnConfig(vocab_size=vocab_size, pad_token_id=pad_id, max_position_embeddings=length,
                          **{**experiment.model, "sparse_prediction": True})
    generator = torch.Generator().manual_seed(settings.seed)
    input_ids = torch.randint(0, pad_id, (batch, length), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    corrupted, labels = mask_tokens(input_ids, attention_mask, probability=experiment.pretraining.mlm_probability,
                                    mask_token_id=pad_id, replacement_ids=torch.arange(pad_id), generator=generator)
    inputs = {"input_ids": corrupted.to(device), "attention_mask": attention_mask.to(device),
              "labels": labels.to(device)}
    steps = {}
    for objective, model_class in PRETRAINING_MODELS.items():
        torch.manual_seed(settings.seed)
        model = model_class(copy.deepcopy(config)).to(device).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate)

        def step(model: torch.nn.Module = model, optimizer: torch.optim.Optimizer = optimizer) -> None:
            model(**inputs).loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        steps[objective] = step
    return steps


@dataclasses.dataclass(frozen=True)
class ObjectivesSection(BenchSection):
    """One pretraining step of each objective (masked LM, replaced-token detection), interleaved."""

    name: ClassVar[str] = "objectives"
    objectives_config: str = option(
        "configs/pretraining/pretrain-rope-rtd.yaml", "pretraining experiment YAML whose model the objectives section "
        "trains")
    objectives_vocab_size: int = option(8001, "vocabulary of the objectives section, [PAD] included (Week 3's 8k)")
    objectives_batch: int = option(32, "chunks per step of the objectives section")
    objectives_length: int = option(128, "tokens per chunk of the objectives section")
    objectives_repeats: int = option(6, "timed steps of each objective")

    @classmethod
    def run(cls, settings: BenchSettings, device: torch.device) -> dict[str, Any]:
        """Each objective's step times (`timing.summarize`), their medians and the ratio of replaced-token detection's
        median to the masked LM's."""
        times = interleaved_times(objective_steps(settings, device), warmup=settings.warmup,
                                  repeats=settings.objectives_repeats, device=device)
        summaries = {objective: summarize(seconds) for objective, seconds in times.items()}
        medians = {objective: summary["median_ms"] for objective, summary in summaries.items()}
        return {"config": settings.objectives_config, "batch": settings.objectives_batch,
                "length": settings.objectives_length, "repeats": settings.objectives_repeats, "median_ms": medians,
                "rtd_over_mlm": medians["rtd"] / medians["mlm"], "steps": summaries}

    @classmethod
    def report(cls, record: dict[str, Any]) -> list[str]:
        medians = record["median_ms"]
        return ["## Pretraining objectives", "",
                f"One training step of the model of `{record['config']}` (batch {record['batch']} x {record['length']} "
                f"tokens, median of {record['repeats']} interleaved repeats): masked LM {medians['mlm']:.0f} ms, "
                f"replaced-token detection {medians['rtd']:.0f} ms, {record['rtd_over_mlm']:.2f}x.", ""]
