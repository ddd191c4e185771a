"""Stands in for transformers' tests/utils/test_configuration_utils.py, which its source distribution does not ship."""

config_common_kwargs = {
    # `PreTrainedConfig`'s own fields, each set to a value other than its default: `ConfigTester` passes them
    # all to a model's config class and checks that each one reads back.
    "architectures": ["BertModel"],
    "output_hidden_states": True,
    "return_dict": False,
    "dtype": "float16",
    "chunk_size_feed_forward": 5,
    "id2label": {0: "label"},
    "label2id": {"label": "0"},
    "problem_type": "regression",
}
