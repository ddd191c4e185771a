"""What the core package costs a user: `import hf_attn` loads no optional extra, and a command whose extra
is missing says which one to install. (accelerate is not checked: transformers itself imports it where it
is installed.)"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tomllib
from helpers import REPO

from hf_attn import cli

OPTIONAL = ["matplotlib", "sklearn", "datasets", "pyarrow", "gradio", "evaluate", "hf_attn.experiments",
            "hf_attn.bench", "hf_attn.analysis", "hf_attn.publishing", "hf_attn.week3", "hf_attn.explore"]
# What a command's machinery loads: the optional modules, the run skeleton and data, and the saved-model loaders.
MACHINERY = [*OPTIONAL, "hf_attn.experiments.run", "hf_attn.experiments.data", "hf_attn.saved"]


def test_importing_the_package_or_parsing_a_command_loads_no_commands_machinery(tmp_path: Path) -> None:
    """`import hf_attn` loads no optional module, and building the parser and parsing `predict` loads none of
    another command's machinery, nor another command's module (the registry imports a command's module, and with
    it its options, only when that command is parsed)."""
    saved = tmp_path / "model"  # what `--model` checks for
    saved.mkdir()
    for name in ("config.json", "tokenizer.json"):
        (saved / name).write_text("{}")
    code = textwrap.dedent(f"""
        import json, sys
        import hf_attn
        from transformers import AutoConfig
        after_import = [name for name in {OPTIONAL!r} if name in sys.modules]
        from hf_attn.cli import build_parser
        args = build_parser().parse_args(["predict", "--model", {str(saved)!r}, "a review"])
        after_parse = [name for name in {MACHINERY!r} if name in sys.modules]
        commands = sorted(name for name in sys.modules if name.startswith("hf_attn.commands."))
        print(json.dumps([after_import, after_parse, commands, f"{{args.func.__module__}}.{{args.func.__name__}}"]))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [
        [], [], ["hf_attn.commands.common", "hf_attn.commands.predict"], "hf_attn.commands.predict.run"]


def test_no_module_of_the_package_imports_the_command_line() -> None:
    """`hf_attn.cli` imports each command's module when the command runs, never the other way round, so the
    two cannot import each other in a cycle (argument types live in `hf_attn.arguments`)."""
    for path in sorted((REPO / "hf_attn").rglob("*.py")):
        if path.name == "cli.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                modules = [node.module or "", *(f"{node.module or ''}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            assert not any(module.split(".")[-1] == "cli" for module in modules), f"{path} imports the cli"


def test_the_benchmark_options_are_read_when_bench_is_parsed() -> None:
    args = cli.build_parser().parse_args(["bench", "--sections", "throughput", "--repeats", "2"])
    assert args.sections == ("throughput",) and args.repeats == 2 and args.func.__module__ == "hf_attn.commands.bench"


def test_every_registered_command_builds_its_options_and_runs_its_module(capsys: pytest.CaptureFixture[str]) -> None:
    """Each entry of `cli.COMMANDS` names a module of hf_attn/commands/ whose `add_arguments` gives the command's
    options (its help lists them) and whose `run` does its work: a command is one module and one registry line."""
    for name, (module_name, _) in cli.COMMANDS.items():
        with pytest.raises(SystemExit) as exit_info:
            cli.main([name, "--help"])
        assert exit_info.value.code == 0 and capsys.readouterr().out.startswith(f"usage: hf-attn {name} [-h]")
        assert callable(importlib.import_module(f"hf_attn.commands.{module_name}").run), name


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
