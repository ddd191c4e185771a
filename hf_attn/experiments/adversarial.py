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

from collections.abc import Iterator
from typing import Any

import torch
from datasets import Dataset
from torch import nn
from torch.utils.data import DataLoader
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
    (`AdversarialSettings`), and with `unlabelled` texts the virtual adversarial loss of one batch of them per step
    (reshuffled each pass; a resumed run draws them afresh); evaluation losses are the plain ones, so validation
    compares across runs."""

    def __init__(self, *args: Any, adversarial: AdversarialSettings, unlabelled: Dataset | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.adversarial = adversarial
        self.unlabelled = unlabelled
        self.unlabelled_batches: Iterator[dict[str, torch.Tensor]] | None = None

    def next_unlabelled_batch(self) -> dict[str, torch.Tensor]:
        """The next batch of unlabelled texts on the training device."""
        batch = next(self.unlabelled_batches, None) if self.unlabelled_batches is not None else None
        if batch is None:
            self.unlabelled_batches = iter(DataLoader(self.unlabelled, self.args.per_device_train_batch_size,
                                                      shuffle=True, collate_fn=self.data_collator))
            batch = next(self.unlabelled_batches)
        return {key: value.to(self.args.device) for key, value in batch.items()}

    def virtual_loss(self, model: nn.Module, inputs: dict[str, torch.Tensor], embeddings: torch.Tensor,
                     clean_logits: torch.Tensor) -> torch.Tensor:
        """KL(p(e) || p(e + r)) at the perturbation r one power iteration from a random probe finds."""
        real = inputs["attention_mask"][..., None].to(embeddings.dtype)
        probe = scaled_per_text(torch.randn_like(embeddings), embeddings, real, self.adversarial.xi).requires_grad_()
        probed = model(**inputs, inputs_embeds=embeddings.detach() + probe).logits
        (gradient,) = torch.autograd.grad(prediction_divergence(clean_logits, probed), probe)
        perturbation = scaled_per_text(gradient, embeddings, real, self.adversarial.epsilon)
        return prediction_divergence(clean_logits, model(**inputs, inputs_embeds=embeddings + perturbation).logits)

    def compute_loss(self, model: nn.Module, inputs: dict[str, torch.Tensor], return_outputs: bool = False,
                     num_items_in_batch: torch.Tensor | int | None = None) -> Any:
        if not model.training or self.adversarial.method == "none":
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        inputs = dict(inputs)
        embed = self.accelerator.unwrap_model(model).get_input_embeddings()
        embeddings = embed(inputs.pop("input_ids"))
        loss, outputs = super().compute_loss(model, {**inputs, "inputs_embeds": embeddings}, True, num_items_in_batch)
        settings = self.adversarial
        if settings.method == "adversarial":
            (gradient,) = torch.autograd.grad(loss, embeddings, retain_graph=True)
            real = inputs["attention_mask"][..., None].to(embeddings.dtype)
            perturbation = scaled_per_text(gradient, embeddings, real, settings.epsilon)
            extra = super().compute_loss(model, {**inputs, "inputs_embeds": embeddings + perturbation},
                                         False, num_items_in_batch)
        else:
            unlabelled = {key: value for key, value in inputs.items() if key != "labels"}
            extra = self.virtual_loss(model, unlabelled, embeddings, outputs.logits)
            if self.unlabelled is not None:
                batch = self.next_unlabelled_batch()
                batch_embeddings = embed(batch.pop("input_ids"))
                with torch.no_grad():
                    clean = model(**batch, inputs_embeds=batch_embeddings).logits
                extra = extra + self.virtual_loss(model, batch, batch_embeddings, clean)
        loss = loss + settings.weight * extra
        return (loss, outputs) if return_outputs else loss
