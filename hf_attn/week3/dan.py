"""The Week 3 Deep Averaging Network (Iyyer et al., 2015), whose embedding starts the Transformers.

Architecture and state-dict names follow the tutorial's `dan_imdb.pt` exactly (`embedding`,
`hidden`, `linear`), so a DAN trained here is a drop-in Week 3 file and vice versa:
embedding -> mean over real tokens -> Linear(d, 768) -> ReLU -> dropout -> Linear(768, 1) -> BCE.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

logger = logging.getLogger(__name__)


class DeepAveragingNetwork(nn.Module):
    def __init__(self, vocab_size: int, pad_id: int, embedding_dim: int = 384, hidden_dim: int = 768,
                 dropout: float = 0.3) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_id)
        self.hidden = nn.Linear(embedding_dim, hidden_dim)
        self.dropout = nn.Dropout(dropout)
        self.linear = nn.Linear(hidden_dim, 1)

    def forward(self, input_ids: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
        """Logits (batch,) of the positive class."""
        mask = padding_mask.unsqueeze(-1).float()
        averaged = (self.embedding(input_ids) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.linear(self.dropout(torch.relu(self.hidden(averaged)))).squeeze(-1)


@dataclass
class DanResult:
    model: DeepAveragingNetwork
    val_accuracy: float
    val_loss: float
    test_accuracy: float
    test_loss: float
    epochs_run: int
    best_epoch: int


def _score(model: DeepAveragingNetwork, data: TensorDataset, batch_size: int = 512) -> tuple[float, float]:
    """(mean BCE loss, accuracy) over a dataset of (input_ids, labels, padding_mask)."""
    model.eval()
    total_loss, correct = 0.0, 0
    with torch.no_grad():
        for input_ids, labels, padding_mask in DataLoader(data, batch_size=batch_size):
            logits = model(input_ids, padding_mask)
            total_loss += nn.functional.binary_cross_entropy_with_logits(logits, labels, reduction="sum").item()
            correct += int(((logits > 0).float() == labels).sum())
    return total_loss / len(data), correct / len(data)


def train_dan(
    train: TensorDataset,
    validation: TensorDataset,
    test: TensorDataset,
    vocab_size: int,
    pad_id: int,
    embedding_dim: int = 384,
    hidden_dim: int = 768,
    dropout: float = 0.3,
    learning_rate: float = 1e-3,
    batch_size: int = 64,
    max_epochs: int = 20,
    patience: int = 2,
    seed: int = 42,
) -> DanResult:
    """Train with AdamW and BCE, stop when validation loss has not improved for `patience` epochs,
    and return the best-validation-loss weights with their validation and test scores."""
    torch.manual_seed(seed)
    model = DeepAveragingNetwork(vocab_size, pad_id, embedding_dim, hidden_dim, dropout)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    loader = DataLoader(train, batch_size=batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(seed))
    best_state, best_loss, best_epoch, epoch = copy.deepcopy(model.state_dict()), float("inf"), 0, 0
    for epoch in range(1, max_epochs + 1):
        model.train()
        for input_ids, labels, padding_mask in loader:
            loss = nn.functional.binary_cross_entropy_with_logits(model(input_ids, padding_mask), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        val_loss, val_accuracy = _score(model, validation)
        logger.info("DAN epoch %d: validation loss %.4f, accuracy %.4f", epoch, val_loss, val_accuracy)
        if val_loss < best_loss:
            best_state, best_loss, best_epoch = copy.deepcopy(model.state_dict()), val_loss, epoch
        elif epoch - best_epoch >= patience:
            break
    model.load_state_dict(best_state)
    val_loss, val_accuracy = _score(model, validation)
    test_loss, test_accuracy = _score(model, test)
    return DanResult(model, val_accuracy, val_loss, test_accuracy, test_loss, epoch, best_epoch)
