"""HfAttnConfig: defaults, serialisation, and a clear ValueError for every invalid value."""

from __future__ import annotations

import pytest
from helpers import tiny_config_kwargs

from hf_attn import POSITION_SCHEMES, HfAttnConfig


def test_defaults_match_reference_setup() -> None:
    config = HfAttnConfig()
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (384, 4, 4)
    assert (config.intermediate_size, config.max_position_embeddings) == (1536, 128)
    assert (config.hidden_act, config.norm_position, config.hidden_dropout) == ("gelu", "pre", 0.1)
    assert config.num_key_value_heads == 4 and config.head_dim == 96
    assert config.rope_parameters == {"rope_type": "default", "rope_theta": 10_000.0}


def test_special_tokens_and_cache_fields_every_transformers_config_declares() -> None:
    """`[PAD]` is the last id (Week 3's layout) for any vocabulary, so a small test vocabulary builds; `None`
    keeps a model without one; no BOS/EOS (Week 3 has none); decoders cache by default."""
    assert HfAttnConfig().pad_token_id == 500
    assert HfAttnConfig(vocab_size=99).pad_token_id == 98
    assert HfAttnConfig(vocab_size=99, pad_token_id=None).pad_token_id is None
    assert HfAttnConfig(vocab_size=99, pad_token_id=0).pad_token_id == 0
    config = HfAttnConfig(vocab_size=99)
    assert (config.bos_token_id, config.eos_token_id, config.use_cache) == (None, None, True)
    assert HfAttnConfig.from_dict(HfAttnConfig(vocab_size=99, pad_token_id=None).to_dict()).pad_token_id is None
    assert HfAttnConfig(vocab_size=99, eos_token_id=[1, 2]).eos_token_id == [1, 2]


def test_dict_round_trip_rebuilds_the_same_config() -> None:
    config = HfAttnConfig(**tiny_config_kwargs(position_embedding_type="rope", sliding_window=4,
                                               layer_types=["sliding_attention", "full_attention"],
                                               rope_parameters={"rope_type": "linear", "factor": 2.0}))
    again = HfAttnConfig.from_dict(config.to_dict())
    assert again.to_dict() == config.to_dict()
    assert again.rope_parameters["factor"] == 2.0 and again.layer_types == ["sliding_attention", "full_attention"]


def test_config_saved_before_rope_layout_loads_with_the_halves_layout_it_was_trained_with(tmp_path) -> None:  # noqa: ANN001
    """A config.json without the field (every model saved before it existed) must keep rotating halves,
    or its weights would be misread; an interleaved config says so in config.json and round-trips."""
    config = HfAttnConfig(**tiny_config_kwargs(position_embedding_type="rope", rope_layout="interleaved"))
    config.save_pretrained(tmp_path)
    assert HfAttnConfig.from_pretrained(tmp_path).rope_layout == "interleaved"
    legacy = config.to_dict()
    del legacy["rope_layout"]
    assert HfAttnConfig.from_dict(legacy).rope_layout == "halves"
    assert HfAttnConfig.from_dict(legacy, rope_layout="interleaved").rope_layout == "interleaved"


INVALID = [
    (dict(position_embedding_type="rope", rope_layout="pairs"), "rope_layout", "halves, interleaved"),
    (dict(hidden_size=30, num_attention_heads=4), "num_attention_heads", "must divide hidden_size"),
    (dict(num_attention_heads=4, num_key_value_heads=3), "num_key_value_heads", "must divide"),
    (dict(hidden_size=36, num_attention_heads=4, position_embedding_type="rope"), "hidden_size", "head_dim"),
    (dict(hidden_size=33, num_attention_heads=3, position_embedding_type="sinusoidal"), "hidden_size", "even"),
    (dict(position_embedding_type="relative"), "position_embedding_type", "sinusoidal"),
    (dict(hidden_act="tanh"), "hidden_act", "swiglu"),
    (dict(norm_type="batchnorm"), "norm_type", "rmsnorm"),
    (dict(norm_position="middle"), "norm_position", "pre"),
    (dict(classifier_pooling="first"), "classifier_pooling", "mean"),
    (dict(hidden_dropout=1.5), "hidden_dropout", "[0, 1)"),
    (dict(attention_dropout=-0.1), "attention_dropout", "[0, 1)"),
    (dict(num_hidden_layers=0), "num_hidden_layers", "positive integer"),
    (dict(hidden_size="384"), "hidden_size", "positive integer"),
    (dict(sliding_window=0), "sliding_window", "positive integer"),
    (dict(layer_types=["full_attention"]), "layer_types", "2 entries"),
    (dict(layer_types=["sliding_attention", "full_attention"]), "layer_types", "sliding_window"),
    (dict(pad_token_id=64), "pad_token_id", "[0, 64)"),
    (dict(bos_token_id=-1), "bos_token_id", "[0, 64)"),
    (dict(eos_token_id=[1, 64]), "eos_token_id", "[0, 64)"),
    (dict(rtd_generator_layers=0), "rtd_generator_layers", "positive integer"),
    (dict(rtd_loss_weight=-1.0), "rtd_loss_weight", "positive number"),
    (dict(relative_attention_num_buckets=0), "relative_attention_num_buckets", "positive integer"),
    (dict(is_decoder="yes"), "is_decoder", "bool"),
    (dict(layer_types=["full_attention", "local"]), "layer_types", "sliding_attention"),
    (dict(classifier_dropout=1.0), "classifier_dropout", "or None (hidden_dropout)"),
    (dict(position_embedding_type="t5", relative_attention_num_buckets=3), "relative_attention_num_buckets", "4"),
    # a decoder's buckets are one-sided, but not under ids that put a key after its query (coupled places)
    (dict(position_embedding_type="t5", is_decoder=True, position_id_rule="coupled", relative_attention_num_buckets=3),
     "relative_attention_num_buckets", "each side"),
    (dict(position_embedding_type="t5", relative_attention_num_buckets=32, relative_attention_max_distance=8),
     "relative_attention_max_distance", "exceed the 8"),
    (dict(position_embedding_type="rope", rope_parameters={"rope_type": "longrope", "factor": 2.0}),
     "rope_type", "yarn"),
    (dict(position_embedding_type="rope", rope_parameters={"rope_type": "linear"}), "factor", ">= 1"),
    (dict(position_embedding_type="rope", rope_parameters={"rope_type": "default", "rope_theta": 0}),
     "rope_theta", "> 1"),
    (dict(rope_parameters={"rope_type": "proportional", "rope_theta": 10_000.0}), "partial_rotary_factor", "[0, 1]"),
    (dict(rope_parameters={"rope_type": "proportional", "partial_rotary_factor": 1.5}), "partial_rotary_factor",
     "[0, 1]"),
    (dict(rope_parameters={"rope_type": "default", "partial_rotary_factor": 0.5}), "partial_rotary_factor",
     "'proportional'"),
    (dict(rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 160_000.0}}, sliding_window=2,
          layer_types=["sliding_attention", "full_attention"]), "rope_parameters", "sliding_attention"),
    (dict(rope_parameters={"full_attention": {"rope_type": "linear", "rope_theta": 10_000.0}}),
     "rope_parameters.full_attention.factor", ">= 1"),
    (dict(position_embedding_type="rope_nope", no_rope_layers=[1, 0, 1]), "no_rope_layers", "2 flags"),
    (dict(position_embedding_type="rope_nope", no_rope_layers=[1, 2]), "no_rope_layers", "1 (RoPE) or 0"),
    (dict(position_embedding_type="rope_nope", no_rope_layer_interval=0), "no_rope_layer_interval", "positive"),
    (dict(position_embedding_type="fire", fire_initial_threshold=0), "fire_initial_threshold", "positive"),
    (dict(position_embedding_type="cope", cope_max_positions=0), "cope_max_positions", "positive"),
]


@pytest.mark.parametrize(("overrides", "field", "hint"), INVALID)
def test_invalid_values_name_field_value_and_fix(overrides: dict, field: str, hint: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        HfAttnConfig(**tiny_config_kwargs(**overrides))
    message = str(excinfo.value)
    assert field in message and hint in message


def test_unknown_scheme_lists_every_known_scheme() -> None:
    with pytest.raises(ValueError) as excinfo:
        HfAttnConfig(position_embedding_type="xpos")
    assert all(name in str(excinfo.value) for name in POSITION_SCHEMES)


ROPE_READERS = "rope, rope_nope, rope_alibi"
IGNORED_SETTINGS = [
    ("rope_parameters", {"rope_parameters": {"rope_type": "yarn", "factor": 4.0}}, ROPE_READERS),
    ("rope_parameters", {"rope_theta": 500_000.0}, ROPE_READERS),
    # transformers' old name
    ("rope_parameters", {"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, ROPE_READERS),
    ("relative_attention_num_buckets", {"relative_attention_num_buckets": 64}, "t5"),
    ("relative_attention_max_distance", {"relative_attention_max_distance": 256}, "t5"),
    ("no_rope_layers", {"no_rope_layers": [1, 0]}, "rope_nope"),
    ("no_rope_layer_interval", {"no_rope_layer_interval": 2}, "rope_nope"),
    ("fire_initial_threshold", {"fire_initial_threshold": None}, "fire"),
    ("cope_max_positions", {"cope_max_positions": 8}, "cope"),
]


@pytest.mark.parametrize("scheme", list(POSITION_SCHEMES))
@pytest.mark.parametrize(("field", "setting", "reader"), IGNORED_SETTINGS)
def test_a_setting_the_scheme_does_not_read_is_refused_naming_field_scheme_and_readers(
    scheme: str, field: str, setting: dict, reader: str
) -> None:
    """YaRN on ALiBi, or T5's buckets on RoPE, would build a model no different from the default: refused, naming
    the field, the chosen scheme and the scheme that reads the field. Its own scheme takes it."""
    if scheme in reader.split(", "):
        HfAttnConfig(**tiny_config_kwargs(position_embedding_type=scheme, **setting))
        return
    with pytest.raises(ValueError) as excinfo:
        HfAttnConfig(**tiny_config_kwargs(position_embedding_type=scheme, **setting))
    message = str(excinfo.value)
    assert f"`{field}`" in message and f"position_embedding_type={scheme!r}" in message and f"({reader})" in message


@pytest.mark.parametrize("scheme", list(POSITION_SCHEMES))
def test_every_scheme_takes_the_defaults_a_saved_config_carries(scheme: str, tmp_path) -> None:  # noqa: ANN001
    """transformers writes `rope_parameters` (and the T5 fields) into every config.json, whatever the scheme: an
    ALiBi config must still load, with or without them spelled out."""
    defaults = dict(rope_parameters={"rope_theta": 10000, "rope_type": "default"},
                    relative_attention_num_buckets=32, relative_attention_max_distance=128)
    HfAttnConfig(**tiny_config_kwargs(position_embedding_type=scheme, **defaults)).save_pretrained(tmp_path)
    assert HfAttnConfig.from_pretrained(tmp_path).position_embedding_type == scheme
    assert HfAttnConfig(**tiny_config_kwargs(position_embedding_type=scheme, rope_theta=10_000.0))


@pytest.mark.parametrize("setting", [
    dict(position_embedding_type="rope_nope", no_rope_layers=[0, 1]),
    dict(position_embedding_type="rope_nope", no_rope_layer_interval=2),
    dict(rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 160_000.0},
                          "sliding_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.5,
                                                "rope_theta": 10_000.0}},
         sliding_window=2, layer_types=["sliding_attention", "full_attention"]),
    dict(position_embedding_type="fire", fire_initial_threshold=None),
    dict(position_embedding_type="fire", fire_initial_threshold=64),
    dict(position_embedding_type="cope", cope_max_positions=8),
], ids=["no-rope-layers", "no-rope-interval", "theta-per-layer-type-and-p-rope", "fire-at-training-length",
        "fire-at-64", "cope-8-positions"])
def test_the_newer_schemes_settings_survive_save_and_load(setting: dict, tmp_path) -> None:  # noqa: ANN001
    HfAttnConfig(**tiny_config_kwargs(**setting)).save_pretrained(tmp_path)
    loaded = HfAttnConfig.from_pretrained(tmp_path)
    for field, value in setting.items():
        assert getattr(loaded, field) == value, field
