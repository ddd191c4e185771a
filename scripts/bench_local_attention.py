"""Sliding-window attention computed by blocks against full attention and against the dense-mask path it replaces.

The reference encoder (the bench's shape: d 384, 4 layers, 4 heads, FFN 1536; RoPE, or `--scheme`; fp32; batch 1;
inference) at each length, three ways with the same weights:

* `full`: every layer attends to every token;
* `sliding (dense mask)`: every layer a sliding window of radius `--window` (each token sees `--window` keys on
  either side, 2 x window + 1 in all), computed as an n x n mask over all the scores (hf-attn before issue #51);
* `sliding (band)`: the same window computed by blocks (`local_attention_forward`): only the band's scores.

Times are interleaved (one forward of each way in turn, `--repeats` rounds, median); peak memory is each way's rise
in resident set size over a forward pass (Linux's peak, reset before the pass), in a fresh process per way and
length. Beside them, the ratio of
floating-point operations in closed form: per layer and token, 2 x (4 d^2 + 2 d I) for the projections and FFN,
plus 4 d x (keys scored) for attention (QK^T and AV), the keys scored being n for full attention, 2w + 1 inside
the window, and block + 2w as the blocks compute them.

    python scripts/bench_local_attention.py --out results/local-attention/encoder.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from hf_attn import HfAttnModel
from hf_attn.bench.models import hf_attn_config
from hf_attn.bench.settings import BenchSettings
from hf_attn.masking import band_blocks, distance_mask
from hf_attn.modeling_hf_attn import LOCAL_MIN_BLOCK, local_attention_forward
from hf_attn.positions import POSITION_SCHEMES
from hf_attn.timing import median_seconds, this_cpu, use_threads

WAYS = ("full", "sliding (dense mask)", "sliding (band)")


def build(way: str, window: int, max_length: int, scheme: str) -> HfAttnModel:
    """The reference encoder of `way`, seeded so that every way has the same weights."""
    settings = BenchSettings()
    overrides = {} if way == "full" else {"sliding_window": window}
    torch.manual_seed(0)
    model = HfAttnModel(hf_attn_config(settings, scheme, max_length, attention_dropout=0.0, hidden_dropout=0.0,
                                       **overrides)).eval()
    if way == "sliding (dense mask)":
        model._band_blocks = lambda *args, **kwargs: None  # today's path: the window as an n x n mask
    return model


def flops_per_token(keys_scored: int) -> float:
    """Forward FLOPs of one layer per token (closed form above)."""
    settings = BenchSettings()
    d, ffn = settings.hidden_size, settings.intermediate_size
    return 2 * (4 * d * d + 2 * d * ffn) + 4 * d * keys_scored


def flop_ratios(length: int, window: int) -> dict[str, float]:
    """Sliding over full attention, FLOPs of the attention alone and of the whole layer, for the window's own keys
    (2w + 1) and for the keys the blocks score (block + 2w)."""
    block = max(window, LOCAL_MIN_BLOCK)
    full = flops_per_token(length)
    ratios = {}
    for name, keys in (("window", min(2 * window + 1, length)), ("blocks", min(block + 2 * window, length))):
        ratios[f"attention ({name})"] = keys / length
        ratios[f"layer ({name})"] = flops_per_token(keys) / full
    return ratios


def time_ways(lengths: list[int], window: int, repeats: int, scheme: str) -> dict[str, dict[str, float]]:
    """Median seconds of one forward pass of each way at each length, interleaved."""
    models = {way: build(way, window, max(lengths), scheme) for way in WAYS}
    medians = {}
    with torch.inference_mode():
        for length in lengths:
            input_ids = torch.randint(0, 500, (1, length), generator=torch.Generator().manual_seed(0))
            steps = {way: (lambda model=model: model(input_ids)) for way, model in models.items()}
            medians[str(length)] = median_seconds(steps, repeats=repeats)
    return medians


def time_attention_alone(lengths: list[int], window: int, repeats: int) -> dict[str, dict[str, float]]:
    """Median seconds of one layer's attention alone (SDPA, the reference shape's heads), each way, interleaved: the
    part of the layer that the band changes. The band's layout (`band_blocks`) is built inside each call, though the
    model builds it once for all its layers."""
    settings = BenchSettings()
    heads = settings.num_attention_heads
    module = build("full", window, max(lengths), "none").layers[0].self_attn
    medians = {}
    cpu = torch.device("cpu")
    with torch.inference_mode():
        for length in lengths:
            generator = torch.Generator().manual_seed(0)
            query, key, value = (torch.randn(1, heads, length, settings.hidden_size // heads, generator=generator)
                                 for _ in range(3))
            ways = {
                "full": lambda: sdpa_attention_forward(module, query, key, value, None, scaling=module.scaling),
                "sliding (dense mask)": lambda: sdpa_attention_forward(
                    module, query, key, value,
                    distance_mask(length, length, causal=False, sliding_window=window, device=cpu),
                    scaling=module.scaling),
                "sliding (band)": lambda: local_attention_forward(
                    module, query, key, value,
                    band_blocks(None, 1, length, causal=False, sliding_window=window,
                                block=max(window, LOCAL_MIN_BLOCK), device=cpu),
                    sdpa_attention_forward, scaling=module.scaling),
            }
            medians[str(length)] = median_seconds(ways, repeats=repeats)
    return medians


def peak_memory(way: str, length: int, window: int, scheme: str) -> float:
    """MiB by which one forward pass raises the maximum resident set size, in a fresh process."""
    command = [sys.executable, __file__, "--memory-of", way, str(length), str(window), "--scheme", scheme]
    result = subprocess.run([*command, "--threads", str(torch.get_num_threads())],
                            capture_output=True, text=True, check=True)
    return float(result.stdout.strip().splitlines()[-1])


def resident_kib(field: str) -> int:
    """`VmRSS` (resident now) or `VmHWM` (its peak) of this process, KiB, from /proc/self/status."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}: the memory probe needs Linux")


def memory_probe(way: str, length: int, window: int, scheme: str) -> None:
    """Print the MiB by which one forward pass raises the resident set above what it was before the pass: the peak
    (VmHWM) is reset first (writing 5 to /proc/self/clear_refs), so building the model does not hide it."""
    model = build(way, window, length, scheme)
    input_ids = torch.randint(0, 500, (1, length), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        Path("/proc/self/clear_refs").write_text("5")
        before = resident_kib("VmRSS")
        model(input_ids)
        peak = resident_kib("VmHWM")
    print((peak - before) / 1024)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--lengths", type=int, nargs="+", default=[2048, 8192])
    parser.add_argument("--window", type=int, default=64, help="radius: keys seen on each side of a token")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, help="torch's intra-op threads (default: torch's own choice)")
    parser.add_argument("--scheme", default="rope", choices=list(POSITION_SCHEMES),
                        help="the encoder's position scheme (a bias scheme's bias is computed in the band too)")
    parser.add_argument("--memory-of", nargs=3, metavar=("WAY", "LENGTH", "WINDOW"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_of:
        use_threads(args.threads)
        way, length, window = args.memory_of
        memory_probe(way, int(length), int(window), args.scheme)
        return
    if args.out is None:
        parser.error("--out is required")
    use_threads(args.threads)
    load_before = os.getloadavg()
    times = time_ways(args.lengths, args.window, args.repeats, args.scheme)
    attention_times = time_attention_alone(args.lengths, args.window, args.repeats)
    memory = {str(n): {way: peak_memory(way, n, args.window, args.scheme) for way in WAYS} for n in args.lengths}
    rows = {}
    for n in args.lengths:
        seconds, flops = times[str(n)], flop_ratios(n, args.window)
        measured = seconds["sliding (band)"] / seconds["full"]
        attention = attention_times[str(n)]
        rows[str(n)] = {
            "seconds": seconds,
            "attention_alone_seconds": attention,
            "attention_alone_band_over_full": attention["sliding (band)"] / attention["full"],
            "peak_memory_mib": memory[str(n)],
            "band_over_full": measured,
            "band_over_dense_mask": seconds["sliding (band)"] / seconds["sliding (dense mask)"],
            "flop_ratio": flops,
            "measured_over_predicted": measured / flops["layer (window)"],
        }
    record = {
        "what": f"reference encoder (d 384, 4 layers, 4 heads, FFN 1536, {args.scheme} positions), fp32, batch 1, "
                "inference; sliding "
                f"window of radius {args.window} ({2 * args.window + 1} keys) in every layer",
        "command": "python scripts/bench_local_attention.py " + " ".join(sys.argv[1:]),
        "block": max(args.window, LOCAL_MIN_BLOCK),
        "repeats": args.repeats,
        "cpu": this_cpu(),
        "threads": torch.get_num_threads(),
        "load_average_before_after": [load_before, os.getloadavg()],
        "torch": torch.__version__,
        "python": platform.python_version(),
        "lengths": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    for n, row in rows.items():
        print(n, {way: round(s * 1000, 1) for way, s in row["seconds"].items()}, row["peak_memory_mib"],
              f"band/full {row['band_over_full']:.2f} predicted {row['flop_ratio']['layer (window)']:.2f};",
              f"attention alone {row['attention_alone_band_over_full']:.3f}",
              f"predicted {row['flop_ratio']['attention (window)']:.3f}")


if __name__ == "__main__":
    main()
