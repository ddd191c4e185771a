"""scripts/compute_curve.py: whole-review accuracy against pretraining compute, summed along the encoder's chain."""

from __future__ import annotations

import json
import math
import runpy
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


def pretraining_run(steps: int, seconds: float, continued_from: dict[str, Any] | None = None) -> dict[str, Any]:
    run = {"optimizer_steps": steps, "chunks_seen": steps * 32, "max_length": 128, "train_runtime_s": seconds}
    return run if continued_from is None else {**run, "continued_from": continued_from}


def write_results(folder: Path, name: str, val: float, test: float, pretraining: dict[str, Any] | None) -> Path:
    metrics = {"val_accuracy": val, "test_accuracy": test, "n_validation": 5000, "n_test": 4000}
    path = folder / f"{name}.json"
    path.write_text(json.dumps(metrics if pretraining is None else {**metrics, "pretraining": pretraining}))
    return path


def run_script(*args: str) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", ["compute_curve.py", *args])
        runpy.run_path(str(REPO / "scripts" / "compute_curve.py"), run_name="__main__")


def test_points_add_up_pretraining_along_the_chain(tmp_path: Path) -> None:
    longer = pretraining_run(4000, 3600.0, continued_from=pretraining_run(4000, 7200.0))
    paths = [write_results(tmp_path, "pretrained-8000", 0.91, 0.905, longer),
             write_results(tmp_path, "scratch", 0.886, 0.89, None),
             write_results(tmp_path, "pretrained-4000", 0.90, 0.899, pretraining_run(4000, 7200.0))]
    run_script(*map(str, paths), "--output", str(tmp_path / "curve" / "compute-curve"))
    points = json.loads((tmp_path / "curve" / "compute-curve.json").read_text())
    assert [point["classifier"] for point in points] == ["scratch", "pretrained-4000", "pretrained-8000"]
    assert [point["pretraining_steps"] for point in points] == [0, 4000, 8000]
    assert [point["pretraining_tokens"] for point in points] == [0, 4000 * 32 * 128, 8000 * 32 * 128]
    assert [point["pretraining_cpu_hours"] for point in points] == pytest.approx([0.0, 2.0, 3.0])
    assert points[2]["test_se"] == pytest.approx(math.sqrt(0.905 * 0.095 / 4000))
    table = (tmp_path / "curve" / "compute-curve.md").read_text()
    assert "| pretrained-8000 | 8,000 | 32.8 | 3.00 | 0.9100 ± 0.0040 | 0.9050 ± 0.0046 |" in table
    assert (tmp_path / "curve" / "compute-curve.png").stat().st_size > 0


def test_an_unfinished_run_is_refused_by_name(tmp_path: Path) -> None:
    stopped = tmp_path / "stopped.json"
    stopped.write_text(json.dumps({"stage": "stopped", "step": 100}))
    with pytest.raises(SystemExit, match="stopped.json has no val_accuracy, test_accuracy"):
        run_script(str(stopped), "--output", str(tmp_path / "curve"))


def test_the_plot_draws_each_accuracy_with_its_standard_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from matplotlib.axes import Axes

    drawn: dict[str, tuple[list[float], list[float]]] = {}
    errorbar = Axes.errorbar

    def recording_errorbar(self: Axes, xs: Any, ys: Any, yerr: Any = None, **kwargs: Any) -> Any:
        drawn[kwargs["label"]] = (list(ys), list(yerr))
        return errorbar(self, xs, ys, yerr=yerr, **kwargs)

    monkeypatch.setattr(Axes, "errorbar", recording_errorbar)
    paths = [write_results(tmp_path, "scratch", 0.886, 0.89, None),
             write_results(tmp_path, "pretrained-4000", 0.90, 0.8, pretraining_run(4000, 7200.0))]
    run_script(*map(str, paths), "--output", str(tmp_path / "compute-curve"))
    assert drawn["validation"][0] == [0.886, 0.90]
    assert drawn["validation"][1] == pytest.approx([math.sqrt(0.886 * 0.114 / 5000), math.sqrt(0.9 * 0.1 / 5000)])
    assert drawn["test"][1] == pytest.approx([math.sqrt(0.89 * 0.11 / 4000), math.sqrt(0.8 * 0.2 / 4000)])
