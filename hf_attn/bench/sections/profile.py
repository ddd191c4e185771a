"""The `profile` part: the top operators by self CPU time over a few training steps of hf-attn and of one anchor.

Not one of `--sections`: it runs whenever `profile_steps` is above 0, after the chosen sections.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from ...modeling_hf_attn import HfAttnForSequenceClassification
from ...runtime.precision import COMPUTED_PRECISIONS
from ..models import ANCHOR_BUILDERS, ANCHORS, Candidate, hf_attn_config, supported_backends
from ..profiling import operators_table, profiled_steps
from ..timing import make_batch, train_step
from .base import BenchSection, option, refuse_unknown

if TYPE_CHECKING:  # the settings gather every section's fields
    from ..settings import BenchSettings


@dataclasses.dataclass(frozen=True)
class ProfileSection(BenchSection):
    """Where a training step's time goes, operator by operator, for hf-attn and `profile_anchor`."""

    name: ClassVar[str] = "profile"
    selectable: ClassVar[bool] = False
    profile_steps: int = option(3, "profiled training steps (0: no profile)")
    profile_scheme: str = option("rope", "hf-attn position scheme of the profile")
    profile_backend: str = option("sdpa", "attention implementation of the profile")
    profile_seq: int = option(128, "sequence length of the profile (batch: --train-batch)")
    profile_precision: str = option("bf16", "precision of the profiled training steps (fp32 or bf16)")
    profile_anchor: str = option(
        "ModernBERT", "transformers model profiled beside hf-attn with the same steps ('' for none)")

    @classmethod
    def wanted(cls, settings: BenchSettings) -> bool:
        return settings.profile_steps > 0

    @classmethod
    def check(cls, settings: BenchSettings) -> None:
        refuse_unknown("precision", (settings.profile_precision,), COMPUTED_PRECISIONS)
        refuse_unknown("profile anchor", (settings.profile_anchor,) if settings.profile_anchor else (), ANCHORS)

    @classmethod
    def run(cls, settings: BenchSettings, device: torch.device) -> dict[str, Any]:
        """Top operators by self CPU time over a few training steps (after one warm-up step) of hf-attn and,
        with `profile_anchor`, of that transformers model on the same batch, in `profile_precision`."""
        seq, size, precision = settings.profile_seq, settings.train_batch, settings.profile_precision
        torch.manual_seed(settings.seed)
        model = HfAttnForSequenceClassification(hf_attn_config(settings, settings.profile_scheme, seq))
        candidates = [Candidate("hf-attn", settings.profile_scheme, settings.profile_backend, model, None)]
        if settings.profile_anchor:
            scheme, build = ANCHOR_BUILDERS[settings.profile_anchor]
            torch.manual_seed(settings.seed)
            anchor = build(settings, seq)
            backend = supported_backends(anchor, (settings.profile_backend, "eager"))[0]  # hf-attn's where it has it
            candidates.append(Candidate(settings.profile_anchor, scheme, backend, anchor, None))
        generator = torch.Generator().manual_seed(settings.seed)
        batch = make_batch(size, [seq] * size, seq, settings.vocab_size, generator, device)
        profiles = {}
        for candidate in candidates:
            candidate.model.to(device)
            candidate.optimizer = torch.optim.AdamW(candidate.model.parameters(), lr=settings.learning_rate)
            candidate.prepare(True)
            train_step(candidate, batch, precision)
            profiles[candidate.name] = profiled_steps(lambda c=candidate: train_step(c, batch, precision),
                                                      settings.profile_steps, settings.profile_rows, device)
        return {"scheme": settings.profile_scheme, "backend": settings.profile_backend, "batch": size, "seq": seq,
                "steps": settings.profile_steps, "precision": precision, "models": profiles}

    @classmethod
    def report(cls, record: dict[str, Any]) -> list[str]:
        """One operators table per profiled model (records from before the anchor: hf-attn's `top_ops` alone)."""
        models = record.get("models") or {f"hf-attn {record['scheme']} {record['backend']}": record}
        precision = record.get("precision", "fp32")
        out = []
        for name, profile in models.items():
            step = f", {profile['step_ms']:.0f} ms per step under the profiler" if "step_ms" in profile else ""
            out += [f"## Profile ({name} training, {precision}, batch {record['batch']}, sequence {record['seq']}, "
                    f"{record['steps']} profiled step(s){step})", "", operators_table(profile["top_ops"]), ""]
        return out
