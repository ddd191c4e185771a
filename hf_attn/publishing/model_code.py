"""The model code a saved folder ships, what `trust_remote_code=True` runs where hf_attn is not installed.

It has one source: the installed package's modules, written by `write_model_code` where the code is needed (a push,
its `--dry-run` folder, an export); `strip_model_code` takes it out again for a folder the installed package loads (a
committed checkpoint: no generated code in git). A run folder's own `.py` files are never copied: they are the code
of the day it trained.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from .. import (
    caching,
    configuration_hf_attn,
    masking,
    modeling_hf_attn,
    position_ids,
    positions,
    reading,
    scoring,
    tokenization_hf_attn,
)
from ..modeling_hf_attn import AUTO_CLASSES

# The package's modules a saved model's `auto_map` loads: the config, the model (and the modules it imports) and
# the tokenizer.
MODEL_CODE_MODULES = (
    configuration_hf_attn, modeling_hf_attn, positions, position_ids, masking, scoring, caching, reading,
    tokenization_hf_attn,
)
MODEL_CODE_FILES = tuple(Path(module.__file__).name for module in MODEL_CODE_MODULES)
# The `auto_map`s that point transformers' Auto classes at that code, as `save_pretrained` writes them: every head
# in config.json (a masked-LM folder loads as a classifier to fine-tune), the BPE tokenizer in tokenizer_config.json.
MODEL_AUTO_MAP = {"AutoConfig": "configuration_hf_attn.HfAttnConfig",
                  **{auto_class: f"modeling_hf_attn.{model_class.__name__}" for auto_class, model_class in
                     AUTO_CLASSES.items()}}
TOKENIZER_AUTO_MAP = {"AutoTokenizer": [None, "tokenization_hf_attn.HfAttnTokenizerFast"]}


def write_model_code(folder: str | os.PathLike[str]) -> list[Path]:
    """Write the installed package's model code into `folder` (made if missing, any copy there replaced) and point
    its config.json and tokenizer_config.json at it (`auto_map`); returns the code files. Also for a Trainer that
    pushes its output folder at every checkpoint (docs/ecosystem.md)."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    written = []
    for module in MODEL_CODE_MODULES:
        source = Path(module.__file__)
        target = Path(folder) / source.name
        shutil.copyfile(source, target)
        written.append(target)
    _set_auto_maps(Path(folder), point_at_code=True)
    return written


def strip_model_code(folder: str | os.PathLike[str]) -> None:
    """Take the model code and the `auto_map`s that point at it out of the saved folder `folder`: it then loads
    with hf_attn installed (`import hf_attn` registers its classes with the Auto classes), `trust_remote_code=True`
    or not, and `write_model_code` (a push) makes it a Hub repo again."""
    for name in MODEL_CODE_FILES:
        (Path(folder) / name).unlink(missing_ok=True)
    _set_auto_maps(Path(folder), point_at_code=False)


def _set_auto_maps(folder: Path, point_at_code: bool) -> None:
    """Set (or with `point_at_code` false, remove) the `auto_map` of the config and of a BPE tokenizer's config
    (a word-level tokenizer is transformers' own class and has no code to point at)."""
    for name, auto_map in (("config.json", MODEL_AUTO_MAP), ("tokenizer_config.json", TOKENIZER_AUTO_MAP)):
        path = folder / name
        if not path.is_file():
            continue
        saved = json.loads(path.read_text())
        if name == "tokenizer_config.json" and saved.get("tokenizer_class") != "HfAttnTokenizerFast":
            continue
        if point_at_code:
            saved["auto_map"] = auto_map
        elif saved.pop("auto_map", None) is None:
            continue
        path.write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n")
