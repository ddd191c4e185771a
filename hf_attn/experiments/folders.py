"""A run's output folder: one process writes it at a time, an earlier run in it is continued or replaced only on
request, and a checkpoint to resume from is checked before any data is loaded."""

from __future__ import annotations

import contextlib
import fcntl
import shutil
from collections.abc import Iterator
from pathlib import Path

import torch
from accelerate import PartialState
from transformers.trainer_utils import get_last_checkpoint


class RunFolderError(ValueError):
    """An output folder this run may not write: it holds another run, or another process writes it."""


# What marks a folder as holding a run: a saved model, its record or its checkpoints.
RUN_MARKERS = ("config.json", "metrics.json", "checkpoint-*")
LOCK_FILE = ".hf-attn.lock"


@contextlib.contextmanager
def claim_output_dir(output_dir: Path, resume: bool, overwrite: bool) -> Iterator[None]:
    """Hold `output_dir` for one run: one process at a time, and an earlier run in it only on request.

    A folder that already holds a run is continued with `resume` or, with `overwrite`, first loses that
    run's checkpoints and metrics, so that an old run's checkpoints never mix with a new one's;
    otherwise it is a `RunFolderError` naming both options. The lock is an `flock` on `LOCK_FILE`,
    which the operating system releases when the process ends, also when it is killed. Under
    `accelerate launch` the main process holds it for all of them.
    """
    if resume and overwrite:
        raise RunFolderError("--resume continues the run in the output folder and --overwrite replaces it: pass one.")
    if not process_state().is_main_process:
        yield
        return
    previous = [path for marker in RUN_MARKERS for path in output_dir.glob(marker)]
    if previous and not (resume or overwrite):
        raise RunFolderError(
            f"{output_dir} already holds a run ({', '.join(sorted(path.name for path in previous)[:4])}); pass "
            "--resume to continue it, or --overwrite to start again (its checkpoints and metrics are deleted)."
        )
    output_dir.mkdir(parents=True, exist_ok=True)
    with open(output_dir / LOCK_FILE, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunFolderError(
                f"another process is writing {output_dir}; wait for it to end or pass another --output-dir."
            ) from None
        if overwrite:
            for path in previous:
                if path.is_dir():
                    shutil.rmtree(path)
                elif path.name != "config.json":  # the new run's save replaces the model files
                    path.unlink()
        yield


def process_state() -> PartialState:
    """accelerate's view of this process (the main one, how many): on a machine without a GPU, CPU processes
    (also under `accelerate launch`)."""
    return PartialState(cpu=not torch.cuda.is_available())


def resume_checkpoint(output_dir: Path) -> str:
    """The last checkpoint in `output_dir`; before any data is loaded, a FileNotFoundError if there is none and a
    ValueError naming it if it is incomplete: `Trainer` writes `trainer_state.json` last, so a run stopped while
    writing a checkpoint leaves it without one, or with a weights file cut short."""
    from safetensors import SafetensorError, safe_open

    checkpoint = get_last_checkpoint(str(output_dir)) if output_dir.is_dir() else None
    if checkpoint is None:
        raise FileNotFoundError(
            f"--resume: no checkpoint-* folder in {output_dir}; start without --resume, or pass the "
            "--output-dir of the interrupted run."
        )
    unreadable = [] if (Path(checkpoint) / "trainer_state.json").is_file() else ["trainer_state.json"]
    for weights in sorted(Path(checkpoint).glob("*.safetensors")):
        try:
            with safe_open(weights, framework="pt"):  # reads the header, which must match the file's size
                pass
        except SafetensorError:
            unreadable.append(weights.name)
    if unreadable:
        steps = sorted(int(path.name.split("-")[-1]) for path in output_dir.glob("checkpoint-*")
                       if path.name.split("-")[-1].isdigit())
        way_back = f"delete it to resume from checkpoint-{steps[-2]}, or" if len(steps) > 1 else "none is earlier:"
        raise ValueError(
            f"--resume: {checkpoint} is incomplete ({' and '.join(unreadable)} missing or cut short): the run was "
            f"stopped while writing it; {way_back} start again with --overwrite."
        )
    return checkpoint


def keep_only_checkpoint(output_dir: Path, kept: str | None) -> None:
    """Delete the `checkpoint-*` folders of `output_dir` but `kept` (what Trainer leaves under a
    `save_total_limit` of 1 when a run ends: the best), from the main process."""
    if kept is None or not process_state().is_main_process:
        return
    for checkpoint in output_dir.glob("checkpoint-*"):
        if checkpoint.resolve() != Path(kept).resolve():
            shutil.rmtree(checkpoint)
