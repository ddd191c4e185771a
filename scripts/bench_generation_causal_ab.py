"""Prefill of an hf-attn RoPE decoder (the generation section's shape) before and after causal-only masks went to
SDPA as `is_causal`, side by side in one process on the same weights, interleaved, 10 repeats per case.

Run from the repository root: `python scripts/bench_generation_causal_ab.py` (it extracts hf_attn as of commit
83d6eb6, the last one before the change, into a temporary folder as `hf_attn_old`) and writes
results/bench/generation.causal-ab.json.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

OLD_COMMIT = "83d6eb6"
folder = Path(tempfile.mkdtemp())
subprocess.run(f"git archive {OLD_COMMIT} hf_attn | tar -x -C {folder}", shell=True, check=True)
(folder / "hf_attn").rename(folder / "hf_attn_old")
sys.path.insert(0, str(folder))

from hf_attn_old.modeling_hf_attn import HfAttnForCausalLM as OldCausalLM  # noqa: E402

from hf_attn import HfAttnForCausalLM  # noqa: E402
from hf_attn.bench.generation import decoder_config, prefill  # noqa: E402
from hf_attn.bench.settings import BenchSettings  # noqa: E402

torch.set_num_threads(1)
settings, rows = BenchSettings(), []
for kv_heads in (4, 1):
    torch.manual_seed(0)
    new = HfAttnForCausalLM(decoder_config(settings, "rope", kv_heads, 2100)).eval()
    old = OldCausalLM(new.config).eval()
    old.load_state_dict(new.state_dict())
    for context in (512, 2048):
        prompt = torch.randint(0, 7999, (1, context), generator=torch.Generator().manual_seed(0))
        times = {"old": [], "new": []}
        for repeat in range(10):
            for name, model in (("old", old), ("new", new))[:: 1 if repeat % 2 else -1]:
                start = time.perf_counter()
                prefill(model, prompt)
                times[name].append(time.perf_counter() - start)
        paired = [old_s / new_s for old_s, new_s in zip(times["old"], times["new"])]
        rows.append({"kv_heads": kv_heads, "context": context,
                     "old_median_ms": 1e3 * statistics.median(times["old"]),
                     "new_median_ms": 1e3 * statistics.median(times["new"]),
                     "paired_speedup_median": statistics.median(paired), "new_faster_in": sum(r > 1 for r in paired)})
        print(rows[-1])
record = {"command": "python scripts/bench_generation_causal_ab.py", "old_commit": OLD_COMMIT, "repeats": 10,
          "threads": 1, "torch": torch.__version__, "load_average_end": list(os.getloadavg()), "rows": rows}
Path("results/bench/generation.causal-ab.json").write_text(json.dumps(record, indent=2) + "\n")
