"""The `local-attention` section: sliding-window attention by blocks against full attention and the dense mask.

The bench's encoder (`hf_attn_config`: d 384, 4 layers, 4 heads, FFN 1536 by default; `local_attention_scheme`
positions; fp32; batch 1; inference) at each of `local_attention_lengths`, three ways with the same weights:

* `full`: every layer attends to every token;
* `sliding (dense mask)`: every layer a sliding window of radius `local_attention_window` (each token sees that many
  keys on either side, 2 x window + 1 in all), computed as an n x n mask over all the scores (hf-attn before #51);
* `sliding (band)`: the same window computed by blocks (`local_attention_forward`): only the band's scores.

Times are interleaved (one forward of each way in turn, `local_attention_repeats` rounds, median); so are those of
one layer's attention alone. Peak memory is each way's rise in resident memory over one forward pass (Linux's peak,
reset before the pass), in a fresh process per way and length. Beside them, the ratio of floating-point operations
in closed form: per layer and token, 2 x (4 d^2 + 2 d I) for the projections and FFN, plus 4 d x (keys scored) for
attention (QK^T and AV), the keys scored being n for full attention, 2w + 1 inside the window, and block + 2w as the
blocks compute them. Asked for by name: `hf-attn bench --sections local-attention`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from ...masking import band_blocks, distance_mask
from ...modeling_hf_attn import LOCAL_MIN_BLOCK, HfAttnModel, local_attention_forward
from ...timing import in_fresh_process, median_seconds, reset_resident_peak, resident_mib, use_threads
from ..models import hf_attn_config
from .base import BenchSection, option

if TYPE_CHECKING:  # the settings gather every section's fields
    from ..settings import BenchSettings

WAYS = ("full", "sliding (dense mask)", "sliding (band)")
CPU = torch.device("cpu")


def build_way(settings: BenchSettings, way: str, max_length: int, scheme: str) -> HfAttnModel:
    """The bench's encoder computing attention `way` (`WAYS`), seeded so that every way has the same weights."""
    overrides = {} if way == "full" else {"sliding_window": settings.local_attention_window}
    torch.manual_seed(settings.seed)
    model = HfAttnModel(hf_attn_config(settings, scheme, max_length, attention_dropout=0.0, hidden_dropout=0.0,
                                       **overrides)).eval()
    if way == "sliding (dense mask)":
        model._band_blocks = lambda *args, **kwargs: None  # the path before #51: the window as an n x n mask
    return model


def token_ids(settings: BenchSettings, length: int) -> torch.Tensor:
    """One row of `length` seeded token ids (never [PAD], the last id)."""
    generator = torch.Generator().manual_seed(settings.seed)
    return torch.randint(0, settings.vocab_size - 1, (1, length), generator=generator)


def flop_ratios(settings: BenchSettings, length: int) -> dict[str, float]:
    """Sliding over full attention, FLOPs of the attention alone and of the whole layer, for the window's own keys
    (2w + 1) and for the keys the blocks score (block + 2w)."""
    d, ffn, window = settings.hidden_size, settings.intermediate_size, settings.local_attention_window

    def per_token(keys_scored: int) -> float:  # forward FLOPs of one layer (the module's closed form)
        return 2 * (4 * d * d + 2 * d * ffn) + 4 * d * keys_scored

    block = max(window, LOCAL_MIN_BLOCK)
    ratios = {}
    for name, keys in (("window", min(2 * window + 1, length)), ("blocks", min(block + 2 * window, length))):
        ratios[f"attention ({name})"] = keys / length
        ratios[f"layer ({name})"] = per_token(keys) / per_token(length)
    return ratios


def attention_ways(settings: BenchSettings, module: torch.nn.Module, length: int) -> dict[str, Callable[[], Any]]:
    """One layer's attention (SDPA, the bench's heads) each way, on seeded queries, keys and values. The band's
    layout (`band_blocks`) is built inside each call, though the model builds it once for all its layers."""
    heads, window = settings.num_attention_heads, settings.local_attention_window
    generator = torch.Generator().manual_seed(settings.seed)
    query, key, value = (torch.randn(1, heads, length, settings.hidden_size // heads, generator=generator)
                         for _ in range(3))
    return {
        "full": lambda: sdpa_attention_forward(module, query, key, value, None, scaling=module.scaling),
        "sliding (dense mask)": lambda: sdpa_attention_forward(
            module, query, key, value, distance_mask(length, length, causal=False, sliding_window=window, device=CPU),
            scaling=module.scaling),
        "sliding (band)": lambda: local_attention_forward(
            module, query, key, value,
            band_blocks(None, 1, length, causal=False, sliding_window=window, block=max(window, LOCAL_MIN_BLOCK),
                        device=CPU),
            sdpa_attention_forward, scaling=module.scaling),
    }


def forward_peak_mib(settings: BenchSettings, way: str, length: int, threads: int) -> float:
    """MiB by which one forward pass raises the resident memory above what it was before the pass: the peak is
    reset first, so building the model does not hide it. Run in a fresh process (`in_fresh_process`)."""
    use_threads(threads)
    model = build_way(settings, way, length, settings.local_attention_scheme)
    input_ids = token_ids(settings, length)
    with torch.inference_mode():
        reset_resident_peak()
        before = resident_mib("VmRSS")
        model(input_ids)
        return resident_mib() - before


@dataclasses.dataclass(frozen=True)
class LocalAttentionSection(BenchSection):
    """A sliding window by blocks against full attention and the dense mask."""

    name: ClassVar[str] = "local-attention"
    local_attention_lengths: tuple[int, ...] = option((2048, 8192), "tokens of the local-attention section's input")
    local_attention_window: int = option(64, "radius of the local-attention section's window: keys on each side")
    local_attention_repeats: int = option(5, "timed forward passes of each way in the local-attention section")
    local_attention_scheme: str = option(
        "rope", "position scheme of the local-attention section's encoder (a bias scheme's bias is computed in the "
        "band too)")

    @classmethod
    def run(cls, settings: BenchSettings, device: torch.device) -> dict[str, Any]:
        """Per length: each way's median seconds, the attention alone's, the peak memory, and the measured and
        closed-form ratios (on the CPU: the memory is the process's)."""
        lengths, repeats = settings.local_attention_lengths, settings.local_attention_repeats
        scheme, window = settings.local_attention_scheme, settings.local_attention_window
        models = {way: build_way(settings, way, max(lengths), scheme) for way in WAYS}
        attention = build_way(settings, "full", max(lengths), "none").layers[0].self_attn
        rows = {}
        for length in lengths:
            input_ids = token_ids(settings, length)
            with torch.inference_mode():
                seconds = median_seconds({way: (lambda model=model: model(input_ids)) for way, model in models.items()},
                                         repeats=repeats)
                alone = median_seconds(attention_ways(settings, attention, length), repeats=repeats)
            flops, measured = flop_ratios(settings, length), seconds["sliding (band)"] / seconds["full"]
            rows[str(length)] = {
                "seconds": seconds,
                "attention_alone_seconds": alone,
                "attention_alone_band_over_full": alone["sliding (band)"] / alone["full"],
                "peak_memory_mib": {way: in_fresh_process(forward_peak_mib, settings, way, length,
                                                          torch.get_num_threads()) for way in WAYS},
                "band_over_full": measured,
                "band_over_dense_mask": seconds["sliding (band)"] / seconds["sliding (dense mask)"],
                "flop_ratio": flops,
                "measured_over_predicted": measured / flops["layer (window)"],
            }
        return {"what": f"reference encoder (d {settings.hidden_size}, {settings.num_hidden_layers} layers, "
                        f"{settings.num_attention_heads} heads, FFN {settings.intermediate_size}, {scheme} positions), "
                        f"fp32, batch 1, inference; sliding window of radius {window} ({2 * window + 1} keys) in every "
                        "layer",
                "block": max(window, LOCAL_MIN_BLOCK), "repeats": repeats, "lengths": rows}

    @classmethod
    def report(cls, record: dict[str, Any]) -> list[str]:
        body = [f"| {length} | " + " | ".join(f"{row['seconds'][way] * 1e3:.1f}" for way in WAYS)
                + f" | {row['band_over_full']:.2f} | {row['flop_ratio']['layer (window)']:.2f} | "
                f"{row['band_over_dense_mask']:.2f} | {row['attention_alone_band_over_full']:.3f} | "
                f"{row['flop_ratio']['attention (window)']:.3f} | "
                + " / ".join(f"{row['peak_memory_mib'][way]:.0f}" for way in WAYS) + " |"
                for length, row in record["lengths"].items()]
        return ["## Local attention: a sliding window by blocks against full attention and the dense mask", "",
                f"{record['what']}; blocks of {record['block']} tokens, median of {record['repeats']}. Band / full: "
                "measured, and predicted from FLOPs; attention alone: one layer's attention, band over full.", "",
                "| tokens | full ms | dense mask ms | band ms | band / full | predicted | band / dense mask | "
                "attention alone | predicted | peak MiB full / dense / band |",
                "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|", *body, ""]
