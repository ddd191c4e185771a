"""`hf-attn probe`: the hard-review and contextual-vector probes of a saved classifier; with --output-dir also its
attention heatmaps, the position schemes' plots and probe.json."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..arguments import model_with_tokenizer, output_folder


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, type=model_with_tokenizer)
    parser.add_argument("--output-dir", type=output_folder,
                        help="write self- and cross-attention heatmaps, position plots, probe.json")
    parser.add_argument("--heatmap-text", help="review for the self-attention heatmaps (default: hard review 1)")


def run(args: argparse.Namespace) -> None:
    """Print both probes' tables; with --output-dir, draw the pictures and write probe.json beside them."""
    from ..analysis.plots import plot_rope_decay, plot_sinusoidal_table
    from ..analysis.probes import (
        HARD_REVIEWS,
        contextual_probe,
        cross_attention_probe,
        format_contextual,
        format_probe,
        run_hard_probe,
        self_attention_heatmaps,
    )
    from ..saved import classifier_pipeline
    from ..tokenization_hf_attn import check_encodable

    classifier = classifier_pipeline(args.model)
    results = run_hard_probe(classifier)
    print(format_probe(results))
    model, tokenizer = classifier.model, classifier.tokenizer
    contextual = contextual_probe(model, tokenizer)
    print("\nContextual vectors: cosine similarity of a word's vectors across its contexts, per layer\n")
    print(format_contextual(contextual))
    if args.output_dir is None:
        return
    output = Path(args.output_dir)
    text = args.heatmap_text or HARD_REVIEWS[0][0]
    check_encodable(text, "--heatmap-text")
    pictures = [str(p) for p in self_attention_heatmaps(model, tokenizer, text, output)]
    cross = cross_attention_probe(model.model, tokenizer, output)
    pictures += [record["png"] for record in cross]
    config = model.config
    pictures.append(str(plot_sinusoidal_table(output / "sinusoidal_table.png", config.max_position_embeddings,
                                              config.hidden_size)))
    pictures.append(str(plot_rope_decay(output / "rope_offset_decay.png")))
    summary = {"hard_probe_score": sum(r.correct for r in results), "hard_probe": [vars(r) for r in results],
               "contextual_vectors": [vars(result) for result in contextual], "cross_attention": cross,
               "pictures": pictures}
    (output / "probe.json").write_text(json.dumps(summary, indent=2))
    print(f"pictures and probe.json in {output}")
