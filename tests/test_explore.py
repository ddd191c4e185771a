"""`hf-attn explore`: the analysis behind the page against written-out references, and the page in a browser.

References: each window cut with Python slicing and encoded alone (its own logits and its share of the
decision), attention by distance summed pair by pair in loops, ALiBi slopes and sinusoidal similarity in
closed form. The browser test serves the page, types a review in headless Chromium and reads the label the
page shows against the pipeline's.
"""

from __future__ import annotations

import importlib.util
import math
import shutil
import sys
from pathlib import Path

import pytest
import torch
from helpers import REPO
from test_cli import save_tiny_classifier
from test_long_inputs import WINDOW

from hf_attn import HfAttnForMaskedLM, cli
from hf_attn.analysis.plots import rope_offset_scores
from hf_attn.explore import analysis
from hf_attn.explore.analysis import (
    attention_by_distance,
    load_explored,
    read_text,
    sample_texts,
    scheme_curves,
    window_attentions,
    window_contributions,
)
from hf_attn.positions import sinusoidal_embedding

STRIDE = 8
REVIEW = "a good film but a bad ending and good good bad " * 6


@pytest.fixture(scope="module")
def windowed_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny RoPE classifier (16 positions) that reads whole texts as windows 8 tokens apart."""
    folder = tmp_path_factory.mktemp("windowed")
    save_tiny_classifier(folder, read_length=10_000, window_stride=STRIDE)
    return folder


def windows_alone(model: torch.nn.Module, tokens: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Each window (starts 0, 8, ... until one reaches the end) encoded alone: its own logits, (windows, labels),
    and its share of the logits, (w_i / sum w) * W @ mean-pooled vector."""
    starts = [0]
    while starts[-1] + WINDOW < len(tokens):
        starts.append(starts[-1] + STRIDE)
    vectors = [model.model(input_ids=torch.tensor([tokens[start : start + WINDOW]])).last_hidden_state.mean(dim=1)[0]
               for start in starts]
    sizes = torch.tensor([len(tokens[start : start + WINDOW]) for start in starts], dtype=torch.float32)
    own = model.classifier(torch.stack(vectors))
    return own, (sizes / sizes.sum())[:, None] * (own - model.classifier.bias)


def test_windows_add_up_to_the_verdict_and_each_equals_the_window_read_alone(windowed_dir: Path) -> None:
    explored = load_explored(windowed_dir)
    reading = read_text(explored, REVIEW)
    tokens = explored.tokenizer(REVIEW)["input_ids"]
    with torch.no_grad():
        own, shares = windows_alone(explored.model, tokens)
    assert len(reading.windows) == own.shape[0] > 3
    torch.testing.assert_close(torch.stack([window.own_logits for window in reading.windows]), own)
    torch.testing.assert_close(torch.stack([window.contribution for window in reading.windows]), shares)
    torch.testing.assert_close(shares.sum(dim=0) + explored.model.classifier.bias, reading.logits)
    pipeline_scores = {item["label"]: item["score"] for item in explored.classifier([REVIEW], top_k=None)[0]}
    expected = torch.tensor([pipeline_scores[explored.model.config.id2label[i]] for i in range(2)])
    torch.testing.assert_close(reading.probabilities, expected)
    margin = reading.logits[reading.predicted] - reading.logits[reading.runner_up]
    bias = reading.bias
    assert sum(window_contributions(reading)) + float(bias[reading.predicted] - bias[reading.runner_up]) == \
        pytest.approx(float(margin), abs=1e-5)


def test_each_window_names_its_tokens_and_the_characters_they_cover(windowed_dir: Path) -> None:
    explored = load_explored(windowed_dir)
    reading = read_text(explored, REVIEW)
    encoded = explored.tokenizer(REVIEW, return_offsets_mapping=True)
    offsets = encoded["offset_mapping"]
    for number, window in enumerate(reading.windows):
        assert window.start == number * STRIDE
        end = min(window.start + WINDOW, len(offsets))
        assert window.ids.tolist() == encoded["input_ids"][window.start : end]
        assert window.characters == (offsets[window.start][0], offsets[end - 1][1])
    assert reading.windows[0].characters[0] == 0
    assert len(REVIEW.rstrip()) <= reading.windows[-1].characters[1] <= len(REVIEW)  # a word's token holds its space


def test_a_short_text_is_one_window_of_its_own_length(windowed_dir: Path) -> None:
    reading = read_text(load_explored(windowed_dir), "a good film")
    assert len(reading.windows) == 1 and reading.window_length == len(reading.windows[0].ids)


def test_window_attentions_are_the_classifiers_own(windowed_dir: Path) -> None:
    """The encoder run again on chosen windows gives the weights the classifier returns for those windows."""
    explored = load_explored(windowed_dir)
    reading = read_text(explored, REVIEW)
    encoded = explored.tokenizer(REVIEW, return_tensors="pt")
    with torch.no_grad():
        everything = explored.model(**encoded, output_attentions=True).attentions
    numbers = [1, len(reading.windows) - 1]  # a full window and the last, padded one
    for ours, theirs in zip(window_attentions(explored, reading, numbers), everything):
        torch.testing.assert_close(ours, theirs[numbers])


def test_a_text_read_whole_has_the_attention_of_its_first_tokens_read_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without windows a long text is one window; its weights are those of its first ATTENTION_TOKENS alone."""
    model = save_tiny_classifier(tmp_path, read_length=100).eval()  # rope, 16 positions, reads 100 tokens at once
    explored = load_explored(tmp_path)
    reading = read_text(explored, REVIEW)
    assert len(reading.windows) == 1 and reading.window_length == len(reading.windows[0].ids) > 40
    monkeypatch.setattr(analysis, "ATTENTION_TOKENS", 10)
    ours = window_attentions(explored, reading, [0])
    with torch.no_grad():
        alone = model.model(input_ids=reading.windows[0].ids[None, :10], output_attentions=True).attentions
    for layer_ours, layer_alone in zip(ours, alone):
        torch.testing.assert_close(layer_ours, layer_alone)
    assert attention_by_distance(reading, [0], ours).shape == (2, 10)


def test_attention_by_distance_is_the_mean_weight_of_real_pairs_that_far_apart(windowed_dir: Path) -> None:
    explored = load_explored(windowed_dir)
    reading = read_text(explored, REVIEW)
    numbers = [0, 2, len(reading.windows) - 1]
    attentions = window_attentions(explored, reading, numbers)
    measured = attention_by_distance(reading, numbers, attentions)
    for layer, weights in enumerate(attentions):
        sums, counts = [0.0] * WINDOW, [0] * WINDOW
        for row, number in enumerate(numbers):
            size = len(reading.windows[number].ids)
            for query in range(size):
                for key in range(size):
                    sums[abs(query - key)] += float(weights[row, :, query, key].mean())
                    counts[abs(query - key)] += 1
        expected = [total / count for total, count in zip(sums, counts)]
        assert measured[layer].tolist() == pytest.approx(expected, abs=1e-6)


def test_alibi_lines_are_each_heads_slope_times_the_distance(tmp_path: Path) -> None:
    save_tiny_classifier(tmp_path, position_embedding_type="alibi")
    _, _, lines = scheme_curves(load_explored(tmp_path), 10)
    for head, line in enumerate(lines.values()):  # 4 heads: slopes 2^-2, 2^-4, 2^-6, 2^-8 (Press et al.)
        assert line.tolist() == pytest.approx([-(2.0 ** (-2 * (head + 1))) * d for d in range(11)])


@pytest.mark.parametrize("rope_layout", ["halves", "interleaved"])
def test_rope_line_is_the_closed_form_decay_and_no_positions_or_cope_draw_no_line(
        tmp_path: Path, rope_layout: str) -> None:
    """The picture comes from the scheme's own rotation, in either layout: the mean of cos(d theta_i)."""
    save_tiny_classifier(tmp_path / "rope", position_embedding_type="rope", rope_layout=rope_layout)
    explored = load_explored(tmp_path / "rope")
    _, _, lines = scheme_curves(explored, 12)
    (line,) = lines.values()
    assert line.tolist() == pytest.approx(rope_offset_scores(explored.model.config.head_dim, 12).tolist(), abs=1e-5)
    save_tiny_classifier(tmp_path / "none", position_embedding_type="none")
    assert scheme_curves(load_explored(tmp_path / "none"), 12)[2] == {}
    save_tiny_classifier(tmp_path / "cope", position_embedding_type="cope")  # counts that depend on the text
    title, _, lines = scheme_curves(load_explored(tmp_path / "cope"), 12)
    assert lines == {} and "counted from the attention scores" in title


@pytest.mark.parametrize("scheme", ["t5", "fire"])
def test_a_learned_bias_is_drawn_as_each_heads_bias_on_a_key_that_far_back(tmp_path: Path, scheme: str) -> None:
    """The same picture as ALiBi's, from the model's own table (T5, buckets by transformers' T5) or MLP (FIRE, the
    paper's formula at the last query)."""
    from test_positions import fire_bias_by_the_formula
    from transformers.models.t5.modeling_t5 import T5Attention

    save_tiny_classifier(tmp_path, position_embedding_type=scheme)
    explored = load_explored(tmp_path)
    _, _, lines = scheme_curves(explored, 10)
    positions, config = explored.model.model.positions, explored.model.config
    if scheme == "t5":
        buckets = T5Attention._relative_position_bucket(-torch.arange(11), bidirectional=True, num_buckets=32,
                                                        max_distance=128)
        expected = positions.relative_attention_bias.weight[buckets].T  # (heads, distance)
    else:
        expected = torch.tensor([fire_bias_by_the_formula(positions, 10, 10 - d) for d in range(11)]).T
    assert len(lines) == config.num_attention_heads
    for line, head in zip(lines.values(), expected, strict=True):
        assert line.tolist() == pytest.approx(head.tolist(), abs=1e-5)


def test_sinusoidal_similarity_is_the_mean_cosine_of_the_offset_over_frequencies(tmp_path: Path) -> None:
    """PE(p) . PE(p + d) = sum_i cos(d w_i) for every p, and |PE(p)|^2 = dim / 2."""
    save_tiny_classifier(tmp_path, position_embedding_type="sinusoidal")
    explored = load_explored(tmp_path)
    _, _, lines = scheme_curves(explored, 12)
    dim = explored.model.config.hidden_size
    frequencies = [10_000 ** (-2 * i / dim) for i in range(dim // 2)]
    expected = [sum(math.cos(d * w) for w in frequencies) / len(frequencies) for d in range(13)]
    assert lines["positions"].tolist() == pytest.approx(expected, abs=1e-6)
    assert sinusoidal_embedding(torch.arange(3), dim).shape == (3, dim)


def test_an_empty_text_and_a_folder_without_a_classifier_are_one_line_errors(windowed_dir: Path,
                                                                              tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="the text is empty"):
        read_text(load_explored(windowed_dir), "  \n")
    save_tiny_classifier(tmp_path, HfAttnForMaskedLM)
    with pytest.raises(ValueError, match="no classifier head") as error:
        load_explored(tmp_path)
    assert "\n" not in str(error.value)


def test_the_samples_are_the_hard_reviews_and_a_long_test_review() -> None:
    samples = sample_texts()
    assert len(samples) == 7 and len(list(samples.values())[-1].split()) > 1000


def explore_screenshot_module():  # noqa: ANN201 - the script's module, imported from its path
    spec = importlib.util.spec_from_file_location("explore_screenshot", REPO / "scripts" / "explore_screenshot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_coloured_text_is_the_reviews_cut_at_window_starts_and_scaled_to_the_largest_push(
    windowed_dir: Path,
) -> None:
    pytest.importorskip("gradio")
    from hf_attn.explore.page import window_views

    explored = load_explored(windowed_dir)
    reading = read_text(explored, REVIEW)
    coloured, table = window_views(explored, reading)
    assert "".join(part for part, _ in coloured) == REVIEW[: reading.windows[-1].characters[1]]
    assert [part for part, _ in coloured][1].startswith(REVIEW[reading.windows[1].characters[0]:][:5])
    pushes = window_contributions(reading)
    largest = max(abs(push) for push in pushes)
    assert [score for _, score in coloured] == pytest.approx([push / largest for push in pushes])
    assert [row[2] for row in table[1:]] == pytest.approx(pushes, abs=1e-4)


def test_the_page_shows_load_errors_on_the_status_line(windowed_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("gradio")
    from hf_attn.explore.page import ModelShelf

    shelf = ModelShelf([str(windowed_dir), str(tmp_path / "nothing")])
    shelf.wait()
    lines = shelf.status().splitlines()
    assert lines[0].endswith("rope, ready")
    assert "**error**" in lines[1] and len(lines) == 2


def test_each_scheme_panel_has_a_legend_of_its_own_lines(windowed_dir: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The scheme's curve (one line) and the attention measured by layer sit side by side: each panel's legend
    names its own lines, none of the other panel's."""
    pytest.importorskip("gradio")
    from hf_attn.analysis import plots
    from hf_attn.explore.page import scheme_png

    drawn = []
    monkeypatch.setattr(plots, "_save", lambda figure, path: drawn.append(figure) or Path(path))
    explored = load_explored(windowed_dir)
    layers = explored.model.config.num_hidden_layers
    scheme_png(explored, torch.rand(layers, 5), 1, tmp_path)
    (figure,) = drawn
    curve, measured = (axis.get_legend() for axis in figure.axes[:2])
    assert [text.get_text() for text in curve.get_texts()] == [f"head_dim {explored.model.config.head_dim}"]
    assert [text.get_text() for text in measured.get_texts()] == [f"layer {layer}" for layer in range(layers)]
    assert not figure.legends  # no legend of the whole figure beside the second panel


@pytest.mark.browser
@pytest.mark.timeout(120)
def test_a_review_typed_in_chromium_gets_the_pipelines_label(windowed_dir: Path, tmp_path: Path) -> None:
    """The page as `hf-attn explore` serves it, driven by headless Chromium: the label it shows is the
    pipeline's, a folder without a classifier and an empty text are one error line each, and the page asks
    nothing of any host but its own."""
    pytest.importorskip("gradio")
    pytest.importorskip("selenium")
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("Debian's chromium and chromium-driver are not installed (.ci/run installs them)")
    from hf_attn.explore.page import launch

    driving = explore_screenshot_module()
    explored = load_explored(windowed_dir)
    expected = explored.classifier([REVIEW])[0]
    port = driving.free_port()
    save_tiny_classifier(tmp_path, HfAttnForMaskedLM)
    page = launch([str(windowed_dir), str(tmp_path)], port, wait=True, prevent_thread_lock=True, quiet=True)
    driver = driving.headless_chromium(1200, 900)
    try:
        shown = driving.read_in_browser(driver, f"http://127.0.0.1:{port}/", REVIEW)
        assert len(shown.splitlines()) == 2  # the header and the one classifier
        row = shown.splitlines()[-1].split()
        assert row[:3] == [windowed_dir.name, "rope", expected["label"]]
        status = driver.find_element(driving.By.ID, "status").text
        assert "rope, ready" in status and "error: " in status and "no classifier head" in status
        assert float(row[3]) == pytest.approx(expected["score"], abs=1e-3)
        assert driving.read_in_browser(driver, f"http://127.0.0.1:{port}/", "") == \
            "error: the text is empty; type a review or pick a sample"
        assert driving.requested_hosts(driver) == {"127.0.0.1"}
    finally:
        driver.quit()
        page.close()


def test_explore_without_gradio_names_the_app_extra(
    windowed_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delitem(sys.modules, "hf_attn.explore.page", raising=False)
    monkeypatch.setitem(sys.modules, "gradio", None)  # import gradio -> ModuleNotFoundError
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["explore", "--model", str(windowed_dir)])
    assert exit_info.value.code == 2 and "pip install 'hf-attn[app]'" in capsys.readouterr().err


def test_the_contextual_table_has_a_row_per_model_starting_at_one_and_one_line_errors(windowed_dir: Path) -> None:
    pytest.importorskip("gradio")
    from hf_attn.explore.page import ModelShelf, contextual_table

    shelf = ModelShelf([str(windowed_dir)])
    shelf.wait()
    table = contextual_table(shelf, " good ", "a good film\n\n  but the ending was not good  \n")
    header, _, row = table.splitlines()
    layers = shelf.models[str(windowed_dir)].model.config.num_hidden_layers
    assert header.count("layer") == layers
    cells = row.split(" | ")
    assert cells[1] == "rope" and cells[3] == "1.000"  # rope: the word's vectors are identical at the input
    assert contextual_table(shelf, "", "a good film\nnot good").startswith("**error**")
    error = contextual_table(shelf, "good", "a good film")
    assert "at least two contexts" in error and "\n" not in error
