"""hf_attn: Hugging Face encoder classifiers with pluggable position encodings.

Importing the package registers the model with transformers' Auto classes, so
`AutoModelForSequenceClassification.from_pretrained(dir)` works on a saved folder, and
`save_pretrained` writes `auto_map` plus the modelling code so that a Hub user loads it with
`trust_remote_code=True` without installing this package.
"""

import transformers
from transformers import AutoConfig, AutoTokenizer

from .configuration_hf_attn import HfAttnConfig
from .modeling_hf_attn import (
    AUTO_CLASSES,
    HfAttnForCausalLM,
    HfAttnForMaskedLM,
    HfAttnForMultipleChoice,
    HfAttnForReplacedTokenDetection,
    HfAttnForSequenceClassification,
    HfAttnForTokenClassification,
    HfAttnModel,
    HfAttnPreTrainedModel,
)
from .position_ids import POSITION_ID_RULES, PositionIdRule
from .positions import POSITION_SCHEMES, PositionScheme
from .tokenization_hf_attn import HfAttnTokenizerFast

AutoConfig.register(HfAttnConfig.model_type, HfAttnConfig, exist_ok=True)
for auto_class_name, model_class in AUTO_CLASSES.items():
    getattr(transformers, auto_class_name).register(HfAttnConfig, model_class, exist_ok=True)
    model_class.register_for_auto_class(auto_class_name)
HfAttnConfig.register_for_auto_class()
AutoTokenizer.register(HfAttnConfig, fast_tokenizer_class=HfAttnTokenizerFast, exist_ok=True)

__all__ = [
    "POSITION_ID_RULES",
    "POSITION_SCHEMES",
    "HfAttnConfig",
    "HfAttnForCausalLM",
    "HfAttnForMaskedLM",
    "HfAttnForMultipleChoice",
    "HfAttnForReplacedTokenDetection",
    "HfAttnForSequenceClassification",
    "HfAttnForTokenClassification",
    "HfAttnModel",
    "HfAttnPreTrainedModel",
    "HfAttnTokenizerFast",
    "PositionIdRule",
    "PositionScheme",
]
