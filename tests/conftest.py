"""Shared fixtures and the offline environment every test runs in."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import SHARED, require, tiny_config_kwargs

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="module")
def sample_dir() -> Path:
    """The Week 3 sample files made by an independent implementation (skips where ../shared is absent)."""
    return require(SHARED / "week3-sample")


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder shaped like a finished `hf-attn train` run: a tiny ALiBi classifier, its tokenizer and code,
    metrics.json, and training's leftovers that must never reach the Hub (training_args.bin, a checkpoint).
    Shared by every test that reads a run: a test that changes a run works on a copy."""
    import torch

    from hf_attn import HfAttnConfig, HfAttnForSequenceClassification
    from hf_attn.experiments.data import load_sample
    from hf_attn.week3 import train_week3_tokenizer

    folder = tmp_path_factory.mktemp("run")
    tokenizer = train_week3_tokenizer(load_sample()["train"]["text"][:300], vocab_size=300, max_seq=64)
    torch.manual_seed(0)
    config = HfAttnConfig(**tiny_config_kwargs(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                               position_embedding_type="alibi", max_position_embeddings=64))
    model = HfAttnForSequenceClassification(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "training_args.bin").write_bytes(b"pickle that must never be uploaded")
    (folder / "trainer_state.json").write_text("{}")
    checkpoint = folder / "checkpoint-2500"
    checkpoint.mkdir()
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json", "model.safetensors"):
        (checkpoint / name).write_bytes(b"training state that must never be uploaded")
    metrics = {"test_accuracy": 0.8123, "test_f1": 0.8011, "test_loss": 0.41, "val_accuracy": 0.8234,
               "n_validation": 5000, "n_test": 5000,
               "val_f1": 0.8199, "val_loss": 0.4, "epochs": 2.0, "n_train": 40000, "optimizer_steps": 2500,
               "train_runtime_s": 3600.0, "world_size": 1, "max_length": 64, "command": "hf-attn train ...",
               "experiment": {"week3": "runs/week3", "training": {"learning_rate": 5e-4}, "evals_per_epoch": 4}}
    (folder / "metrics.json").write_text(json.dumps(metrics))
    return folder
