"""What the core package costs a user: `import hf_attn` loads no optional extra, and a command whose extra
is missing says which one to install. (accelerate is not checked: transformers itself imports it where it
is installed.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from helpers import REPO

from hf_attn import cli

OPTIONAL = ["matplotlib", "sklearn", "datasets", "pyarrow", "gradio", "hf_attn.experiments", "hf_attn.bench",
            "hf_attn.analysis", "hf_attn.week3", "hf_attn.explore"]


def test_importing_the_package_loads_no_optional_module() -> None:
    code = (
        "import sys, hf_attn\n"
        "from transformers import AutoConfig\n"
        f"print([name for name in {OPTIONAL!r} if name in sys.modules])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert result.stdout.strip() == "[]"


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
