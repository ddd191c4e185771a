"""The folder that `push_to_hub` would commit, and the push: the run's weights, config and tokenizer, the installed
package's model code (`model_code.py`) and the card (`cards.py`). `upload_folder` is the only call that touches the
network; everything before it is a local folder that tests can load in a fresh process."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from huggingface_hub import HfApi

from .cards import card_for_run
from .checkpoint import load_run_model
from .model_code import write_model_code

# What a Hub repo needs besides the code: weights, config, tokenizer, card.
UPLOAD_SUFFIXES = (".json", ".safetensors", ".txt", ".model")
# Never uploaded: optimizer state and pickles from training, per-step checkpoints, local metrics.
EXCLUDED_NAMES = {"training_args.bin", "metrics.json", "trainer_state.json"}


def assemble_upload(model_dir: str | os.PathLike[str], folder: str | os.PathLike[str], repo_id: str) -> Path:
    """Write exactly what would be committed into `folder`: the run's weights, config and tokenizer, the installed
    package's model code and the card. A run whose weights do not fit that code (trained by an older hf_attn whose
    model differed) is refused, naming the weights, before anything is written."""
    model_dir, folder = Path(model_dir), Path(folder)
    card = card_for_run(model_dir, repo_id)
    load_run_model(model_dir)
    folder.mkdir(parents=True, exist_ok=True)
    for path in sorted(model_dir.iterdir()):
        if path.is_file() and path.suffix in UPLOAD_SUFFIXES and path.name not in EXCLUDED_NAMES:
            shutil.copy2(path, folder / path.name)
    write_model_code(folder)
    card.save(folder / "README.md")
    return folder


def push(model_dir: str | os.PathLike[str], repo_id: str, private: bool = False,
         dry_run_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Upload a run to the Hub, or with `dry_run_dir` only write the folder that would be uploaded there; returns the
    names of the files. The upload is assembled in a temporary folder: the run folder is only read (it may be a
    committed checkpoint, or read-only)."""
    with tempfile.TemporaryDirectory(prefix="hf-attn-push-") as scratch:
        folder = assemble_upload(model_dir, dry_run_dir if dry_run_dir is not None else scratch, repo_id)
        names = sorted(path.name for path in folder.iterdir())
        if dry_run_dir is None:
            api = HfApi()
            api.create_repo(repo_id, private=private, exist_ok=True)
            api.upload_folder(folder_path=folder, repo_id=repo_id, commit_message="Upload hf-attn model")
    return names
