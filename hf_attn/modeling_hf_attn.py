"""hf_attn models: a small Transformer encoder or decoder whose position scheme is one config field.

`HfAttnModel.attention_batch` builds what attention needs (masks, RoPE's cos/sin, the position bias) once per forward
pass and every layer reads it; the attention math is transformers' `attn_implementation`. Position schemes, masks,
scorings, caches and the classifier's reading policy are Hub files of their own beside this one.
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn
from transformers import CONFIG_MAPPING, AutoConfig, GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, EncoderDecoderCache
from transformers.integrations.sdpa_attention import repeat_kv
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutputWithPastAndCrossAttentions,
    CausalLMOutputWithCrossAttentions,
    MaskedLMOutput,
    ModelOutput,
    MultipleChoiceModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, slice_logits_to_keep
from transformers.processing_utils import Unpack
from transformers.utils import TransformersKwargs, can_return_tuple, is_tracing
from transformers.utils.deprecation import deprecate_kwarg
from transformers.utils.output_capturing import OutputRecorder, capture_outputs

from .caching import decoding_cache
from .configuration_hf_attn import HfAttnConfig
from .masking import BandBlocks, RealTokens, band_blocks, key_padding_mask, real_tokens, self_attention_mask
from .positions import PositionScheme, apply_rotary, build_position_scheme
from .reading import read_inputs
from .scoring import ATTENTION_SCORINGS, AttentionScoring

# The fewest queries in a block of `local_attention_forward`: tiny blocks cost more overhead than the scores they skip.
LOCAL_MIN_BLOCK = 32


def eager_attention_forward(
    module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
    attention_mask: torch.Tensor | None, scaling: float, dropout: float = 0.0,
    position_bias: torch.Tensor | None = None, scored_positions: PositionScheme | None = None, **kwargs: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(`module.scoring`(q x scaling, k) + bias) v and the weights: (batch, heads, seq, head_dim) in, (batch,
    seq, heads, head_dim) out; `scored_positions` adds its logits of the scores (CoPE). Masked scores get the dtype's
    minimum (-inf makes a fully masked row NaN), masked weights 0. Scaling the queries, and a softmax in the scores'
    dtype (its kernels accumulate in float32), each save a pass over the scores."""
    key = repeat_kv(key, module.num_key_value_groups)
    value = repeat_kv(value, module.num_key_value_groups)
    query = query * scaling
    scores = module.scoring(query, key)  # (B, H, Q, K)
    if position_bias is not None:
        scores = scores + position_bias
    if scored_positions is not None:
        scores = scores + scored_positions.score_logits(query, scores, attention_mask, module.layer_idx)
    if attention_mask is not None:
        scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1).to(query.dtype)
    if attention_mask is not None:
        weights = weights.masked_fill(~attention_mask, 0.0)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()  # (B, Q, H, D)
    return output, weights


@dataclass
class AttentionInputs:
    """What one attention layer reads besides its hidden states (`BatchAttention` builds it)."""

    mask: torch.Tensor | None = None  # (1|batch, 1, query, key), True where a query may see a key; None: every key
    rotary: tuple[torch.Tensor, torch.Tensor] | None = None  # RoPE's cos and signed sin
    bias: torch.Tensor | None = None  # the scores' additive position bias
    empty_query_rows: torch.Tensor | None = None  # (batch, query, 1, 1): queries that see no key, whose output is 0
    band: BandBlocks | None = None  # the sliding window by blocks (`local_attention_forward`): `mask` is then None
    causal_only: bool = False  # `mask` is the causal mask and nothing else
    real: RealTokens | None = None  # the hidden states are the real tokens alone, (1, tokens, hidden)
    context: torch.Tensor | None = None  # cross-attention's keys and values come from it
    scored_positions: PositionScheme | None = None  # a scheme that reads the scores (`reads_scores`): eager only
    output_attentions: bool = False  # the weights are asked for: only the eager math returns them


@dataclass
class BatchAttention:
    """What every layer's attention needs in one forward pass: each layer type's self-attention inputs but the bias,
    cross-attention's but the context, and the real tokens of an unpadded batch.

    A layer takes its bias (`biases[layer_type]`) as an argument of its own: reentrant gradient checkpointing carries
    the gradients of tensor arguments only, and a learned bias (t5, fire) needs them.
    """

    self_attention: dict[str, AttentionInputs]
    biases: dict[str, torch.Tensor | None]
    cross_attention: AttentionInputs
    real: RealTokens | None = None


class HfAttnAttention(nn.Module):
    """Multi-head / grouped-query attention, as self-attention (Q, K, V in one matmul, positions applied) or as
    cross-attention (K and V from the context; no positions: query and key index different sequences). Decoding
    appends the keys and values to the cache; cross-attention's are projected once into an `EncoderDecoderCache`."""

    def __init__(self, config: HfAttnConfig, is_cross_attention: bool = False, layer_idx: int | None = None) -> None:
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.head_dim = config.head_dim
        self.num_heads = config.num_attention_heads
        self.num_key_value_heads = config.num_key_value_heads
        self.num_key_value_groups = config.num_key_value_groups
        self.scoring = ATTENTION_SCORINGS[config.attention_scoring](config)
        self.scaling = self.scoring.scaling
        self.rope_layout = config.rope_layout
        self.attention_dropout = config.attention_dropout
        self.is_cross_attention = is_cross_attention
        # Whether this layer rotates its queries and keys (a scheme may leave some layers without positions).
        rotated_layers = config.position_scheme.rotated_layers(config)
        self.rotates = not is_cross_attention and (layer_idx is None or rotated_layers[layer_idx])
        # transformers' SDPA treats a module without this flag as causal when the mask is None.
        self.is_causal = False
        q_width = self.num_heads * self.head_dim
        kv_width = self.num_key_value_heads * self.head_dim
        self.split_sizes = [q_width, kv_width, kv_width]
        if is_cross_attention:
            self.q_proj = nn.Linear(config.hidden_size, q_width, bias=config.attention_bias)
            self.kv_proj = nn.Linear(config.hidden_size, 2 * kv_width, bias=config.attention_bias)
        else:
            self.qkv_proj = nn.Linear(config.hidden_size, q_width + 2 * kv_width, bias=config.attention_bias)
        self.o_proj = nn.Linear(q_width, config.hidden_size, bias=config.attention_bias)

    def _heads(self, *states: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(batch, seq, heads x head_dim) -> (batch, seq, heads, head_dim), each (no -1: a text may be empty)."""
        return tuple(state.view(*state.shape[:-1], state.shape[-1] // self.head_dim, self.head_dim) for state in states)

    def _project(self, hidden_states: torch.Tensor, inputs: AttentionInputs) -> tuple[torch.Tensor, ...]:
        """Q (batch, query, heads, head_dim), K and V (batch, key, kv_heads, head_dim), RoPE applied."""
        if inputs.context is not None:
            key, value = self.kv_proj(inputs.context).split(self.split_sizes[1:], dim=-1)
            return self._heads(self.scoring.project_query(self.q_proj(hidden_states)), key, value)
        projected = self.qkv_proj(hidden_states)
        if inputs.real is not None:
            projected = inputs.real.pad(projected)
        projected = self.scoring.project_fused_query(projected, self.split_sizes[0])  # before RoPE rotates it
        if inputs.rotary is None or not self.rotates:
            return self._heads(*projected.split(self.split_sizes, dim=-1))
        query_width, key_width, value_width = self.split_sizes
        query_and_key, value = projected.split([query_width + key_width, value_width], dim=-1)
        # Q's and K's heads sit side by side in the fused projection: one rotation covers both.
        (query_and_key,) = self._heads(query_and_key)
        rotated = apply_rotary(query_and_key, inputs.rotary, self.rope_layout, heads_dim=2)
        query, key = rotated.split([self.num_heads, self.num_key_value_heads], dim=2)
        if value.requires_grad:  # a view of the fused projection would keep all of it alive for backward
            value = value.contiguous()
        return (query, key, *self._heads(value))

    def _query_key_value(
        self, hidden_states: torch.Tensor, inputs: AttentionInputs, cache: Cache | None
    ) -> tuple[torch.Tensor, ...]:
        """Q, K and V as attention takes them, (batch, heads, seq, head_dim), K and V through the cache if any."""
        if self.is_cross_attention and cache is not None and cache.is_updated.get(self.layer_idx, False):
            (query,) = self._heads(self.scoring.project_query(self.q_proj(hidden_states)))
            cached = cache.cross_attention_cache.layers[self.layer_idx]
            return query.transpose(1, 2), cached.keys, cached.values
        query, key, value = (state.transpose(1, 2) for state in self._project(hidden_states, inputs))
        if self.is_cross_attention and cache is not None:
            key, value = cache.cross_attention_cache.update(key, value, self.layer_idx)
            cache.is_updated[self.layer_idx] = True
        elif cache is not None:
            key, value = cache.update(key, value, self.layer_idx)
        return query, key, value

    def _attention_function(self, inputs: AttentionInputs, query_length: int) -> tuple[Callable, bool]:
        """The backend (eager where the weights are asked for, or the scoring or the position scheme needs the
        scores), and `is_causal`."""
        implementation = self.scoring.implementation(self.config._attn_implementation)
        # an empty text runs the eager math over no tokens (SDPA's reshapes fail)
        eager = inputs.output_attentions or implementation == "eager" or query_length == 0
        if eager or inputs.scored_positions is not None:
            return eager_attention_forward, False
        function = ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention_forward)
        # Causality is in the explicit mask, so every backend sees the same one, unless it is the causal mask alone:
        # as `is_causal`, SDPA's kernels skip the masked half of the scores instead of reading a mask.
        return function, inputs.causal_only and inputs.bias is None

    def forward(
        self, hidden_states: torch.Tensor, inputs: AttentionInputs, cache: Cache | None = None, **kwargs: object
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`cache`: a self-attention cache, or for cross-attention the `EncoderDecoderCache` (or None)."""
        real = inputs.real
        batch, query_length = (real.batch, real.length) if real is not None else hidden_states.shape[:2]
        query, key, value = self._query_key_value(hidden_states, inputs, cache)
        mask, bias = inputs.mask, inputs.bias
        if cache is not None and not self.is_cross_attention:
            # A sliding-window cache layer returns only the last keys, where the mask and the bias cover all of them.
            mask = mask[..., -key.shape[-2] :] if mask is not None else None
            bias = bias[..., -key.shape[-2] :] if bias is not None else None
        attention_function, is_causal = self._attention_function(inputs, query_length)
        dropout = self.attention_dropout if self.training else 0.0
        if inputs.band is not None:
            output, weights = local_attention_forward(
                self, query, key, value, inputs.band, attention_function, self.scaling, dropout, bias
            )
        else:
            output, weights = attention_function(
                self, query, key, value, None if is_causal else mask, scaling=self.scaling, dropout=dropout,
                position_bias=bias, is_causal=is_causal, scored_positions=inputs.scored_positions,
            )
        if inputs.empty_query_rows is not None:  # backends disagree on rows with no visible key; define them as 0
            output = output.masked_fill(inputs.empty_query_rows, 0.0)
        output = output.reshape(batch, query_length, self.num_heads * self.head_dim)
        return self.o_proj(real.take(output) if real is not None else output), weights


def local_attention_forward(
    module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, blocks: BandBlocks,
    attention_function: Callable, scaling: float, dropout: float = 0.0, position_bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, None]:
    """Sliding-window self-attention over the scores inside the window alone: `attention_function` runs on the
    small blocks of `blocks` instead of the (length, length) square, so cost grows linearly with the length.
    `position_bias` is already cut to the blocks; a query that sees no key gets zeros; no weights are returned."""
    output, _ = attention_function(  # (batch x blocks, block, heads, head_dim)
        module, blocks.queries(query), blocks.keys(key), blocks.keys(value), blocks.mask, scaling=scaling,
        dropout=dropout, position_bias=position_bias, is_causal=False,
    )
    output = output.reshape(blocks.batch, -1, *output.shape[2:])[:, : blocks.length]
    if blocks.sees_a_key is not None:
        output = output.masked_fill(~blocks.sees_a_key, 0.0)
    return output, None


class HfAttnMLP(nn.Module):
    """Position-wise feed-forward: act(x W1) W2, or the gated act(x Wg) * (x Wu) W2 (SwiGLU, GeGLU)."""

    GATED = {"swiglu": "silu", "geglu": "gelu"}

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__()
        self.is_gated = config.hidden_act in self.GATED
        activation = self.GATED.get(config.hidden_act, config.hidden_act)
        self.act = ACT2FN[activation]
        up_width = 2 * config.intermediate_size if self.is_gated else config.intermediate_size
        self.up_proj = nn.Linear(config.hidden_size, up_width)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        up = self.up_proj(hidden_states)
        if self.is_gated:
            gate, up = up.chunk(2, dim=-1)
            return self.down_proj(self.act(gate) * up)
        return self.down_proj(self.act(up))


def build_norm(config: HfAttnConfig) -> nn.Module:
    if config.norm_type == "rmsnorm":
        return nn.RMSNorm(config.hidden_size, eps=config.norm_eps)
    return nn.LayerNorm(config.hidden_size, eps=config.norm_eps)


class HfAttnLayer(GradientCheckpointingLayer):
    """Self-attention, optional cross-attention, feed-forward; each a residual sublayer, pre-norm
    x + dropout(f(norm(x))) or post-norm norm(x + dropout(f(x)))."""

    def __init__(self, config: HfAttnConfig, layer_idx: int) -> None:
        super().__init__()
        self.attention_type = config.layer_types[layer_idx]
        self.pre_norm = config.norm_position == "pre"
        self.self_attn = HfAttnAttention(config, layer_idx=layer_idx)
        self.self_attn_norm = build_norm(config)
        if config.add_cross_attention:
            self.cross_attn = HfAttnAttention(config, is_cross_attention=True, layer_idx=layer_idx)
            self.cross_attn_norm = build_norm(config)
        self.mlp = HfAttnMLP(config)
        self.mlp_norm = build_norm(config)
        self.dropout = nn.Dropout(config.hidden_dropout)

    def _sublayer(
        self, hidden_states: torch.Tensor, norm: nn.Module, sublayer: Callable[[torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        update = sublayer(norm(hidden_states) if self.pre_norm else hidden_states)
        hidden_states = hidden_states + self.dropout(update)
        return hidden_states if self.pre_norm else norm(hidden_states)

    def forward(
        self, hidden_states: torch.Tensor, position_bias: torch.Tensor | None, batch: BatchAttention,
        encoder_hidden_states: torch.Tensor | None = None, cache: Cache | None = None, **kwargs: object,
    ) -> torch.Tensor:
        """`position_bias`, `encoder_hidden_states`: arguments of their own for checkpointing (`BatchAttention`)."""
        is_encoder_decoder_cache = isinstance(cache, EncoderDecoderCache)
        self_cache = cache.self_attention_cache if is_encoder_decoder_cache else cache
        self_inputs = replace(batch.self_attention[self.attention_type], bias=position_bias)
        hidden_states = self._sublayer(
            hidden_states, self.self_attn_norm, lambda states: self.self_attn(states, self_inputs, self_cache)[0]
        )
        if encoder_hidden_states is not None:
            cross = replace(batch.cross_attention, context=encoder_hidden_states)
            cross_cache = cache if is_encoder_decoder_cache else None  # a plain cache holds self-attention only
            hidden_states = self._sublayer(
                hidden_states, self.cross_attn_norm, lambda states: self.cross_attn(states, cross, cross_cache)[0]
            )
        return self._sublayer(hidden_states, self.mlp_norm, self.mlp)


class HfAttnPreTrainedModel(PreTrainedModel):
    config: HfAttnConfig
    config_class = HfAttnConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["HfAttnLayer"]
    _supports_sdpa = True
    _can_compile_fullgraph = True  # tests/test_export.py: every scheme and head under torch.compile(fullgraph=True)
    # Hidden states and attention weights are recorded by hooks (`capture_outputs` on `HfAttnModel.forward`).
    _can_record_outputs = {
        "hidden_states": HfAttnLayer,
        "attentions": OutputRecorder(HfAttnAttention, index=1, layer_name="self_attn"),
        "cross_attentions": OutputRecorder(HfAttnAttention, index=1, layer_name="cross_attn"),
    }
    # Only the causal LM's loss takes the Trainer's `num_items_in_batch`; the other heads average their own loss.
    accepts_loss_kwargs = False

    def save_pretrained(self, save_directory: str | os.PathLike[str], *args: Any, **kwargs: Any) -> None:
        """`PreTrainedModel.save_pretrained`, with every head of `AUTO_CLASSES` in the config's `auto_map`."""
        module = type(self).__module__.rsplit(".", 1)[-1]  # `modeling_hf_attn`, also when loaded as remote code
        heads = {auto_class: f"{module}.{model_class.__name__}" for auto_class, model_class in AUTO_CLASSES.items()}
        self.config.auto_map = {**(getattr(self.config, "auto_map", None) or {}), **heads}
        super().save_pretrained(save_directory, *args, **kwargs)

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """transformers' normal init, the residual branches' output projections scaled by 1/sqrt(2 * layers) as in
        GPT-2 (the residual stream's variance does not grow with depth); position buffers recomputed."""
        super()._init_weights(module)
        if isinstance(module, (HfAttnAttention, HfAttnMLP)):
            projection = module.o_proj if isinstance(module, HfAttnAttention) else module.down_proj
            std = self.config.initializer_range / math.sqrt(2 * self.config.num_hidden_layers)
            init.normal_(projection.weight, mean=0.0, std=std)
        elif isinstance(module, PositionScheme):
            module.reset_buffers()
            module.init_parameters()
        elif isinstance(module, AttentionScoring):
            module.init_parameters()


def _check_input_ids(input_ids: torch.Tensor, vocab_size: int) -> None:
    """A clear error for input_ids not (batch, sequence) or outside the vocabulary (not checked while tracing)."""
    if input_ids.ndim != 2:
        raise ValueError(
            f"input_ids must be (batch, sequence), got shape {tuple(input_ids.shape)}; for one text use "
            "input_ids[None] or the tokenizer with return_tensors='pt' on a list."
        )
    if not input_ids.numel() or is_tracing(input_ids):
        return
    lowest, highest = (int(value) for value in torch.aminmax(input_ids))  # one device sync, not two
    if lowest < 0 or highest >= vocab_size:
        raise ValueError(
            f"input_ids hold ids outside [0, {vocab_size}) (min {lowest}, max {highest}): the tokenizer and "
            "the model's vocab_size disagree. Use the tokenizer saved "
            "with this model, or call model.resize_token_embeddings(len(tokenizer))."
        )


def empty_rows(mask: torch.Tensor | None) -> torch.Tensor | None:
    """(B, Q, 1, 1) flags of the queries that see no key, or None when all see one (always kept while tracing)."""
    if mask is None:
        return None
    empty = ~mask.any(dim=-1)  # (B|1, 1, Q)
    return empty.transpose(1, 2)[..., None] if is_tracing(empty) or bool(empty.any()) else None


class HfAttnModel(HfAttnPreTrainedModel):
    """The bare encoder or decoder: embeddings -> layers -> final norm. A decoder's `cache` holds the earlier keys
    and values: `attention_mask` then covers past and new tokens, and the position ids continue from the cache."""

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.embedding_scale = config.embedding_scale
        self.positions = build_position_scheme(config)
        self.position_id_rule = config.position_id_rule_class(config)
        self.dropout = nn.Dropout(config.hidden_dropout)
        self.layers = nn.ModuleList(HfAttnLayer(config, i) for i in range(config.num_hidden_layers))
        # Post-norm blocks already end in a norm; a second one would only rescale.
        self.norm = build_norm(config) if config.norm_position == "pre" else nn.Identity()
        self.gradient_checkpointing = False
        self.post_init()

    def _decoding_cache(
        self, cache: Cache | None, use_cache: bool | None, encoder_hidden_states: torch.Tensor | None
    ) -> Cache | None:
        """The cache to decode with, or None: an encoder ignores `use_cache`, as BERT, and refuses a cache."""
        if not self.config.is_decoder:
            use_cache = False
        elif use_cache is None:
            use_cache = self.config.use_cache and not self.training
        if cache is None and not use_cache:
            return None
        if not self.config.is_decoder:
            raise ValueError(
                "A cache of past keys and values needs a causal model (is_decoder=True): in an encoder every "
                "token sees the later ones, so earlier keys change as text is added."
            )
        return decoding_cache(cache, cross_attention=encoder_hidden_states is not None, config=self.config)

    def _check_inputs(
        self, inputs_embeds: torch.Tensor, attention_mask: Any, past_length: int, encoder_hidden_states: Any
    ) -> None:
        batch, length = inputs_embeds.shape[:2]
        # `create_masks_for_generate` hands a static cache's steps their masks (a dict), built before the forward.
        if isinstance(attention_mask, torch.Tensor) and not is_tracing(attention_mask):
            if attention_mask.shape != (batch, past_length + length):
                raise ValueError(
                    f"attention_mask has shape {tuple(attention_mask.shape)} but the input is {(batch, length)} "
                    f"after {int(past_length)} cached tokens; pass the tokenizer's attention_mask for the same "
                    "batch (with a cache: for the cached and the new tokens)."
                )
        if encoder_hidden_states is not None and not self.config.add_cross_attention:
            raise ValueError(
                "encoder_hidden_states were given but this model has no cross-attention; build it with "
                "add_cross_attention=True."
            )

    def _key_position_ids(self, position_ids: torch.Tensor, key_position_ids: torch.Tensor | None, past_length: int,
                          static: bool) -> torch.Tensor | None:
        """The keys' ids for a bias of id distances: the caller's, else the queries' own without a cache; None (the
        slots' distances) after a cache, where a rule whose ids are not the sequential ones must be given them. A
        static cache takes no bias (refused below) and its length is a tensor: no branch on it while compiling."""
        if static:
            return None
        if key_position_ids is not None:
            if key_position_ids.shape[-1] != past_length + position_ids.shape[-1]:
                raise ValueError(
                    f"key_position_ids covers {key_position_ids.shape[-1]} keys, but there are {past_length} cached "
                    f"and {position_ids.shape[-1]} new tokens: pass the ids of all of them, cached first."
                )
            return key_position_ids
        if not past_length:
            return position_ids
        if not self.config.position_id_rule_class.sequential_in_evaluation and self.positions.reads_distances:
            raise ValueError(
                f"position_embedding_type={self.config.position_embedding_type!r} reads the distances of the ids "
                f"position_id_rule={self.config.position_id_rule!r} gives, and after a cache it cannot know the "
                "cached keys' ids: pass key_position_ids (all tokens' ids, cached first), as generate() does."
            )
        return None

    def _band_blocks(
        self, attention_mask: torch.Tensor | None, batch: int, length: int, past_length: int, output_attentions: bool,
        device: torch.device,
    ) -> BandBlocks | None:
        """The blocks of sliding layers' band (`local_attention_forward`), or None for a dense mask: after cached
        keys, below twice the keys a block sees, when the weights are asked for (returned whole) and for a scheme
        that reads the scores (`reads_scores`)."""
        window = self.config.sliding_window
        if window is None or past_length or output_attentions or self.positions.reads_scores:
            return None
        if self.config.position_id_rule_class.renumbers and self.positions.reads_distances:
            return None  # the band's bias measures slots
        block = max(window, LOCAL_MIN_BLOCK)
        if length < 2 * (block + 2 * window):
            return None
        return band_blocks(
            key_padding_mask(attention_mask), batch, length, causal=self.config.is_decoder, sliding_window=window,
            block=block, device=device,
        )

    def attention_masks(
        self, attention_mask: torch.Tensor | None, query_length: int, cache: Cache | None, device: torch.device,
        by_blocks: bool = False,
    ) -> tuple[dict[str, torch.Tensor | None], bool]:
        """The self-attention mask of each layer type (none for sliding layers `by_blocks`), and whether nothing is
        padding. A static cache's keys are all its slots: the queries sit at its length (a tensor, so one compiled
        graph serves every step) and the causal mask hides the unwritten slots after them."""
        past_length = cache.get_seq_length() if cache is not None else 0
        query_start, key_length = None, past_length + query_length
        if cache is not None and cache.is_compileable:
            query_start, key_length = past_length, cache.get_mask_sizes(query_length, 0)[0]
            if attention_mask is not None:  # it covers the written slots only
                attention_mask = nn.functional.pad(attention_mask, (0, key_length - attention_mask.shape[-1]), value=1)
        padding = key_padding_mask(attention_mask)
        masks = {
            kind: None if by_blocks and kind == "sliding_attention" else self_attention_mask(
                padding,
                query_length,
                causal=self.config.is_decoder,
                sliding_window=self.config.sliding_window if kind == "sliding_attention" else None,
                device=device,
                key_length=key_length,
                query_start=query_start,
            )
            for kind in set(self.config.layer_types)
        }
        return masks, padding is None

    @deprecate_kwarg("past_key_values", "5.40.0", new_name="cache")  # the 4.x name, as Llama takes it
    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,  # BERT-style collators': no segment embeddings
        cache: Cache | None = None,
        use_cache: bool | None = None,
        key_position_ids: torch.LongTensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        """`key_position_ids` (batch, cached + new tokens): the ids of every key, which a scheme that reads their
        distances (`reads_distances`) needs after a cache under a rule that renumbers (`generate()` passes them);
        without a cache the keys are the queries, at `position_ids`."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of input_ids or inputs_embeds.")
        if input_ids is not None:
            _check_input_ids(input_ids, self.config.vocab_size)
            inputs_embeds = self.embed_tokens(input_ids)
        cache = self._decoding_cache(cache, use_cache, encoder_hidden_states)
        past_length = cache.get_seq_length() if cache is not None else 0
        self._check_inputs(inputs_embeds, attention_mask, past_length, encoder_hidden_states)
        if position_ids is None:
            position_ids = self.position_id_rule.position_ids(
                input_ids, inputs_embeds.shape[:2], past_length, self.training, inputs_embeds.device
            )
        elif self.training:
            position_ids = self.position_id_rule.training_ids(position_ids)

        if self.embedding_scale != 1.0:
            inputs_embeds = inputs_embeds * self.embedding_scale
        hidden_states = self.dropout(self.positions.embed(inputs_embeds, position_ids))
        batch = self.attention_batch(
            hidden_states, attention_mask, position_ids, cache, encoder_hidden_states, encoder_attention_mask,
            # Attention weights exist only where attention runs eagerly: asking for them selects the eager math.
            output_attentions=kwargs.get("output_attentions", self.config.output_attentions),
            output_hidden_states=kwargs.get("output_hidden_states", self.config.output_hidden_states),
            key_position_ids=key_position_ids,
        )
        if batch.real is not None:
            hidden_states = batch.real.take(hidden_states)
        for layer in self.layers:
            hidden_states = layer(
                hidden_states, batch.biases[layer.attention_type], batch, encoder_hidden_states, cache=cache
            )
        hidden_states = self.norm(hidden_states)
        if batch.real is not None:
            hidden_states = batch.real.pad(hidden_states)
        return BaseModelOutputWithPastAndCrossAttentions(last_hidden_state=hidden_states, cache=cache)

    def attention_batch(
        self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | dict[str, torch.Tensor | None] | None,
        position_ids: torch.Tensor, cache: Cache | None, encoder_hidden_states: torch.Tensor | None,
        encoder_attention_mask: torch.Tensor | None, output_attentions: bool, output_hidden_states: bool,
        key_position_ids: torch.Tensor | None = None,
    ) -> BatchAttention:
        """What every layer's attention needs for this batch, built once (`BatchAttention`)."""
        batch, length = hidden_states.shape[:2]
        past_length = cache.get_seq_length() if cache is not None else 0
        static = cache is not None and cache.is_compileable
        key_position_ids = self._key_position_ids(position_ids, key_position_ids, past_length, static)
        masks_given = isinstance(attention_mask, dict)  # `create_masks_for_generate`'s, for a static cache
        if masks_given:
            masks, unpadded, band = attention_mask, False, None
        else:
            band = None if static else self._band_blocks(
                attention_mask, batch, length, past_length, output_attentions, hidden_states.device
            )
            masks, unpadded = self.attention_masks(
                attention_mask, length, cache, hidden_states.device, by_blocks=band is not None
            )
        key_length = cache.get_mask_sizes(length, 0)[0] if static else past_length + length
        # The bias over every query and key only where a layer reads it: sliding layers by blocks take the band's.
        dense_bias = band is None or "full_attention" in self.config.layer_types
        positions = self.positions.attention_positions(position_ids, key_length, dense_bias, key_position_ids)
        if static and positions.bias is not None:
            raise ValueError(
                f"position_embedding_type={self.config.position_embedding_type!r} adds a bias over the keys, which "
                "a static cache's unwritten slots would shift; decode with a dynamic cache (drop "
                "cache_implementation)."
            )
        biases = dict.fromkeys(masks, positions.bias)
        if band is not None:
            biases["sliding_attention"] = self.positions.band_bias(position_ids, band)
        # Every step but attention on the real tokens alone (`unpad_inputs`): not with a cache or cross-attention,
        # nor when each layer's hidden states or weights are returned (every slot's).
        unpad = self.config.unpad_inputs and cache is None and encoder_hidden_states is None and not masks_given
        unpad = unpad and not output_attentions and not output_hidden_states
        real = real_tokens(attention_mask) if unpad else None
        # A decoder's full-attention mask is the causal one alone when nothing is padding and the queries are all the
        # keys (or one query, which sees every key): SDPA can then take it as `is_causal`.
        causal_only = self.config.is_decoder and not static and (past_length == 0 or length == 1) and unpadded
        self_attention = {
            kind: AttentionInputs(
                mask=mask, rotary=positions.rotary.get(kind), empty_query_rows=empty_rows(mask),
                band=band if kind == "sliding_attention" else None,
                causal_only=causal_only and kind == "full_attention", real=real, output_attentions=output_attentions,
                scored_positions=self.positions if self.positions.reads_scores else None,
            )
            for kind, mask in masks.items()
        }
        cross_mask = key_padding_mask(encoder_attention_mask) if encoder_hidden_states is not None else None
        cross_attention = AttentionInputs(mask=cross_mask, output_attentions=output_attentions)
        return BatchAttention(self_attention, biases, cross_attention, real)


def pool(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None, mode: str) -> torch.Tensor:
    """(B, T, D) -> (B, D): the first token (`cls`), or the mean / max over real tokens; zeros for no tokens."""
    if hidden_states.shape[1] == 0:
        return hidden_states.new_zeros(hidden_states.shape[0], hidden_states.shape[2])
    if mode == "cls":
        return hidden_states[:, 0]
    if attention_mask is None:
        return hidden_states.mean(dim=1) if mode == "mean" else hidden_states.amax(dim=1)
    keep = attention_mask[..., None].to(hidden_states.dtype)
    if mode == "mean":
        return (hidden_states * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1.0)
    pooled = hidden_states.masked_fill(keep == 0, torch.finfo(hidden_states.dtype).min).amax(dim=1)
    return pooled.masked_fill(keep.sum(dim=1) == 0, 0.0)  # a row of padding alone: zeros, as for `mean`


class HfAttnHead(HfAttnPreTrainedModel):
    """What every head shares: the encoder (`model`), its call and the output carrying its hidden states and
    attentions. A head builds its layers after `super().__init__` and ends with `self.post_init()`."""

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.model = HfAttnModel(config)

    def encode(
        self, input_ids: torch.Tensor | None, attention_mask: torch.Tensor | None, position_ids: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None = None, **kwargs: Any,
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        return self.model(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, inputs_embeds=inputs_embeds,
            return_dict=True, **kwargs,
        )

    @staticmethod
    def output(output_class: type[ModelOutput], encoded: ModelOutput, **fields: Any) -> ModelOutput:
        return output_class(**fields, hidden_states=encoded.hidden_states, attentions=encoded.attentions)


class HfAttnClassifierHead(HfAttnHead):
    """Dropout (`classifier_dropout`, else the hidden dropout, as BERT's) and a linear `classifier`."""

    def __init__(self, config: HfAttnConfig, num_outputs: int) -> None:
        super().__init__(config)
        probability = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout
        self.dropout = nn.Dropout(probability)
        self.classifier = nn.Linear(config.hidden_size, num_outputs)

    def classify(self, states: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(states))


class HfAttnForSequenceClassification(HfAttnClassifierHead):
    """Encoder + pooling (`classifier_pooling`) + dropout + linear layer, reading as the config's policy says
    (reading.py; read as windows, hidden states and attentions are the windows'). The loss is transformers'."""

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config, config.num_labels)
        self.num_labels = config.num_labels
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> SequenceClassifierOutput:
        reading = read_inputs(
            self.config, self.model.positions.extrapolates, input_ids, inputs_embeds, attention_mask, position_ids
        )
        outputs = self.encode(
            reading.input_ids, reading.attention_mask, reading.position_ids, reading.inputs_embeds, **kwargs
        )
        pooled = reading.pool(pool(outputs.last_hidden_state, reading.attention_mask, self.config.classifier_pooling))
        logits = self.classify(pooled)
        loss = None if labels is None else self.loss_function(labels=labels, pooled_logits=logits, config=self.config)
        return self.output(SequenceClassifierOutput, outputs, loss=loss, logits=logits)


class HfAttnForMaskedLM(HfAttnHead):
    """Encoder + dense, activation, norm + the vocabulary projection, tied to the input embedding. With
    `sparse_prediction` and labels, the logits are the labelled positions' alone, (labelled tokens, vocab)."""

    _tied_weights_keys = {"decoder.weight": "model.embed_tokens.weight"}

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = ACT2FN["gelu"]
        self.head_norm = build_norm(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        self.post_init()

    def get_output_embeddings(self) -> nn.Linear:
        return self.decoder

    def set_output_embeddings(self, new_embeddings: nn.Linear) -> None:
        self.decoder = new_embeddings

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        labels: torch.LongTensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> MaskedLMOutput:
        outputs = self.encode(input_ids, attention_mask, position_ids, inputs_embeds, **kwargs)
        hidden_states = outputs.last_hidden_state
        if labels is not None and self.config.sparse_prediction:
            predicted = labels.reshape(-1) != -100
            hidden_states = hidden_states.reshape(-1, hidden_states.size(-1))[predicted]
            labels = labels.reshape(-1)[predicted]
        logits = self.decoder(self.head_norm(self.act(self.dense(hidden_states))))
        loss = self.loss_function(logits, labels, vocab_size=self.config.vocab_size) if labels is not None else None
        return self.output(MaskedLMOutput, outputs, loss=loss, logits=logits)


class HfAttnForCausalLM(HfAttnHead, GenerationMixin):
    """Decoder (`is_decoder=True`) + vocabulary projection tied to the input embedding: next-token prediction and
    `generate()`; with `add_cross_attention`, an `EncoderDecoderModel`'s decoder. The loss shifts `labels` by one."""

    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}
    accepts_loss_kwargs = True

    def __init__(self, config: HfAttnConfig) -> None:
        if not config.is_decoder:
            raise ValueError(
                "HfAttnForCausalLM predicts each next token, so its tokens must not see later ones: build (or "
                "load) it with is_decoder=True."
            )
        super().__init__(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def generate(self, inputs: torch.Tensor | None = None, *args: Any, **kwargs: Any) -> Any:
        """`GenerationMixin.generate`, with clear errors for an empty prompt (an IndexError in transformers) and for
        a rule whose ids come from the task without them (transformers would decode at sequential ids)."""
        prompt = inputs if inputs is not None else kwargs.get("input_ids")
        if prompt is not None and prompt.shape[-1] == 0:
            raise ValueError(
                "generate() got an empty prompt; pass at least one token, or no inputs and a bos_token_id to "
                "start from."
            )
        if self.config.position_id_rule_class.from_task and kwargs.get("position_ids") is None:
            raise ValueError(
                f"position_id_rule={self.config.position_id_rule!r} takes its ids from the task, and generate() got "
                "no position_ids: pass the prompt's ids followed by the planned ids of the answer's positions (e.g. "
                "hf_attn.tasks.length.coupled_position_ids(task, input), as score-pairs does)."
            )
        return super().generate(inputs, *args, **kwargs)

    def prepare_inputs_for_generation(
        self, input_ids: torch.LongTensor, *args: Any, position_ids: torch.Tensor | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """transformers' step inputs, with the ids of the whole sequence `input_ids` as the config's
        `position_id_rule` gives them (the step keeps the last ones): a cached step gets a full pass's ids."""
        position_ids = self.model.position_id_rule.generation_ids(input_ids, position_ids)
        inputs = super().prepare_inputs_for_generation(input_ids, *args, position_ids=position_ids, **kwargs)
        if position_ids is not None and self.config.position_id_rule_class.renumbers:
            inputs["key_position_ids"] = position_ids  # every token's: a bias of id distances reads the cached keys'
        return inputs

    def create_masks_for_generate(
        self, config: HfAttnConfig, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor | None,
        cache: Cache | None, **kwargs: Any,
    ) -> dict[str, torch.Tensor | None] | torch.Tensor | None:
        """A static cache's masks of each step, built before the forward so a compiled one sees a single shape."""
        if cache is None or not cache.is_compileable:
            return attention_mask
        return self.model.attention_masks(attention_mask, inputs_embeds.shape[1], cache, inputs_embeds.device)[0]

    @deprecate_kwarg("past_key_values", "5.40.0", new_name="cache")  # the 4.x name, as Llama takes it
    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        cache: Cache | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        **kwargs: Unpack[TransformersKwargs],
    ) -> CausalLMOutputWithCrossAttentions:
        """`logits_to_keep`: the last that many positions' logits (0: all); `kwargs` go to the model and the loss."""
        outputs = self.encode(
            input_ids, attention_mask, position_ids, inputs_embeds, encoder_hidden_states=encoder_hidden_states,
            encoder_attention_mask=encoder_attention_mask, cache=cache, use_cache=use_cache, **kwargs,
        )
        logits = self.lm_head(slice_logits_to_keep(outputs.last_hidden_state, logits_to_keep))
        loss = None
        if labels is not None:
            loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs)
        return self.output(
            CausalLMOutputWithCrossAttentions, outputs, loss=loss, logits=logits, cache=outputs.cache,
            cross_attentions=outputs.cross_attentions,
        )


@dataclass
class ReplacedTokenDetectionOutput(ModelOutput):
    """`logits`: (batch, seq), positive for "replaced". With labels, `loss` = `generator_loss` + rtd_loss_weight x
    `discriminator_loss`, and `replaced` flags the positions whose sample differs from the original token."""

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    generator_loss: torch.FloatTensor | None = None
    discriminator_loss: torch.FloatTensor | None = None
    replaced: torch.BoolTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    attentions: tuple[torch.FloatTensor, ...] | None = None


class HfAttnForReplacedTokenDetection(HfAttnHead):
    """ELECTRA pretraining (Clark et al., 2020): a small masked-LM generator (`rtd_generator_layers` deep, its own
    token table) samples tokens for the masked positions, and the encoder learns to tell at every real position
    whether the token is the original: a signal at every position, not at the 15% masked. `labels` hold the original
    ids at masked positions (-100 elsewhere); a sample equal to the original counts as original, as in ELECTRA."""

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = ACT2FN["gelu"]
        self.detector = nn.Linear(config.hidden_size, 1)
        generator = copy.deepcopy(config)
        generator.num_hidden_layers = config.rtd_generator_layers
        generator.layer_types = config.layer_types[: config.rtd_generator_layers]
        if config.no_rope_layers is not None:
            generator.no_rope_layers = config.no_rope_layers[: config.rtd_generator_layers]
        generator.sparse_prediction = True
        self.generator = HfAttnForMaskedLM(generator)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        labels: torch.LongTensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> ReplacedTokenDetectionOutput:
        generator_loss = replaced = None
        if labels is not None:
            masked = labels != -100
            generated = self.generator(
                input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, labels=labels
            )
            generator_loss = generated.loss
            with torch.no_grad():  # logits: (masked positions, vocab), in the order of `masked`
                proposals = generated.logits.float()
                if self.config.pad_token_id is not None:  # [PAD] stands for [MASK]: never a replacement
                    proposals[:, self.config.pad_token_id] = -torch.inf
                samples = torch.multinomial(proposals.softmax(dim=-1), num_samples=1).squeeze(-1)
            input_ids = input_ids.masked_scatter(masked, samples)
            replaced = masked & (input_ids != labels)
        outputs = self.encode(input_ids, attention_mask, position_ids, **kwargs)
        logits = self.detector(self.act(self.dense(outputs.last_hidden_state))).squeeze(-1)
        loss = discriminator_loss = None
        if labels is not None:
            real = attention_mask.bool() if attention_mask is not None else torch.ones_like(replaced)
            discriminator_loss = nn.functional.binary_cross_entropy_with_logits(logits[real], replaced[real].float())
            loss = generator_loss + self.config.rtd_loss_weight * discriminator_loss
        return self.output(
            ReplacedTokenDetectionOutput, outputs, loss=loss, logits=logits, generator_loss=generator_loss,
            discriminator_loss=discriminator_loss, replaced=replaced,
        )


class HfAttnForTokenClassification(HfAttnClassifierHead):
    """Encoder + dropout + a linear layer at every token (tagging, NER), reading its input in one pass."""

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config, config.num_labels)
        self.num_labels = config.num_labels
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> TokenClassifierOutput:
        outputs = self.encode(input_ids, attention_mask, position_ids, inputs_embeds, **kwargs)
        logits = self.classify(outputs.last_hidden_state)
        loss = self.loss_function(logits, labels, self.config) if labels is not None else None
        return self.output(TokenClassifierOutput, outputs, loss=loss, logits=logits)


class HfAttnForMultipleChoice(HfAttnClassifierHead):
    """Encoder + pooling + dropout + a linear layer to one score per choice, as BERT's: inputs (batch, choices,
    seq), each choice encoded on its own in one pass, logits (batch, choices)."""

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config, 1)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> MultipleChoiceModelOutput:
        choices = (input_ids if input_ids is not None else inputs_embeds).shape[1]
        input_ids, attention_mask, position_ids, inputs_embeds = (  # (batch, choices, ...) -> (batch * choices, ...)
            None if tensor is None else tensor.flatten(0, 1)
            for tensor in (input_ids, attention_mask, position_ids, inputs_embeds)
        )
        outputs = self.encode(input_ids, attention_mask, position_ids, inputs_embeds, **kwargs)
        pooled = pool(outputs.last_hidden_state, attention_mask, self.config.classifier_pooling)
        logits = self.classify(pooled).view(-1, choices)
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return self.output(MultipleChoiceModelOutput, outputs, loss=loss, logits=logits)


# `EncoderDecoderConfig` builds its halves by model type, a registry that `trust_remote_code` does not fill.
if HfAttnConfig.model_type not in CONFIG_MAPPING:
    AutoConfig.register(HfAttnConfig.model_type, HfAttnConfig)

# Each model's Auto class: a saved folder's `auto_map` lists them all, so that it loads as any head.
AUTO_CLASSES: dict[str, type[HfAttnPreTrainedModel]] = {
    "AutoModel": HfAttnModel,
    "AutoModelForSequenceClassification": HfAttnForSequenceClassification,
    "AutoModelForTokenClassification": HfAttnForTokenClassification,
    "AutoModelForMultipleChoice": HfAttnForMultipleChoice,
    "AutoModelForMaskedLM": HfAttnForMaskedLM,
    "AutoModelForPreTraining": HfAttnForReplacedTokenDetection,
    "AutoModelForCausalLM": HfAttnForCausalLM,
}

__all__ = [
    "AUTO_CLASSES",
    "HfAttnForCausalLM",
    "HfAttnForMaskedLM",
    "HfAttnForMultipleChoice",
    "HfAttnForReplacedTokenDetection",
    "HfAttnForSequenceClassification",
    "HfAttnForTokenClassification",
    "HfAttnModel",
    "HfAttnPreTrainedModel",
]
