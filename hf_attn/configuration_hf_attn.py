"""Configuration of hf_attn encoder classifiers.

The config is the single source of truth: `config.json` alone rebuilds the model, including the
position scheme, which is one field (`position_embedding_type`) looked up in the registry of
`positions.py`. Every invalid value is rejected here, at construction, with a `ValueError` that names
the field, the value and what is allowed, so that a bad YAML file or a typo in a notebook never
surfaces later as a shape error deep inside torch.
"""

import math
from collections.abc import Callable
from dataclasses import fields as dataclass_fields
from typing import Any, Literal, get_args, get_origin

from huggingface_hub.dataclasses import type_validator, validated_field
from transformers import PreTrainedConfig

from .positions import POSITION_SCHEMES, ROPE_TYPES, PositionScheme
from .scoring import ATTENTION_SCORINGS

LayerType = Literal["full_attention", "sliding_attention"]
LAST_ID = -1
"""`pad_token_id`'s default, replaced at construction by `vocab_size - 1`: the id Week 3 gives `[PAD]`."""
DEFAULT_ROPE_PARAMETERS = {"rope_type": "default", "rope_theta": 10_000.0}
"""`rope_parameters` when none are given: every config carries them (transformers fills them in), any scheme."""


def is_count(value: Any) -> bool:
    """Whether `value` is a whole number >= 1 (a bool is not a number here, though Python says it is)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _invalid(field: str, value: Any, allowed: str) -> ValueError:
    return ValueError(f"HfAttnConfig: invalid `{field}`={value!r}; {allowed}.")


# Fields whose type hint alone does not say what is allowed carry a validator (huggingface_hub's
# `validated_field`, as transformers' configs declare `interval(...)`); each raises `ValueError("what is allowed")`.
def _checked(default: Any, accepts: Callable[[Any], bool], allowed: str, none_means: str | None = None) -> Any:
    def check(value: Any) -> None:
        if not (accepts(value) or (none_means is not None and value is None)):
            raise ValueError(allowed if none_means is None else f"{allowed}, or None ({none_means})")

    return validated_field(check, default=default)


def count(default: int | None, none_means: str | None = None) -> Any:
    return _checked(default, is_count, "must be a positive integer", none_means)


def probability(default: float | None, none_means: str | None = None) -> Any:
    return _checked(default, lambda value: is_number(value) and 0.0 <= value < 1.0,
                    "must be a probability in [0, 1)", none_means)


def positive_number(default: float) -> Any:
    return _checked(default, lambda value: is_number(value) and value > 0, "must be a positive number")


def one_of(default: str, choices: dict[str, Any]) -> Any:
    """A choice among the keys of a registry, read when checked (a scheme registered later is allowed too)."""

    def check(value: Any) -> None:
        if value not in choices:
            raise ValueError(f"allowed: {', '.join(choices)}")

    return validated_field(check, default=default)


def _allowed_by_hint(hint: Any) -> str:
    """What a type hint allows, in words: the choices of its `Literal`s, or the type itself."""
    choices = _literal_choices(hint)
    return f"allowed: {', '.join(map(str, choices))}" if choices else f"must be {getattr(hint, '__name__', hint)}"


def _literal_choices(hint: Any) -> list[Any]:
    if get_origin(hint) is Literal:
        return list(get_args(hint))
    return [choice for argument in get_args(hint) for choice in _literal_choices(argument)]


def _schemes(has: Callable[[type[PositionScheme]], bool]) -> str:
    """The names of the registered schemes whose class `has` the capability asked, for an error message."""
    return ", ".join(name for name, scheme in POSITION_SCHEMES.items() if has(scheme))


class HfAttnConfig(PreTrainedConfig):
    r"""Configuration of an hf_attn encoder (or decoder-style) Transformer classifier.

    Defaults describe a small classifier: 4 pre-norm layers, 4 heads, hidden size 384, FFN 1536, GELU,
    dropout 0.1, 128 tokens, a 501-token vocabulary with `[PAD]` = 500.

    Args:
        vocab_size: rows of the token embedding; take it from the tokenizer (`len(tokenizer)`).
        hidden_size: model width d.
        num_hidden_layers: number of Transformer blocks.
        num_attention_heads: query heads; `hidden_size` must divide evenly.
        num_key_value_heads: key/value heads for grouped-query attention (1 = multi-query); `None`
            means as many as query heads (plain multi-head attention).
        intermediate_size: FFN width (for gated activations, the width of each of the two branches).
        hidden_act: `gelu`, `relu`, `silu`, or the gated `swiglu` / `geglu`.
        norm_type: `layernorm` or `rmsnorm`.
        norm_eps: epsilon of every norm.
        norm_position: `pre` (x + f(norm(x)): stable without warm-up tricks) or `post`
            (norm(x + f(x)): the original Transformer / BERT).
        position_embedding_type: a key of `hf_attn.positions.POSITION_SCHEMES`: `none`, `sinusoidal`,
            `learned`, `rope`, `alibi`, `t5` (T5's bucketed relative bias), `fire` (FIRE's learned function of
            the normalised log distance).
        max_position_embeddings: the training length; `learned` cannot go beyond it, RoPE scaling
            uses it as the original context length, other schemes extrapolate past it.
        rope_parameters: transformers' RoPE dict (`rope_type` in default/linear/dynamic/yarn,
            `rope_theta`, `factor`, ...). Filled with `{"rope_type": "default", "rope_theta": 10000.0}`
            when nothing is given, whatever the scheme (as transformers fills them); a scheme without RoPE
            refuses any other value, which would change nothing.
        rope_layout: which channels of a head RoPE rotates together: `halves` (i and i + d/2, Llama's
            `rotate_half`) or `interleaved` (2i and 2i + 1, the RoPE paper's and RoFormer's layout).
            A `config.json` saved before this field existed was trained with `halves`, the default.
        relative_attention_num_buckets: `t5` only: buckets of the key-query offset, each with a learned bias
            per head (T5's 32); an encoder gives half to keys after the query.
        relative_attention_max_distance: `t5` only: the offset from which all share the last bucket (T5's 128).
            Another scheme refuses either field but at its default: it would change nothing.
        sliding_window: if set, layers of type `sliding_attention` let a token attend only to keys at
            most this many positions away (on each side; only backwards when causal).
        layer_types: per-layer `full_attention` / `sliding_attention`; defaults to all sliding when
            `sliding_window` is set (list some as `full_attention` to keep them global).
        attention_scoring: how a query and a key make a score (docs/attention-notes.md): `dot`, q . k (Vaswani et
            al.); `general`, Luong et al.'s bilinear q^T W k with a learned W per head (head_dim x head_dim,
            starting at the identity), computed as (q W) . k, so SDPA still applies; `additive`, Bahdanau et al.'s
            v^T tanh(W1 q + W2 k) per head, which builds a (batch, heads, query, key, head_dim) tensor and runs
            eagerly only (an `sdpa` model computes it eagerly, with a one-time warning). RoPE needs the dot
            product of rotated queries and keys, so it refuses `additive`; a bias (alibi, t5, fire) adds to any.
        scale_attn_weights: `dot` and `general`: divide the scores by sqrt(head_dim), which keeps their variance
            at about 1 whatever the head width; `False` is the unscaled product, a teaching option whose softmax
            saturates as head_dim grows. `additive` scores are not a product of two head_dim vectors and are
            never scaled, so it must stay `True` there.
        attention_dropout: dropout on attention weights.
        hidden_dropout: dropout on embeddings and on every residual branch.
        classifier_dropout: dropout before the classification layer; `None` means `hidden_dropout`.
        classifier_pooling: `mean` over real tokens (the default: it needs no CLS token), `max` over real
            tokens, or `cls` (the first token).
        read_length: sequence classification only: how many tokens of each text the classifier reads, the
            first `read_length` (the model cuts a longer input, so `pipeline(...)` with its defaults, a
            tokenizer called without truncation and hf-attn's commands all read the same tokens); `None`
            reads every token. Past `max_position_embeddings` the model reads directly (schemes that
            extrapolate) or as windows (`window_stride`; the only way for `learned`).
        window_stride: sequence classification only: `None` (the default) reads the input directly, in
            one pass. A number: an input longer than `max_position_embeddings` is read as windows of that
            many tokens starting every `window_stride` tokens (at most `max_position_embeddings`, so no
            token is skipped), each encoded on its own with positions from 0 as in training, and the
            classifier reads the average of their pooled vectors weighted by their real tokens: linear cost
            in the length, and every scheme, learned positions included, reads a text of any length.
        max_direct_length: sequence classification only: the longest input read directly in one pass when
            `window_stride` is `None` (default 8192 tokens). Attention costs time quadratic in the length, so a
            longer input (a whole book through `pipeline(...)`) is read as windows of `max_position_embeddings`
            tokens, one after another (the stride `max_position_embeddings`), with a warning: linear cost.
            `None` reads every input directly, however long. Learned positions, which read directly at most
            `max_position_embeddings` tokens, refuse any longer input without `window_stride`, past this limit too.
        scale_embeddings: multiply token embeddings by sqrt(hidden_size) (Vaswani et al.), which keeps
            them from being drowned by sinusoidal positions of magnitude 1.
        attention_bias: biases on the Q/K/V/O projections.
        initializer_range: std of the normal init.
        is_decoder: causal self-attention (each token sees only itself and earlier tokens).
        add_cross_attention: a cross-attention sublayer in each block, attending over
            `encoder_hidden_states` (no positions are applied in that step).
        pad_token_id: id of `[PAD]`; its embedding row is kept at zero and gets no gradient. Defaults to the
            last id, `vocab_size - 1`, where every Week 3 vocabulary puts it; `None` for no padding token.
        bos_token_id, eos_token_id: ids that start and end a generated text (`generate()` reads them);
            Week 3 vocabularies have neither, so both default to `None`.
        use_cache: decoders only: whether an evaluation forward (and `generate()`) keeps the keys and values
            of past tokens by default. A training forward never does (every position is scored at once and
            the cache would only cost memory), and an encoder ignores it, as BERT does.
        rtd_generator_layers: replaced-token detection (ELECTRA) pretraining only: layers of the masked-LM
            generator that proposes the replacements (same width as the encoder; ELECTRA's best
            generators are 1/4 to 1/2 the size of the model they train).
        rtd_loss_weight: replaced-token detection only: weight of the encoder's per-token loss against
            the generator's masked-LM loss (ELECTRA's 50).
        sparse_prediction: masked-LM only: when labels are given, run the vocabulary projection on the
            labelled (masked) positions alone and return their logits as (masked tokens, vocab), as
            ModernBERT does; with 15% masking that skips ~85% of the largest matmul of pretraining.
        unpad_inputs: with padding in a batch (and no cache or cross-attention, no hidden states or attention
            weights asked for, no graph being captured by `torch.compile` or export), run every step but attention
            on the real tokens only, as ModernBERT unpads: the projections and the feed-forward then cost the
            batch's real tokens, not batch x longest. The padding's hidden states are then zero; `False` (and the
            cases above) computes them like any token's. The real tokens' states are the same either way, up to
            rounding.

    Example:
        ```python
        >>> from hf_attn import HfAttnConfig, HfAttnForSequenceClassification
        >>> config = HfAttnConfig(position_embedding_type="alibi", num_key_value_heads=2)
        >>> model = HfAttnForSequenceClassification(config)
        ```
    """

    model_type = "hf_attn"

    vocab_size: int = count(501)
    hidden_size: int = count(384)
    num_hidden_layers: int = count(4)
    num_attention_heads: int = count(4)
    num_key_value_heads: int | None = count(None, "as many as num_attention_heads")
    intermediate_size: int = count(1536)
    hidden_act: Literal["gelu", "relu", "silu", "swiglu", "geglu"] = "gelu"
    norm_type: Literal["layernorm", "rmsnorm"] = "layernorm"
    norm_eps: float = positive_number(1e-5)
    norm_position: Literal["pre", "post"] = "pre"
    position_embedding_type: str = one_of("rope", POSITION_SCHEMES)
    max_position_embeddings: int = count(128)
    rope_parameters: dict | None = None
    rope_layout: Literal["halves", "interleaved"] = "halves"
    relative_attention_num_buckets: int = count(32)
    relative_attention_max_distance: int = count(128)
    sliding_window: int | None = count(None, "no window")
    layer_types: list[LayerType] | None = None
    attention_scoring: str = one_of("dot", ATTENTION_SCORINGS)
    scale_attn_weights: bool = True
    attention_dropout: float = probability(0.1)
    hidden_dropout: float = probability(0.1)
    classifier_dropout: float | None = probability(None, "hidden_dropout")
    classifier_pooling: Literal["cls", "mean", "max"] = "mean"
    read_length: int | None = count(None, "every token")
    window_stride: int | None = count(None, "read directly, in one pass")
    max_direct_length: int | None = count(8192, "read any length in one pass")
    scale_embeddings: bool = False
    attention_bias: bool = True
    initializer_range: float = positive_number(0.02)
    is_decoder: bool = False
    add_cross_attention: bool = False
    pad_token_id: int | None = LAST_ID
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    use_cache: bool = True
    tie_word_embeddings: bool = True
    sparse_prediction: bool = False
    rtd_generator_layers: int = count(1)
    rtd_loss_weight: float = positive_number(50.0)
    unpad_inputs: bool = True

    def __post_init__(self, **kwargs: Any) -> None:
        # Configs saved by hf_attn 1.0 name a dropout implementation; dropout is torch's now, and inactive at
        # inference, so such a checkpoint computes the same logits.
        kwargs.pop("dropout_implementation", None)
        # hf_attn 1.0 named the window stride `classifier_window_stride`.
        if "classifier_window_stride" in kwargs:
            self.window_stride = kwargs.pop("classifier_window_stride")
        if self.pad_token_id == LAST_ID and isinstance(self.vocab_size, int):
            self.pad_token_id = self.vocab_size - 1
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        if self.layer_types is None:
            kind = "full_attention" if self.sliding_window is None else "sliding_attention"
            self.layer_types = [kind] * self.num_hidden_layers if isinstance(self.num_hidden_layers, int) else []
        takes_rope_parameters = POSITION_SCHEMES.get(self.position_embedding_type, PositionScheme).takes_rope_parameters
        if takes_rope_parameters and not self.rope_parameters and "rope_scaling" not in kwargs:
            self.rope_parameters = {**DEFAULT_ROPE_PARAMETERS, "rope_theta": kwargs.pop("rope_theta", 10_000.0)}
        self.validate_fields()
        super().__post_init__(**kwargs)  # fills `rope_parameters` (from a legacy `rope_theta` / `rope_scaling`)
        self._validate_rope_parameters()

    @property
    def position_scheme(self) -> type[PositionScheme]:
        """The registry's class of `position_embedding_type`: what the scheme can do (`extrapolates`, ...)."""
        return POSITION_SCHEMES[self.position_embedding_type]

    @property
    def head_dim(self) -> int:
        """Width of one attention head (read by transformers' RoPE init functions)."""
        return self.hidden_size // self.num_attention_heads

    @property
    def embedding_scale(self) -> float:
        """What the forward pass multiplies the token table by: sqrt(hidden_size) with `scale_embeddings`, else 1."""
        return math.sqrt(self.hidden_size) if self.scale_embeddings else 1.0

    @property
    def num_key_value_groups(self) -> int:
        """Query heads sharing one key/value head."""
        return self.num_attention_heads // self.num_key_value_heads

    def validate_fields(self) -> None:
        """Raise a `ValueError` naming the first invalid field (run at construction; again after a field is set)."""
        hints = HfAttnConfig.__annotations__  # evaluated: this module does not postpone annotations
        for field in dataclass_fields(HfAttnConfig):
            if field.name not in hints:
                continue  # a field of PreTrainedConfig's: transformers checks it
            value = getattr(self, field.name)
            try:
                # A field's validator says what it accepts (a number where the hint says float takes an int, too);
                # otherwise its type hint does, `Literal` choices included.
                for check in field.metadata.get("validator", []):
                    check(value)
                if "validator" not in field.metadata:
                    type_validator(field.name, value, hints[field.name])
            except ValueError as error:
                raise _invalid(field.name, value, str(error)) from None
            except TypeError:
                raise _invalid(field.name, value, _allowed_by_hint(hints[field.name])) from None
        if self.hidden_size % self.num_attention_heads:
            raise _invalid(
                "num_attention_heads", self.num_attention_heads,
                f"must divide hidden_size={self.hidden_size} (head_dim = hidden_size / num_attention_heads)",
            )
        if self.num_attention_heads % self.num_key_value_heads:
            raise _invalid(
                "num_key_value_heads", self.num_key_value_heads,
                f"must divide num_attention_heads={self.num_attention_heads} (each key/value head serves "
                "a whole group of query heads)",
            )
        if len(self.layer_types) != self.num_hidden_layers:
            raise _invalid(
                "layer_types", self.layer_types,
                f"must list {self.num_hidden_layers} entries (one per layer) from {', '.join(get_args(LayerType))}",
            )
        if "sliding_attention" in self.layer_types and self.sliding_window is None:
            raise _invalid("layer_types", self.layer_types, "`sliding_attention` layers need `sliding_window` set")
        stride = self.window_stride
        if stride is not None and stride > self.max_position_embeddings:
            raise _invalid(
                "window_stride", stride,
                f"must be None or a whole number in [1, max_position_embeddings={self.max_position_embeddings}] "
                "(a longer stride would skip tokens between windows)",
            )
        if not self.position_scheme.extrapolates and stride is None and (
            self.read_length or 0
        ) > self.max_position_embeddings:
            raise _invalid(
                "read_length", self.read_length,
                f"{self.position_embedding_type} positions cover max_position_embeddings="
                f"{self.max_position_embeddings} tokens; read at most that many, or set window_stride to read "
                "longer texts as windows",
            )
        if not ATTENTION_SCORINGS[self.attention_scoring].is_dot_product:
            self._validate_scoring_without_product()
        for field in ("pad_token_id", "bos_token_id", "eos_token_id"):
            value = getattr(self, field)
            ids = value if isinstance(value, list) and field == "eos_token_id" else [value]
            if value is not None and not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < self.vocab_size for i in ids
            ):
                raise _invalid(field, value, f"must be None or an id in [0, {self.vocab_size})")
        self.position_scheme.check_config(self)
        # A field of other schemes alone (T5's buckets) keeps its default: the chosen scheme would not read it.
        for field in dataclass_fields(HfAttnConfig):
            readers = [name for name, scheme in POSITION_SCHEMES.items() if field.name in scheme.own_fields]
            value = getattr(self, field.name)
            if readers and field.name not in self.position_scheme.own_fields and value != field.default:
                raise self._ignored(field.name, value, field.default, ", ".join(readers))

    def _ignored(self, field: str, value: Any, default: Any, users: str) -> ValueError:
        """The error of a field that the scheme does not read, so that its value would change nothing."""
        return _invalid(
            field, value,
            f"position_embedding_type={self.position_embedding_type!r} does not read it, so it would change "
            f"nothing; leave it out (its default is {default!r}), or use a scheme that reads it ({users})",
        )

    def _validate_scoring_without_product(self) -> None:
        """A scoring whose scores are not a dot product (`additive`) is never scaled, and takes no rotation."""
        products = " or ".join(repr(name) for name, scoring in ATTENTION_SCORINGS.items() if scoring.is_dot_product)
        if not self.scale_attn_weights:
            raise _invalid(
                "scale_attn_weights", False,
                f"attention_scoring={self.attention_scoring!r} is never scaled (1/sqrt(head_dim) divides a dot product "
                f"of two head_dim vectors, which {self.attention_scoring} scores are not); leave it True, or use "
                f"{products}",
            )
        if self.position_scheme.rotates_queries_and_keys:
            schemes = _schemes(lambda scheme: not scheme.rotates_queries_and_keys)
            raise _invalid(
                "attention_scoring", self.attention_scoring,
                f"position_embedding_type={self.position_embedding_type!r} rotates queries and keys so that their dot "
                f"product depends on the offset alone, and {self.attention_scoring} scores take no dot product: use "
                f"{products}, or a scheme that does not rotate them ({schemes})",
            )

    def _validate_rope_parameters(self) -> None:
        if not self.position_scheme.takes_rope_parameters:
            if (self.rope_parameters or DEFAULT_ROPE_PARAMETERS) != DEFAULT_ROPE_PARAMETERS:
                raise self._ignored("rope_parameters", self.rope_parameters, DEFAULT_ROPE_PARAMETERS,
                                    _schemes(lambda scheme: scheme.takes_rope_parameters))
            return
        rope_type = self.rope_parameters.get("rope_type", "default")
        if rope_type not in ROPE_TYPES:
            raise _invalid("rope_parameters.rope_type", rope_type, f"allowed: {', '.join(ROPE_TYPES)}")
        if rope_type != "default":
            factor = self.rope_parameters.get("factor")
            if isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor < 1:
                raise _invalid(
                    "rope_parameters.factor", factor,
                    f"rope_type={rope_type!r} needs a context-length scaling factor >= 1 (e.g. 4.0 to reach "
                    f"4 x max_position_embeddings)",
                )
        theta = self.rope_parameters.get("rope_theta")
        if isinstance(theta, bool) or not isinstance(theta, (int, float)) or theta <= 1:
            raise _invalid("rope_parameters.rope_theta", theta, "must be a number > 1 (10000.0 is standard)")


__all__ = ["HfAttnConfig"]
