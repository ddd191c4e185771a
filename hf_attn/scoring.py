"""The registry of attention scorings, how a query and a key make a score (`attention_scoring`): one small
`AttentionScoring` subclass and one line in `ATTENTION_SCORINGS` each."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn
from transformers import initialization as init
from transformers.utils import logging

if TYPE_CHECKING:
    from .configuration_hf_attn import HfAttnConfig

logger = logging.get_logger(__name__)


class AttentionScoring(nn.Module):
    """How an attention layer scores a query against a key. `project_query` maps the projected queries before RoPE
    rotates them; the eager attention calls the scoring for the (batch, heads, query, key) scores.
    `is_dot_product`: the scores are q' . k, so SDPA computes them and `scale_attn_weights` applies."""

    is_dot_product: bool = True

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.name = config.attention_scoring
        self.scaling = self.head_dim**-0.5 if config.scale_attn_weights and self.is_dot_product else 1.0

    def project_query(self, query: torch.Tensor) -> torch.Tensor:
        return query

    def project_fused_query(self, projected: torch.Tensor, query_width: int) -> torch.Tensor:
        """A fused projection (..., queries | keys | values) with `project_query` applied to the queries."""
        return projected

    def implementation(self, requested: str) -> str:
        """The `attn_implementation` asked for, or `eager` (with a warning) for scores that are not q k^T."""
        if self.is_dot_product or requested == "eager":
            return requested
        logger.warning_once(
            f"attention_scoring={self.name!r} has no {requested} kernel (its scores are not a product q k^T): "
            "attention runs eagerly."
        )
        return "eager"

    def forward(self, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        return torch.matmul(query, key.transpose(2, 3))

    def init_parameters(self) -> None:
        """Initialise the scoring's own parameters (called by `_init_weights`)."""


class DotProductScoring(AttentionScoring):
    """`dot`: the score of query q and key k is q . k (Vaswani et al., 2017), scaled by the attention layer."""


class BilinearScoring(DotProductScoring):
    """`general`: q^T W k with a learned head_dim x head_dim W per head (Luong et al., 2015), starting at the
    identity. Computed as (q W) . k before RoPE, so SDPA applies and, with RoPE, the scores depend on the offset
    alone. After the query projection W reparametrises (W_q W is one map): it changes training, not capacity."""

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.weight = nn.Parameter(torch.empty(self.num_heads, self.head_dim, self.head_dim))

    def project_query(self, query: torch.Tensor) -> torch.Tensor:
        heads = query.unflatten(-1, (self.num_heads, self.head_dim))
        return torch.einsum("bthd,hde->bthe", heads, self.weight).flatten(-2)

    def project_fused_query(self, projected: torch.Tensor, query_width: int) -> torch.Tensor:
        query, key_and_value = projected.split([query_width, projected.shape[-1] - query_width], dim=-1)
        return torch.cat((self.project_query(query), key_and_value), dim=-1)

    def init_parameters(self) -> None:
        identity = torch.eye(self.head_dim, device=self.weight.device, dtype=self.weight.dtype)
        init.copy_(self.weight, identity.expand_as(self.weight))


class AdditiveScoring(AttentionScoring):
    """`additive`: v^T tanh(W1 q + W2 k) per head (Bahdanau et al., 2015). Every query-key pair goes through the
    tanh: a (batch, heads, query, key, head_dim) intermediate, eager only. N(0, 1/head_dim) init keeps W q at q's
    scale."""

    is_dot_product = False

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.query_weight = nn.Parameter(torch.empty(self.num_heads, self.head_dim, self.head_dim))
        self.key_weight = nn.Parameter(torch.empty(self.num_heads, self.head_dim, self.head_dim))
        self.vector = nn.Parameter(torch.empty(self.num_heads, self.head_dim))

    def forward(self, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        query = torch.einsum("bhqd,hde->bhqe", query, self.query_weight)
        key = torch.einsum("bhkd,hde->bhke", key, self.key_weight)
        hidden = torch.tanh(query[:, :, :, None, :] + key[:, :, None, :, :])  # (B, H, Q, K, D)
        return torch.einsum("bhqke,he->bhqk", hidden, self.vector)

    def init_parameters(self) -> None:
        for parameter in (self.query_weight, self.key_weight, self.vector):
            init.normal_(parameter, std=self.head_dim**-0.5)


ATTENTION_SCORINGS: dict[str, type[AttentionScoring]] = {
    "dot": DotProductScoring,
    "general": BilinearScoring,
    "additive": AdditiveScoring,
}
