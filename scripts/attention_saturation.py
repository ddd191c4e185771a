"""Why scaled dot-product attention divides by sqrt(d_k): softmax saturation, measured beside its closed form.

For each key width d_k, draws random queries and keys with unit-variance entries (q, k ~ N(0, I)), scores n keys
per query unscaled (q . k, whose variance is d_k) and scaled (q . k / sqrt(d_k), variance 1), and measures

* the entropy of the attention weights (nats; log n is uniform attention, 0 a single key), and
* the gradient norm that reaches the scores and the query through the softmax, for the loss sum_j g_j p_j with a
  random N(0, 1) g_j per key (a stand-in for what the layer above asks of the weights, the same at every width).

Beside the entropy, the closed form for logits that are n independent N(0, s^2): its expectation computed
numerically (Monte Carlo over Gaussian logits alone, no q or k), and the large-n approximation log n - s^2 / 2
(Z = sum_j exp(s_j) ~ n exp(s^2 / 2), and the softmax-weighted mean logit is s^2), valid while s^2 is well below
2 log n. Unscaled, s^2 = d_k; scaled, s^2 = 1 at every width.

    python scripts/attention_saturation.py --output-dir results/attention-notes
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch

WIDTHS = (8, 16, 32, 64, 128, 256, 512)


def entropy(weights: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of each row of softmax weights (0 log 0 = 0)."""
    return -(weights * weights.clamp_min(1e-45).log()).sum(dim=-1)


def measure(width: int, keys: int, queries: int, scaled: bool, generator: torch.Generator) -> dict[str, float]:
    """Mean attention entropy and median gradient norms (scores, query) over `queries` random queries."""
    query = torch.randn(queries, width, generator=generator, dtype=torch.float64).requires_grad_()
    key = torch.randn(queries, keys, width, generator=generator, dtype=torch.float64)
    upstream = torch.randn(queries, keys, generator=generator, dtype=torch.float64)
    scores = torch.einsum("qd,qkd->qk", query, key) / (math.sqrt(width) if scaled else 1.0)
    scores.retain_grad()
    weights = scores.softmax(dim=-1)
    loss = (weights * upstream).sum()  # rows are independent: one backward gives every row's gradient
    loss.backward()
    return {
        "entropy_nats": entropy(weights.detach()).mean().item(),
        "score_variance": scores.detach().var().item(),
        "score_grad_norm": scores.grad.norm(dim=-1).median().item(),
        "query_grad_norm": query.grad.norm(dim=-1).median().item(),
    }


def gaussian_logit_entropy(variance: float, keys: int, samples: int, generator: torch.Generator) -> float:
    """E[entropy of softmax(s)] for s of `keys` independent N(0, variance) logits, by Monte Carlo."""
    logits = torch.randn(samples, keys, generator=generator, dtype=torch.float64) * math.sqrt(variance)
    return entropy(logits.softmax(dim=-1)).mean().item()


def large_n_entropy(variance: float, keys: int) -> float:
    """log n - s^2 / 2: the expected entropy for many keys, while s^2 is well below 2 log n."""
    return math.log(keys) - variance / 2


def run(keys: int, queries: int, samples: int, seed: int) -> dict:
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for width in WIDTHS:
        for scaled in (False, True):
            variance = 1.0 if scaled else float(width)
            rows.append({
                "d_k": width,
                "scaled": scaled,
                **measure(width, keys, queries, scaled, generator),
                "closed_form_variance": variance,
                "closed_form_entropy_nats": gaussian_logit_entropy(variance, keys, samples, generator),
                "large_n_entropy_nats": large_n_entropy(variance, keys),
            })
    return {"keys": keys, "queries_per_width": queries, "closed_form_samples": samples, "seed": seed,
            "uniform_entropy_nats": math.log(keys), "rows": rows}


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for scaled, colour, label in ((False, "tab:red", "q.k (unscaled)"), (True, "tab:blue", "q.k / sqrt(d_k)")):
        rows = [row for row in results["rows"] if row["scaled"] is scaled]
        widths = [row["d_k"] for row in rows]
        left.plot(widths, [row["entropy_nats"] for row in rows], "o-", color=colour, label=f"{label}: measured")
        left.plot(widths, [row["closed_form_entropy_nats"] for row in rows], "x--", color=colour,
                  label=f"{label}: Gaussian logits, var {'1' if scaled else 'd_k'}")
        right.plot(widths, [row["score_grad_norm"] for row in rows], "o-", color=colour, label=f"{label}: scores")
        right.plot(widths, [row["query_grad_norm"] for row in rows], "s:", color=colour, label=f"{label}: query")
    valid = [row for row in results["rows"] if row["large_n_entropy_nats"] > 0]  # negative: far outside its range
    left.plot([row["d_k"] for row in valid], [row["large_n_entropy_nats"] for row in valid], "+", color="grey",
              markersize=9, label="log n - s^2 / 2 (large n), where positive")
    left.axhline(results["uniform_entropy_nats"], color="black", linewidth=0.8, label="log n (uniform)")
    for axis in (left, right):
        axis.set_xscale("log", base=2)
        axis.set_xlabel("d_k")
    left.set_ylabel(f"attention entropy, nats ({results['keys']} keys)")
    right.set_yscale("log")
    right.set_ylabel("median gradient norm")
    left.legend(fontsize=7)
    right.legend(fontsize=7)
    left.set_title("Softmax saturation")
    right.set_title("Gradient through the softmax")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-dir", type=Path, default=Path("results/attention-notes"))
    parser.add_argument("--keys", type=int, default=64, help="keys each query attends over (n)")
    parser.add_argument("--queries", type=int, default=2000, help="random queries per width")
    parser.add_argument("--samples", type=int, default=20000, help="Monte Carlo rows of the closed form")
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args()
    results = run(arguments.keys, arguments.queries, arguments.samples, arguments.seed)
    results["command"] = ("python scripts/attention_saturation.py --output-dir "
                          f"{arguments.output_dir} --keys {arguments.keys} --queries {arguments.queries} "
                          f"--samples {arguments.samples} --seed {arguments.seed}")
    arguments.output_dir.mkdir(parents=True, exist_ok=True)
    (arguments.output_dir / "saturation.json").write_text(json.dumps(results, indent=2) + "\n")
    plot(results, arguments.output_dir / "saturation.png")
    for row in results["rows"]:
        print(f"d_k {row['d_k']:4d} {'scaled  ' if row['scaled'] else 'unscaled'} entropy {row['entropy_nats']:.3f} "
              f"(closed form {row['closed_form_entropy_nats']:.3f}, large n {row['large_n_entropy_nats']:.2f}) "
              f"grad scores {row['score_grad_norm']:.3g} query {row['query_grad_norm']:.3g}")


if __name__ == "__main__":
    main()
