"""Configuration of hf_attn models: `config.json` alone rebuilds the model. Every invalid value is rejected at
construction with a `ValueError` naming the field, the value and what is allowed, not later as a shape error."""

import math
from collections.abc import Callable
from dataclasses import fields as dataclass_fields
from typing import Any, Literal, get_args, get_origin

from huggingface_hub.dataclasses import type_validator, validated_field
from transformers import PreTrainedConfig

from .position_ids import POSITION_ID_RULES, PositionIdRule
from .positions import POSITION_SCHEMES, ROPE_CONTEXT_SCALINGS, ROPE_TYPES, PositionScheme
from .scoring import ATTENTION_SCORINGS

LayerType = Literal["full_attention", "sliding_attention"]
LAST_ID = -1  # `pad_token_id`'s default, replaced by `vocab_size - 1`: the id Week 3 gives `[PAD]`
DEFAULT_ROPE_PARAMETERS = {"rope_type": "default", "rope_theta": 10_000.0}  # every config carries them, any scheme


def is_count(value: Any) -> bool:
    """Whether `value` is a whole number >= 1 (a bool is not)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _invalid(field: str, value: Any, allowed: str) -> ValueError:
    return ValueError(f"HfAttnConfig: invalid `{field}`={value!r}; {allowed}.")


# Fields whose type hint does not say what is allowed carry a validator that raises `ValueError("what is allowed")`.
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


def whole_number(default: int) -> Any:
    return _checked(default, lambda value: is_count(value) or value == 0, "must be a whole number >= 0")


def positive_number(default: float) -> Any:
    return _checked(default, lambda value: is_number(value) and value > 0, "must be a positive number")


def one_of(default: str, choices: dict[str, Any]) -> Any:
    """A key of a registry, read when checked (a scheme registered later is allowed too)."""

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
    """The registered schemes whose class `has` a capability, for an error message."""
    return ", ".join(name for name, scheme in POSITION_SCHEMES.items() if has(scheme))


class HfAttnConfig(PreTrainedConfig):
    r"""Configuration of an hf_attn Transformer (README's table has the trade-offs).

    Args:
        vocab_size: rows of the token embedding (`len(tokenizer)`).
        hidden_size: model width.
        num_hidden_layers: Transformer blocks.
        num_attention_heads: query heads; must divide `hidden_size`.
        num_key_value_heads: key/value heads (grouped-query attention; 1 = multi-query); `None`: as many as queries.
        intermediate_size: FFN width (of each branch for gated activations).
        hidden_act: `gelu`, `relu`, `silu`, or the gated `swiglu` / `geglu`.
        norm_type: `layernorm` or `rmsnorm`.
        norm_eps: epsilon of every norm.
        norm_position: `pre` (x + f(norm(x))) or `post` (norm(x + f(x)), the original Transformer's and BERT's).
        position_embedding_type: a key of `positions.POSITION_SCHEMES`: `none`, `sinusoidal`, `learned`, `rope`,
            `alibi`, `t5` (bucketed relative bias), `fire` (a learned function of the normalised log distance),
            `rope_nope` (RoPE with some layers without positions, as SmolLM3), `rope_alibi` (RoPE's rotations and
            ALiBi's penalty of the distance on the same scores) or `cope` (positions counted by gates
            of the attention scores, Golovneva et al.; it reads the scores, so attention runs eagerly whatever
            `attn_implementation` says).
        position_id_rule: a key of `position_ids.POSITION_ID_RULES`, the ids the scheme reads when none are passed:
            `sequential` (0, 1, 2, ...), `randomized` (a sorted random subset in training, Ruoss et al.), `abacus`
            (each digit's offset inside its number, McLeish et al.) or `coupled` (the task's, Cho et al.).
        max_random_position: `randomized` only: training ids are drawn from range(this); `None`:
            `max_position_embeddings` (Ruoss et al. take several times the training length).
        digit_token_ids: `abacus` only: the ids of the digit tokens.
        max_abacus_start: `abacus` only: in training every digit's offset is shifted by one random start per
            sequence, uniform in [0, this] (McLeish et al.'s 100).
        max_coupled_start: `coupled` only: in training every task id but 0 is shifted by one random start per
            sequence, uniform in [0, this] (Cho et al.'s random starting id; 0: none).
        max_position_embeddings: the training length: `learned` cannot go past it, RoPE scaling starts from it.
        rope_parameters: transformers' RoPE dict (`rope_type` default/linear/dynamic/yarn, or `proportional` for
            p-RoPE with its `partial_rotary_factor`; `rope_theta`, `factor`), or one such dict per layer type (keys
            `full_attention` / `sliding_attention`, as ModernBERT's); every config carries the default one, which a
            scheme without RoPE requires.
        rope_layout: the channels RoPE rotates together: `halves` (i, i + d/2; Llama's, the default of configs
            saved before the field) or `interleaved` (2i, 2i + 1; RoFormer's).
        relative_attention_num_buckets: `t5` only: buckets of the key-query offset (T5's 32).
        relative_attention_max_distance: `t5` only: the offset from which all share the last bucket (T5's 128).
        no_rope_layers: `rope_nope` only: per layer, 1 (RoPE) or 0 (no positions), as SmolLM3's; `None`: every
            `no_rope_layer_interval`-th layer without RoPE.
        no_rope_layer_interval: `rope_nope` only: SmolLM3's 4 (layers 4, 8, ... without RoPE) where `no_rope_layers`
            is `None`.
        fire_initial_threshold: `fire` only: FIRE's threshold L at initialisation (it is learned from there), below
            which positions are not normalised further; `None`: `max_position_embeddings`, the training length.
        cope_max_positions: `cope` only: learned position vectors per layer, counts past the last one clamped to it;
            `None`: max_position_embeddings + 1 (a count reaches the training length).
        sliding_window: `sliding_attention` layers see keys at most this far away (only backwards when causal).
        layer_types: per layer, `full_attention` or `sliding_attention` (default: all sliding with a window).
        attention_scoring: how a query and a key make a score (docs/attention-notes.md): `dot`; `general`, q^T W k
            with a learned W per head, computed as (q W) . k; `additive`, v^T tanh(W1 q + W2 k), eager only and
            refused by RoPE, which needs a dot product.
        scale_attn_weights: divide dot-product scores by sqrt(head_dim); `False` (a teaching option) saturates the
            softmax as head_dim grows. `additive` scores are never scaled, so it must stay `True` there.
        attention_dropout: dropout on attention weights.
        hidden_dropout: dropout on embeddings and on every residual branch.
        classifier_dropout: dropout before the classification layer; `None`: `hidden_dropout`.
        classifier_pooling: `mean` or `max` over real tokens, or `cls` (the first token).
        read_length: sequence classification: read each text's first `read_length` tokens (`None`: all), whoever
            calls the model (`pipeline(...)`, the CLI).
        window_stride: sequence classification: `None` reads directly; a number reads an input longer than
            `max_position_embeddings` as windows of that many tokens every `window_stride` tokens, each encoded
            with positions from 0, their pooled vectors averaged by real tokens (any length, any scheme).
        max_direct_length: sequence classification, without `window_stride`: a longer input is read as windows of
            `max_position_embeddings` tokens, with a warning (linear cost); `None` reads any length directly.
        scale_embeddings: multiply token embeddings by sqrt(hidden_size) (Vaswani et al.).
        attention_bias: biases on the Q/K/V/O projections.
        initializer_range: std of the normal init.
        is_decoder: causal self-attention.
        add_cross_attention: a cross-attention sublayer in each block over `encoder_hidden_states`.
        pad_token_id: id of `[PAD]`, whose embedding stays zero; default `vocab_size - 1` (Week 3's); `None`: none.
        bos_token_id, eos_token_id: ids that start and end a generated text (Week 3 has neither).
        use_cache: decoders: whether an evaluation forward and `generate()` keep past keys and values.
        rtd_generator_layers: replaced-token detection (ELECTRA): layers of the masked-LM generator.
        rtd_loss_weight: replaced-token detection: weight of the per-token loss (ELECTRA's 50).
        sparse_prediction: masked LM with labels: logits at the labelled positions only, as ModernBERT.
        unpad_inputs: every step but attention on a padded batch's real tokens only, as ModernBERT (not with a
            cache, cross-attention, hidden states or weights asked for, or while tracing); padding's states are zero.

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
    position_id_rule: str = one_of("sequential", POSITION_ID_RULES)
    max_random_position: int | None = count(None, "max_position_embeddings")
    digit_token_ids: list[int] | None = None
    max_abacus_start: int = whole_number(100)
    max_coupled_start: int = whole_number(0)
    max_position_embeddings: int = count(128)
    rope_parameters: dict | None = None
    rope_layout: Literal["halves", "interleaved"] = "halves"
    relative_attention_num_buckets: int = count(32)
    relative_attention_max_distance: int = count(128)
    no_rope_layers: list[int] | None = _checked(
        None, lambda value: isinstance(value, list) and all(flag in (0, 1) and type(flag) is int for flag in value),
        "must list 1 (RoPE) or 0 (no RoPE) per layer", "a layer without RoPE every no_rope_layer_interval layers",
    )
    no_rope_layer_interval: int = count(4)
    fire_initial_threshold: int | None = count(512, "max_position_embeddings")
    cope_max_positions: int | None = count(None, "max_position_embeddings + 1")
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
        # Older configs' fields: a dropout implementation (inactive at inference), the window stride's old name.
        kwargs.pop("dropout_implementation", None)
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
        """The registry's class of `position_embedding_type`: what the scheme can do."""
        return POSITION_SCHEMES[self.position_embedding_type]

    @property
    def position_id_rule_class(self) -> type[PositionIdRule]:
        """The registry's class of `position_id_rule`: what the rule can do."""
        return POSITION_ID_RULES[self.position_id_rule]

    @property
    def head_dim(self) -> int:
        """Width of one attention head (read by transformers' RoPE init functions)."""
        return self.hidden_size // self.num_attention_heads

    @property
    def embedding_scale(self) -> float:
        """sqrt(hidden_size) with `scale_embeddings`, else 1."""
        return math.sqrt(self.hidden_size) if self.scale_embeddings else 1.0

    @property
    def num_key_value_groups(self) -> int:
        """Query heads sharing one key/value head."""
        return self.num_attention_heads // self.num_key_value_heads

    def validate_fields(self) -> None:
        """Raise a `ValueError` naming the first invalid field."""
        hints = HfAttnConfig.__annotations__  # evaluated: this module does not postpone annotations
        for field in dataclass_fields(HfAttnConfig):
            if field.name not in hints:
                continue  # a field of PreTrainedConfig's: transformers checks it
            value = getattr(self, field.name)
            try:
                # A field's validator, else its type hint (a validated float field takes an int too).
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
        if self.no_rope_layers is not None and len(self.no_rope_layers) != self.num_hidden_layers:
            raise _invalid("no_rope_layers", self.no_rope_layers,
                           f"must list {self.num_hidden_layers} flags (one per layer)")
        if "sliding_attention" in self.layer_types and self.sliding_window is None:
            raise _invalid("layer_types", self.layer_types, "`sliding_attention` layers need `sliding_window` set")
        stride = self.window_stride
        if stride is not None and stride > self.max_position_embeddings:
            raise _invalid(
                "window_stride", stride,
                f"must be None or a whole number in [1, max_position_embeddings={self.max_position_embeddings}] "
                "(a longer stride would skip tokens between windows)",
            )
        reads_past_table = (self.read_length or 0) > self.max_position_embeddings
        if not self.position_scheme.extrapolates and stride is None and reads_past_table:
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
        self.position_id_rule_class.check_config(self)
        if self.position_id_rule_class.renumbers and not self.position_scheme.reads_position_ids:
            readers = ", ".join(name for name, scheme in POSITION_SCHEMES.items() if scheme.reads_position_ids)
            raise _invalid(
                "position_id_rule", self.position_id_rule,
                f"position_embedding_type={self.position_embedding_type!r} ignores position ids (it has none, or "
                f"counts positions from the attention scores), so the rule would change nothing: choose a scheme "
                f"that reads them ({readers}) or position_id_rule='sequential'",
            )
        # A field of other schemes or rules alone (T5's buckets) keeps its default: the chosen one would not read it.
        choosers = (("position_embedding_type", POSITION_SCHEMES), ("position_id_rule", POSITION_ID_RULES))
        for chooser, registry in choosers:
            chosen = registry[getattr(self, chooser)]
            for field in dataclass_fields(HfAttnConfig):
                readers = [name for name, kind in registry.items() if field.name in kind.own_fields]
                value = getattr(self, field.name)
                if readers and field.name not in chosen.own_fields and value != field.default:
                    raise self._ignored(field.name, value, field.default, ", ".join(readers), chooser)

    def _ignored(self, field: str, value: Any, default: Any, users: str,
                 chooser: str = "position_embedding_type") -> ValueError:
        return _invalid(
            field, value,
            f"{chooser}={getattr(self, chooser)!r} does not read it, so it would change "
            f"nothing; leave it out (its default is {default!r}), or choose one that reads it ({users})",
        )

    def _validate_scoring_without_product(self) -> None:
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

    def layer_rope_parameters(self, layer_type: str) -> dict[str, Any]:
        """The RoPE parameters of `layer_type` layers: their own where `rope_parameters` is keyed by layer type."""
        return self.rope_parameters.get(layer_type, self.rope_parameters)

    def _validate_rope_parameters(self) -> None:
        if not self.position_scheme.takes_rope_parameters:
            if (self.rope_parameters or DEFAULT_ROPE_PARAMETERS) != DEFAULT_ROPE_PARAMETERS:
                raise self._ignored("rope_parameters", self.rope_parameters, DEFAULT_ROPE_PARAMETERS,
                                    _schemes(lambda scheme: scheme.takes_rope_parameters))
            return
        keyed = [key for key in self.rope_parameters if key in get_args(LayerType)]
        if keyed and not set(self.layer_types) <= set(keyed):
            raise _invalid("rope_parameters", self.rope_parameters, f"keyed by layer type, it needs an entry for each "
                           f"of layer_types' {', '.join(sorted(set(self.layer_types)))}")
        for layer_type in keyed or [None]:
            self._validate_rope_dict(self.rope_parameters[layer_type] if layer_type else self.rope_parameters,
                                     f"rope_parameters{f'.{layer_type}' if layer_type else ''}")

    def _validate_rope_dict(self, parameters: Any, name: str) -> None:
        if not isinstance(parameters, dict):
            raise _invalid(name, parameters, "must be a dict of RoPE parameters (rope_type, rope_theta, ...)")
        rope_type = parameters.get("rope_type", "default")
        if rope_type not in ROPE_TYPES:
            raise _invalid(f"{name}.rope_type", rope_type, f"allowed: {', '.join(ROPE_TYPES)}")
        if rope_type in ROPE_CONTEXT_SCALINGS:
            factor = parameters.get("factor")
            if not is_number(factor) or factor < 1:
                raise _invalid(
                    f"{name}.factor", factor,
                    f"rope_type={rope_type!r} needs a context-length scaling factor >= 1 (e.g. 4.0 to reach "
                    f"4 x max_position_embeddings)",
                )
        share = parameters.get("partial_rotary_factor")
        share_is_valid = share is None or (is_number(share) and 0 <= share <= 1)
        if (rope_type == "proportional") != (share is not None) or not share_is_valid:
            raise _invalid(f"{name}.partial_rotary_factor", share, "rope_type='proportional' (p-RoPE) alone reads it: "
                           "the share of the frequencies kept, the highest, in [0, 1]")
        theta = parameters.get("rope_theta")
        if not is_number(theta) or theta <= 1:
            raise _invalid(f"{name}.rope_theta", theta, "must be a number > 1 (10000.0 is standard)")


__all__ = ["HfAttnConfig"]
