"""hf_attn.week3.tensors against the Week 3 sample tensors, which were made outside this project."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
import torch
from helpers import SHARED, require, tiny_config_kwargs
from torch.utils.data import Subset, TensorDataset
from transformers import BertConfig, BertForSequenceClassification
from transformers.testing_utils import CaptureLogger
from week3_reference import ReferenceTokenizer

from hf_attn import HfAttnConfig, HfAttnForSequenceClassification
from hf_attn.week3 import Week3FormatError, load_week3_tokenizer, tensors
from hf_attn.week3.tensors import (
    load_week3_embedding,
    load_week3_pickle,
    load_week3_split,
    read_embedding_width,
    save_week3_split,
)

SAMPLE = SHARED / "week3-sample"
IMDB = SHARED / "data" / "imdb"
SPLIT_KEYS = {"train": "train", "val": "val", "test": "test"}


@pytest.fixture(scope="module")
def labelled_imdb() -> dict[str, list]:
    """The 50,000 labelled reviews, IMDb train then test, the order split_indices.json indexes."""
    require(IMDB)
    tables = [pq.read_table(next(IMDB.glob(f"{split}-*.parquet"))) for split in ("train", "test")]
    return {column: [v for table in tables for v in table.column(column).to_pylist()] for column in ("text", "label")}


@pytest.fixture(scope="module")
def embedding_weight(sample_dir: Path) -> torch.Tensor:
    """The sample embedding read with plain torch, the way a user would check it by hand."""
    return torch.load(sample_dir / "models" / "imdb_embedding_layer.pt", weights_only=True)["weight"]


def bert(vocab_size: int = 501, hidden_size: int = 384, pad_token_id: int = 500) -> BertForSequenceClassification:
    """A tiny stock transformers model: the loader must work through the generic API only."""
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=32,
        max_position_embeddings=128,
        pad_token_id=pad_token_id,
    )
    return BertForSequenceClassification(config)


# --- dataset splits --------------------------------------------------------------------------------


@pytest.mark.parametrize("split", list(SPLIT_KEYS))
def test_sample_split_rows_are_our_tokenizer_ids(split: str, sample_dir: Path, labelled_imdb: dict[str, list]) -> None:
    """The sample's first 200 rows of each part were tokenized by an independent implementation."""
    rows = json.loads((sample_dir / "split_indices.json").read_text())[SPLIT_KEYS[split]][:200]
    loaded = load_week3_split(sample_dir / "datasets" / f"{split}_ds.pt")
    assert loaded.column_names == ["input_ids", "attention_mask", "labels"]
    assert len(loaded) == 200
    texts = [labelled_imdb["text"][i] for i in rows]
    ours = load_week3_tokenizer(sample_dir)(texts, truncation=True, padding="max_length")
    assert loaded["input_ids"] == ours["input_ids"]
    assert loaded["attention_mask"] == ours["attention_mask"]
    assert loaded["labels"] == [labelled_imdb["label"][i] for i in rows]
    reference = ReferenceTokenizer.from_week3_folder(sample_dir)
    assert loaded["input_ids"][:20] == [reference.encode_padded(text)[0] for text in texts[:20]]


def test_split_round_trip_keeps_the_notebook_shape(sample_dir: Path, tmp_path: Path) -> None:
    original_path = sample_dir / "datasets" / "val_ds.pt"
    loaded = load_week3_split(original_path)
    saved = save_week3_split(loaded, tmp_path / "datasets" / "val_ds.pt")
    assert load_week3_split(saved).to_dict() == loaded.to_dict()
    with torch.serialization.safe_globals([TensorDataset, Subset]):
        original = torch.load(original_path, weights_only=True)
        written = torch.load(saved, weights_only=True)
    assert isinstance(written, Subset) and isinstance(written.dataset, TensorDataset)
    for ours, theirs in zip(written.dataset.tensors, original.dataset.tensors):
        assert ours.dtype == theirs.dtype
        assert torch.equal(ours, theirs[list(original.indices)])


def test_save_split_takes_a_tensor_dataset(tmp_path: Path) -> None:
    ids = torch.tensor([[5, 6, 500], [7, 500, 500]])
    tensors = TensorDataset(ids, torch.tensor([1.0, 0.0]), (ids != 500).long())
    loaded = load_week3_split(save_week3_split(tensors, tmp_path / "train_ds.pt"))
    assert loaded["input_ids"] == ids.tolist()
    assert loaded["attention_mask"] == [[1, 1, 0], [1, 0, 0]]
    assert loaded["labels"] == [1, 0]


def test_save_split_rejects_ragged_rows(tmp_path: Path) -> None:
    ragged = datasets.Dataset.from_dict({"input_ids": [[1, 2], [3]], "attention_mask": [[1, 1], [1]], "labels": [0, 1]})
    with pytest.raises(ValueError, match="pad them to max_seq"):
        save_week3_split(ragged, tmp_path / "x.pt")


class RunsCodeWhenUnpickled:
    """A pickle that would create a file if it were ever executed."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (Path.touch, (self.marker,))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
@pytest.mark.parametrize("writer", ["torch", "pickle"])
def test_foreign_pickles_are_refused_without_running(tmp_path: Path, writer: str) -> None:
    marker = tmp_path / "executed"
    path = tmp_path / "train_ds.pt"
    payload = Subset(TensorDataset(torch.zeros(1, 2)), [RunsCodeWhenUnpickled(marker)])
    if writer == "torch":
        torch.save(payload, path)
    else:
        path.write_bytes(pickle.dumps(payload))
    with pytest.raises(Week3FormatError, match=rf"{path}: refused to load"):
        load_week3_split(path)
    assert not marker.exists()


def test_unreadable_missing_and_misshapen_splits(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a torch file at all")
    with pytest.raises(Week3FormatError, match=rf"{garbage}: refused to load: .* or is not a torch.save file"):
        load_week3_pickle(garbage)
    truncated = tmp_path / "truncated.pt"
    torch.save({"weight": torch.zeros(50, 50)}, truncated)
    truncated.write_bytes(truncated.read_bytes()[:3000])
    with pytest.raises(Week3FormatError, match=rf"{truncated}: not a readable torch.save file"):
        load_week3_pickle(truncated)
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_week3_split(tmp_path / "absent.pt")
    state_dict = tmp_path / "state.pt"
    torch.save({"weight": torch.zeros(2, 2)}, state_dict)
    with pytest.raises(Week3FormatError, match=r"expected Subset\(TensorDataset\(input_ids, labels, padding_mask\)"):
        load_week3_split(state_dict)
    swapped = tmp_path / "swapped.pt"
    ids = torch.ones(3, 4, dtype=torch.long)
    torch.save(Subset(TensorDataset(ids, ids, torch.ones(3)), [0, 1, 2]), swapped)
    with pytest.raises(Week3FormatError, match="must be input_ids \\[N, max_seq\\], labels \\[N\\]"):
        load_week3_split(swapped)


@pytest.mark.parametrize("label", [2.0, -1.0])
def test_a_split_with_a_label_outside_0_and_1_is_refused_on_load(tmp_path: Path, label: float) -> None:
    """IMDb is binary: a label 2 or -1 would otherwise load and fail later, inside the loss."""
    path = tmp_path / "labels.pt"
    ids = torch.ones(3, 4, dtype=torch.long)
    torch.save(Subset(TensorDataset(ids, torch.tensor([0.0, 1.0, label]), torch.ones_like(ids)), [0, 1, 2]), path)
    expected = rf"labels must be 0 \(negative\) or 1 \(positive\), found \[{int(label)}\]"
    with pytest.raises(Week3FormatError, match=expected):
        load_week3_split(path)


# --- the embedding --------------------------------------------------------------------------------


@pytest.mark.parametrize(("file", "key"), [("imdb_embedding_layer.pt", "weight"), ("dan_imdb.pt", "embedding.weight")])
def test_embedding_goes_into_a_stock_model(sample_dir: Path, file: str, key: str) -> None:
    path = sample_dir / "models" / file
    expected = torch.load(path, weights_only=True)[key]
    model = load_week3_embedding(bert(), path)
    assert torch.equal(model.get_input_embeddings().weight, expected)
    assert read_embedding_width(path) == 384


def test_embedding_goes_into_an_hf_attn_model(sample_dir: Path, embedding_weight: torch.Tensor) -> None:
    config = HfAttnConfig(**tiny_config_kwargs(vocab_size=501, hidden_size=384, pad_token_id=500))
    model = load_week3_embedding(
        HfAttnForSequenceClassification(config),
        sample_dir / "models" / "imdb_embedding_layer.pt",
        vocab_config=sample_dir / "models" / "vocab_config.json",
    )
    assert torch.equal(model.get_input_embeddings().weight, embedding_weight)


@pytest.mark.parametrize("scale_embeddings", [False, True])
def test_model_computes_with_the_dan_vectors(
    sample_dir: Path, embedding_weight: torch.Tensor, scale_embeddings: bool
) -> None:
    """Whatever the model's embedding scale, the vectors entering the first block are the DAN's rows."""
    config = HfAttnConfig(**tiny_config_kwargs(
        vocab_size=501, hidden_size=384, pad_token_id=500, position_embedding_type="none",
        hidden_dropout=0.0, scale_embeddings=scale_embeddings,
    ))
    embedding_file = sample_dir / "models" / "imdb_embedding_layer.pt"
    model = load_week3_embedding(HfAttnForSequenceClassification(config), embedding_file)
    token_ids = torch.tensor([[3, 7, 250, 499]])
    first_hidden = model(token_ids, output_hidden_states=True).hidden_states[0]
    torch.testing.assert_close(first_hidden[0], embedding_weight[token_ids[0]])


def position_table_weights(model: torch.nn.Module) -> list[torch.Tensor]:
    """The weights of the model's position tables, found by name (BERT's `position_embeddings`, hf-attn's
    `positions.embeddings`) rather than by the loader's own search."""
    return [module.weight.detach() for name, module in model.named_modules()
            if "position" in name and isinstance(module, torch.nn.Embedding)]


def learned_hf_attn_model() -> HfAttnForSequenceClassification:
    return HfAttnForSequenceClassification(HfAttnConfig(**tiny_config_kwargs(
        vocab_size=501, hidden_size=384, pad_token_id=500, position_embedding_type="learned")))


@pytest.mark.parametrize("make_model", [bert, learned_hf_attn_model], ids=["bert", "hf_attn"])
def test_position_tables_start_at_the_dan_tokens_scale_when_asked(
    sample_dir: Path, embedding_weight: torch.Tensor, make_model
) -> None:
    """A fresh position table (std initializer_range = 0.02) is ~1/50 of the DAN's N(0, 1) vectors, and an encoder
    learns to ignore it: asked, the loader draws it at the tokens' std; otherwise it keeps it and says so."""
    path = sample_dir / "models" / "imdb_embedding_layer.pt"
    kept = make_model()
    initial = [weight.clone() for weight in position_table_weights(kept)]
    assert len(initial) == 1 and float(initial[0].std()) == pytest.approx(0.02, rel=0.1)
    with CaptureLogger(tensors.logger) as captured:
        load_week3_embedding(kept, path)
    assert torch.equal(position_table_weights(kept)[0], initial[0])
    assert "start_position_tables_at_token_scale=True" in captured.out

    redrawn = load_week3_embedding(make_model(), path, start_position_tables_at_token_scale=True)
    assert float(position_table_weights(redrawn)[0].std()) == pytest.approx(float(embedding_weight.std()), rel=0.05)
    assert torch.equal(redrawn.get_input_embeddings().weight, embedding_weight)


def test_embedding_mismatches_raise_clear_errors(sample_dir: Path, tmp_path: Path) -> None:
    path = sample_dir / "models" / "imdb_embedding_layer.pt"
    with pytest.raises(Week3FormatError, match=r"embedding is \[501, 384\] but the model expects \[vocab_size=600"):
        load_week3_embedding(bert(vocab_size=600), path, vocab_config={"vocab_size": 501, "pad_id": 500})
    with pytest.raises(
        Week3FormatError, match=r"hidden_size=256\]\. Build the model with vocab_size=501 and hidden_size=384"
    ):
        load_week3_embedding(bert(hidden_size=256), path)
    with pytest.raises(
        Week3FormatError, match=r"vocab_config\.json: pad_id 500 differs from the model's pad_token_id 0"
    ):
        load_week3_embedding(bert(pad_token_id=0), path)
    with pytest.raises(Week3FormatError, match=r"has 501 rows but vocab_config\.json says vocab_size 502"):
        load_week3_embedding(bert(), path, vocab_config={"vocab_size": 502, "pad_id": 500})
    no_embedding = tmp_path / "head_only.pt"
    torch.save({"linear.weight": torch.zeros(1, 4)}, no_embedding)
    with pytest.raises(Week3FormatError, match=r"no embedding among keys \['linear.weight'\]"):
        load_week3_embedding(bert(), no_embedding)
    flat = tmp_path / "flat.pt"
    torch.save({"weight": torch.zeros(501)}, flat)
    with pytest.raises(Week3FormatError, match="must be a 2-D float tensor"):
        load_week3_embedding(bert(), flat)
