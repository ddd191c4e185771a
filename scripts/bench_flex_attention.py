"""Is torch's `flex_attention` an alternative to the band blocks on this CPU? One sliding-window attention call (the
reference encoder's heads: 4 x 96, batch 1, fp32, inference) four ways, interleaved, median: full attention (SDPA),
the window by blocks (`local_attention_forward` over SDPA, its layout built beforehand as the model builds it once per
forward pass), and `flex_attention` with the window as a block mask, compiled (`torch.compile`, the first call's
compilation timed apart) and eager. The outputs are compared too.

    PYTHONPATH=. python scripts/bench_flex_attention.py --threads 1 --out results/local-attention/flex-attention.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from hf_attn.masking import band_blocks
from hf_attn.modeling_hf_attn import LOCAL_MIN_BLOCK, local_attention_forward
from hf_attn.timing import median_seconds, this_cpu, timed, use_threads


class Heads(torch.nn.Module):
    """What the attention functions read from their module."""

    num_key_value_groups = 1
    is_causal = False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--length", type=int, default=2048)
    parser.add_argument("--window", type=int, default=64, help="radius: keys seen on each side of a token")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, help="torch's intra-op threads (default: torch's own choice)")
    args = parser.parse_args()
    use_threads(args.threads)
    length, window, heads, scaling = args.length, args.window, Heads(), 96**-0.5
    load_before = os.getloadavg()
    generator = torch.Generator().manual_seed(0)
    query, key, value = (torch.randn(1, 4, length, 96, generator=generator) for _ in range(3))
    blocks = band_blocks(None, 1, length, causal=False, sliding_window=window, block=max(window, LOCAL_MIN_BLOCK),
                         device=torch.device("cpu"))
    block_mask = create_block_mask(lambda b, h, q, k: (q - k).abs() <= window, 1, 1, length, length, device="cpu")
    compiled = torch.compile(flex_attention)
    with torch.inference_mode():
        compile_seconds = timed(lambda: compiled(query, key, value, block_mask=block_mask, scale=scaling))
        ways = {
            "full (sdpa)": lambda: sdpa_attention_forward(heads, query, key, value, None, scaling=scaling)[0],
            "window by blocks (sdpa)": lambda: local_attention_forward(
                heads, query, key, value, blocks, sdpa_attention_forward, scaling=scaling)[0],
            "flex_attention, compiled": lambda: compiled(
                query, key, value, block_mask=block_mask, scale=scaling).transpose(1, 2),
            "flex_attention, eager": lambda: flex_attention(
                query, key, value, block_mask=block_mask, scale=scaling).transpose(1, 2),
        }
        outputs = {way: attend() for way, attend in ways.items()}  # also the warm-up
        medians = median_seconds(ways, warmup=0, repeats=args.repeats)
    reference = outputs["window by blocks (sdpa)"]
    record = {
        "what": f"one attention call, 4 heads x 96, batch 1, fp32, inference, {length} tokens, sliding window of "
                f"radius {window}",
        "command": "python scripts/bench_flex_attention.py " + " ".join(sys.argv[1:]),
        "cpu": this_cpu(),
        "threads": torch.get_num_threads(),
        "load_average_before_after": [load_before, os.getloadavg()],
        "torch": torch.__version__,
        "median_seconds": medians,
        "flex_compile_seconds": compile_seconds,
        "max_difference_from_blocks": {way: (output - reference).abs().max().item()
                                       for way, output in outputs.items() if way != "full (sdpa)"},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record["median_seconds"], indent=1), f"compile {compile_seconds:.1f} s")


if __name__ == "__main__":
    main()
