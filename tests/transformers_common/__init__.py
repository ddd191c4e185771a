"""transformers' own common model and config tests, vendored at a pinned version (see README.md)."""
