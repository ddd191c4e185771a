"""A run's model as a small `from_pretrained` folder to keep (`hf-attn checkpoint`).

Run folders are not kept from one machine to the next, and pretraining is the expensive part of a run, so
pretrained encoders and the best classifiers are kept as checkpoints (this repository commits them in
`checkpoints/`, under the size and count rules of `tools/commit_checkpoint.py`). `write_checkpoint` turns a run
folder into such a folder: the weights as float16 safetensors (half the bytes of float32; float16 keeps 11
significant bits), a config.json whose `dtype` stays float32, the tokenizer, the run's `metrics.json` (so that
a run fine-tuned from it with `init_from` records the pretraining) and a model card. Written from the last
checkpoint of a stage stopped by `--max-time` (`RUN/checkpoint-N`), it also keeps `trainer_state.json` and
`stage.json`, from which `--continue-from` goes on on another machine.

transformers 5 loads with `dtype="auto"` by default: the config's `dtype`, else the weights' own. A float16
file whose config said float16 would compute in float16 on the CPU; with float32 in the config,
`from_pretrained` upcasts the weights to float32 unless the caller asks for `dtype=torch.float16`.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import ModelCard
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from transformers import AutoTokenizer, PreTrainedModel

from ..configuration_hf_attn import HfAttnConfig
from ..modeling_hf_attn import AUTO_CLASSES
from ..saved import load_strictly
from .cards import build_description_card, card_from_records
from .model_code import strip_model_code

STORED_DTYPE = torch.float16
WEIGHTS_NAME = "model.safetensors"  # a checkpoint's one weights file (a run's may be split, with an index)
# A run's records a checkpoint keeps: its scores (for `init_from` runs and cards), and where a stage stopped by
# --max-time got to (`Trainer`'s state and the stage record, which `--continue-from` goes on from).
RUN_RECORDS = ("metrics.json", "trainer_state.json", "stage.json")

STORAGE_NOTE = """
## Stored weights

This folder was written by `hf-attn checkpoint`: the weights are stored as float16 safetensors, and
`from_pretrained` loads them as float32 (the config's `dtype`) unless it is passed `dtype=torch.float16`.
float16 keeps 11 significant bits, so its outputs differ by float16 rounding from those of the float32
weights the run trained (on which any score in this card was measured).

The folder holds no code: it loads where hf-attn is installed, once `import hf_attn` has registered its classes
with transformers' Auto classes. `hf-attn push --model FOLDER --repo-id ID` (or `--dry-run DIR`) writes the code
beside it, for `trust_remote_code=True` where hf-attn is not installed.
"""


# The first line of a checkpoint card's code: the folder holds no code, the installed package's classes load it.
IMPORT_LINE = "import hf_attn  # registers hf-attn's classes with transformers' Auto classes"


class CheckpointError(ValueError):
    """A checkpoint that may not be written: too large, in the way of another folder, or from no saved model."""


def load_run_model(run_dir: Path) -> PreTrainedModel:
    """The run's model in float32, as the class its config.json names, loaded strictly (every weight must fit)."""
    config_path = run_dir / "config.json"
    weights = [run_dir / WEIGHTS_NAME, run_dir / f"{WEIGHTS_NAME}.index.json"]
    if not config_path.is_file() or not any(path.is_file() for path in weights):
        raise CheckpointError(
            f"{run_dir} holds no saved model (config.json and {WEIGHTS_NAME}); pass the --output-dir of a finished "
            "`hf-attn train` or `hf-attn pretrain`"
        )
    config = json.loads(config_path.read_text())
    if config.get("model_type") != HfAttnConfig.model_type:
        raise CheckpointError(f"{config_path} says model_type {config.get('model_type')!r}, not "
                              f"{HfAttnConfig.model_type!r}: only hf_attn models are checkpointed here")
    classes = {model_class.__name__: model_class for model_class in AUTO_CLASSES.values()}
    architecture = (config.get("architectures") or [None])[0]
    if architecture not in classes:
        raise CheckpointError(f"{config_path} names the architecture {architecture!r}, not one of {sorted(classes)}; "
                              "save the model with save_pretrained, which writes it")
    return load_strictly(classes[architecture], run_dir, dtype=torch.float32)


def check_output(output: Path, overwrite: bool, max_checkpoints: int | None = None) -> None:
    """Refuse to write `output` over a non-empty folder without `overwrite`, or, where `max_checkpoints` is given,
    as one checkpoint more than that beside the checkpoints already in its parent folder (replace one instead)."""
    if output.is_dir() and any(output.iterdir()):
        if not overwrite:
            raise CheckpointError(f"{output} already holds files; pass --overwrite to replace them with this "
                                  "checkpoint, or another --output")
        return
    if max_checkpoints is None or not output.parent.is_dir():
        return
    others = sorted(path.name for path in output.parent.iterdir()
                    if path != output and not path.name.startswith(".") and is_checkpoint(path))  # not a staging one
    if len(others) >= max_checkpoints:
        raise CheckpointError(
            f"{output.parent} already holds {len(others)} checkpoints ({', '.join(others)}), the most it keeps; "
            "replace one (--output with its path and --overwrite), or delete one first"
        )


def is_checkpoint(folder: Path) -> bool:
    """Whether `folder` is a checkpoint as `write_checkpoint` writes them: a saved model stored in float16."""
    return (folder / "config.json").is_file() and stored_dtypes(folder) == {"F16"}


def committed_classifiers(checkpoints: str | os.PathLike[str]) -> list[Path]:
    """The classifier checkpoints in the folder `checkpoints` (none when it does not exist), by name."""
    folder = Path(checkpoints)
    if not folder.is_dir():
        return []
    return [path for path in sorted(folder.iterdir()) if is_checkpoint(path) and "HfAttnForSequenceClassification"
            in json.loads((path / "config.json").read_text()).get("architectures", [])]


def stored_dtypes(folder: Path) -> set[str]:
    """The safetensors dtypes (`F16`, `F32`, ...) of the weights in `folder`, read from the file header only."""
    weights = folder / WEIGHTS_NAME
    if not weights.is_file():
        return set()
    with safe_open(weights, framework="pt") as file:
        return {file.get_slice(name).get_dtype() for name in file.keys()}


def folder_bytes(folder: Path) -> int:
    """The size of every file in `folder`, subfolders included."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def checkpoint_card(metrics: dict[str, Any] | None, config: dict[str, Any], repo_id: str,
                    encoder_of: str | None = None) -> ModelCard:
    """The model card of a checkpoint: the card of the run's records (`card_from_records`), or for the encoder alone
    (`encoder_of` names the run's model) the card that says what it is; followed by how the weights are stored and
    which heads were left out. Its code imports hf_attn first: the folder holds no code of its own."""
    card = (card_from_records(metrics, config, repo_id) if encoder_of is None
            else build_description_card(metrics, config, repo_id))
    dropped = "" if encoder_of is None else (
        f"\nOnly the encoder of the run's `{encoder_of}` is stored (`hf-attn checkpoint --encoder-only`): its heads "
        "were left out, and a classifier fine-tuned from it starts its head afresh.\n")
    loading = card.content.replace("```python\n", f"```python\n{IMPORT_LINE}\n")
    return ModelCard(loading + STORAGE_NOTE + dropped)


def save_checkpoint_files(model: PreTrainedModel, run_dir: Path, folder: Path, repo_id: str,
                          encoder_only: bool = False) -> None:
    """Write the checkpoint of `model` (loaded from `run_dir`), or of its encoder alone, into the empty `folder`.

    The model is saved as `save_pretrained` saves it in float32 (config with `dtype` float32, tied weights
    once), without the model code `save_pretrained` writes beside it: the installed package loads the folder, and
    `hf-attn push` writes the code where a Hub repo needs it. The weights file is then stored again with every
    float tensor in float16; only the stored bytes change."""
    encoder_of = type(model).__name__ if encoder_only else None
    (model.base_model if encoder_only else model).save_pretrained(folder)
    weights = load_file(folder / WEIGHTS_NAME)
    save_file({name: tensor.to(STORED_DTYPE) if tensor.is_floating_point() else tensor
               for name, tensor in weights.items()}, folder / WEIGHTS_NAME, metadata={"format": "pt"})
    AutoTokenizer.from_pretrained(run_dir).save_pretrained(folder)
    strip_model_code(folder)
    for record in RUN_RECORDS:  # kept as they are
        if (run_dir / record).is_file():
            shutil.copy2(run_dir / record, folder / record)
    metrics = json.loads((folder / "metrics.json").read_text()) if (folder / "metrics.json").is_file() else None
    config = json.loads((folder / "config.json").read_text())
    checkpoint_card(metrics, config, repo_id, encoder_of).save(folder / "README.md")


def write_checkpoint(run_dir: str | os.PathLike[str], output: str | os.PathLike[str], overwrite: bool = False,
                     encoder_only: bool = False, max_bytes: int | None = None,
                     max_checkpoints: int | None = None) -> int:
    """Write the checkpoint of the run folder `run_dir` to `output`; returns its size in bytes.

    With `encoder_only`, only the encoder is kept (an `HfAttnModel`): what a classifier fine-tunes from, at the
    size of the encoder alone where a run's heads would not fit (ELECTRA's generator at the reference size).

    It is written beside `output` first and moved into place only once it is whole and, where `max_bytes` is
    given, at most that size, so a refused or failed checkpoint leaves `output` as it was. Its card's loading
    example names `output`. With `max_checkpoints`, the folder it goes in keeps at most that many.
    """
    run_dir, output = Path(run_dir), Path(output)
    check_output(output, overwrite, max_checkpoints)
    model = load_run_model(run_dir)
    staging = output.parent / f".{output.name}.partial"
    if staging.exists():  # left by an interrupted write
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    try:
        save_checkpoint_files(model, run_dir, staging, str(output), encoder_only)
        size = folder_bytes(staging)
        if max_bytes is not None and size > max_bytes:
            heads = model.base_model is not model and not encoder_only
            raise CheckpointError(
                f"the checkpoint of {run_dir} would take {size / 1e6:.2f} MB, over the limit of "
                f"{max_bytes / 1e6:g} MB a checkpoint may take; "
                + ("pass --encoder-only to keep the encoder without its heads, or " if heads else "")
                + "checkpoint a smaller model (fewer layers, a smaller vocabulary or width)"
            )
        if output.exists():
            shutil.rmtree(output)
        staging.rename(output)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return size
