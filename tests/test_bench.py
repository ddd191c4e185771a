"""Tests for hf_attn.bench: the whole benchmark end to end at toy sizes (seconds, not minutes), and its
ModernBERT anchor against the shape it must match."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import torch
from helpers import REPO
from test_export import needs_onnx
from torch import nn

from hf_attn import HfAttnForSequenceClassification
from hf_attn.bench import BenchSettings, add_arguments, format_markdown, run_benchmark, run_from_args, runner
from hf_attn.bench.flops import step_flops
from hf_attn.bench.markdown import table
from hf_attn.bench.models import (
    ANCHOR_BUILDERS,
    ANCHORS,
    build_candidates,
    build_modernbert,
    encoder_layers,
    hf_attn_config,
)
from hf_attn.bench.report import (
    RECORDS_BEGIN,
    RECORDS_END,
    read_records,
    records_table,
    with_records_table,
)
from hf_attn.bench.sections import BENCH_SECTIONS, BenchSection, section_names
from hf_attn.bench.sections.base import option
from hf_attn.bench.sections.generation import (
    build_decoders,
    decode_steps,
    prefill,
)
from hf_attn.bench.sections.realistic import epoch_batches
from hf_attn.bench.sections.throughput import _faster_repeats
from hf_attn.bench.settings import SharedSettings, settings_class
from hf_attn.bench.timing import infer_step, make_batch, train_step
from hf_attn.caching import GrowingCacheLayer
from hf_attn.positions import POSITION_SCHEMES
from hf_attn.timing import cpu_description, interleaved_times, peak_memory_bytes, summarize

# Every section and every scheme, at sizes that make each step a few milliseconds.
TOY = [
    "--hidden-size", "32", "--num-hidden-layers", "2", "--num-attention-heads", "4", "--intermediate-size", "64",
    "--vocab-size", "64", "--train-batch", "2", "--infer-batch", "2", "--seq-lengths", "8,16",
    "--warmup", "1", "--repeats", "1", "--scaling-lengths", "8,16", "--scaling-batch", "2", "--scaling-repeats", "1",
    "--epoch-reviews", "12", "--realistic-batch", "4", "--realistic-max-lengths", "16,32", "--group-megabatch", "2",
    "--profile-steps", "1", "--profile-seq", "16", "--threads", "1",
]


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, Path]:
    """One toy run through the command-line path, with a fake tokenizer-benchmark JSON to merge."""
    out = tmp_path_factory.mktemp("bench")
    tokenizer_report = {"reviews": 40, "rows": [{"method": "fast", "seconds": 0.1, "reviews_per_s": 400}]}
    (out / "tokenizer.json").write_text(json.dumps(tokenizer_report))  # the layout scripts/bench_tokenizer.py writes
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(TOY + [
        "--output", str(out / "bench.json"), "--markdown", str(out / "bench.md"),
        "--plot", str(out / "scaling.png"), "--tokenizer-json", str(out / "tokenizer.json"),
    ])
    run_from_args(args)
    return json.loads((out / "bench.json").read_text()), (out / "bench.md").read_text(), out


def test_every_model_and_scheme_has_a_row(toy_run: tuple[dict, str, Path]) -> None:
    results, markdown, _ = toy_run
    rows = results["throughput"]["rows"]
    expected = {("hf-attn", scheme, backend) for scheme in POSITION_SCHEMES for backend in ("eager", "sdpa")}
    variants = ("hf-attn (rope_layout=interleaved)",)  # beside the defaults
    expected |= {(family, "rope", backend) for family in variants for backend in ("eager", "sdpa")}
    expected |= {(anchor, scheme, backend) for anchor, scheme in
                 (("BERT", "absolute"), ("ModernBERT", "rope"), ("ModernBERT-defaults", "rope"))
                 for backend in ("eager", "sdpa")}
    expected.add(("RoFormer", "rope", "eager"))  # RoFormer has no SDPA path
    for mode in ("train", "infer"):
        for seq in (8, 16):
            for precision in ("fp32", "bf16"):
                case = {(r["family"], r["scheme"], r["backend"]) for r in rows
                        if (r["mode"], r["seq"], r["precision"]) == (mode, seq, precision)}
                assert case == expected
    assert all(r["median_ms"] > 0 and r["peak_mib"] >= 0 for r in rows)
    assert all(f"speedup_vs_{anchor}" in r for r in rows for anchor in ANCHORS)
    for r in rows:  # the yardstick: the fastest peer of the same precision at its fastest attention (RoPE: the
        # rotary models only)
        case = [x for x in rows if (x["mode"], x["seq"], x["precision"]) == (r["mode"], r["seq"], r["precision"])]
        fastest = {family: min(x["median_ms"] for x in case if x["family"] == family) for family in ANCHORS}
        peers = ("RoFormer", "ModernBERT") if r["scheme"] == "rope" else ("BERT", "RoFormer", "ModernBERT")
        if r["family"] in ANCHORS:
            assert "speedup_vs_peer" not in r and "goal" not in r
            continue
        assert r["speedup_vs_peer"] == pytest.approx(min(fastest[p] for p in peers) / r["median_ms"])
        assert r["fastest_peer"] == min(peers, key=fastest.__getitem__)
        assert any(x["family"] == r["fastest_peer"] and x["backend"] == r["fastest_peer_backend"]
                   and x["median_ms"] == fastest[r["fastest_peer"]] for x in case)
        own = [x["median_ms"] for x in case if (x["family"], x["scheme"]) == (r["family"], r["scheme"])]
        assert r.get("goal", False) == (r["family"] == "hf-attn" and r["median_ms"] == min(own))
    assert "| vs BERT | vs RoFormer | vs ModernBERT | vs ModernBERT-defaults | vs fastest peer |" in markdown
    for family, scheme, backend in expected:
        assert f"| {family} | {scheme} | {backend} |" in markdown
    for heading in ("## Throughput", "### Matrix-multiply peak", "### hf-attn against its fastest peer",
                    "### Model-FLOPs utilisation",
                    "### Training (forward + backward + AdamW, bf16), batch 2, sequence 8",
                    "## Attention cost scaling", "## Realistic batches", "## Profile (hf-attn rope sdpa training, bf16",
                    "## Profile (ModernBERT rope sdpa training, bf16", "## Tokenizer speed", "| fast | 0.1 | 400 |",
                    "reviews 40."):
        assert heading in markdown


def test_goals_summarise_hf_attn_at_its_fastest_against_its_fastest_peer(toy_run: tuple[dict, str, Path]) -> None:
    """The summary counts, per precision, hf-attn's cells (the faster of its two attentions) at 1.0x of the fastest
    peer or better and their geometric mean, recomputed here from the rows; the goals over every cell add the
    realistic epochs."""
    results, markdown, _ = toy_run
    section = results["throughput"]
    for precision in ("fp32", "bf16", "all"):
        ratios = []
        for scheme in POSITION_SCHEMES:
            for mode in ("train", "infer"):
                for seq in (8, 16):
                    for cell_precision in ("fp32", "bf16") if precision == "all" else (precision,):
                        own = [r for r in section["rows"] if (r["family"], r["scheme"], r["mode"], r["seq"],
                                                              r["precision"]) == ("hf-attn", scheme, mode, seq,
                                                                                   cell_precision)]
                        ratios.append(min(own, key=lambda r: r["median_ms"])["speedup_vs_peer"])
        goal = section["goals"][precision]
        assert goal["cells"] == len(ratios) == len(POSITION_SCHEMES) * 2 * 2 * (2 if precision == "all" else 1)
        assert goal["met"] == sum(ratio >= 1.0 for ratio in ratios)
        assert goal["geomean"] == pytest.approx(math.prod(ratios) ** (1 / len(ratios)))
    assert section["goals"]["all"]["training_mfu"] is None  # peaks of two precisions are not one yardstick
    # The ceiling of each scheme's cells: 1 / the MFU of the fastest peer at its fastest attention.
    ceilings = markdown.split("The ceiling", 1)[1].split("###", 1)[0]
    for scheme in POSITION_SCHEMES:
        expected = []
        for r in (r for r in section["rows"] if r.get("goal") and r["scheme"] == scheme):
            peer = min((x for x in section["rows"] if (x["family"], x["mode"], x["seq"], x["precision"])
                        == (r["fastest_peer"], r["mode"], r["seq"], r["precision"])), key=lambda x: x["median_ms"])
            expected.append(f"{1 / peer['mfu']:.2f}x")
        assert f"| {scheme} | {' | '.join(expected)} |" in ceilings
    for precision in ("fp32", "bf16"):
        ratios = [r["speedup_vs_peer"] for r in section["rows"] if r.get("goal") and r["precision"] == precision]
        ratios += [r["speedup_vs_peer"] for run in results["realistic"]["runs"] if run["precision"] == precision
                   for r in run["rows"]]
        cells = len(POSITION_SCHEMES) * 2 * 2 + 2 * 3  # + 2 truncation lengths x 3 paddings
        mean = math.prod(ratios) ** (1 / len(ratios))
        assert len(ratios) == cells
        met = sum(r >= 1.0 for r in ratios)
        assert f"| {precision} | {met}/{cells} | {min(ratios):.2f}x | {mean:.2f}x |" in markdown


def test_baselines_have_the_same_shape(toy_run: tuple[dict, str, Path]) -> None:
    models = {m["family"]: m for m in toy_run[0]["throughput"]["models"]}
    reference = models["hf-attn"]
    for family in ANCHORS:
        assert models[family]["hidden_size"] == reference["hidden_size"] == 32
        assert models[family]["num_layers"] == reference["num_layers"] == 2
        ratio = models[family]["encoder_layer_params"] / reference["encoder_layer_params"]
        assert 0.95 < ratio < 1.05, (family, ratio)


def test_other_sections_and_outputs(toy_run: tuple[dict, str, Path]) -> None:
    results, _, out = toy_run
    json.dumps(results)  # already parsed from disk; this also guards against in-memory non-JSON types
    scaling = results["scaling"]["rows"]
    assert {(r["seq"], r["backend"]) for r in scaling} == {(8, "eager"), (8, "sdpa"), (16, "eager"), (16, "sdpa")}
    assert (out / "scaling.png").stat().st_size > 0
    runs = results["realistic"]["runs"]
    assert [(run["max_length"], run["precision"]) for run in runs] == [(16, "fp32"), (32, "fp32"), (16, "bf16"),
                                                                        (32, "bf16")]
    for run in runs:
        width = run["max_length"]
        realistic = {r["strategy"]: r for r in run["rows"]}
        assert set(realistic) == {"fixed", "dynamic", "grouped"}
        assert realistic["fixed"]["padded_tokens"] == 12 * width
        assert realistic["grouped"]["padded_tokens"] <= realistic["dynamic"]["padded_tokens"] <= 12 * width
        assert len({r["real_tokens"] for r in realistic.values()}) == 1
        for row in realistic.values():  # hf-attn unpadded and padded, and RoPE's peers, on the same batches
            epochs = row["epoch_s_by_model"]
            assert list(epochs) == ["hf-attn", "hf-attn (unpad_inputs=False)", "RoFormer", "ModernBERT"]
            assert row["epoch_s"] == epochs["hf-attn"]
            assert row["speedup_vs_peer"] == min(epochs["RoFormer"], epochs["ModernBERT"]) / epochs["hf-attn"]
            assert row["fastest_peer"] == min(("RoFormer", "ModernBERT"), key=epochs.__getitem__)
            assert row["speedup_vs_padded"] == epochs["hf-attn (unpad_inputs=False)"] / epochs["hf-attn"]
            # Each model at the fastest of its attentions (RoFormer has eager alone).
            timed = row["epoch_s_by_model_and_backend"]
            assert set(timed) == {f"{name} {backend}" for name in epochs for backend in ("eager", "sdpa")} - {
                "RoFormer sdpa"}
            for name, seconds in epochs.items():
                assert seconds == min(value for key, value in timed.items() if key.rsplit(" ", 1)[0] == name)
                assert timed[f"{name} {row['backend_by_model'][name]}"] == seconds
    # Truncating shorter can only cut tokens, never add them.
    assert runs[0]["rows"][0]["real_tokens"] <= runs[1]["rows"][0]["real_tokens"]
    profiles = results["profile"]["models"]
    assert list(profiles) == ["hf-attn rope sdpa", "ModernBERT rope sdpa"]  # the default anchor beside hf-attn
    assert all(profile["top_ops"] and profile["step_ms"] > 0 for profile in profiles.values())
    assert results["tokenizer"]["rows"][0]["method"] == "fast"
    assert results["settings"]["seq_lengths"] == [8, 16]


def test_rows_carry_model_flops_and_mfu_against_the_peak_of_their_precision(toy_run: tuple[dict, str, Path]) -> None:
    """hf-attn's FLOPs per token by hand from the toy shape (d 32, FFN 64, 2 layers, 2 labels): per layer
    Q/K/V + output 4 d^2 and FFN 2 d I multiply-adds per token, attention 4 T d, the classifier 2 d per
    sequence; training 3 x; FIRE's MLP (1 -> 32 -> 4 heads) once per query-key pair. MFU = FLOPs x tokens/s over
    the matmul FLOP/s measured interleaved in the row's own case: the four GEMM shapes' FLOPs over that step's
    median time."""
    section = toy_run[0]["throughput"]
    d, ffn, layers = 32, 64, 2
    assert {(c["mode"], c["seq"], c["precision"]) for c in section["matmul_interleaved"]} == {
        (mode, seq, precision) for mode in ("train", "infer") for seq in (8, 16) for precision in ("fp32", "bf16")}
    assert set(section["matmul_peak"]) == {"fp32", "bf16"}
    for peak in section["matmul_peak"].values():
        assert peak["gflops"] == max(shape["gflops"] for shape in peak["shapes"]) > 0
        rows = 2 * 8  # a training batch at the shortest length
        assert [shape["shape"] for shape in peak["shapes"]] == [[rows, d, 3 * d], [rows, d, d], [rows, d, ffn],
                                                                 [rows, ffn, d]]
    for r in section["rows"]:
        if r["family"] != "hf-attn":
            continue
        seq = r["seq"]
        scheme_mlp = 32 + 32 * 4 if r["scheme"] == "fire" else 0
        forward = (seq * (2 * layers * (4 * d * d + 2 * d * ffn) + layers * 4 * seq * d) + 2 * scheme_mlp * seq**2
                   + 2 * d * 2)
        assert r["flops_per_token"] == pytest.approx({"train": 3, "infer": 1}[r["mode"]] * forward / seq)
        case = next(c for c in section["matmul_interleaved"] if (c["mode"], c["seq"], c["precision"]) ==
                    (r["mode"], r["seq"], r["precision"]))
        gemm = 2 * rows * (d * 3 * d + d * d + d * ffn + ffn * d)  # the four products of the interleaved step
        peak = gemm / (case["median_ms"] / 1e3)
        assert r["matmul_gflops"] == pytest.approx(peak / 1e9)
        assert r["mfu"] == pytest.approx(r["flops_per_token"] * r["tokens_per_s"] / peak)
        assert r["tokens_per_s"] == pytest.approx(r["batch"] * seq / (r["median_ms"] / 1e3))


AMX_XEON = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512_vnni avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8

processor\t: 1
model name\t: some other core
"""
AVX2_EPYC = "processor : 0\nmodel name : AMD EPYC 7B12\nflags : fpu avx fma avx2 sha_ni\n"


@pytest.mark.parametrize(("cpuinfo", "model", "flags"), [
    (AMX_XEON, "Intel(R) Xeon(R) Platinum 8480+",
     ["avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"]),
    (AVX2_EPYC, "AMD EPYC 7B12", ["avx2", "fma"]),
    ("", None, None),
])
def test_cpu_description_reads_the_model_and_matmul_flags_of_the_first_processor(
    cpuinfo: str, model: str | None, flags: list[str] | None
) -> None:
    assert cpu_description(cpuinfo) == {"model": model, "matmul_flags": flags}


def test_a_record_says_where_it_ran_and_its_report_and_the_docs_table_show_it(
    toy_run: tuple[dict, str, Path],
) -> None:
    """The toy record carries this machine's CPU, threads, precisions and loads; its report shows them; an
    older record without them reads "not recorded"; docs/benchmarks.md's table is the committed records'."""
    results, markdown, _ = toy_run
    environment = results["environment"]
    assert environment["cpu"] == cpu_description(Path("/proc/cpuinfo").read_text())
    assert environment["threads"] == 1 and environment["precision"] == ["fp32", "bf16"]
    assert len(environment["load_average_start"]) == len(environment["load_average_end"]) == 3
    assert f"CPU {environment['cpu']['model']} (matmul flags: {' '.join(environment['cpu']['matmul_flags'])})" in (
        markdown)
    assert "median GFLOP/s" in markdown  # the interleaved peaks table
    old = {"environment": {key: value for key, value in environment.items() if key not in ("cpu", "precision")},
           "settings": {}, "throughput": {"matmul_peak": results["throughput"]["matmul_peak"]}}
    table = records_table({"new.json": results, "old.json": old})
    new_row, old_row = table.splitlines()[2:]
    assert environment["cpu"]["model"] in new_row and "not recorded" not in new_row
    assert old_row.split(" | ")[3:6] == ["not recorded", "not recorded", "1 of " + str(environment["cpu_count"])]
    assert old_row.endswith("| not recorded |")  # no interleaved peak
    docs = (REPO / "docs" / "benchmarks.md").read_text()
    assert with_records_table(docs, records_table(read_records(REPO / "results" / "bench"))) == docs, (
        "docs/benchmarks.md's records table is stale: run hf-attn bench --records-only")


def test_records_only_rewrites_the_docs_table_from_the_records_and_measures_nothing(
    toy_run: tuple[dict, str, Path], tmp_path: Path,
) -> None:
    """`hf-attn bench --records-only` puts the table of the records in --output's folder (the toy record; the
    tokenizer JSON beside it is no record) between the document's markers, and leaves the record as it was."""
    results, _, out = toy_run
    record = (out / "bench.json").read_text()
    docs = tmp_path / "benchmarks.md"
    docs.write_text(f"# Speed\n\n{RECORDS_BEGIN}\nan old table\n{RECORDS_END}\nafter\n")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    run_from_args(parser.parse_args(["--records-only", "--output", str(out / "bench.json"), "--records-docs",
                                     str(docs)]))
    table = records_table({"bench.json": results})
    assert docs.read_text() == f"# Speed\n\n{RECORDS_BEGIN}\n\n{table}\n\n{RECORDS_END}\nafter\n"
    assert (out / "bench.json").read_text() == record


@pytest.mark.parametrize("family", ["hf-attn", "BERT", "RoFormer", "ModernBERT"])
def test_closed_form_flops_match_torch_flop_counter(family: str) -> None:
    """The module doc's formula against torch.utils.flop_counter, which counts the matrix products actually
    dispatched (eager attention: the counter does not see CPU SDPA's fused kernel); a training step (forward
    + backward) is 3 x the forward."""
    from torch.utils.flop_counter import FlopCounterMode

    settings = BenchSettings(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
                             vocab_size=64, dropout=0.0, attention_dropout=0.0)
    batch, seq = 2, 16
    if family == "hf-attn":
        model = HfAttnForSequenceClassification(hf_attn_config(settings, "rope", seq))
    else:
        model = ANCHOR_BUILDERS[family][1](settings, seq)
    model.set_attn_implementation("eager")
    layers = encoder_layers(model)
    inputs = make_batch(batch, [seq] * batch, seq, 64, torch.Generator().manual_seed(0), torch.device("cpu"))
    with FlopCounterMode(display=False) as forward_only, torch.no_grad():
        model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
    assert forward_only.get_total_flops() == step_flops(model, layers, "infer", batch, seq)
    with FlopCounterMode(display=False) as training:
        model(**inputs).loss.backward()
    assert training.get_total_flops() == step_flops(model, layers, "train", batch, seq)


def test_bf16_steps_compute_in_bfloat16_and_keep_float32_parameters() -> None:
    """Under `precision="bf16"` the linear layers' outputs are bfloat16 (autocast), training and inference;
    the parameters, their AdamW state and the gradients stay float32, as with `Trainer(bf16=True)`."""
    settings = BenchSettings(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
                             vocab_size=64, schemes=("rope",), backends=("sdpa",), variants=(), anchors=())
    candidate = build_candidates(settings, 16, torch.device("cpu"))[0]
    batch = make_batch(2, [16, 16], 16, 64, torch.Generator().manual_seed(0), torch.device("cpu"))
    seen: list[torch.dtype] = []
    candidate.model.classifier.register_forward_hook(lambda module, args, output: seen.append(output.dtype))
    for step, precision in ((train_step, "bf16"), (infer_step, "bf16"), (infer_step, "fp32")):
        candidate.prepare(step is train_step)
        step(candidate, batch, precision)
    assert seen == [torch.bfloat16, torch.bfloat16, torch.float32]
    assert {p.dtype for p in candidate.model.parameters()} == {torch.float32}
    state = candidate.optimizer.state[candidate.model.classifier.weight]
    assert state["exp_avg"].dtype == torch.float32


def test_bad_precision_and_flag_values_are_rejected_before_timing() -> None:
    for bad in (dict(precision=("fp32", "fp16")), dict(profile_precision="half")):
        with pytest.raises(ValueError, match="unknown benchmark precision"):
            run_benchmark(BenchSettings(sections=("throughput",)), **bad)
    with pytest.raises(ValueError, match="unknown benchmark profile anchor"):
        run_benchmark(BenchSettings(sections=("throughput",)), profile_anchor="GPT")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args(["--peak-memory", "false"]).peak_memory is False
    assert parser.parse_args(["--precision", "bf16"]).precision == ("bf16",)
    with pytest.raises(SystemExit):
        parser.parse_args(["--peak-memory", "no"])


def test_epoch_batches_cover_every_review_once() -> None:
    import random

    lengths = [5, 1, 9, 3, 7, 2, 8, 4, 6, 10]
    for grouped in (False, True):
        batches = epoch_batches(lengths, 3, grouped, megabatch=2, rng=random.Random(0))
        assert sorted(i for batch in batches for i in batch) == list(range(10))
    grouped_batches = epoch_batches(lengths, 3, True, megabatch=10, rng=random.Random(0))
    spreads = [max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in grouped_batches]
    assert max(spreads) <= 2  # one megabatch spans all reviews, so each batch is 3 neighbours in length


def test_peak_memory_counts_only_what_the_step_allocates() -> None:
    held_before = torch.ones(2_000_000)  # 8 MB alive before the step: not counted

    def step() -> None:
        temporary = torch.ones(1_000_000)  # 4 MB, freed at once
        del temporary
        kept.append(torch.ones(500_000))  # 2 MB, still held at the end

    kept: list[torch.Tensor] = []
    peak = peak_memory_bytes(step, torch.device("cpu"))
    assert 4_000_000 <= peak < 4_100_000
    assert held_before.numel() == 2_000_000 and kept[0].numel() == 500_000


def test_every_section_has_a_run_and_report_lines_in_the_reports_order() -> None:
    """Every section in `BENCH_SECTIONS` has its measuring function and its report lines, and the report
    shows the sections `--sections` takes in that order, before the tokenizer's JSON and the profile."""
    assert all("run" in vars(section) and "report" in vars(section) for section in BENCH_SECTIONS.values())
    assert tuple(BENCH_SECTIONS) == (*section_names(), "tokenizer", "profile")
    assert section_names(by_default=True) == ("throughput", "scaling", "realistic")



def test_bench_settings_are_the_shared_ones_then_each_sections_and_a_name_declared_twice_is_refused() -> None:
    """`BenchSettings` has a field per shared setting and per setting of each section, in the registry's order, and
    a section that declares a name another already has (here the throughput section's `repeats`) is refused."""
    names = [field.name for field in dataclasses.fields(BenchSettings)]
    declared = [field.name for owner in (SharedSettings, *BENCH_SECTIONS.values())
                for field in dataclasses.fields(owner)]
    assert names == declared and len(set(names)) == len(names)
    assert names.index("repeats") < names.index("scaling_repeats") < names.index("tokenizer_json")

    @dataclasses.dataclass(frozen=True)
    class RepeatsAgain(BenchSection):
        name: ClassVar[str] = "again"
        repeats: int = option(3, "timed steps of the again section")

    with pytest.raises(TypeError, match="duplicated: 'repeats'"):
        settings_class([*BENCH_SECTIONS.values(), RepeatsAgain])


@dataclasses.dataclass(frozen=True)
class MatmulSection(BenchSection):
    """docs/contributing.md's worked example of a section: GFLOP/s of one square matrix product per size."""

    name: ClassVar[str] = "matmul"  # its --sections name and its key in the record
    matmul_sizes: tuple[int, ...] = option((256, 1024), "sizes of the matmul section's square products")
    matmul_repeats: int = option(5, "timed products per size in the matmul section")

    @classmethod
    def run(cls, settings: Any, device: torch.device) -> dict[str, Any]:
        rows = []
        for size in settings.matmul_sizes:
            left, right = (torch.randn(size, size, device=device) for _ in range(2))
            times = interleaved_times({"mm": lambda: torch.mm(left, right)}, warmup=1,
                                      repeats=settings.matmul_repeats, device=device)
            median_ms = summarize(times["mm"])["median_ms"]
            rows.append({"size": size, "median_ms": median_ms, "gflops": 2 * size**3 / (median_ms / 1e3) / 1e9})
        return {"repeats": settings.matmul_repeats, "rows": rows}

    @classmethod
    def report(cls, record: dict[str, Any]) -> list[str]:
        return ["## Matrix products", "", f"Median of {record['repeats']} products, fp32.", "",
                table(["size", "GFLOP/s"], [[row["size"], f"{row['gflops']:.0f}"] for row in record["rows"]]), ""]


def test_a_section_defined_in_one_class_and_registered_in_one_line_runs_through_the_command_and_its_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`MatmulSection` declares its name, its settings, its run and its report lines; registered with one line (here
    `monkeypatch.setitem`; `hf_attn.bench.settings` builds `BenchSettings` from the registry when it is imported, as
    `settings_class` does here), `hf-attn bench` takes its options, runs it when `--sections` names it, keeps its
    record and settings in the JSON and shows its lines in the report; unregistered, `--sections matmul` is refused."""
    toy = ["--sections", "matmul", "--matmul-sizes", "16,32", "--matmul-repeats", "2", "--profile-steps", "0",
           "--tokenizer-json", "", "--output", str(tmp_path / "bench.json"), "--markdown", str(tmp_path / "bench.md")]
    with pytest.raises(ValueError, match=r"unknown benchmark section\(s\) \['matmul'\]"):
        run_benchmark(sections=("matmul",))
    monkeypatch.setitem(BENCH_SECTIONS, "matmul", MatmulSection)
    monkeypatch.setattr(runner, "BenchSettings", settings_class(BENCH_SECTIONS.values()))
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    run_from_args(parser.parse_args(toy))
    results, markdown = json.loads((tmp_path / "bench.json").read_text()), (tmp_path / "bench.md").read_text()
    assert [key for key in results if key not in ("settings", "environment", "command")] == ["matmul"]
    assert results["settings"]["matmul_sizes"] == [16, 32] and results["settings"]["matmul_repeats"] == 2
    rows = results["matmul"]["rows"]
    assert [row["size"] for row in rows] == [16, 32]
    for row in rows:  # 2 n^3 floating-point operations per product of two n x n matrices
        assert row["gflops"] == pytest.approx(2 * row["size"] ** 3 / (row["median_ms"] / 1e3) / 1e9)
    assert "## Matrix products\n\nMedian of 2 products, fp32.\n\n| size | GFLOP/s |" in markdown
    assert f"| 32 | {rows[1]['gflops']:.0f} |" in markdown


def test_unknown_section_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown benchmark section"):
        run_benchmark(BenchSettings(sections=("throughput", "typo")))
    assert "## Throughput" not in format_markdown(
        {"environment": {"torch": "t", "transformers": "t", "device": "cpu", "threads": 1, "cpu_count": 1,
                         "load_average_start": [0.0], "load_average_end": [0.0], "started": "now"}}
    )


def test_a_variant_changes_one_config_field_and_a_bad_one_fails_before_timing() -> None:
    settings = BenchSettings(hidden_size=32, num_hidden_layers=1, intermediate_size=64, vocab_size=64,
                             schemes=("rope", "alibi"), backends=("sdpa",), anchors=(),
                             variants=("rope:num_key_value_heads=2", "alibi:attention_dropout=0.0"))
    configs = {(c.family, c.scheme): c.model.config for c in build_candidates(settings, 16, torch.device("cpu"))}
    assert configs[("hf-attn (num_key_value_heads=2)", "rope")].num_key_value_heads == 2
    assert configs[("hf-attn", "rope")].num_key_value_heads == 4
    assert configs[("hf-attn (attention_dropout=0.0)", "alibi")].attention_dropout == 0.0
    assert configs[("hf-attn", "alibi")].attention_dropout == 0.1
    for bad, hint in (("rope", "SCHEME:FIELD=VALUE"), ("rope:layout=halves", "no field 'layout'")):
        with pytest.raises(ValueError, match=hint):
            run_benchmark(settings, variants=(bad,), sections=("throughput",))
    with pytest.raises(ValueError, match="unknown benchmark anchor"):
        run_benchmark(settings, anchors=("BERT", "GPT"), sections=("throughput",))


def _linear_multiply_adds(module: nn.Module) -> int:
    """Multiply-adds per token of every linear layer in `module`, from the weight shapes alone."""
    return sum(m.in_features * m.out_features for m in module.modules() if isinstance(m, nn.Linear))


def test_modernbert_anchor_has_the_hf_attn_shape_and_ffn_cost() -> None:
    """At the bench's reference shape (384 wide, 4 layers, 4 heads, FFN 1536): hf-attn's FFN does
    2 x 384 x 1536 multiply-adds per token, and ModernBERT's GeGLU FFN (384 -> 2 x 1024, 1024 -> 384) the
    same; parameters agree within a few percent (ModernBERT has no biases and a dense classifier head)."""
    settings = BenchSettings()
    hf_attn = HfAttnForSequenceClassification(hf_attn_config(settings, "rope", 512))
    modernbert = build_modernbert(settings, 512)
    ffn = 2 * 384 * 1536
    for model in (hf_attn, modernbert):
        layers = getattr(model, model.base_model_prefix).layers
        assert len(layers) == 4
        assert [_linear_multiply_adds(layer.mlp) for layer in layers] == [ffn] * 4
    assert modernbert.model.layers[0].mlp.Wi.out_features == 2 * 1024
    # Every layer takes the full-attention mask (ModernBERT's default makes two layers in three local).
    assert [layer.attention_type for layer in modernbert.model.layers] == ["full_attention"] * 4
    assert modernbert.config.vocab_size == hf_attn.config.vocab_size
    assert modernbert.config.max_position_embeddings == hf_attn.config.max_position_embeddings == 512
    assert modernbert.config.num_attention_heads == 4
    params = {name: sum(p.numel() for p in model.parameters()) for name, model in
              (("hf-attn", hf_attn), ("ModernBERT", modernbert))}
    assert 0.97 < params["ModernBERT"] / params["hf-attn"] < 1.03, params


def test_modernbert_dropout_follows_the_bench_or_its_own_defaults() -> None:
    """With the bench's dropout, ModernBERT's embedding, MLP and classifier dropout take `dropout` and its
    attention dropout `attention_dropout`, and training-mode passes differ; at its own defaults it has no
    dropout at all: training mode gives exactly the evaluation-mode output."""
    settings = BenchSettings(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
                             vocab_size=64, dropout=0.2, attention_dropout=0.3)
    input_ids = torch.randint(0, 63, (2, 16))

    def logits(model: nn.Module, training: bool) -> torch.Tensor:
        model.train(training)
        with torch.no_grad():
            return model(input_ids=input_ids).logits

    same = build_modernbert(settings, 16)
    config = same.config
    assert (config.embedding_dropout, config.mlp_dropout, config.classifier_dropout) == (0.2, 0.2, 0.2)
    assert config.attention_dropout == 0.3
    assert not torch.equal(logits(same, True), logits(same, True))
    own = build_modernbert(settings, 16, own_dropout=True)
    assert torch.equal(logits(own, True), logits(own, False))


def test_objective_bench_times_both_pretraining_objectives() -> None:
    """The objectives section runs a masked-LM and a replaced-token-detection step of one config and records both
    medians and their ratio."""
    results = run_benchmark(sections=("objectives",), profile_steps=0, tokenizer_json="", warmup=0,
                            objectives_config=str(REPO / "configs" / "pretraining" / "pretrain-rope-rtd.yaml"),
                            objectives_vocab_size=64, objectives_batch=2, objectives_length=16, objectives_repeats=1)
    record = json.loads(json.dumps(results["objectives"]))
    assert set(record["median_ms"]) == {"mlm", "rtd"} and all(ms > 0 for ms in record["median_ms"].values())
    assert record["rtd_over_mlm"] == pytest.approx(record["median_ms"]["rtd"] / record["median_ms"]["mlm"])
    assert "## Pretraining objectives" in format_markdown(results)


def test_dropout_section_times_eager_and_sdpa_attention_with_dropout_in_both_dtypes() -> None:
    """The dropout section times one attention with dropout, forward and backward, eager and SDPA, at the bench's
    heads, in float32 and bfloat16, and records SDPA's median over eager's."""
    results = run_benchmark(sections=("dropout",), profile_steps=0, tokenizer_json="", hidden_size=16,
                            num_attention_heads=2, dropout_batch=2, dropout_seq=8, dropout_repeats=2)
    section = results["dropout"]
    assert section["shape"] == [2, 2, 8, 8] and section["dropout"] == 0.1
    assert [row["dtype"] for row in section["rows"]] == ["fp32", "bf16"]
    for row in section["rows"]:
        assert len(row["eager"]["times_ms"]) == len(row["sdpa"]["times_ms"]) == 2
        assert row["sdpa_over_eager"] == pytest.approx(row["sdpa"]["median_ms"] / row["eager"]["median_ms"])
    assert "| fp32 |" in format_markdown(results)


def test_long_text_section_times_one_pipeline_call_per_policy_and_size() -> None:
    """The long-text section reads one text of each size through `pipeline` under each reading policy, the one-pass
    policy only up to its limit, and records the text's length in tokens (more characters, more tokens)."""
    results = run_benchmark(sections=("long-text",), profile_steps=0, tokenizer_json="", hidden_size=16,
                            num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                            long_text_sizes=(300, 900), long_text_one_pass_limit=300,
                            long_text_tokenizer=str(REPO / "checkpoints" / "rope-whole-reviews"))
    rows = results["long-text"]["rows"]
    assert [(row["policy"], row["characters"]) for row in rows] == [
        ("windows past 8192 (default)", 300), ("windows past 8192 (default)", 900), ("read_length=8192", 300),
        ("read_length=8192", 900), ("one pass (max_direct_length=None)", 300)]
    assert all(row["seconds"] > 0 for row in rows) and rows[0]["tokens"] < rows[1]["tokens"]
    assert "| read_length=8192 | 900 |" in format_markdown(results)


def test_streaming_methods_read_every_copy_and_compute_the_same_products() -> None:
    """The streaming section's methods (the fused product here uncompiled): each product method multiplies the row by
    every copy of the weight, as `row @ weight.T` does, and the copies together make the megabytes asked for."""
    from hf_attn.bench.sections.streaming import FUSED, single_row_product, streaming_methods

    settings = BenchSettings(streaming_megabytes=1, streaming_rows=64, streaming_columns=32)
    methods, copies = streaming_methods(settings, single_row_product, torch.device("cpu"))
    assert copies == 10**6 // (64 * 32 * 4)
    linear = methods["BLAS, weight (out, in): nn.functional.linear"]()
    for name in ("BLAS, weight (in, out): row @ weight", FUSED):
        products = methods[name]()
        assert len(products) == copies
        for mine, reference in zip(products, linear, strict=True):
            torch.testing.assert_close(mine, reference, rtol=1e-5, atol=1e-5)
    assert methods["sum over one tensor"]().shape == ()


@pytest.mark.slow
def test_streaming_section_reports_each_methods_speed() -> None:
    results = run_benchmark(sections=("streaming",), profile_steps=0, tokenizer_json="",
                            streaming_megabytes=1, streaming_rows=64, streaming_columns=32, streaming_repeats=2)
    section = results["streaming"]
    assert [row["method"] for row in section["rows"]][-1] == "(row * weight).sum(-1), compiled"
    assert all(row["gb_per_s"] > 0 and len(row["gb_per_s_per_repeat"]) == 2 for row in section["rows"])
    assert "| sum over one tensor |" in format_markdown(results)


TINY_ENCODER = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, vocab_size=64)


def test_the_local_attention_sections_ways_compute_what_they_claim() -> None:
    """The section's three encoders and its attention-alone calls: the band computes what the dense mask computes
    (whole models and attention alone), and full attention differs from both; the FLOP ratios are the closed form."""
    from hf_attn.bench.sections.local_attention import WAYS, attention_ways, build_way, flop_ratios, token_ids

    settings = BenchSettings(**TINY_ENCODER, local_attention_lengths=(96,), local_attention_window=4,
                             local_attention_repeats=1)
    ratios = flop_ratios(settings, 96)
    assert ratios["attention (window)"] == pytest.approx(9 / 96)
    assert ratios["attention (blocks)"] == pytest.approx((32 + 8) / 96)
    input_ids = token_ids(settings, 96)
    with torch.no_grad():
        outputs = {way: build_way(settings, way, 96, "rope")(input_ids).last_hidden_state for way in WAYS}
        alone = {way: attend()[0] for way, attend in attention_ways(
            settings, build_way(settings, "full", 96, "none").layers[0].self_attn, 96).items()}
    for computed in (outputs, alone):
        torch.testing.assert_close(computed["sliding (band)"], computed["sliding (dense mask)"], rtol=1e-5, atol=1e-5)
        assert not torch.allclose(computed["full"], computed["sliding (band)"], atol=1e-3)


@pytest.mark.slow
def test_local_attention_section_times_three_ways_and_their_memory() -> None:
    """The whole section (each way's peak memory in a fresh process: slow): its record and its table."""
    from hf_attn.bench.sections.local_attention import WAYS

    settings = BenchSettings(**TINY_ENCODER, local_attention_lengths=(96,), local_attention_window=4,
                             local_attention_repeats=1)
    results = run_benchmark(settings, sections=("local-attention",), profile_steps=0, tokenizer_json="")
    section = results["local-attention"]
    assert section["block"] == 32 and section["repeats"] == 1 and "radius 4 (9 keys)" in section["what"]
    row = section["lengths"]["96"]
    assert list(row["seconds"]) == list(row["attention_alone_seconds"]) == list(row["peak_memory_mib"]) == list(WAYS)
    assert row["band_over_full"] == pytest.approx(row["seconds"]["sliding (band)"] / row["seconds"]["full"])
    assert row["flop_ratio"]["attention (window)"] == pytest.approx(9 / 96)
    assert row["measured_over_predicted"] == pytest.approx(row["band_over_full"] / row["flop_ratio"]["layer (window)"])
    assert all(mib >= 0 for mib in row["peak_memory_mib"].values())
    assert "| 96 |" in format_markdown(results)


def test_faster_repeats_count_the_repeats_won_against_the_faster_baseline_of_each_repeat() -> None:
    """The 'faster in' column pairs each repeat with the same repeat of the row's fastest peer, or in records
    from before peers, of the transformers model with the lowest median among those with the bench's dropout
    (here BERT; ModernBERT-defaults, without dropout, is faster but not like-for-like), counted by hand."""
    def row(family: str, times: list[float]) -> dict:
        return {"family": family, "times_ms": times, "median_ms": sorted(times)[len(times) // 2]}

    bert, roformer = row("BERT", [10.0, 12.0, 11.0]), row("RoFormer", [13.0, 14.0, 8.0])
    faster, tied = row("hf-attn", [9.0, 11.5, 10.0]), row("hf-attn", [10.0, 11.5, 10.0])
    case = [faster, tied, bert, roformer, row("ModernBERT-defaults", [5.0, 5.0, 5.0])]
    assert _faster_repeats(faster, case) == "3/3"  # against RoFormer's repeats it would be 2/3
    assert _faster_repeats(tied, case) == "2/3"  # a tie is not a win
    assert _faster_repeats(bert, case) == ""
    assert _faster_repeats({"family": "hf-attn", "median_ms": 1.0}, case) == ""  # a record without times
    # Records with peers count against the row's fastest peer: RoPE's is RoFormer here, whatever BERT did.
    assert _faster_repeats({**faster, "scheme": "rope", "fastest_peer": "RoFormer"}, case) == "2/3"


def test_results_written_before_modernbert_still_format() -> None:
    """A results file with only the BERT and RoFormer anchors and no per-repeat times (the oldest layout)
    formats with exactly their ratio columns."""
    environment = {"torch": "t", "transformers": "t", "device": "cpu", "threads": 2, "cpu_count": 2,
                   "load_average_start": [1.0], "load_average_end": [1.0], "started": "then"}
    rows = [{"mode": "train", "batch": 32, "seq": 128, "family": family, "scheme": scheme, "backend": backend,
             "median_ms": ms, "min_ms": ms, "sequences_per_s": 32 / ms * 1e3, "peak_mib": 1.0,
             "speedup_vs_BERT": 100.0 / ms, "speedup_vs_RoFormer": 120.0 / ms, "speedup_vs_best": 100.0 / ms}
            for family, scheme, backend, ms in (("hf-attn", "rope", "sdpa", 80.0), ("BERT", "absolute", "sdpa", 100.0),
                                                ("RoFormer", "rope", "eager", 120.0))]
    models = [{"family": r["family"], "scheme": r["scheme"], "hidden_size": 384, "num_layers": 4, "params": 1,
               "encoder_layer_params": 1} for r in rows]
    markdown = format_markdown({"environment": environment, "throughput": {"models": models, "rows": rows}})
    assert "| seq/s | vs BERT | vs RoFormer | faster in | peak MiB | goal |" in markdown
    assert "| hf-attn | rope | sdpa | 80.0 | 80.0 | 400.0 | 1.25x | 1.50x |  | 1.0 | yes |" in markdown
    assert "ModernBERT" not in markdown


# ---------------------------------------------------------------- generation section

GENERATION_TOY = dict(
    sections=("generation",), hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
    generation_vocab_size=64, generation_kv_heads=(4, 2, 1), generation_contexts=(8, 16), generation_batches=(1, 2),
    generation_new_tokens=3, generation_repeats=2, generation_uncached_new_tokens=2, generation_uncached_repeats=1,
    generation_profile_steps=2, profile_steps=0, tokenizer_json="", threads=1,
)


def test_generation_section_times_every_decoder_and_measures_the_cache() -> None:
    """Every decoder (hf-attn RoPE and ALiBi, Llama) x head count x context x batch has a row; the cache
    holds layers x (K, V) x batch x context x kv_heads x head_dim fp32 numbers, so MHA's bytes over a
    model's are heads / kv_heads."""
    results = run_benchmark(**GENERATION_TOY)
    rows = results["generation"]["rows"]
    decoders = {("hf-attn", "rope"), ("hf-attn", "alibi"), ("Llama", "rope")}
    expected = {(*decoder, kv, context, batch) for decoder in decoders for kv in (4, 2, 1) for context in (8, 16)
                for batch in (1, 2)}
    assert {(r["family"], r["scheme"], r["kv_heads"], r["context"], r["batch"]) for r in rows} == expected
    head_dim = 32 // 4
    for r in rows:
        per_token = 2 * 2 * r["batch"] * r["kv_heads"] * head_dim * 4  # layers x (K, V) x batch x kv x d x fp32
        assert r["cache_bytes"] == per_token * r["context"]
        room = max(GrowingCacheLayer.min_room, int(r["context"] * GrowingCacheLayer.growth))
        allocated = r["context"] + (room if r["family"] == "hf-attn" else 0)
        assert r["cache_allocated_bytes"] == per_token * allocated
        assert r["cache_vs_most_kv_heads"] == 4 / r["kv_heads"]
        assert r["cached"]["median_ms"] > 0 and r["prefill"]["median_ms"] > 0 and r["uncached"]["median_ms"] > 0
        assert r["cached_tokens_per_s"] == pytest.approx(r["batch"] * 3 / (r["cached"]["median_ms"] / 1e3))
        llama = next(x for x in rows if (x["family"], x["kv_heads"], x["context"], x["batch"])
                     == ("Llama", r["kv_heads"], r["context"], r["batch"]))
        assert r["cached_vs_llama"] == pytest.approx(llama["cached"]["median_ms"] / r["cached"]["median_ms"])
        step_ratio = llama["model_step"]["median_ms"] / r["model_step"]["median_ms"]
        assert r["model_step_vs_llama"] == pytest.approx(step_ratio)
        assert ("cached_faster_in" in r) == ("model_step_faster_in" in r) == (r["family"] == "hf-attn")
    profile = results["generation"]["decode_profile"]
    assert (profile["context"], profile["batch"], profile["steps"]) == (16, 2, 2)
    assert set(profile["models"]) == {"hf-attn rope kv4", "Llama rope kv4"}  # the MHA RoPE models, side by side
    assert all(0 < op["self_cpu_share"] <= 1 for ops in profile["models"].values() for op in ops)
    markdown = format_markdown(results)
    for text in ("## Generation", "### Context 16, batch 2", "### KV-cache memory after the prompt",
                 "### Profile of 2 cached decoding steps of Llama rope kv4 after 16 tokens (batch 2)",
                 "| Llama | rope | 1 | 2 | 16 | 0.00 | 0.00 | 4.00 | 4.00 |"):
        assert text in markdown


def test_decode_steps_leave_the_prompts_cache_as_prefill_made_it() -> None:
    """The model-step timing reuses one cache: every pass's position is cropped off again, so the keys and
    values left are a fresh prefill's, and the prompt's length is what every pass decodes at."""
    torch.manual_seed(0)
    settings = BenchSettings(**{**GENERATION_TOY, "generation_kv_heads": (2,), "generation_schemes": ("alibi",)})
    decoder = build_decoders(settings, 32, torch.device("cpu"))[0].model
    prompt = torch.randint(0, 60, (2, 9))
    cache = prefill(decoder, prompt)
    decode_steps(decoder, cache, prompt, steps=3)
    fresh = prefill(decoder, prompt)
    assert cache.get_seq_length() == 9
    for mine, reference in zip(cache.layers, fresh.layers, strict=True):
        torch.testing.assert_close(mine.keys, reference.keys)
        torch.testing.assert_close(mine.values, reference.values)


def test_generation_is_not_a_default_section_and_needs_two_new_tokens() -> None:
    assert "generation" not in BenchSettings().sections
    with pytest.raises(ValueError, match="generation_new_tokens must be at least 2"):
        run_benchmark(**{**GENERATION_TOY, "generation_new_tokens": 1})


# ---------------------------------------------------------------- generation-compiled section

COMPILED_TOY = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                    generation_vocab_size=64, generation_compiled_kv_heads=2, generation_compiled_new_tokens=4,
                    generation_compiled_repeats=1)


def test_compiled_generation_steps_are_timed_per_token_and_llama_decodes_what_hf_attn_does() -> None:
    """`generate` stamps each new token: exactly `new_tokens` tokens and `new_tokens - 1` steps on each clock; the
    eager variants, hf-attn and the Llama given its weights, generate the same greedy tokens."""
    from hf_attn.bench.sections.generation_compiled import CLOCKS, compiled_variants, generate

    settings = BenchSettings(**COMPILED_TOY)
    variants = compiled_variants(settings, 16, torch.device("cpu"))
    assert list(variants) == ["hf-attn", "hf-attn static compiled", "hf-attn static compiled streamed", "Llama",
                              "Llama static compiled", "Llama static compiled streamed"]
    assert [bool(extra) for _, extra in variants.values()] == [False, True, True, False, True, True]
    prompt = torch.randint(0, 63, (1, 8), generator=torch.Generator().manual_seed(0))
    tokens = {}
    for name in ("hf-attn", "Llama"):
        tokens[name], seconds = generate(variants[name][0], prompt, 4, "greedy", 0, {})
        assert tokens[name].shape == (1, 12) and set(seconds) == set(CLOCKS)
        assert all(len(values) == 3 and min(values) >= 0 for values in seconds.values())
    assert torch.equal(tokens["hf-attn"], tokens["Llama"])


@pytest.mark.slow
def test_generation_compiled_section_compiles_each_static_variant_and_keeps_the_tokens() -> None:
    results = run_benchmark(sections=("generation-compiled",), profile_steps=0, tokenizer_json="", threads=1,
                            generation_compiled_contexts=(8,), **COMPILED_TOY)
    section = results["generation-compiled"]
    assert [(row["mode"], row["variant"]) for row in section["rows"]][:2] == [("greedy", "hf-attn"),
                                                                              ("greedy", "hf-attn static compiled")]
    assert len(section["rows"]) == 12 and all(row["same_tokens_as_hf_attn"] for row in section["rows"])
    assert len(section["first_call_extra_seconds"]) == 4 and section["options"]["kv_heads"] == 2
    llama = next(row for row in section["rows"] if (row["mode"], row["variant"]) == ("greedy", "Llama"))
    assert llama["cpu_vs_llama"] == pytest.approx(1.0)
    assert "| 8 | greedy | hf-attn static compiled |" in format_markdown(results)


# ---------------------------------------------------------------- serving section


def serving_toy(tmp_path: Path, *variants: str) -> dict:
    """The serving section over the packaged sample's 200 test reviews with a tiny saved classifier."""
    from test_cli import save_tiny_classifier

    save_tiny_classifier(tmp_path / "model")
    return run_benchmark(sections=("serving",), profile_steps=0, tokenizer_json="", threads=1,
                         serving_model=str(tmp_path / "model"), serving_dataset="sample", serving_batch_size=32,
                         serving_chunk=100, serving_variants=variants)


def test_serving_reads_every_variant_on_the_same_batches_and_scores_them_against_fp32() -> None:
    """The section's reading loop without models: each runner sees the same batches, chunk by chunk and sorted by
    length inside a chunk; accuracy and agreement are those of the labels written out by hand."""
    from hf_attn.bench.sections.serving import read_in_turn, serving_rows

    texts = ["a" * length for length in (5, 1, 4, 2, 3)]
    seen: dict[str, list[list[str]]] = {"torch_fp32": [], "torch_int8": []}

    def runner(name: str, flip: bool):  # label 1 for texts of odd length; the int8 stand-in flips length 3
        def logits(batch: list[str]) -> np.ndarray:
            seen[name].append(batch)
            labels = [len(text) % 2 ^ (flip and len(text) == 3) for text in batch]
            return np.eye(2)[labels]
        return logits

    settings = BenchSettings(serving_chunk=3, serving_batch_size=2)
    order = np.array([0, 1, 2, 3, 4])
    predicted, seconds, read = read_in_turn(
        settings, {"torch_fp32": runner("torch_fp32", False), "torch_int8": runner("torch_int8", True)}, texts, order)
    assert seen["torch_fp32"] == seen["torch_int8"] == [["a", "aaaa"], ["aaaaa"], ["aa", "aaa"]]
    assert read == [1, 2, 0, 3, 4] and predicted["torch_fp32"] == [1, 0, 1, 0, 1]
    rows = serving_rows(predicted, {"torch_fp32": 1.0, "torch_int8": 0.5}, np.array([1, 0, 1, 0, 0]),
                        {"torch_fp32": 2_000_000, "torch_int8": None})
    assert rows["torch_fp32"]["accuracy"] == 0.8 and rows["torch_int8"]["accuracy"] == 1.0
    assert rows["torch_int8"]["agreement_with_torch_fp32"] == 0.8 and rows["torch_int8"]["speed_vs_torch_fp32"] == 2.0


def test_serving_latency_reads_every_cell_with_each_variant_and_times_bert_against_its_own_eager() -> None:
    """The latency part without models: every reader reads the same batches of each cell, cut to the window at the
    short reading and whole otherwise; BERT's pair only at the short reading; each speed is the round's ratio to its
    reference (PyTorch fp32, or BERT eager for BERT's export), so the references are 1.0 in every round."""
    from hf_attn.bench.sections.serving_latency import bench_latency, format_latency

    calls: dict[str, list[tuple[tuple[str, ...], int | None]]] = {}

    def reader(name: str):
        def logits(texts: list[str], max_length: int | None = None) -> np.ndarray:
            calls.setdefault(name, []).append((tuple(texts), max_length))
            return np.zeros((len(texts), 2))
        return logits

    settings = BenchSettings(serving_latency_batches=(1, 2), serving_latency_reviews=3, serving_latency_rounds=2)
    readers = {name: reader(name) for name in ("torch_fp32", "onnx_int8")}
    bert = {name: reader(name) for name in ("bert_fp32", "bert_onnx_fp32")}
    latency = bench_latency(settings, readers, ["r0", "r1", "r2", "r3"], np.array([2, 0, 1, 3]), 128, bert)
    assert [(cell["reading"], cell["batch"], cell["batches"]) for cell in latency["cells"]] == [
        ("short", 1, 3), ("short", 2, 2), ("whole", 1, 3), ("whole", 2, 2)]
    assert list(latency["cells"][0]["rows"]) == ["torch_fp32", "onnx_int8", "bert_fp32", "bert_onnx_fp32"]
    assert list(latency["cells"][2]["rows"]) == ["torch_fp32", "onnx_int8"]
    short_pairs = [(("r2",), 128), (("r0",), 128), (("r1",), 128)]
    # each cell: a first pass and 2 rounds
    assert calls["bert_onnx_fp32"] == short_pairs * 3 + [(("r2", "r0"), 128), (("r1",), 128)] * 3
    assert calls["onnx_int8"][-2:] == [(("r2", "r0"), None), (("r1",), None)]
    for cell in latency["cells"]:
        for name in ("torch_fp32", "bert_fp32"):
            if name in cell["rows"]:
                row = cell["rows"][name]
                assert row["speed_median"] == row["speed_min"] == row["speed_max"] == 1.0
    table = "\n".join(format_latency(latency, spinning=False))
    assert "| short | 2 | BERT ONNX Runtime fp32 (same shape) |" in table and "not spinning" in table


@pytest.mark.slow
def test_serving_section_scores_each_variant_as_the_model_itself_does(tmp_path: Path) -> None:
    """PyTorch fp32 (always run) and int8 read every test review; fp32's accuracy is the saved model's own over the
    split, read in one batch; each variant's memory is measured in a process of its own."""
    from hf_attn.experiments.data import load_imdb
    from hf_attn.saved import load_saved_classifier

    results = serving_toy(tmp_path, "torch_int8")
    section = results["serving"]
    assert list(section["rows"]) == list(section["memory"])[1:] == ["torch_fp32", "torch_int8"]
    assert section["reviews"] == section["reviews_planned"] == 200 and "chunks of 100" in section["order"]
    fp32, int8 = section["rows"]["torch_fp32"], section["rows"]["torch_int8"]
    assert fp32["agreement_with_torch_fp32"] == 1.0 and fp32["speed_vs_torch_fp32"] == 1.0
    assert 0.9 <= int8["agreement_with_torch_fp32"] <= 1.0 and int8["file_mb"] is not None
    assert all(memory["baseline_after_imports_mb"] > 0 for memory in list(section["memory"].values())[1:])
    test = load_imdb("sample")["test"]
    model, tokenizer = load_saved_classifier(tmp_path / "model")
    with torch.no_grad():
        predicted = model.eval()(**tokenizer(list(test["text"]), padding=True, return_tensors="pt")).logits.argmax(-1)
    assert fp32["accuracy"] == pytest.approx((predicted == torch.tensor(test["label"])).float().mean().item())
    assert "| PyTorch dynamic int8 |" in format_markdown(results)
    with pytest.raises(ValueError, match="unknown benchmark serving variant"):
        run_benchmark(sections=("serving",), serving_variants=("onnx_fp16",))


@pytest.mark.slow
@needs_onnx
def test_bert_reference_readers_are_one_model_eager_exported_and_quantized(tmp_path: Path) -> None:
    """The latency part's BERT references read the same texts to the same logits: the export as transformers' eager
    model (float rounding), its int8 file within dynamic quantization's error, a tenth of the logits' spread."""
    from test_cli import save_tiny_classifier

    from hf_attn.bench.sections.serving_latency import bert_readers

    save_tiny_classifier(tmp_path / "model")
    readers = bert_readers(str(tmp_path / "model"), tmp_path, threads=1, spinning=False)
    texts = ["A fine film.", "Dull, slow and far too long " * 4]
    eager, exported, int8 = (readers[name](texts, 16) for name in ("bert_fp32", "bert_onnx_fp32", "bert_onnx_int8"))
    scale = float(np.abs(eager).max())
    assert np.abs(exported - eager).max() <= 1e-4 * scale
    assert 1e-4 * scale < np.abs(int8 - eager).max() <= 0.1 * scale  # quantized, yet the same model


@pytest.mark.slow
@needs_onnx
def test_serving_section_exports_the_onnx_variants(tmp_path: Path) -> None:
    section = serving_toy(tmp_path, "onnx_fp32", "onnx_int8")["serving"]
    assert list(section["rows"]) == ["torch_fp32", "onnx_fp32", "onnx_int8"] and "onnxruntime" in section
    assert section["rows"]["onnx_fp32"]["agreement_with_torch_fp32"] == 1.0
    short_batch_1 = section["latency"]["cells"][0]
    assert (short_batch_1["reading"], short_batch_1["batch"]) == ("short", 1)
    assert list(short_batch_1["rows"]) == ["torch_fp32", "onnx_fp32", "onnx_int8", "bert_fp32", "bert_onnx_fp32",
                                           "bert_onnx_int8"]
