"""Moved to `hf_attn.publishing` (cards, model_code, hub); this path keeps the imports of hf-attn 2.x working."""

from ..publishing.cards import (  # noqa: F401
    build_description_card,
    build_model_card,
    build_sequence_card,
    card_for_run,
    card_from_records,
)
from ..publishing.hub import assemble_upload, push  # noqa: F401
from ..publishing.model_code import (  # noqa: F401
    MODEL_AUTO_MAP,
    MODEL_CODE_FILES,
    MODEL_CODE_MODULES,
    TOKENIZER_AUTO_MAP,
    strip_model_code,
    write_model_code,
)
