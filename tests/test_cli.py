"""What `hf-attn` says about a `--model` that is not a model: one line naming it, exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from hf_attn import cli

SAVED = Path(__file__).parent / "fixtures" / "pre-1.0" / "alibi-gqa"


@pytest.mark.parametrize("command", ["predict", "evaluate", "probe", "card", "push"])
@pytest.mark.parametrize(("folder", "message"), [("missing", "does not exist"), ("empty", "holds no config.json")])
def test_a_model_folder_that_is_not_a_model_is_a_usage_error(
    command: str, folder: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    extra = {"predict": ["some text"], "card": ["--repo-id", "a/b", "--output", "x.md"], "push": ["--repo-id", "a/b"]}
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--model", str(tmp_path / folder), *extra.get(command, [])])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert str(tmp_path / folder) in error and message in error
    assert "Traceback" not in error


@pytest.mark.parametrize("value", [str(SAVED), "someone/hf-attn-imdb-rope"])
def test_a_saved_folder_or_a_hub_repo_id_passes(value: str) -> None:
    assert cli.model_folder(value) == value
