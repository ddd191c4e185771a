"""Moved to `hf_attn.publishing.hub`; this path keeps the imports of hf-attn 2.x working."""

from ..publishing.hub import (  # noqa: F401
    MODEL_AUTO_MAP,
    MODEL_CODE_FILES,
    MODEL_CODE_MODULES,
    TOKENIZER_AUTO_MAP,
    assemble_upload,
    build_description_card,
    build_model_card,
    build_sequence_card,
    card_for_run,
    card_from_records,
    push,
    strip_model_code,
    write_model_code,
)
