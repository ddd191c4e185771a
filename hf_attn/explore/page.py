"""The explore page: Gradio components over `analysis`, for one or more saved classifiers.

The classifiers load on a background thread, so the page answers while a large one is still loading (the
models loaded so far read the text; the status line says which are still coming). Every error a reader can
cause (an empty text, a folder that is not a classifier) is one line on the page, never a traceback.
Nothing is fetched from the internet: analytics are off and the theme uses the system's fonts.
"""

from __future__ import annotations

import dataclasses
import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before gradio is imported: it reads it then

import tempfile  # noqa: E402
import threading  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import gradio as gr  # noqa: E402
import torch  # noqa: E402

from ..analysis.plots import plot_attention_grid, plot_line_panels  # noqa: E402
from ..analysis.probes import CONTEXT_WORDS, token_labels  # noqa: E402
from .analysis import (  # noqa: E402
    ExploredModel,
    Reading,
    Window,
    attention_by_distance,
    contextual_vectors,
    load_explored,
    read_text,
    sample_texts,
    scheme_curves,
    window_attentions,
    window_contributions,
)

HEATMAP_TOKENS = 64  # tokens of a window a heatmap shows: more leaves the axis labels unreadable
DISTANCE_WINDOWS = 8  # windows whose attention by distance is measured (the first 1,024 tokens at 128 a window)
# System fonts only: the default theme's Google font is a request to the internet on every page load.
THEME = gr.themes.Default(font=["ui-sans-serif", "system-ui", "sans-serif"],
                          font_mono=["ui-monospace", "monospace"])
# A 3,000-word review coloured in full would push everything else off the screen: it scrolls in its box.
CSS = "#coloured {max-height: 22em; overflow-y: auto}"


class ModelShelf:
    """The page's classifiers, loaded one after another on a background thread: each folder's model once it is
    ready, or the one-line reason it could not be loaded."""

    def __init__(self, model_dirs: Sequence[str]) -> None:
        self.model_dirs = list(model_dirs)
        self.models: dict[str, ExploredModel] = {}
        self.errors: dict[str, str] = {}
        self._thread = threading.Thread(target=self._load_all, daemon=True)
        self._thread.start()

    def _load_all(self) -> None:
        for model_dir in self.model_dirs:
            try:
                explored = load_explored(model_dir)
            except Exception as error:  # noqa: BLE001 - any failure is shown on the page as one line
                self.errors[model_dir] = one_line(error)
            else:
                self.models[model_dir] = explored

    @property
    def loading(self) -> bool:
        return self._thread.is_alive()

    def wait(self) -> None:
        """Block until every folder is loaded or has failed (the browser test, `app.py` on a Space)."""
        self._thread.join()

    def status(self) -> str:
        """One line per folder: its scheme once loaded, else loading or the reason it failed."""
        lines = []
        for model_dir in self.model_dirs:
            if model_dir in self.models:
                lines.append(f"- `{model_dir}`: {self.models[model_dir].scheme}, ready")
            elif model_dir in self.errors:
                lines.append(f"- `{model_dir}`: **error**: {self.errors[model_dir]}")
            else:
                lines.append(f"- `{model_dir}`: loading...")
        return "\n".join(lines)


def one_line(error: BaseException) -> str:
    """An exception as the page shows it: its type when the message alone would not say, first line only."""
    message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return message if isinstance(error, ValueError) else f"{type(error).__name__}: {message}"


def verdict_table(shelf: ModelShelf, readings: dict[str, Reading]) -> str:
    """A markdown table, one row per classifier: its scheme, label, score and how many windows it read."""
    rows = ["| model | scheme | label | score | windows read |", "|---|---|---|---|---|"]
    for model_dir, reading in readings.items():
        explored = shelf.models[model_dir]
        label = explored.model.config.id2label[reading.predicted]
        rows.append(f"| {explored.name} | {explored.scheme} | {label} | {float(reading.probabilities.max()):.3f} | "
                    f"{len(reading.windows)} |")
    return "\n".join(rows)


def window_views(explored: ExploredModel, reading: Reading) -> tuple[list, list[list[Any]]]:
    """The text coloured by the window that first reads each part (its push toward the label, scaled to the
    largest), and a table of the windows: number, tokens, push, the window's own verdict, its text."""
    id2label = explored.model.config.id2label
    toward, against = id2label[reading.predicted], id2label[reading.runner_up]
    pushes = window_contributions(reading)
    largest = max(abs(push) for push in pushes) or 1.0
    text = reading.text
    starts = [window.characters[0] for window in reading.windows] + [reading.windows[-1].characters[1]]
    coloured = [(text[begin:end], push / largest) for begin, end, push in zip(starts, starts[1:], pushes)]
    table = []
    for number, (window, push) in enumerate(zip(reading.windows, pushes)):
        alone = window.own_logits.softmax(-1)
        table.append([number, f"{window.start}-{window.start + len(window.ids) - 1}", round(push, 4),
                      f"{id2label[int(alone.argmax())]} {float(alone.max()):.3f}",
                      text[slice(*window.characters)]])
    headers = ["window", "tokens", f"push toward {toward} (vs {against})", "alone", "text"]
    return coloured, [headers, *table]


def heatmap_png(explored: ExploredModel, window: Window, weights: torch.Tensor, title: str, folder: Path) -> str:
    """Self-attention weights (heads, window, window) over (at most `HEATMAP_TOKENS` of) a window, as a PNG."""
    tokens = token_labels(explored.tokenizer, window.ids[:HEATMAP_TOKENS])
    path = tempfile.NamedTemporaryFile(suffix=".png", dir=folder, delete=False).name
    return str(plot_attention_grid(weights[:, : len(tokens), : len(tokens)], tokens, tokens, path, title))


def scheme_png(explored: ExploredModel, measured: torch.Tensor, windows: int, folder: Path) -> str:
    """The scheme's own curve beside the attention by distance measured on `windows` windows of the text, both
    against the distance, as a PNG."""
    title, ylabel, lines = scheme_curves(explored, explored.model.config.max_position_embeddings - 1)
    distances = list(range(measured.shape[1]))
    panels = [
        (title, ylabel, {name: (list(range(len(ys))), ys.tolist()) for name, ys in lines.items()}),
        (f"measured on {windows} window(s) of this text", "mean attention weight (heads averaged)",
         {f"layer {layer}": (distances, row.tolist()) for layer, row in enumerate(measured)}),
    ]
    path = tempfile.NamedTemporaryFile(suffix=".png", dir=folder, delete=False).name
    return str(plot_line_panels(panels, path, "distance |i - j| (tokens)", legend_per_panel=True))


def pictures(explored: ExploredModel, reading: Reading, window: int, layer: int, head: int,
             folder: Path) -> tuple[str, str]:
    """The heatmap of one window, layer and head, and the scheme's panel, as PNG paths. Attention weights are
    computed for that window and the first `DISTANCE_WINDOWS` (the distance panel's), no more."""
    config = explored.model.config
    window = min(max(window, 0), len(reading.windows) - 1)
    layer, head = min(max(layer, 0), config.num_hidden_layers - 1), min(max(head, 0), config.num_attention_heads - 1)
    numbers = sorted(set(range(min(len(reading.windows), DISTANCE_WINDOWS))) | {window})
    attentions = window_attentions(explored, reading, numbers)
    title = f"{explored.name} ({explored.scheme}): window {window}, layer {layer}, head {head}"
    heatmap = heatmap_png(explored, reading.windows[window], attentions[layer][numbers.index(window), head : head + 1],
                          title, folder)
    return heatmap, scheme_png(explored, attention_by_distance(reading, numbers, attentions), len(numbers), folder)


def contextual_table(shelf: ModelShelf, word: str, contexts: str) -> str:
    """A markdown table, one row per loaded classifier: the cosine similarity of `word`'s vectors across the
    sentences of `contexts`, before the first layer and after each; or the error lines."""
    rows, errors = [], []
    for explored in list(shelf.models.values()):
        try:
            result = contextual_vectors(explored, word, contexts)
        except ValueError as error:
            errors.append(f"**error** ({explored.name}): {one_line(error)}")
            continue
        if not rows:
            layers = [f"layer {layer}" for layer in range(1, len(result.between_contexts))]
            rows = ["| model | scheme | tokens | input | " + " | ".join(layers) + " |",
                    "|---|---|---|---|" + "---|" * len(layers)]
        values = " | ".join(f"{value:.3f}" for value in result.between_contexts)
        rows.append(f"| {explored.name} | {explored.scheme} | {' '.join(result.tokens)} | {values} |")
    return "\n\n".join(errors + ["\n".join(rows)] if rows else errors)


@dataclasses.dataclass
class PageActions:
    """What the page's buttons do: read a text with every loaded classifier, show the chosen one's windows, draw."""

    shelf: ModelShelf
    folder: Path  # where the pictures are drawn

    def read(self, text: str) -> tuple[str, str, dict[str, Reading]]:
        if not text.strip():
            return "**error**: the text is empty; type a review or pick a sample", "", {}
        readings, errors = {}, []
        for model_dir, explored in list(self.shelf.models.items()):
            try:
                readings[model_dir] = read_text(explored, text)
            except Exception as error:  # noqa: BLE001 - shown on the page as one line
                errors.append(f"**error** ({explored.name}): {one_line(error)}")
        if not readings:
            errors.append("**error**: no classifier is loaded yet; see the status above" if self.shelf.loading
                          else "**error**: no classifier could be loaded; see the status above")
        return "\n\n".join(errors), verdict_table(self.shelf, readings) if readings else "", readings

    @staticmethod
    def chosen(readings: dict[str, Reading], detail_dir: str) -> str:
        """The folder whose details are shown: the one asked for, else the first that read the text."""
        return detail_dir if detail_dir in readings else next(iter(readings))

    def details(self, readings: dict[str, Reading], detail_dir: str) -> tuple:
        if not readings:
            return None, None
        detail_dir = self.chosen(readings, detail_dir)
        coloured, table = window_views(self.shelf.models[detail_dir], readings[detail_dir])
        return coloured, {"headers": table[0], "data": table[1:]}

    def draw(self, readings: dict[str, Reading], detail_dir: str, window: float, layer: float, head: float) -> tuple:
        if not readings:
            return None, None
        detail_dir = self.chosen(readings, detail_dir)
        explored, reading = self.shelf.models[detail_dir], readings[detail_dir]
        return pictures(explored, reading, int(window), int(layer), int(head), self.folder)


def build_page(model_dirs: Sequence[str]) -> tuple[gr.Blocks, ModelShelf]:
    """The page over `model_dirs` (loading starts now, in the background) and the shelf that loads them."""
    shelf = ModelShelf(model_dirs)
    samples = sample_texts()
    actions = PageActions(shelf, Path(tempfile.mkdtemp(prefix="hf-attn-explore-")))
    with gr.Blocks(title="hf-attn explore") as page:
        gr.Markdown("# hf-attn explore: what each position scheme does to a review\n"
                    "Type or pick a review, then **Read**. Every classifier below reads it; the details are "
                    "those of the one chosen under *details of*.")
        status = gr.Markdown(shelf.status(), elem_id="status")
        with gr.Row():
            with gr.Column(scale=3):
                text = gr.Textbox(label="review", lines=6, max_lines=10, elem_id="review")
            with gr.Column(scale=1):
                sample = gr.Dropdown(list(samples), label="samples", value=None)
                detail = gr.Dropdown(list(model_dirs), value=model_dirs[0], label="details of")
                button = gr.Button("Read", variant="primary", elem_id="read")
        error = gr.Markdown(elem_id="error")
        verdicts = gr.Markdown(elem_id="verdicts")
        gr.Markdown("### Windows: each one's push on the pooled decision\nA long review is read as windows of "
                    "the model's positions; the pooled vector is their token-weighted mean, so the logits are one "
                    "term per window plus the head's bias. Each part of the text is coloured by the window that "
                    "first reads it: red pushes toward the verdict, purple against it.")
        coloured = gr.HighlightedText(label="the review, coloured by its windows' push", elem_id="coloured")
        windows = gr.Dataframe(label="windows", wrap=True, max_height=320, elem_id="windows")
        gr.Markdown("### The position scheme, and the attention measured on this text\nLeft: what the scheme "
                    "itself does with distance. Right: the mean attention weight between tokens that far apart, per "
                    "layer, in the first windows of the text.")
        scheme = gr.Image(label="scheme and attention by distance", show_label=False, type="filepath", elem_id="scheme")
        gr.Markdown(f"### Attention heatmap (eager)\nOne head of one layer over a window (its first "
                    f"{HEATMAP_TOKENS} tokens): queries down, keys across. Press Enter in a box to redraw.")
        with gr.Row():
            with gr.Column(scale=1):
                window = gr.Number(0, label="window", precision=0, minimum=0)
                layer = gr.Number(0, label="layer", precision=0, minimum=0)
                head = gr.Number(0, label="head", precision=0, minimum=0)
            with gr.Column(scale=3):
                heatmap = gr.Image(label="self-attention of one head", show_label=False, type="filepath",
                                   elem_id="heatmap")
        gr.Markdown("### Contextual vectors\nOne word in two or more sentences (one per line): the cosine similarity "
                    "of its vectors across the sentences, before the first layer and after each (a word of several "
                    "tokens is their mean). Without absolute positions it starts at exactly 1.")
        with gr.Row():
            with gr.Column(scale=1):
                word = gr.Textbox(CONTEXT_WORDS[0][0], label="word", elem_id="word")
                compare = gr.Button("Compare", elem_id="compare")
            with gr.Column(scale=3):
                contexts = gr.Textbox("\n".join(CONTEXT_WORDS[0][1]), label="sentences, one per line", lines=3,
                                      elem_id="contexts")
        similarities = gr.Markdown(elem_id="contextual")
        readings = gr.State({})

        timer = gr.Timer(1.0)
        timer.tick(lambda: (shelf.status(), gr.Timer(active=shelf.loading)), outputs=[status, timer])
        sample.change(lambda name: samples.get(name, ""), inputs=sample, outputs=text)
        drawn = [readings, detail, window, layer, head]
        gr.on([button.click, text.submit], actions.read, inputs=text, outputs=[error, verdicts, readings]).then(
            actions.details, inputs=[readings, detail], outputs=[coloured, windows]).then(
            actions.draw, inputs=drawn, outputs=[heatmap, scheme])
        detail.change(actions.details, inputs=[readings, detail], outputs=[coloured, windows]).then(
            actions.draw, inputs=drawn, outputs=[heatmap, scheme])
        gr.on([window.submit, layer.submit, head.submit], actions.draw, inputs=drawn, outputs=[heatmap, scheme])
        compare.click(lambda *typed: contextual_table(shelf, *typed), inputs=[word, contexts], outputs=similarities)
    return page, shelf


def launch(model_dirs: Sequence[str], port: int | None = None, wait: bool = False, **launch_kwargs: Any) -> gr.Blocks:
    """Build the page and serve it on 127.0.0.1:`port` (Gradio's default when None); `wait` loads every model
    before serving."""
    if not model_dirs:
        raise ValueError("pass at least one classifier folder with --model")
    page, shelf = build_page(model_dirs)
    if wait:
        shelf.wait()
    page.launch(server_port=port, theme=THEME, css=CSS, **launch_kwargs)
    return page
