"""transformers' own common tests (`ModelTesterMixin`, `ConfigTester`) over every hf_attn head and position scheme.

Written as transformers writes a model's test file (tests/models/bert/test_modeling_bert.py): a model tester
that builds a tiny config and inputs, and a `unittest.TestCase` per setting that mixes in the common tests,
fetched from transformers' source distribution into tests/transformers_common/ (its README says what and
how). Each setting is one position scheme with either the encoder heads or the decoder: the default suite
runs two settings (RoPE encoders, ALiBi decoder), `-m slow` every scheme of both.

Every skip is the common tests' own, with the reason they give (GPU, DeepSpeed, Flash Attention, kernels;
no MoE, TP plan, sub-configs or legacy checkpoint conversion; an encoder takes no cache). The settings
change three things, each said where it is: `test_resize_position_embeddings` is off (no scheme has a table to
resize but `learned`, and hf_attn offers no resize), the RoPE scaling tests skip the schemes without RoPE
(every config has `rope_parameters`, which only `rope` reads), and replaced-token detection sits out the
tuple/dict output comparison, as its forward samples.
"""

from __future__ import annotations

import unittest
from unittest import mock

import pytest
import torch
from transformers.models.auto.modeling_auto import (
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    MODEL_FOR_MULTIPLE_CHOICE_MAPPING_NAMES,
    MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES,
    MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES,
    MODEL_MAPPING_NAMES,
)
from transformers_common.generation.test_utils import GenerationTesterMixin

# Fetched from transformers' sdist by `make install` (tests/transformers_common/README.md), not committed.
pytest.importorskip("transformers_common.test_modeling_common",
                    reason="fetched by `make install` (tests/transformers_common/fetch.py)")
from transformers_common.test_configuration_common import ConfigTester  # noqa: E402
from transformers_common.test_modeling_common import ModelTesterMixin, ids_tensor, random_attention_mask  # noqa: E402

from hf_attn import (
    POSITION_SCHEMES,
    HfAttnConfig,
    HfAttnForCausalLM,
    HfAttnForMaskedLM,
    HfAttnForMultipleChoice,
    HfAttnForReplacedTokenDetection,
    HfAttnForSequenceClassification,
    HfAttnForTokenClassification,
    HfAttnModel,
)

ENCODER_HEADS = (HfAttnModel, HfAttnForSequenceClassification, HfAttnForTokenClassification, HfAttnForMultipleChoice,
                 HfAttnForMaskedLM, HfAttnForReplacedTokenDetection)
DECODER_HEADS = (HfAttnForCausalLM,)
# The Auto name tables the common tests read to know a class's task (which labels it takes, which class is the
# bare model); transformers' own models are listed there, hf_attn's are registered at run time instead.
TASK_NAMES = (
    (MODEL_MAPPING_NAMES, HfAttnModel),
    (MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES, HfAttnForSequenceClassification),
    (MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES, HfAttnForTokenClassification),
    (MODEL_FOR_MULTIPLE_CHOICE_MAPPING_NAMES, HfAttnForMultipleChoice),
    (MODEL_FOR_MASKED_LM_MAPPING_NAMES, HfAttnForMaskedLM),
    (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, HfAttnForCausalLM),
)


class HfAttnModelTester:
    """A tiny config (2 layers, width 32, vocabulary 99) and a batch of random ids with a padding mask."""

    def __init__(
        self,
        parent: unittest.TestCase,
        position_embedding_type: str,
        is_decoder: bool,
        batch_size: int = 13,
        seq_length: int = 7,
        is_training: bool = True,
        vocab_size: int = 99,
        hidden_size: int = 32,
        num_hidden_layers: int = 2,
        num_attention_heads: int = 4,
        num_key_value_heads: int = 2,
        intermediate_size: int = 37,
        max_position_embeddings: int = 512,
        num_labels: int = 3,
        num_choices: int = 4,
    ) -> None:
        self.parent = parent
        self.position_embedding_type = position_embedding_type
        self.is_decoder = is_decoder
        self.batch_size = batch_size
        self.seq_length = seq_length
        self.is_training = is_training
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.intermediate_size = intermediate_size
        self.max_position_embeddings = max_position_embeddings
        self.num_labels = num_labels
        self.num_choices = num_choices  # the common tests repeat each text as the choices of a multiple-choice head

    def get_config(self) -> HfAttnConfig:
        return HfAttnConfig(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads,
            num_key_value_heads=self.num_key_value_heads,
            intermediate_size=self.intermediate_size,
            max_position_embeddings=self.max_position_embeddings,
            position_embedding_type=self.position_embedding_type,
            is_decoder=self.is_decoder,
            num_labels=self.num_labels,
            # Week 3 puts [PAD] last, but test_load_with_mismatched_shapes shrinks a built config's vocab_size to
            # 10; 0 (BERT's default) stays in every vocabulary.
            pad_token_id=0,
            attention_dropout=0.0,
            hidden_dropout=0.0,
        )

    def prepare_config_and_inputs(self) -> tuple[HfAttnConfig, torch.Tensor, torch.Tensor]:
        input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size)
        attention_mask = random_attention_mask([self.batch_size, self.seq_length])
        return self.get_config(), input_ids, attention_mask

    def prepare_config_and_inputs_for_common(self) -> tuple[HfAttnConfig, dict[str, torch.Tensor]]:
        config, input_ids, attention_mask = self.prepare_config_and_inputs()
        return config, {"input_ids": input_ids, "attention_mask": attention_mask}


class HfAttnModelTestBase(ModelTesterMixin):
    """The common tests for one setting; `make_test_case` names the scheme and whether the heads decode."""

    position_embedding_type: str
    is_decoder: bool
    test_resize_embeddings = True
    # hf_attn has no `resize_position_embeddings` (RoPE, ALiBi and sinusoidal positions need none).
    test_resize_position_embeddings = False

    def setUp(self) -> None:
        if self._testMethodName.startswith("test_model_rope_scaling") and self.position_embedding_type != "rope":
            self.skipTest(f"position_embedding_type={self.position_embedding_type!r} has no RoPE to scale")
        self.model_tester = HfAttnModelTester(self, self.position_embedding_type, self.is_decoder)
        # Llama's tester passes hidden_size=37; RoPE needs an even head width, so 40 over the default 4 heads.
        self.config_tester = ConfigTester(self, config_class=HfAttnConfig, hidden_size=40)
        for names, model_class in TASK_NAMES:
            patcher = mock.patch.dict(names, {HfAttnConfig.model_type: model_class.__name__})
            patcher.start()
            self.addCleanup(patcher.stop)

    def _prepare_for_class(
        self, inputs_dict: dict[str, torch.Tensor], model_class: type, return_labels: bool = False
    ) -> dict[str, torch.Tensor]:
        """As BERT's test does for its pretraining head: ELECTRA-style pretraining takes masked-LM labels."""
        inputs_dict = super()._prepare_for_class(inputs_dict, model_class, return_labels=return_labels)
        if return_labels and model_class is HfAttnForReplacedTokenDetection:
            shape = (self.model_tester.batch_size, self.model_tester.seq_length)
            inputs_dict["labels"] = torch.zeros(shape, dtype=torch.long)
        return inputs_dict

    def test_config(self) -> None:
        self.config_tester.run_common_tests()

    def test_model_outputs_equivalence(self) -> None:
        """Run on every head but replaced-token detection, whose forward samples the replaced tokens when given
        labels (as ELECTRA's generator does in training), so two calls differ by design."""
        self.all_model_classes = tuple(
            model_class for model_class in self.all_model_classes if model_class is not HfAttnForReplacedTokenDetection
        )
        super().test_model_outputs_equivalence()


def make_test_case(scheme: str, heads: tuple[type, ...], slow: bool) -> type[unittest.TestCase]:
    """A `unittest.TestCase` of the common tests for `scheme` and `heads` (all encoders, or the decoder)."""
    is_decoder = heads == DECODER_HEADS
    bases = (HfAttnModelTestBase, GenerationTesterMixin) if is_decoder else (HfAttnModelTestBase,)
    heads_name = ("Decoder" if is_decoder else "Encoder") if slow else heads[0].__name__.removeprefix("HfAttnFor")
    name = f"HfAttn{heads_name}{scheme.capitalize()}Test"
    attributes = {
        "position_embedding_type": scheme,
        "is_decoder": is_decoder,
        "all_model_classes": heads,
        "__module__": __name__,
        "__qualname__": name,
    }
    if slow:
        attributes["pytestmark"] = [pytest.mark.slow]
    return type(name, (*bases, unittest.TestCase), attributes)


# The default suite: the classifier with RoPE and the causal LM with ALiBi, one head each. `-m slow`: every
# scheme with all encoder heads, and with the decoder.
TEST_CASES = [
    make_test_case("rope", (HfAttnForSequenceClassification,), slow=False),
    make_test_case("alibi", DECODER_HEADS, slow=False),
    *(make_test_case(scheme, ENCODER_HEADS, slow=True) for scheme in POSITION_SCHEMES),
    *(make_test_case(scheme, DECODER_HEADS, slow=True) for scheme in POSITION_SCHEMES if scheme != "alibi"),
]
globals().update((case.__name__, case) for case in TEST_CASES)
