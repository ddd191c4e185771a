"""One cached decoding step (a model forward of one new token after the prompt), hf-attn RoPE against Llama with
its weights, at the generation section's shape: the model's per-step cost alone, without `generate()`'s own
per-step work. The two steps alternate, 150 pairs per case; the cache is cut back to the prompt after each step.
Then hf-attn's own per-forward preparation (input-id check, masks, empty-row flags, RoPE angles), timed alone
(best of 3 x 2,000 calls) against its whole step after 128 tokens (best of 3 x 50).

Run from the repository root: `python scripts/bench_decode_step.py` (writes
results/bench/generation.decode-step.json).
"""

import json
import os
import statistics
import time
import timeit
from pathlib import Path

import torch

from hf_attn.bench.generation import build_decoders, prefill
from hf_attn.bench.settings import BenchSettings
from hf_attn.masking import key_padding_mask
from hf_attn.modeling_hf_attn import _check_input_ids, empty_rows

torch.set_num_threads(1)
PAIRS = 150
rows = []
for kv_heads in (4, 1):
    settings = BenchSettings(generation_kv_heads=(kv_heads,), generation_schemes=("rope",))
    decoders = build_decoders(settings, 2100, torch.device("cpu"))  # hf-attn RoPE, then Llama
    for context in (128, 2048):
        prompt = torch.randint(0, 7999, (1, context), generator=torch.Generator().manual_seed(0))
        caches = {d.name: prefill(d.model, prompt) for d in decoders}
        inputs = dict(input_ids=torch.tensor([[5]]), attention_mask=torch.ones(1, context + 1, dtype=torch.long),
                      position_ids=torch.tensor([[context]]), use_cache=True, logits_to_keep=1)
        times = {d.name: [] for d in decoders}
        for pair in range(PAIRS):
            for decoder in decoders[:: 1 if pair % 2 else -1]:
                with torch.no_grad():
                    start = time.perf_counter()
                    decoder.model(cache=caches[decoder.name], **inputs)
                    times[decoder.name].append(time.perf_counter() - start)
                caches[decoder.name].crop(-1)
        mine, llama = (times[d.name] for d in decoders)
        rows.append({"kv_heads": kv_heads, "context": context,
                     "hf_attn_median_ms": 1e3 * statistics.median(mine),
                     "llama_median_ms": 1e3 * statistics.median(llama),
                     "paired_speedup_vs_llama_median": statistics.median([b / a for a, b in zip(mine, llama)]),
                     "hf_attn_faster_in": f"{sum(a < b for a, b in zip(mine, llama))}/{PAIRS}"})
        print(rows[-1])


def best_us(call: object, number: int) -> float:
    return 1e6 * min(timeit.repeat(call, number=number, repeat=3)) / number


model, cache = decoders[0].model, prefill(decoders[0].model, prompt[:, :128])  # hf-attn, MQA, 128 tokens
inputs["attention_mask"], inputs["position_ids"] = torch.ones(1, 129, dtype=torch.long), torch.tensor([[128]])
mask = inputs["attention_mask"]
masks = model.model._self_attention_masks(mask, 1, mask.device, 129)


def whole_step() -> None:
    with torch.no_grad():
        model(cache=cache, **inputs)
    cache.crop(-1)


overhead = {
    "check_input_ids_us": best_us(lambda: _check_input_ids(inputs["input_ids"], model.config.vocab_size), 2000),
    "self_attention_masks_us": best_us(lambda: model.model._self_attention_masks(mask, 1, mask.device, 129), 2000),
    "empty_rows_us": best_us(lambda: [empty_rows(m) for m in masks.values()], 2000),
    "key_padding_mask_us": best_us(lambda: key_padding_mask(mask), 2000),
    "rope_angles_us": best_us(lambda: model.model.positions.attention_positions(inputs["position_ids"], 129), 2000),
    "whole_step_us": best_us(whole_step, 50),
}
overhead["share_of_step"] = sum(v for k, v in overhead.items() if k != "whole_step_us") / overhead["whole_step_us"]
print(overhead)
record = {"command": "python scripts/bench_decode_step.py", "threads": 1, "torch": torch.__version__,
          "load_average_end": list(os.getloadavg()), "rows": rows, "hf_attn_per_forward_preparation": overhead}
Path("results/bench/generation.decode-step.json").write_text(json.dumps(record, indent=2) + "\n")
