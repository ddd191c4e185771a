"""Stands in for transformers' tests/exporters/test_export.py, which its source distribution does not ship."""


class ExportTesterMixin:
    """The base `ModelTesterMixin` extends; its export tests are not in the sdist (see tests/test_export.py)."""
