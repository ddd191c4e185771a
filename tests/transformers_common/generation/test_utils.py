"""Stands in for transformers' tests/generation/test_utils.py, which its source distribution does not ship."""


class GenerationTesterMixin:
    """Marks a tester whose models generate: `ModelTesterMixin` checks that such a tester inherits this class.

    transformers' generation tests are not in the sdist; hf_attn's `generate()` is tested in
    tests/test_decoders.py and tests/test_causal_lm.py.
    """
