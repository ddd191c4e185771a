"""`hf-attn`'s dispatch: the registry of commands, the parser built from it, and `main`, which runs a command and
turns what goes wrong into one line and an exit status. Each command's options and work are in its own module of
`hf_attn.commands`, imported only when that command is parsed: `hf-attn --help`, or parsing one command, loads no
other command's machinery."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib import import_module
from typing import Any

from safetensors import SafetensorError

DESCRIPTION = ("`hf-attn` command line: arguments, and reading and printing; the work is done by the package's "
               "functions.")

# Each command: its module in hf_attn/commands/ (`add_arguments(parser)`, `run(args)`), and its line in
# `hf-attn --help`, in the order listed there. A new command is a module and a line here (docs/contributing.md).
COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("train", "train a classifier from a YAML experiment file (a decoder when its dataset is a sequence "
              "task: docs/length-tasks.md)"),
    "pretrain": ("train", "pretrain on the dataset's training texts (IMDb: with its unlabelled reviews): an encoder "
                 "for init_from (masked LM or replaced-token detection) or a causal LM"),
    "seq2seq": ("train", "train an encoder-decoder to write dates of many locales and formats as YYYY-MM-DD "
                "(generated pairs; --dataset is not read)"),
    "arena": ("arena", "every position scheme through the same data, budget and seed: accuracy by read length, "
              "masked-LM loss by length, speed (resumable)"),
    "prepare": ("prepare", "make a complete Week 3 folder (BPE, splits, DAN) from IMDb"),
    "evaluate": ("evaluate", "accuracy and F1 of a saved classifier on a split of a dataset"),
    "score-pairs": ("score_pairs", "exact match by length of a saved sequence-task model on a JSONL file of "
                    '{"input": ..., "target": ...} pairs (docs/length-tasks.md)'),
    "write-pairs": ("write_pairs", "write a generated length task's train / validation / test pairs as JSONL, for "
                    "score-pairs or another model (docs/length-tasks.md)"),
    "predict": ("predict", "classify texts with a saved model: one result line per text"),
    "probe": ("probe", "hard-review and contextual-vector probes; with --output-dir also heatmaps and plots"),
    "explore": ("explore", "a local page (Gradio) to read texts with saved classifiers: verdicts, windows, attention "
                "heatmaps, each position scheme's picture"),
    "generate": ("generate", "continue prompts with a saved causal LM (or encoder-decoder)"),
    "perplexity": ("perplexity", "perplexity of a saved causal LM on validation text at several lengths "
                   "(non-overlapping windows; the ALiBi paper's Figure 1)"),
    "baseline": ("baseline", "TF-IDF + logistic regression on the first N tokens"),
    "card": ("card", "write the model card of a trained run (from its metrics.json)"),
    "push": ("push", "upload model, tokenizer, code and model card to the Hub"),
    "export": ("export", "export a saved classifier to ONNX (with --int8, also ONNX Runtime's dynamic int8) beside "
               "its tokenizer and config (docs/serving.md)"),
    "checkpoint": ("checkpoint", "write a run's model as a small float16 from_pretrained folder with its tokenizer, "
                   "code and card (this repository commits its own with tools/commit_checkpoint.py)"),
    "bench": ("bench", "speed against transformers' BERT, RoFormer, ModernBERT and Llama of the same shape"),
}

# Modules of the optional extras (pyproject.toml), for a clear error where one is missing.
EXTRA_OF_MODULE = {
    "datasets": "experiments",
    "accelerate": "experiments",
    "yaml": "experiments",
    "sklearn": "experiments",
    "matplotlib": "analysis",
    "babel": "experiments",
    "evaluate": "experiments",
    "gradio": "app",
    "onnxruntime": "export",
    "onnxscript": "export",
}


class CommandParser(argparse.ArgumentParser):
    """A command's parser, which imports the command's module and takes its options and `run` from it only when
    the command is parsed or its help shown: building `hf-attn`'s parser then imports no command's module
    (`hf-attn predict` never loads the benchmark, whose options are generated from its settings)."""

    def __init__(self, *args: Any, module: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._module = module

    def _ensure_options(self) -> None:
        if self._module is not None:
            command = import_module(f"hf_attn.commands.{self._module}")
            self._module = None
            command.add_arguments(self)
            self.set_defaults(func=command.run)

    def parse_known_args(self, args: Sequence[str] | None = None,
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        self._ensure_options()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self._ensure_options()
        return super().format_help()


def build_parser() -> argparse.ArgumentParser:
    """`hf-attn`'s parser: one subparser per entry of `COMMANDS`, its options read when it is parsed."""
    parser = argparse.ArgumentParser(prog="hf-attn", description=DESCRIPTION)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    for name, (module, help_text) in COMMANDS.items():
        commands.add_parser(name, help=help_text, module=module)
    return parser


def _leave_process_group() -> None:
    """Leave the process group a run under `accelerate launch` joined, if any.

    A process that exits while still in a gloo group can abort in its last moment ("terminate called without
    an active exception": the group's threads outlive the interpreter), failing a run whose work was done.
    """
    distributed = sys.modules.get("torch.distributed")  # absent where the command never imported torch
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        distributed.destroy_process_group()


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command `argv` (default: the process's arguments) names; a user's error, a missing extra, Ctrl-C or
    a closed pipe ends it in one line on stderr (or none) and an exit status, without a traceback."""
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except (ValueError, FileNotFoundError) as error:  # user errors: one clear line, no traceback
        print(f"hf-attn {args.command}: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt:  # Ctrl-C: a run's checkpoints stay as they were; say how to go on, no traceback
        again = "; the same command with --resume continues from its last checkpoint" if getattr(
            args, "resume", None) is not None else ""
        print(f"\nhf-attn {args.command}: interrupted{again}", file=sys.stderr)
        raise SystemExit(130) from None
    except BrokenPipeError:  # the reader went away (`hf-attn predict ... | head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the interpreter's final flush is silent
        raise SystemExit(1) from None
    except SafetensorError as error:
        print(f"hf-attn {args.command}: error: a weights file cannot be read ({error}); it is truncated or "
              "corrupt: save or download the model again", file=sys.stderr)
        raise SystemExit(2) from None
    except ModuleNotFoundError as error:
        if error.name not in EXTRA_OF_MODULE:
            raise
        extra = EXTRA_OF_MODULE[error.name]
        print(f"hf-attn {args.command}: error: this command needs {error.name}, which the core package does not "
              f"install; pip install 'hf-attn[{extra}]'", file=sys.stderr)
        raise SystemExit(2) from None
    except OSError as error:  # what transformers raises for a Hub repo it cannot find or reach, a full disk, ...
        print(f"hf-attn {args.command}: error: {' '.join(str(error).split())}", file=sys.stderr)
        raise SystemExit(2) from None
    finally:
        _leave_process_group()


if __name__ == "__main__":
    main()
