"""Speed and memory of hf-attn against transformers' BERT, RoFormer, ModernBERT and Llama of the same shape.

`hf-attn bench` runs it; the modules by concern:

* `sections`: one class per section, a file each, and their registry `BENCH_SECTIONS` (in the report's order):
  `throughput`, `scaling` (attention cost as the length grows) and `realistic` (one epoch of real review lengths)
  by default; asked for by name, `generation` (decoders' `generate()` and KV cache against transformers' Llama),
  `objectives` (masked LM against replaced-token detection), `dropout` (attention with dropout, SDPA against eager),
  `long-text` (one long text through `pipeline`, by reading policy), `streaming` (one-row products against a memory
  pass), `local-attention` (a sliding window by blocks against full attention and the dense mask),
  `generation-compiled` (decoding steps, eager against a static cache's compiled step) and `serving` (a saved
  classifier served by PyTorch and ONNX Runtime, fp32 and int8); and two parts their own settings ask for, the
  tokenizer's JSON and the training profile;
* `settings`: `BenchSettings`, the settings every section shares and each section's own (the command line is
  generated from it);
* `models`: hf-attn candidates and the transformers anchors, built with one shape, and each scheme's peers;
* `timing`: the steps (fp32, or the forward under bfloat16 autocast), timed by `hf_attn.timing` (interleaved
  repeats, peak memory), the package's one clock;
* `flops`: model FLOPs per step, the measured matmul peak of each precision, MFU;
* `goals`, `markdown`, `profiling`: what several sections share (the goals and their summaries, table formatting,
  the profiler's top operators);
* `report`: the markdown report, also for JSON written earlier, and the records table of the docs;
* `runner`: `run_benchmark` and the command-line wiring.

A section is one file and one line: a class in `sections/NAME.py` (its name, its settings as dataclass fields, its
`run(settings, device)` and `report(record)`) and its entry in `BENCH_SECTIONS` (docs/contributing.md).
"""

from .report import format_markdown
from .runner import add_arguments, run_benchmark, run_from_args
from .sections.scaling import plot_attention_scaling
from .settings import BenchSettings

__all__ = [
    "BenchSettings",
    "add_arguments",
    "format_markdown",
    "plot_attention_scaling",
    "run_benchmark",
    "run_from_args",
]
