"""PNG pictures: attention heatmaps, the sinusoidal table, RoPE's relative-offset score decay.

matplotlib runs with the Agg backend, so every function works on a machine without a display.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import torch  # noqa: E402

from ..positions import sinusoidal_embedding  # noqa: E402


def _save(figure: plt.Figure, path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return path


def plot_attention_grid(
    weights: torch.Tensor,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    path: str | os.PathLike[str],
    title: str,
) -> Path:
    """One heatmap per head of a (heads, query, key) attention tensor, tokens on the axes."""
    heads = weights.shape[0]
    columns = min(heads, 4)
    rows = -(-heads // columns)
    size = max(3.0, 0.22 * max(len(query_tokens), len(key_tokens)))
    figure, axes = plt.subplots(rows, columns, figsize=(size * columns, size * rows), squeeze=False)
    for head, axis in enumerate(axes.flat):
        if head >= heads:
            axis.axis("off")
            continue
        axis.imshow(weights[head].float().numpy(), cmap="viridis", vmin=0.0, aspect="auto")
        axis.set_title(f"head {head}", fontsize=9)
        axis.set_xticks(range(len(key_tokens)), key_tokens, rotation=90, fontsize=6)
        axis.set_yticks(range(len(query_tokens)), query_tokens, fontsize=6)
    figure.suptitle(title)
    return _save(figure, path)


def plot_sinusoidal_table(path: str | os.PathLike[str], length: int = 128, dim: int = 384) -> Path:
    """The table added to token embeddings: positions down, channels across."""
    figure, axis = plt.subplots(figsize=(8, 4))
    table = sinusoidal_embedding(torch.arange(length), dim).numpy()
    image = axis.imshow(table, cmap="RdBu", aspect="auto", vmin=-1, vmax=1)
    axis.set_xlabel("channel")
    axis.set_ylabel("position")
    axis.set_title(f"Sinusoidal positions ({length} x {dim})")
    figure.colorbar(image, ax=axis)
    return _save(figure, path)


def rope_offset_scores(head_dim: int, max_offset: int, theta: float = 10_000.0) -> torch.Tensor:
    """q.k after rotation for q = k = all-ones, as a function of the offset, divided by its value at 0.

    Each channel pair (in either `rope_layout`) contributes 2 cos(offset * theta^(-2i/d)), so the score
    is the mean of those cosines: 1 at offset 0, decaying (with ripples) as the offset grows.
    """
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    offsets = torch.arange(max_offset + 1, dtype=torch.float64)
    return torch.cos(offsets[:, None] * inv_freq[None, :]).mean(dim=1)


def plot_rope_decay(path: str | os.PathLike[str], head_dims: Sequence[int] = (32, 64, 96),
                    max_offset: int = 512) -> Path:
    """RoPE's long-range decay: how much an all-ones query still scores an all-ones key `offset` away."""
    figure, axis = plt.subplots(figsize=(7, 4))
    for head_dim in head_dims:
        axis.plot(rope_offset_scores(head_dim, max_offset).numpy(), label=f"head_dim {head_dim}")
    axis.set_xlabel("relative offset |p - m|")
    axis.set_ylabel("normalised q.k")
    axis.set_title("RoPE: score decay with relative offset")
    axis.legend()
    return _save(figure, path)


def plot_perplexity_by_length(
    curves: Mapping[str, Mapping[int, float]], path: str | os.PathLike[str], training_length: int
) -> Path:
    """Perplexity against evaluation length, one line per position scheme, both axes logarithmic (the ALiBi
    paper's Figure 1); a dotted line marks the training length. A scheme's missing lengths (a learned table
    cannot be read past its end) are left out of its line."""
    figure, axis = plt.subplots(figsize=(7, 4.5))
    for scheme, curve in curves.items():
        lengths = sorted(curve)
        axis.plot(lengths, [curve[length] for length in lengths], marker="o", label=scheme)
    axis.axvline(training_length, color="grey", linestyle=":", label=f"training length {training_length}")
    axis.set_xscale("log", base=2)
    axis.set_yscale("log")
    axis.set_xlabel("evaluation length (tokens per non-overlapping window)")
    axis.set_ylabel("validation perplexity")
    axis.set_title("Causal LM on IMDb: perplexity beyond the training length")
    axis.legend()
    return _save(figure, path)


def plot_attention_maps(
    maps: Sequence[tuple[str, torch.Tensor]],
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    path: str | os.PathLike[str],
    title: str,
) -> Path:
    """Named (query, key) attention maps side by side, tokens on the axes: e.g. one per layer, heads averaged."""
    width = max(3.0, 0.3 * len(key_tokens))
    height = max(2.5, 0.3 * len(query_tokens))
    figure, axes = plt.subplots(1, len(maps), figsize=(width * len(maps), height), squeeze=False)
    for axis, (name, weights) in zip(axes.flat, maps):
        axis.imshow(weights.float().numpy(), cmap="viridis", vmin=0.0, aspect="auto")
        axis.set_title(name, fontsize=9)
        axis.set_xticks(range(len(key_tokens)), key_tokens, rotation=90, fontsize=7)
        axis.set_yticks(range(len(query_tokens)), query_tokens, fontsize=7)
    figure.suptitle(title, y=1.04)  # above the panel titles (the saved figure's box grows to hold it)
    return _save(figure, path)


def plot_line_panels(
    panels: Sequence[tuple[str, str, dict[str, tuple[Sequence[float], ...]]]],
    path: str | os.PathLike[str],
    xlabel: str,
    log_x: bool = False,
    columns: int = 3,
    legend_per_panel: bool = False,
) -> Path:
    """Panels in rows of at most `columns`, each (title, y label, {line name: (xs, ys) or (xs, ys, standard
    errors)}; errors are drawn as bars, so a reader sees which gaps are noise), with a shared x label; `log_x`
    spaces the x axis in powers of 2 (lengths that double), ticked at the lines' own x values. Lines named
    `group/variant` share a colour per group (a position scheme) and a line style per variant (a reading, an
    attention mode). One legend right of all panels serves panels that share their lines (a scheme per line);
    `legend_per_panel` gives each panel its own, for panels whose lines differ."""
    names = [name for _, _, series in panels for name in series]
    groups = list(dict.fromkeys(name.split("/", 1)[0] for name in names))
    variants = list(dict.fromkeys(name.partition("/")[2] for name in names))
    styles = ("-", "--", ":", "-.", (0, (5, 1)), (0, (1, 3)))
    width = min(len(panels), columns)
    rows = -(-len(panels) // width)
    figure, axes = plt.subplots(rows, width, figsize=(6.5 * width, 4.5 * rows), squeeze=False)
    for axis, (title, ylabel, series) in zip(axes.flat, panels):
        for name, (xs, ys, *errors) in series.items():
            group, _, variant = name.partition("/")
            axis.errorbar(xs, ys, yerr=errors[0] if errors else None, capsize=3, marker="o", label=name,
                          color=f"C{groups.index(group) % 10}", linestyle=styles[variants.index(variant) % len(styles)])
        if log_x:
            axis.set_xscale("log", base=2)
            ticks = sorted({x for xs, *_ in series.values() for x in xs})
            axis.set_xticks(ticks, [f"{tick:g}" for tick in ticks])
            axis.minorticks_off()
        axis.set_xlabel(xlabel)
        axis.set_ylabel(ylabel)
        axis.set_title(title)
    for axis in axes.flat[len(panels):]:
        axis.set_visible(False)
    if legend_per_panel:
        for axis in axes.flat[:len(panels)]:
            if axis.get_legend_handles_labels()[1]:
                axis.legend(fontsize=7)
        figure.tight_layout()
        return _save(figure, path)
    # One legend for all panels, right of them: inside a panel it hides the points of a dozen lines.
    handles = {label: handle for axis in axes.flat for handle, label in zip(*axis.get_legend_handles_labels())}
    if handles:
        figure.legend(list(handles.values()), list(handles), fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    figure.tight_layout()
    return _save(figure, path)
