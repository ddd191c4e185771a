"""The registry of attention scorings: how a query and a key make a score (`attention_scoring`).

Adding a scoring is one small subclass of `AttentionScoring` plus one line in `ATTENTION_SCORINGS`. What attention
asks of a scoring is on its class: whether its scores are a dot product of (projected) queries and keys, which
SDPA computes and `scale_attn_weights` scales (`is_dot_product`), and whether it maps the queries before RoPE
rotates them (`projects_query`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn
from transformers import initialization as init

if TYPE_CHECKING:
    from .configuration_hf_attn import HfAttnConfig


class AttentionScoring(nn.Module):
    """How an attention layer scores a query against a key (`attention_scoring`); one per attention layer.

    A scoring is asked twice: `project_query` maps the projected queries (batch, seq, heads x head_dim) before
    RoPE rotates them, and the eager attention calls it with (batch, heads, query, head_dim) queries and keys for
    the (batch, heads, query, key) scores. `is_dot_product`: the scores are q' . k for the projected q', so SDPA
    computes them and `scale_attn_weights` applies. `projects_query`: `project_query` is not the identity.
    `scaling` multiplies the queries before scoring: 1/sqrt(head_dim) for a scaled dot product, else 1.
    """

    is_dot_product: bool = True
    projects_query: bool = False

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.scaling = self.head_dim**-0.5 if config.scale_attn_weights and self.is_dot_product else 1.0

    def project_query(self, query: torch.Tensor) -> torch.Tensor:
        return query

    def forward(self, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        return torch.matmul(query, key.transpose(2, 3))

    def init_parameters(self) -> None:
        """Initialise the scoring's own parameters (called by `_init_weights`; transformers' `initialization`
        helpers leave a loaded parameter as it is)."""


class DotProductScoring(AttentionScoring):
    """`dot`: the score of query q and key k is q . k (Vaswani et al., 2017), scaled by the attention layer."""


class BilinearScoring(DotProductScoring):
    """`general`: q^T W k with a learned head_dim x head_dim W per head (Luong et al., 2015).

    Computed as (q W) . k: W is applied to the query before RoPE rotates it, so the scores stay a dot product (SDPA
    applies) and, with RoPE, still depend on the offset alone. W starts at the identity, the dot product. After a
    learned query projection, W is a reparametrisation (W_q W is one linear map): it changes how training moves the
    scores, not which scores a layer can make.
    """

    projects_query = True

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.weight = nn.Parameter(torch.empty(self.num_heads, self.head_dim, self.head_dim))

    def project_query(self, query: torch.Tensor) -> torch.Tensor:
        heads = query.unflatten(-1, (self.num_heads, self.head_dim))
        return torch.einsum("bthd,hde->bthe", heads, self.weight).flatten(-2)

    def init_parameters(self) -> None:
        identity = torch.eye(self.head_dim, device=self.weight.device, dtype=self.weight.dtype)
        init.copy_(self.weight, identity.expand_as(self.weight))


class AdditiveScoring(AttentionScoring):
    """`additive`: v^T tanh(W1 q + W2 k) per head (Bahdanau et al., 2015), W1 and W2 head_dim x head_dim, v of
    head_dim.

    Every query-key pair goes through the tanh, so the scores need a (batch, heads, query, key, head_dim)
    intermediate: eager only, and memory grows with query x key x head_dim. W1, W2 and v start as N(0, 1/head_dim),
    which keeps W q at q's scale.
    """

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
