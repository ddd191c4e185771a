"""hf_attn: Hugging Face encoder classifiers with pluggable position encodings.

Importing the package registers the model with transformers' Auto classes, so
`AutoModelForSequenceClassification.from_pretrained(dir)` works on a saved folder, and
`save_pretrained` writes `auto_map` plus the modelling code so that a Hub user loads it with
`trust_remote_code=True` without installing this package.
"""

from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification

from .configuration_hf_attn import HfAttnConfig
from .modeling_hf_attn import (
    HfAttnForMaskedLM,
    HfAttnForSequenceClassification,
    HfAttnModel,
    HfAttnPreTrainedModel,
)
from .positions import POSITION_SCHEMES, PositionScheme

AutoConfig.register(HfAttnConfig.model_type, HfAttnConfig, exist_ok=True)
for auto_class, model_class in (
    (AutoModel, HfAttnModel),
    (AutoModelForSequenceClassification, HfAttnForSequenceClassification),
    (AutoModelForMaskedLM, HfAttnForMaskedLM),
):
    auto_class.register(HfAttnConfig, model_class, exist_ok=True)
    model_class.register_for_auto_class(auto_class.__name__)
HfAttnConfig.register_for_auto_class()

__all__ = [
    "POSITION_SCHEMES",
    "HfAttnConfig",
    "HfAttnForMaskedLM",
    "HfAttnForSequenceClassification",
    "HfAttnModel",
    "HfAttnPreTrainedModel",
    "PositionScheme",
]
