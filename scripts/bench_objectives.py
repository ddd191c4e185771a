"""Time one pretraining step of each objective side by side: masked LM against replaced-token detection.

ELECTRA's step runs a generator and a per-token detector on top of the encoder, so it costs more than a
masked-LM step; this measures how much, for the model of a pretraining config, with both models'
steps interleaved (as in `hf-attn bench`) so that machine drift hits them alike:

    python scripts/bench_objectives.py --config configs/pretraining/pretrain-rope-rtd.yaml --threads 2

Writes a JSON record (`--output`) and prints the medians and their ratios.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
from pathlib import Path

import torch

from hf_attn import HfAttnConfig
from hf_attn.bench.timing import interleaved_times
from hf_attn.experiments.config import load_experiment
from hf_attn.experiments.pretraining import PRETRAINING_MODELS, mask_tokens


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/pretraining/pretrain-rope-rtd.yaml",
                        help="pretraining experiment YAML")
    parser.add_argument("--vocab-size", type=int, default=8001, help="vocabulary incl. [PAD] (the 8k Week 3 one)")
    parser.add_argument("--batch", type=int, default=32, help="chunks per step")
    parser.add_argument("--length", type=int, default=128, help="tokens per chunk")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps of each objective")
    parser.add_argument("--repeats", type=int, default=6, help="timed steps of each objective (median reported)")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    parser.add_argument("--output", default="results/bench/bench-objectives.json", help="JSON record")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    experiment = load_experiment(args.config)
    pad_id = args.vocab_size - 1
    config = HfAttnConfig(vocab_size=args.vocab_size, pad_token_id=pad_id, max_position_embeddings=args.length,
                          **{**experiment.model, "sparse_prediction": True})
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(0, pad_id, (args.batch, args.length), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    corrupted, labels = mask_tokens(input_ids, attention_mask, probability=experiment.pretraining.mlm_probability,
                                    mask_token_id=pad_id, replacement_ids=torch.arange(pad_id), generator=generator)

    steps, prepare = {}, {}
    for objective, model_class in PRETRAINING_MODELS.items():
        torch.manual_seed(0)
        model = model_class(copy.deepcopy(config))
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step(model: torch.nn.Module = model, optimizer: torch.optim.Optimizer = optimizer) -> None:
            model(input_ids=corrupted, attention_mask=attention_mask, labels=labels).loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        steps[objective], prepare[objective] = step, model.train
    times = interleaved_times(steps, prepare, args.warmup, args.repeats, torch.device("cpu"))
    medians = {objective: 1e3 * statistics.median(seconds) for objective, seconds in times.items()}

    record = {
        "config": args.config, "batch": args.batch, "length": args.length, "repeats": args.repeats,
        "threads": torch.get_num_threads(), "median_ms": medians, "rtd_over_mlm": medians["rtd"] / medians["mlm"],
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(record, indent=2) + "\n")
    print(f"masked LM {medians['mlm']:.0f} ms, replaced-token detection {medians['rtd']:.0f} ms per step: "
          f"{record['rtd_over_mlm']:.2f}x")
    return record


if __name__ == "__main__":
    main()
