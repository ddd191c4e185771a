"""`hf-attn prepare` on the shipped sample: a Week 3 folder the package's own loaders accept, whose
tensors and DAN scores agree with a second computation from the files it wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers import SMOKE
from torch import nn

from hf_attn.experiments.classification import train
from hf_attn.experiments.config import load_experiment
from hf_attn.experiments.data import load_imdb
from hf_attn.experiments.run import build_model, load_tokenizer
from hf_attn.week3 import load_week3_tokenizer
from hf_attn.week3.dan import DeepAveragingNetwork
from hf_attn.week3.prepare import prepare_week3
from hf_attn.week3.tensors import load_week3_pickle, load_week3_split, read_embedding


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("week3")
    report = prepare_week3(folder, dataset="sample", vocab_size=300, max_seq=32, embedding_dim=16)
    return folder, report


def test_prepare_writes_every_week3_file(prepared: tuple[Path, dict]) -> None:
    folder, report = prepared
    for name in ("datasets/bpe_vocab.json", "datasets/bpe_merges.json", "models/vocab_config.json",
                 "datasets/train_ds.pt", "datasets/val_ds.pt", "datasets/test_ds.pt",
                 "models/dan_imdb.pt", "models/imdb_embedding_layer.pt", "prepare_report.json"):
        assert (folder / name).is_file(), name
    written = json.loads((folder / "prepare_report.json").read_text())
    assert written["vocab_size"] == report["vocab_size"] == 301  # 256 bytes + 44 merges + [PAD]
    assert read_embedding(folder / "models" / "imdb_embedding_layer.pt").shape == (301, 16)


def test_prepared_splits_are_the_tokenizer_on_the_seed_split(prepared: tuple[Path, dict]) -> None:
    folder, _ = prepared
    tokenizer = load_week3_tokenizer(folder)
    validation = load_imdb("sample")["validation"]
    stored = load_week3_split(folder / "datasets" / "val_ds.pt")
    assert stored.num_rows == validation.num_rows
    for row in (0, 7, validation.num_rows - 1):
        expected = tokenizer(validation[row]["text"], truncation=True, max_length=32)["input_ids"]
        ids = stored[row]["input_ids"]
        assert ids[: len(expected)] == expected
        assert set(ids[len(expected):]) <= {tokenizer.pad_token_id}
        assert stored[row]["labels"] == validation[row]["label"]


def test_reported_dan_scores_come_from_the_saved_dan(prepared: tuple[Path, dict]) -> None:
    """Recompute validation loss/accuracy from dan_imdb.pt with a plain loop over the saved split."""
    folder, report = prepared
    state = load_week3_pickle(folder / "models" / "dan_imdb.pt")
    vocab_size, width = state["embedding.weight"].shape
    pad_id = json.loads((folder / "models" / "vocab_config.json").read_text())["pad_id"]
    dan = DeepAveragingNetwork(vocab_size, pad_id, embedding_dim=width)
    dan.load_state_dict(state)
    dan.eval()
    split = load_week3_split(folder / "datasets" / "val_ds.pt")
    losses, correct = [], 0
    with torch.no_grad():
        for row in split:
            ids = torch.tensor(row["input_ids"])
            vectors = dan.embedding.weight[ids[ids != pad_id]]
            logit = dan.linear(torch.relu(dan.hidden(vectors.mean(0)))).squeeze()
            label = torch.tensor(float(row["labels"]))
            losses.append(nn.functional.binary_cross_entropy_with_logits(logit, label).item())
            correct += int((logit > 0).item() == bool(row["labels"]))
    assert report["dan"]["val_accuracy"] == pytest.approx(correct / split.num_rows)
    assert report["dan"]["val_loss"] == pytest.approx(sum(losses) / len(losses), rel=1e-4)
    saved_embedding = read_embedding(folder / "models" / "imdb_embedding_layer.pt")
    assert torch.equal(saved_embedding, state["embedding.weight"])


def test_dan_starts_from_the_seeded_default_init() -> None:
    """scripts/embedding_drift.py recreates the DAN's starting embedding this way: a DAN trained for
    zero epochs must return exactly that table."""
    from torch.utils.data import TensorDataset

    from hf_attn.week3.dan import train_dan

    ids = torch.randint(0, 49, (8, 6))
    data = TensorDataset(ids, torch.randint(0, 2, (8,)).float(), torch.ones_like(ids))
    untrained = train_dan(data, data, data, vocab_size=50, pad_id=49, embedding_dim=8, max_epochs=0, seed=3)
    torch.manual_seed(3)
    recreated = DeepAveragingNetwork(50, 49, embedding_dim=8).embedding.weight
    assert torch.equal(untrained.model.embedding.weight, recreated)


def test_an_experiment_trains_from_the_prepared_folder(prepared: tuple[Path, dict], tmp_path: Path) -> None:
    """`week3: DIR` gives the tokenizer and the DAN's vectors (at the model's forward scale) to training."""
    folder, _ = prepared
    overrides = [f"week3={folder}", "limit_train=64", "limit_eval=32", "model.hidden_size=16",
                 "model.intermediate_size=32", "model.scale_embeddings=true", "training.num_train_epochs=1"]
    experiment = load_experiment(SMOKE, overrides)
    model = build_model(experiment, load_tokenizer(experiment, train_texts=[]))  # Week 3 tokenizer: none trained
    dan_rows = read_embedding(folder / "models" / "imdb_embedding_layer.pt")
    torch.testing.assert_close(model.get_input_embeddings().weight * 16**0.5, dan_rows)

    metrics = train(experiment, tmp_path / "run")
    assert metrics["vocab_size"] == 301
    assert "tokenizer_vocab_size" not in metrics["experiment"]  # none was trained: the Week 3 one was used
