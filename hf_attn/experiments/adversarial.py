"""Adversarial and virtual adversarial training on the token embeddings (Miyato, Dai & Goodfellow, ICLR 2017), for
classifiers fine-tuned by `hf-attn train` (the experiment's `adversarial` section).

Both add a second loss on the text's token embeddings moved by a small perturbation r, the one that hurts most:

* adversarial (`method: adversarial`): r = ε ‖e‖ g / ‖g‖, g the gradient of the loss with respect to the
  embeddings e; the added loss is the cross-entropy of the perturbed text with its label;
* virtual adversarial (`method: virtual`): no label needed; d is a random direction, g the gradient with respect to
  r of KL(p(e) ‖ p(e + ξ ‖e‖ d / ‖d‖)) (one power iteration), and the added loss is KL(p(e) ‖ p(e + r)),
  p(e) held fixed.

Norms are per text, over its real tokens (padding is never moved). Miyato et al. normalise the embeddings and
fix ε; here ε and ξ are relative to each text's embedding norm, so one setting holds across models whose
embeddings differ in scale. The training step costs two forward and backward passes (adversarial) or three
(virtual) instead of one; evaluation is unchanged."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from transformers import Trainer

from .config import AdversarialSettings


def scaled_per_text(direction: torch.Tensor, embeddings: torch.Tensor, real: torch.Tensor, size: float
                    ) -> torch.Tensor:
    """`direction` (batch, seq, hidden) on real tokens only, each text's scaled to `size` times the norm of its
    embeddings."""
    direction = direction * real
    embedding_norm = (embeddings.detach() * real).flatten(1).norm(dim=1)
    direction_norm = direction.flatten(1).norm(dim=1).clamp(min=torch.finfo(direction.dtype).tiny)
    return direction * (size * embedding_norm / direction_norm)[:, None, None]


def prediction_divergence(clean_logits: torch.Tensor, perturbed_logits: torch.Tensor) -> torch.Tensor:
    """KL(p ‖ q) of the clean prediction p (held fixed) and the perturbed one q, averaged over texts."""
    clean = clean_logits.detach().float().log_softmax(-1)
    return nn.functional.kl_div(perturbed_logits.float().log_softmax(-1), clean, log_target=True,
                                reduction="batchmean")


class AdversarialTrainer(Trainer):
    """`Trainer` whose training loss adds `weight` times the adversarial or virtual adversarial loss
    (`AdversarialSettings`); evaluation losses are the plain ones, so validation compares across runs."""

    def __init__(self, *args: Any, adversarial: AdversarialSettings, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.adversarial = adversarial

    def compute_loss(self, model: nn.Module, inputs: dict[str, torch.Tensor], return_outputs: bool = False,
                     num_items_in_batch: torch.Tensor | int | None = None) -> Any:
        if not model.training or self.adversarial.method == "none":
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        inputs = dict(inputs)
        embeddings = self.accelerator.unwrap_model(model).get_input_embeddings()(inputs.pop("input_ids"))
        real = inputs["attention_mask"][..., None].to(embeddings.dtype)
        loss, outputs = super().compute_loss(model, {**inputs, "inputs_embeds": embeddings}, True, num_items_in_batch)
        settings = self.adversarial
        if settings.method == "adversarial":
            (gradient,) = torch.autograd.grad(loss, embeddings, retain_graph=True)
            perturbation = scaled_per_text(gradient, embeddings, real, settings.epsilon)
            extra = super().compute_loss(model, {**inputs, "inputs_embeds": embeddings + perturbation},
                                         False, num_items_in_batch)
        else:
            unlabelled = {key: value for key, value in inputs.items() if key != "labels"}
            probe = scaled_per_text(torch.randn_like(embeddings), embeddings, real, settings.xi).requires_grad_()
            probed = model(**unlabelled, inputs_embeds=embeddings.detach() + probe).logits
            (gradient,) = torch.autograd.grad(prediction_divergence(outputs.logits, probed), probe)
            perturbation = scaled_per_text(gradient, embeddings, real, settings.epsilon)
            perturbed = model(**unlabelled, inputs_embeds=embeddings + perturbation).logits
            extra = prediction_divergence(outputs.logits, perturbed)
        loss = loss + settings.weight * extra
        return (loss, outputs) if return_outputs else loss
