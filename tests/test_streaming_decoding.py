"""`hf_attn.serving.decoding`: compiled single-row products as a multiply-and-sum, switched on per model."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from transformers import CompileConfig, LlamaConfig, LlamaForCausalLM

from hf_attn import HfAttnConfig, HfAttnForCausalLM
from hf_attn.serving import StreamingLinear, stream_single_row_products


@pytest.mark.parametrize("bias", [True, False])
def test_a_compiled_single_row_product_is_a_multiply_and_sum_equal_to_the_linear_product(bias: bool) -> None:
    """One row's product reaches the backend as a multiply and a sum, no linear, and equals `F.linear`'s within
    fp32 rounding; several rows, and a row run eagerly, are the linear product itself."""
    torch.manual_seed(0)
    layer = StreamingLinear(48, 40, bias=bias)
    graphs: list[set] = []

    def backend(graph: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):  # noqa: ANN202 - a callable
        graphs.append({node.target for node in graph.graph.nodes if node.op == "call_function"})
        return graph.forward

    compiled = torch.compile(layer, backend=backend, fullgraph=True, dynamic=False)
    row, rows = torch.randn(1, 1, 48), torch.randn(2, 3, 48)
    with torch.no_grad():
        torch.testing.assert_close(compiled(row), F.linear(row, layer.weight, layer.bias))
        assert F.linear not in graphs[-1]
        torch.testing.assert_close(compiled(rows), F.linear(rows, layer.weight, layer.bias))
        assert F.linear in graphs[-1]
        assert torch.equal(layer(row), F.linear(row, layer.weight, layer.bias))
        with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast runs linears in bfloat16: so does this one
            assert compiled(row).dtype == F.linear(row, layer.weight, layer.bias).dtype


def tiny_decoders() -> list[torch.nn.Module]:
    torch.manual_seed(0)
    hf_attn = HfAttnForCausalLM(HfAttnConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                             num_key_value_heads=2, intermediate_size=64, is_decoder=True,
                                             position_embedding_type="rope", max_position_embeddings=64))
    llama = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                         num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64))
    return [hf_attn.eval(), llama.eval()]


@pytest.mark.parametrize("index", [0, 1], ids=["hf_attn", "llama"])
def test_switching_keeps_every_parameter_and_the_eager_outputs(index: int) -> None:
    model = tiny_decoders()[index]
    ids = torch.randint(0, 50, (2, 7))
    state = {key: value.clone() for key, value in model.state_dict().items()}
    with torch.no_grad():
        before = model(ids).logits
        linears = [name for name, module in model.named_modules() if type(module) is torch.nn.Linear]
        assert stream_single_row_products(model) is model
        assert linears and all(type(model.get_submodule(name)) is StreamingLinear for name in linears)
        assert model.state_dict().keys() == state.keys()
        assert all(torch.equal(model.state_dict()[key], value) for key, value in state.items())
        assert torch.equal(model(ids).logits, before)


@pytest.mark.slow
def test_compiled_static_decoding_of_one_prompt_gives_the_tokens_of_recomputing_the_prefix() -> None:
    """Each compiled step multiplies a single row by the weights as a multiply-and-sum: the greedy tokens are still
    those of recomputing the whole prefix eagerly, with the plain linear products."""
    model = tiny_decoders()[0]
    prompt = torch.randint(0, 50, (1, 5))
    with torch.no_grad():
        expected = prompt
        for _ in range(8):
            expected = torch.cat([expected, model(expected).logits[:, -1:].argmax(-1)], dim=-1)
    compile_config = CompileConfig(fullgraph=True, dynamic=False)
    compile_config._compile_all_devices = True  # transformers' switch for compiling on devices other than GPUs
    stream_single_row_products(model)
    generated = model.generate(prompt, max_new_tokens=8, do_sample=False, cache_implementation="static",
                               compile_config=compile_config, pad_token_id=0)
    assert hasattr(model, "_compiled_call")  # the steps ran compiled
    assert torch.equal(generated, expected)
