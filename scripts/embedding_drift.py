"""How far training moved the token embedding: the DAN's from its random init, each run's from the DAN.

The DAN of `hf-attn prepare` starts its embedding from nn.Embedding's N(0, 1) init under
`torch.manual_seed(seed)`; rebuilding the network with the same seed recreates that init exactly, so
the learned part of the embedding is (trained - init). An encoder run initialised from the DAN
embedding started at the DAN rows, so its learned part is (its table x its forward scale - DAN).
Drift is the Frobenius norm of the learned part over the norm of the starting table ([PAD] excluded).

    python scripts/embedding_drift.py --week3 runs/week3-8k --runs runs/sinusoidal runs/rope \\
        --out results/pretraining/embedding-drift.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from hf_attn.configuration_hf_attn import HfAttnConfig
from hf_attn.week3.dan import DeepAveragingNetwork
from hf_attn.week3.tensors import read_embedding


def relative_drift(start: torch.Tensor, end: torch.Tensor, pad_id: int) -> float:
    """||end - start|| / ||start|| over every row but [PAD]'s."""
    keep = torch.arange(start.shape[0]) != pad_id
    return float((end[keep] - start[keep]).norm() / start[keep].norm())


def run_embedding(run: Path) -> torch.Tensor:
    """The vectors a saved hf_attn model feeds its first block: its table times its forward scale."""
    config = HfAttnConfig.from_pretrained(run)
    weights = load_file(run / "model.safetensors")
    (table,) = [value for key, value in weights.items() if key.endswith("embed_tokens.weight")]
    return table * config.embedding_scale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--week3", type=Path, required=True, help="a folder written by hf-attn prepare")
    parser.add_argument("--seed", type=int, default=42, help="the seed prepare trained the DAN with")
    parser.add_argument("--runs", type=Path, nargs="*", default=[], help="saved runs started from that DAN")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    dan = read_embedding(args.week3 / "models" / "imdb_embedding_layer.pt")
    pad_id = json.loads((args.week3 / "models" / "vocab_config.json").read_text())["pad_id"]
    torch.manual_seed(args.seed)
    dan_init = DeepAveragingNetwork(dan.shape[0], pad_id, embedding_dim=dan.shape[1]).embedding.weight.detach()
    report = {
        "dan_value_std": float(dan.std()),
        "dan_drift_from_init": relative_drift(dan_init, dan, pad_id),
        "run_drift_from_dan": {str(run): relative_drift(dan, run_embedding(run), pad_id) for run in args.runs},
        "command": "python scripts/embedding_drift.py --week3 {} --seed {} --runs {} --out {}".format(
            args.week3, args.seed, " ".join(map(str, args.runs)), args.out),
    }
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
