"""Speed and memory of hf-attn against transformers' BERT, RoFormer, ModernBERT and Llama of the same shape.

`hf-attn bench` runs it; the modules by concern:

* `settings`: every size, repeat count and model choice (`BenchSettings`; the command line is generated
  from it);
* `models`: hf-attn candidates and the transformers anchors, built with one shape;
* `timing`: the steps (fp32, or the forward under bfloat16 autocast), timed by `hf_attn.timing` (interleaved
  repeats, peak memory), the package's one clock;
* `flops`: model FLOPs per step, the measured matmul peak of each precision, MFU;
* `sections` (throughput, attention scaling, profile), `realistic` (one epoch of real review lengths) and,
  asked for by name, `generation` (decoders' `generate()` and KV cache against transformers' Llama), `objectives`
  (masked LM against replaced-token detection), `dropout` (attention with dropout, SDPA against eager), `long_text`
  (one long text through `pipeline`, by reading policy), `streaming` (one-row products against a memory pass) and
  `local_attention` (a sliding window by blocks against full attention and the dense mask), `generation_compiled`
  (decoding steps, eager against a static cache's compiled step) and `serving` (a saved classifier served by PyTorch
  and ONNX Runtime, fp32 and int8): each a function
  `(settings, device) -> dict`, run by name from `runner`, whose report lines `report` writes;
* `report`: markdown and plot, also for JSON written earlier;
* `runner`: `run_benchmark` and the command-line wiring.

A section is one module with its run and report functions, its settings as `BenchSettings` fields, its name in
`settings.SECTIONS` and its two functions in `runner.SECTION_RUNS` and `report.SECTION_REPORTS`.
"""

from .report import format_markdown, plot_attention_scaling
from .runner import add_arguments, run_benchmark, run_from_args
from .settings import BenchSettings

__all__ = [
    "BenchSettings",
    "add_arguments",
    "format_markdown",
    "plot_attention_scaling",
    "run_benchmark",
    "run_from_args",
]
