"""The `objectives` section: one pretraining step of each objective, masked LM against replaced-token detection.

ELECTRA's step runs a generator and a per-token detector on top of the encoder, so it costs more than a masked-LM
step; this measures how much, for the model of one pretraining config (`objectives_config`), with both models'
steps interleaved so that drift of the machine hits them alike. Asked for by name: `hf-attn bench --sections
objectives`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

from ..configuration_hf_attn import HfAttnConfig
from ..timing import interleaved_times, summarize
from .settings import BenchSettings


def objective_steps(settings: BenchSettings, device: torch.device) -> dict[str, Callable[[], None]]:
    """A training step (forward, backward, AdamW) of each of `PRETRAINING_MODELS` on one masked batch."""
    from ..experiments.config import load_experiment
    from ..experiments.pretraining import PRETRAINING_MODELS, mask_tokens

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


def bench_objectives(settings: BenchSettings, device: torch.device) -> dict[str, Any]:
    """Each objective's step times (`timing.summarize`), their medians and the ratio of replaced-token detection's
    median to the masked LM's."""
    times = interleaved_times(objective_steps(settings, device), warmup=settings.warmup,
                              repeats=settings.objectives_repeats, device=device)
    summaries = {objective: summarize(seconds) for objective, seconds in times.items()}
    medians = {objective: summary["median_ms"] for objective, summary in summaries.items()}
    return {"config": settings.objectives_config, "batch": settings.objectives_batch,
            "length": settings.objectives_length, "repeats": settings.objectives_repeats, "median_ms": medians,
            "rtd_over_mlm": medians["rtd"] / medians["mlm"], "steps": summaries}


def format_objectives(section: dict[str, Any]) -> list[str]:
    medians = section["median_ms"]
    return ["## Pretraining objectives", "",
            f"One training step of the model of `{section['config']}` (batch {section['batch']} x {section['length']} "
            f"tokens, median of {section['repeats']} interleaved repeats): masked LM {medians['mlm']:.0f} ms, "
            f"replaced-token detection {medians['rtd']:.0f} ms, {section['rtd_over_mlm']:.2f}x.", ""]
