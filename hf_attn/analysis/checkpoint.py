"""Moved to `hf_attn.publishing.checkpoint`; this path keeps the imports of hf-attn 2.x working."""

from ..publishing.checkpoint import (  # noqa: F401
    CheckpointError,
    checkpoint_card,
    committed_classifiers,
    is_checkpoint,
    load_run_model,
    stored_dtypes,
    write_checkpoint,
)
