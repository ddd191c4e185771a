"""What the core package costs a user: `import hf_attn` loads no optional extra, and a command whose extra
is missing says which one to install. (accelerate is not checked: transformers itself imports it where it
is installed.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from helpers import REPO

from hf_attn import cli

OPTIONAL = ["matplotlib", "sklearn", "datasets", "pyarrow", "hf_attn.experiments", "hf_attn.bench",
            "hf_attn.analysis", "hf_attn.week3"]
# What a command's machinery loads: the optional modules but `hf_attn.experiments` itself, which the command line
# reads `PRECISIONS` (a constant of `hf_attn.experiments.precision`) from while it builds its parser.
MACHINERY = [*(name for name in OPTIONAL if name != "hf_attn.experiments"), "hf_attn.experiments.run",
             "hf_attn.experiments.data", "hf_attn.saved"]


def modules_loaded_by(code: str, names: list[str] = OPTIONAL) -> list[str]:
    """Those of `names` and `hf_attn.cli` that a fresh interpreter has loaded after running `code`."""
    check = (f"import json, sys\n{code}\n"
             f"print(json.dumps([name for name in {[*names, 'hf_attn.cli']!r} if name in sys.modules]))")
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_importing_the_package_loads_no_optional_module() -> None:
    assert modules_loaded_by("import hf_attn\nfrom transformers import AutoConfig") == []


def test_parsing_a_command_imports_no_other_commands_machinery(tmp_path: Path) -> None:
    saved = tmp_path / "model"  # what `--model` checks for
    saved.mkdir()
    for name in ("config.json", "tokenizer.json"):
        (saved / name).write_text("{}")
    code = (f"from hf_attn.cli import build_parser\n"
            f"args = build_parser().parse_args(['predict', '--model', {str(saved)!r}, 'a review'])\n"
            "assert args.func.__name__ == '_predict'")
    assert modules_loaded_by(code, MACHINERY) == ["hf_attn.cli"]


def test_the_benchmark_options_are_read_when_bench_runs_and_the_benchmark_does_not_import_the_command_line() -> None:
    args = cli.build_parser().parse_args(["bench", "--sections", "throughput", "--repeats", "2"])
    assert args.sections == ("throughput",) and args.repeats == 2 and args.func.__name__ == "run_from_args"
    assert "hf_attn.cli" not in modules_loaded_by("import hf_attn.bench")


def test_core_dependencies_are_the_models_and_torch_is_not_pinned() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = {requirement.split(">")[0].split("=")[0].split("<")[0] for requirement in project["dependencies"]}
    assert core == {"torch", "transformers", "tokenizers", "safetensors", "huggingface_hub"}
    torch_requirement = next(r for r in project["dependencies"] if r.startswith("torch"))
    assert "==" not in torch_requirement
    extras = project["optional-dependencies"]
    for module, extra in cli.EXTRA_OF_MODULE.items():
        distribution = {"sklearn": "scikit-learn", "yaml": "pyyaml"}.get(module, module)
        assert any(requirement.startswith(distribution) for requirement in extras[extra]), (module, extra)


def test_a_command_whose_extra_is_missing_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    saved = tmp_path / "model"  # what `--model` checks for; the command stops at its import before reading it
    saved.mkdir()
    for name in ("config.json", "tokenizer.json"):
        (saved / name).write_text("{}")
    for name in [name for name in sys.modules if name.startswith("hf_attn.analysis")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ModuleNotFoundError
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["probe", "--model", str(saved)])
    assert exit_info.value.code == 2
    assert "pip install 'hf-attn[analysis]'" in capsys.readouterr().err
