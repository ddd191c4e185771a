"""Adversarial and virtual adversarial training (Miyato et al. 2017) against the losses computed by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from datasets import Dataset
from helpers import SMOKE, SMOKE_TINY_MODEL, tiny_config_kwargs
from transformers import TrainingArguments

from hf_attn import HfAttnConfig, HfAttnForSequenceClassification
from hf_attn.experiments.adversarial import AdversarialTrainer, scaled_per_text
from hf_attn.experiments.classification import train
from hf_attn.experiments.config import AdversarialSettings, ExperimentConfigError, load_experiment
from hf_attn.experiments.pretraining import pretrain


def test_a_perturbation_is_scaled_per_text_over_its_real_tokens() -> None:
    torch.manual_seed(0)
    direction, embeddings = torch.randn(3, 5, 4), torch.randn(3, 5, 4)
    real = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]])[..., None].float()
    scaled = scaled_per_text(direction, embeddings, real, 0.1)
    for text, length in enumerate((5, 3, 1)):
        own = embeddings[text, :length]
        assert scaled[text, length:].abs().sum() == 0  # padding never moves
        assert scaled[text].norm() == pytest.approx(0.1 * own.norm().item(), rel=1e-5)
        cosine = F.cosine_similarity(scaled[text, :length].flatten(), direction[text, :length].flatten(), dim=0)
        assert cosine == pytest.approx(1.0, abs=1e-6)


def tiny_trainer(tmp_path: Path, **adversarial: object) -> tuple[AdversarialTrainer, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    model = HfAttnForSequenceClassification(HfAttnConfig(**tiny_config_kwargs(num_labels=2))).train()
    arguments = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    trainer = AdversarialTrainer(model=model, args=arguments, adversarial=AdversarialSettings(**adversarial))
    inputs = {"input_ids": torch.randint(1, 64, (3, 9)), "attention_mask": torch.ones(3, 9, dtype=torch.long),
              "labels": torch.tensor([0, 1, 1])}
    inputs["attention_mask"][1, 6:] = 0
    return trainer, inputs


def cross_entropy(model: HfAttnForSequenceClassification, embeddings: torch.Tensor, inputs: dict) -> torch.Tensor:
    logits = model(inputs_embeds=embeddings, attention_mask=inputs["attention_mask"]).logits
    return F.cross_entropy(logits, inputs["labels"])


def test_the_adversarial_loss_is_that_of_the_embeddings_moved_along_the_losss_gradient(tmp_path: Path) -> None:
    trainer, inputs = tiny_trainer(tmp_path, method="adversarial", epsilon=0.05, weight=0.5)
    model = trainer.model
    embeddings = model.get_input_embeddings()(inputs["input_ids"]).detach().requires_grad_()
    clean = cross_entropy(model, embeddings, inputs)
    (gradient,) = torch.autograd.grad(clean, embeddings)
    real = inputs["attention_mask"][..., None].float()
    moved = []
    for text in range(3):  # text by text: g / |g| over its real tokens, times 5% of its embeddings' norm
        g, e = gradient[text] * real[text], embeddings[text].detach() * real[text]
        moved.append(embeddings[text].detach() + 0.05 * e.norm() * g / g.norm())
    adversarial = cross_entropy(model, torch.stack(moved), inputs)
    loss = trainer.compute_loss(model, inputs)
    torch.testing.assert_close(loss, clean + 0.5 * adversarial, rtol=1e-5, atol=1e-6)
    assert adversarial > clean  # the direction that raises the loss


def test_virtual_adversarial_training_adds_the_kl_of_the_prediction_moved_by_the_power_iteration(
        tmp_path: Path) -> None:
    trainer, inputs = tiny_trainer(tmp_path, method="virtual", epsilon=0.05, xi=0.01, weight=2.0)
    model = trainer.model
    real = inputs["attention_mask"][..., None].float()
    embeddings = model.get_input_embeddings()(inputs["input_ids"]).detach()
    logits = model(inputs_embeds=embeddings, attention_mask=inputs["attention_mask"]).logits.detach()

    def kl(perturbed: torch.Tensor) -> torch.Tensor:  # KL(p || q) by its definition, averaged over texts
        p, q = logits.softmax(-1), perturbed.softmax(-1)
        return (p * (p.log() - q.log())).sum(-1).mean()

    def unit(direction: torch.Tensor) -> torch.Tensor:  # per text, over real tokens, scaled to its embeddings
        direction = direction * real
        return direction / direction.flatten(1).norm(dim=1)[:, None, None] * \
            (embeddings * real).flatten(1).norm(dim=1)[:, None, None]

    torch.manual_seed(7)
    probe = (0.01 * unit(torch.randn_like(embeddings))).requires_grad_()
    (gradient,) = torch.autograd.grad(kl(model(inputs_embeds=embeddings + probe,
                                               attention_mask=inputs["attention_mask"]).logits), probe)
    moved = embeddings + 0.05 * unit(gradient)
    virtual = kl(model(inputs_embeds=moved, attention_mask=inputs["attention_mask"]).logits)
    clean = F.cross_entropy(logits, inputs["labels"])
    torch.manual_seed(7)
    loss = trainer.compute_loss(model, inputs)
    torch.testing.assert_close(loss, clean + 2.0 * virtual, rtol=1e-4, atol=1e-7)
    random_direction = kl(model(inputs_embeds=embeddings + 0.05 * unit(torch.randn_like(embeddings)),
                                attention_mask=inputs["attention_mask"]).logits)
    assert virtual > random_direction  # the power iteration finds a direction that moves the prediction more


def test_unlabelled_texts_add_the_kl_of_their_own_prediction_moved(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """With `unlabelled`, each step adds the virtual adversarial loss of a batch of unlabelled texts, computed as for
    the labelled ones (the random probes fixed here, so that both sides draw the same)."""

    def fixed_direction(tensor: torch.Tensor) -> torch.Tensor:  # not constant per token: a norm would remove that
        return torch.arange(tensor.numel(), dtype=tensor.dtype).reshape(tensor.shape).sin()

    monkeypatch.setattr(torch, "randn_like", fixed_direction)
    trainer, inputs = tiny_trainer(tmp_path, method="virtual", unlabelled=True, epsilon=0.05, xi=0.01, weight=2.0)
    model = trainer.model
    unlabelled = {"input_ids": torch.tensor([[5, 6, 7, 8, 9]]), "attention_mask": torch.tensor([[1, 1, 1, 1, 0]])}
    trainer.unlabelled = Dataset.from_dict({key: value.tolist() for key, value in unlabelled.items()})
    embeddings = model.get_input_embeddings()(unlabelled["input_ids"]).detach()
    real = unlabelled["attention_mask"][..., None].float()
    logits = model(inputs_embeds=embeddings, attention_mask=unlabelled["attention_mask"]).logits.detach()

    def kl(perturbed: torch.Tensor) -> torch.Tensor:
        p, q = logits.softmax(-1), perturbed.softmax(-1)
        return (p * (p.log() - q.log())).sum(-1).mean()

    def scaled(direction: torch.Tensor, size: float) -> torch.Tensor:  # over the 4 real tokens, to the embeddings'
        direction = direction * real
        return size * direction / direction.norm() * (embeddings * real).norm()

    probe = scaled(fixed_direction(embeddings), 0.01).requires_grad_()
    probed = model(inputs_embeds=embeddings + probe, attention_mask=unlabelled["attention_mask"]).logits
    (gradient,) = torch.autograd.grad(kl(probed), probe)
    moved = embeddings + scaled(gradient, 0.05)
    virtual = kl(model(inputs_embeds=moved, attention_mask=unlabelled["attention_mask"]).logits)
    with_unlabelled = trainer.compute_loss(model, inputs)
    trainer.unlabelled = None
    # the difference of two losses near 0.7, each rounded to float32 (~1e-7): the tolerance is theirs
    torch.testing.assert_close(with_unlabelled - trainer.compute_loss(model, inputs), 2.0 * virtual,
                               rtol=1e-3, atol=2e-6)
    assert virtual > 0


def test_evaluation_and_method_none_compute_the_plain_loss(tmp_path: Path) -> None:
    for settings in ({"method": "adversarial"}, {"method": "none"}):
        trainer, inputs = tiny_trainer(tmp_path, **settings)
        model = trainer.model.eval() if settings["method"] != "none" else trainer.model
        plain = model(**inputs).loss
        torch.testing.assert_close(trainer.compute_loss(model, inputs), plain)


def test_a_smoke_run_trains_with_virtual_adversarial_training_and_records_it(tmp_path: Path) -> None:
    overrides = [*SMOKE_TINY_MODEL, "limit_train=64", "limit_eval=32", "training.num_train_epochs=1",
                 "adversarial.method=virtual", "adversarial.epsilon=0.03"]
    metrics = train(load_experiment(SMOKE, overrides), tmp_path / "run")
    assert metrics["experiment"]["adversarial"] == {"method": "virtual", "epsilon": 0.03, "xi": 0.005, "weight": 1.0,
                                                    "unlabelled": False}
    assert 0.0 <= metrics["test_accuracy"] <= 1.0


def test_adversarial_settings_are_checked_and_refused_where_nothing_reads_them(tmp_path: Path) -> None:
    with pytest.raises(ExperimentConfigError, match=r"\[adversarial\]: `method` must be one of"):
        load_experiment(SMOKE, ["adversarial.method=fgsm"])
    with pytest.raises(ExperimentConfigError, match=r"\[adversarial\]: `epsilon`"):
        load_experiment(SMOKE, ["adversarial.epsilon=0"])
    with pytest.raises(ExperimentConfigError, match="set method: virtual with unlabelled: true"):
        load_experiment(SMOKE, ["adversarial.method=adversarial", "adversarial.unlabelled=true"])
    with pytest.raises(ValueError, match="has no unlabelled texts"):
        train(load_experiment(SMOKE, [*SMOKE_TINY_MODEL, "adversarial.method=virtual", "adversarial.unlabelled=true",
                                      "limit_train=16", "limit_eval=8"]), tmp_path / "run")
    with pytest.raises(ValueError, match="trains no classifier"):
        pretrain(load_experiment(SMOKE, [*SMOKE_TINY_MODEL, "adversarial.method=adversarial"]), tmp_path / "run")
