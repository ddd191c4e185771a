"""`hf-attn` command line: arguments, and reading and printing; the work is done by the package's functions."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from safetensors import SafetensorError

from .arguments import (
    input_file,
    length_buckets,
    lengths_list,
    minutes,
    model_folder,
    model_with_tokenizer,
    names_list,
    output_file,
    output_folder,
    positive_int,
    positive_number,
    read_length,
    reading_policy,
    run_folder,
    seeds_list,
)
from .experiments.precision import PRECISIONS
from .prediction_files import INPUT_FORMATS

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

def _overrides(args: argparse.Namespace) -> list[str]:
    """The command line's key=value overrides, with --week3 and the dataset (--dataset and its columns) as more."""
    overrides = list(args.overrides)
    if args.week3:
        overrides.append(f"week3={args.week3}")
    dataset = dataset_argument(args)
    if dataset is not None:
        overrides.append(f"dataset={json.dumps(dataset)}")  # JSON is YAML: a string or a mapping
    return overrides


def dataset_argument(args: argparse.Namespace) -> str | dict[str, str] | None:
    """--dataset, or with --text-column / --label-column the mapping of a `datasets` source (None: neither given)."""
    columns = {key: value for key, value in (("text_column", args.text_column), ("label_column", args.label_column))
               if value is not None}
    if not columns:
        return args.dataset
    if args.dataset is None:
        raise ValueError("--text-column and --label-column name columns of --dataset: pass --dataset too")
    return {"kind": "datasets", "path": args.dataset, **columns}


def _experiment(args: argparse.Namespace):  # noqa: ANN202 - returns hf_attn.experiments.config.Experiment (imported lazily)
    """The YAML experiment with the command line's overrides applied."""
    from .experiments.config import load_experiment

    return load_experiment(args.config, _overrides(args))


def _run_experiment(args: argparse.Namespace, run) -> None:  # noqa: ANN001 - train or pretrain
    from .experiments.folders import process_state

    experiment = _experiment(args)
    output_dir = args.output_dir or f"outputs/{experiment.name}"
    metrics = run(experiment, output_dir, resume=args.resume, overwrite=args.overwrite, results_path=args.results,
                  max_time=args.max_time, continue_from=args.continue_from)
    if not process_state().is_main_process:
        return
    print(json.dumps({k: v for k, v in metrics.items() if k != "experiment"}, indent=2, default=str))
    if metrics.get("stage") == "stopped":
        print(f"stopped at step {metrics['step']} of {metrics['max_steps']} (--max-time {args.max_time}); continue "
              f"here with:\n  {metrics['continue_here']}\nor on another machine, after committing the checkpoint:\n  "
              + "\n  ".join(metrics["continue_elsewhere"]))


def _train(args: argparse.Namespace) -> None:
    from .experiments.classification import train
    from .experiments.sequence import is_sequence_experiment, train_sequence

    def train_by_task(experiment, output_dir, **options):  # noqa: ANN001, ANN202 - `_run_experiment`'s `run`
        trains = train_sequence if is_sequence_experiment(experiment) else train
        return trains(experiment, output_dir, **options)

    _run_experiment(args, train_by_task)


def _pretrain(args: argparse.Namespace) -> None:
    from .experiments.pretraining import pretrain

    _run_experiment(args, pretrain)


def _seq2seq(args: argparse.Namespace) -> None:
    from .experiments.seq2seq import train_seq2seq

    _run_experiment(args, train_seq2seq)


def _arena(args: argparse.Namespace) -> None:
    from .experiments.arena import load_arena, run_arena

    arena = load_arena(args.config, args.budget, _overrides(args))
    results = args.results or str(Path(args.output_dir) / "results")
    only = {field: values for field in ARENA_LIMITS if (values := getattr(args, f"{field}s"))}
    if only and args.report_only:
        raise ValueError(f"--report-only measures nothing, so --{next(iter(only))}s limits nothing: leave one out")
    record = run_arena(arena, args.output_dir, results, max_time=args.max_time, checkpoints=args.checkpoints,
                       report_only=args.report_only, only=only)
    if args.report_only and not any((Path(results) / "cells").rglob("*.json")):
        print(f"{results}/cells/ holds no cells: the table is empty; point --results at an arena's results folder")
    print(f"measured {len(record['measured_now'])} new cell(s); table, JSON and plots in {results}/")
    if record["stopped"]:
        print(f"stage stopped by --max-time ({record['stopped']}); commit {results}/"
              + (f" and {args.checkpoints}/" if args.checkpoints else "") + " and run the same command to continue")


def _score_pairs(args: argparse.Namespace) -> None:
    from .experiments.sequence import score_saved

    print(json.dumps(score_saved(args.model, args.pairs, args.buckets, args.by_position), indent=2))


def _write_pairs(args: argparse.Namespace) -> None:
    from .tasks.length import write_length_splits

    for path, count in write_length_splits(args.task, args.max_train_length, args.n_train, args.n_validation,
                                           args.n_test_per_length, args.seed, Path(args.output_dir)).items():
        print(f"{path}: {count} pairs")


def _evaluate(args: argparse.Namespace) -> None:
    from .experiments.classification import evaluate_saved

    metrics = evaluate_saved(args.model, dataset=dataset_argument(args), split=args.split, limit=args.limit,
                             precision=args.precision, **reading_policy(args.read_length, args.window_stride))
    print(json.dumps(metrics, indent=2))


def text_arguments(texts: Sequence[str], kind: str) -> list[str]:
    """The command line's texts, each checked to be UTF-8 (Python keeps other bytes as lone surrogates, which the
    tokenizer cannot read): a ValueError naming the `kind` and number of the first that is not."""
    from .tokenization_hf_attn import check_encodable

    for number, text in enumerate(texts, 1):
        check_encodable(text, f"{kind} {number}")
    return list(texts)


def _predict(args: argparse.Namespace) -> None:
    from .prediction_files import check_prediction_keys, input_format, read_records, text_key, write_predictions
    from .saved import classifier_pipeline, classify_in_batches

    if bool(args.texts) == (args.input is not None):
        raise ValueError("pass the texts as arguments or --input PATH (- for standard input), one of the two")
    texts = text_arguments(args.texts, "text")
    if args.input is None and (args.format or args.text_column):
        raise ValueError("--format and --text-column say how to read --input; texts given as arguments are classified "
                         "as they are")
    kind = input_format(args.input, args.format)
    text = text_key(kind, args.text_column)
    keys = (args.label_key, args.score_key)
    check_prediction_keys(text, keys)
    classifier = classifier_pipeline(args.model, **reading_policy(args.read_length, args.window_stride))
    records = ({text: one} for one in texts)
    with contextlib.ExitStack() as stack:
        if args.input == "-":
            if hasattr(sys.stdin, "reconfigure"):  # UTF-8 whatever the locale; other bytes reach read_records
                sys.stdin.reconfigure(encoding="utf-8", errors="surrogateescape")
            records = read_records(sys.stdin, kind, text, keys)
        elif args.input is not None:
            records = read_records(stack.enter_context(open(args.input, encoding="utf-8", errors="surrogateescape")),
                                   kind, text, keys)
        write_predictions(classify_in_batches(classifier, records, text), kind, text, keys, sys.stdout)


def _probe(args: argparse.Namespace) -> None:
    from .analysis.plots import plot_rope_decay, plot_sinusoidal_table
    from .analysis.probes import (
        HARD_REVIEWS,
        contextual_probe,
        cross_attention_probe,
        format_contextual,
        format_probe,
        run_hard_probe,
        self_attention_heatmaps,
    )
    from .saved import classifier_pipeline
    from .tokenization_hf_attn import check_encodable

    classifier = classifier_pipeline(args.model)
    results = run_hard_probe(classifier)
    print(format_probe(results))
    model, tokenizer = classifier.model, classifier.tokenizer
    contextual = contextual_probe(model, tokenizer)
    print("\nContextual vectors: cosine similarity of a word's vectors across its contexts, per layer\n")
    print(format_contextual(contextual))
    if args.output_dir is None:
        return
    output = Path(args.output_dir)
    text = args.heatmap_text or HARD_REVIEWS[0][0]
    check_encodable(text, "--heatmap-text")
    pictures = [str(p) for p in self_attention_heatmaps(model, tokenizer, text, output)]
    cross = cross_attention_probe(model.model, tokenizer, output)
    pictures += [record["png"] for record in cross]
    config = model.config
    pictures.append(str(plot_sinusoidal_table(output / "sinusoidal_table.png", config.max_position_embeddings,
                                              config.hidden_size)))
    pictures.append(str(plot_rope_decay(output / "rope_offset_decay.png")))
    summary = {"hard_probe_score": sum(r.correct for r in results), "hard_probe": [vars(r) for r in results],
               "contextual_vectors": [vars(result) for result in contextual], "cross_attention": cross,
               "pictures": pictures}
    (output / "probe.json").write_text(json.dumps(summary, indent=2))
    print(f"pictures and probe.json in {output}")


def _explore(args: argparse.Namespace) -> None:
    from .explore.page import launch

    launch(args.model, args.port)


def _generate(args: argparse.Namespace) -> None:
    """Print the continuation of each prompt (for an encoder-decoder folder: the output for each source).

    The whole prompt is read (its end is what a continuation follows), or its last `--max-length` tokens; a model
    with learned positions refuses a prompt it has no positions for, naming its length and the limit.
    An empty prompt starts from the model's `bos_token_id` when it has one (Week 3 tokenizers have no
    BOS token); without one it is an error. One prompt at a time, so no padding is needed. A prompt with words the
    model's tokenizer reads as unknown (a word-level vocabulary's) is refused before anything is generated; a
    continuation without text is still a line, and stderr names the tokens it holds instead.
    """
    import torch
    from transformers import AutoConfig, set_seed

    from .experiments.seq2seq_training import load_seq2seq
    from .saved import check_known_words, load_saved_causal_lm, load_tokenizer

    prompts = text_arguments(args.prompts, "prompt")
    is_seq2seq = AutoConfig.from_pretrained(args.model).is_encoder_decoder
    if is_seq2seq:
        model = load_seq2seq(args.model)
        tokenizer = load_tokenizer(args.model)
    else:
        model, tokenizer = load_saved_causal_lm(args.model)
    for number, prompt in enumerate(prompts, 1):
        check_known_words(tokenizer, prompt, f"prompt {number}", args.model,
                          "write prompts in the words the model was trained on")
    model.eval()
    options = dict(max_new_tokens=args.max_new_tokens, num_beams=args.num_beams, do_sample=args.do_sample,
                   temperature=args.temperature, top_k=args.top_k, top_p=args.top_p)
    for number, prompt in enumerate(prompts, 1):
        # `verbose=False`: no warning that the prompt is longer than the tokenizer's training length.
        input_ids = tokenizer(prompt, truncation=False, verbose=False, return_tensors="pt")["input_ids"]
        if args.max_length is not None:
            input_ids = input_ids[:, -args.max_length :]
        if not input_ids.shape[1]:
            if is_seq2seq or model.generation_config.bos_token_id is None:
                raise ValueError(f"the prompt {prompt!r} has no tokens and the model has no bos_token_id to start from")
            input_ids = torch.tensor([[model.generation_config.bos_token_id]])
        check_generation_fits(model.config, input_ids.shape[1], args.max_new_tokens)
        set_seed(args.seed)
        with torch.no_grad():
            output = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), **options)
        new_tokens = output[0, 1 if is_seq2seq else input_ids.shape[1]:]  # after the decoder start token, or the prompt
        answer = tokenizer.decode(new_tokens, skip_special_tokens=True)
        if not answer.strip():  # the line stays (one per prompt); stderr says why it is blank
            print(f"hf-attn generate: prompt {number}'s continuation holds no text, only "
                  f"{' '.join(tokenizer.convert_ids_to_tokens(new_tokens.tolist())) or 'no tokens'}", file=sys.stderr)
        print(answer)


def check_generation_fits(config: Any, prompt_length: int, max_new_tokens: int) -> None:
    """A one-line ValueError when generating `max_new_tokens` after a prompt of `prompt_length` tokens needs
    positions a learned table does not have (schemes that extrapolate have no such limit).

    A causal LM reads the prompt and every new token but the last; an encoder-decoder's encoder reads the prompt,
    and its decoder the start token and every new token but the last."""
    from .saved import beyond_learned_table

    decoder = config.decoder if config.is_encoder_decoder else config
    if beyond_learned_table(decoder, max_new_tokens):
        raise ValueError(f"--max-new-tokens {max_new_tokens} is more than the {decoder.max_position_embeddings} "
                         f"learned positions the model generates with; pass --max-new-tokens "
                         f"{decoder.max_position_embeddings} or fewer")
    if config.is_encoder_decoder:
        limit = config.encoder.max_position_embeddings
        if beyond_learned_table(config.encoder, prompt_length):
            raise ValueError(f"the prompt has {prompt_length} tokens but the encoder's learned positions cover "
                             f"{limit}; pass --max-length {limit} to read its last {limit} tokens")
        return
    needed, limit = prompt_length + max_new_tokens - 1, config.max_position_embeddings
    if beyond_learned_table(config, needed):
        keep = limit - max_new_tokens + 1
        raise ValueError(f"the prompt has {prompt_length} tokens, which with {max_new_tokens} new ones need {needed} "
                         f"positions, but the model's learned positions cover {limit}; pass --max-length {keep} to "
                         f"continue the prompt's last {keep} tokens (or fewer --max-new-tokens)")


def _perplexity(args: argparse.Namespace) -> None:
    from .experiments.perplexity import evaluate_perplexity
    from .experiments.records import cli_command

    report = {**evaluate_perplexity(args.model, args.lengths, dataset=args.dataset, max_tokens=args.max_tokens,
                                    precision=args.precision), "command": cli_command()}
    text = json.dumps(report, indent=2, default=str)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text)
    print(text)


def _baseline(args: argparse.Namespace) -> None:
    from .experiments.baseline import run_tfidf_baseline
    from .experiments.records import cli_command
    from .tasks import load_classification

    tokenizer = None
    if args.week3:
        from .week3 import load_week3_tokenizer

        tokenizer = load_week3_tokenizer(args.week3)
    metrics = run_tfidf_baseline(load_classification(dataset_argument(args)).splits, tokenizer=tokenizer,
                                 max_tokens=args.max_tokens)
    metrics["command"] = cli_command()
    text = json.dumps(metrics, indent=2, default=str)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text)
    print(text)


def _prepare(args: argparse.Namespace) -> None:
    from .week3.prepare import prepare_week3

    report = prepare_week3(args.output, dataset=dataset_argument(args), vocab_size=args.vocab_size,
                           min_freq=args.min_freq, max_seq=args.max_seq, tokenizer_train_size=args.tokenizer_train_size)
    print(json.dumps(report, indent=2))


def _card(args: argparse.Namespace) -> None:
    from .analysis.hub import card_for_run

    card = card_for_run(args.model, args.repo_id)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    card.save(args.output)
    print(f"wrote {args.output}")


def _push(args: argparse.Namespace) -> None:
    from .analysis.hub import push

    names = push(args.model, args.repo_id, private=args.private, dry_run_dir=args.dry_run)
    print(f"{f'wrote {args.dry_run}' if args.dry_run else f'uploaded to {args.repo_id}'}: {', '.join(names)}")


def _checkpoint(args: argparse.Namespace) -> None:
    from .analysis.checkpoint import write_checkpoint

    max_bytes = None if args.max_mb is None else round(args.max_mb * 1_000_000)
    size = write_checkpoint(args.model, args.output, overwrite=args.overwrite, encoder_only=args.encoder_only,
                            max_bytes=max_bytes, max_checkpoints=args.max_checkpoints)
    print(f"wrote {args.output} ({size / 1e6:.1f} MB, float16 weights): from_pretrained({args.output!r}) loads it")


def _export(args: argparse.Namespace) -> None:
    from .serving import export_classifier

    record = export_classifier(args.model, args.output, int8=args.int8)
    print(json.dumps(record, indent=2))


READ_LENGTH_HELP = ("tokens read of each text, or `all` (default: the saved config's read_length); past the "
                    "training length a model reads directly (sinusoidal, rope, alibi) or as windows (--window-stride)"
                    "; --max-length is its 1.0 name")
PRECISION_HELP = "bf16 autocast where the hardware has bfloat16 units (auto, the default), or as chosen"
MAX_TIME_HELP = ("stop at the first step past this many minutes, with a checkpoint and stage.json, and print the "
                 "commands that continue (--resume here, --continue-from elsewhere); exits 0")
WINDOW_STRIDE_HELP = ("read a text longer than the model's positions as windows of that many tokens starting every N "
                      "tokens, pooled (any scheme, any length; default: the saved config's window_stride)")


class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser that may take its options from `add_options`, called only when that subcommand is
    parsed or its help shown: building `hf-attn`'s parser then imports no command's machinery (`hf-attn predict`
    never loads the benchmark, whose options are generated from its settings)."""

    def __init__(self, *args: Any, add_options: Callable[[argparse.ArgumentParser], None] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._add_options = add_options

    def _ensure_options(self) -> None:
        if self._add_options is not None:
            add_options, self._add_options = self._add_options, None
            add_options(self)

    def parse_known_args(self, args: Sequence[str] | None = None,
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        self._ensure_options()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self._ensure_options()
        return super().format_help()


def _bench_options(parser: argparse.ArgumentParser) -> None:
    from .bench.runner import add_arguments, run_from_args

    add_arguments(parser)
    parser.set_defaults(func=run_from_args)


# What `hf-attn arena` can limit a stage to (the arena module's `CELL_FIELDS`), with how each option is read.
ARENA_LIMITS = {"scheme": names_list, "task": names_list, "seed": seeds_list}
DATASET_HELP = ("a data file (CSV, TSV, JSON, JSONL, parquet), a folder of them, a Hub id, an IMDb copy (parquet "
                "folder, aclImdb/) or 'sample'")


def add_column_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--text-column", help="the --dataset column holding the texts (default: text)")
    command.add_argument("--label-column", help="the --dataset column holding the labels, names or numbers "
                         "(default: label)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hf-attn", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)

    for name, func, help_text in (
        ("train", _train, "train a classifier from a YAML experiment file (a decoder when its dataset is a sequence "
         "task: docs/length-tasks.md)"),
        ("pretrain", _pretrain, "pretrain on the dataset's training texts (IMDb: with its unlabelled reviews): an "
         "encoder for init_from (masked LM or replaced-token detection) or a causal LM"),
        ("seq2seq", _seq2seq, "train an encoder-decoder to write dates of many locales and formats as YYYY-MM-DD "
         "(generated pairs; --dataset is not read)"),
    ):
        command = commands.add_parser(name, help=help_text)
        command.add_argument("--config", required=True, help="experiment YAML (see configs/)")
        command.add_argument("--week3", help="Week 3 folder: tokenizer files and the DAN embedding")
        command.add_argument("--dataset", help=DATASET_HELP)
        add_column_arguments(command)
        command.add_argument("--output-dir", type=output_folder,
                             help="where model, tokenizer, checkpoints, metrics.json go")
        command.add_argument("--results", type=output_file,
                             help="also write the metrics JSON here (e.g. results/positions/rope.json)")
        command.add_argument("--resume", action="store_true", help="continue from the last checkpoint in --output-dir")
        command.add_argument("--overwrite", action="store_true",
                             help="start again in an --output-dir that holds a run (deletes its checkpoints)")
        command.add_argument("--max-time", type=minutes, metavar="MINUTES", help=MAX_TIME_HELP)
        command.add_argument("--continue-from", type=model_folder, metavar="DIR",
                             help="go on from a stopped stage's checkpoint committed with `hf-attn checkpoint` "
                             "(float16 weights and trainer_state.json), in a new --output-dir")
        command.add_argument("overrides", nargs="*", help="key=value overrides, e.g. training.learning_rate=1e-3")
        command.set_defaults(func=func)

    arena = commands.add_parser("arena", help="every position scheme through the same data, budget and seed: "
                                "accuracy by read length, masked-LM loss by length, speed (resumable)")
    arena.add_argument("--config", required=True, help="arena YAML (configs/arena/arena.yaml)")
    arena.add_argument("--budget", default="small", help="a budget the arena file defines (tiny, small, full)")
    arena.add_argument("--output-dir", type=output_folder, default="runs/arena",
                       help="training runs and measured cells; run the same command again to resume")
    arena.add_argument("--results", type=output_folder,
                       help="where arena.md, arena.json and the plots go (default: OUTPUT_DIR/results)")
    arena.add_argument("--week3", help="Week 3 folder for both experiments: tokenizer files and the DAN embedding")
    arena.add_argument("--dataset", help=DATASET_HELP + ", for every experiment of the arena")
    add_column_arguments(arena)
    arena.add_argument("--max-time", type=minutes, metavar="MINUTES",
                       help="end this stage when the time is up (a training at a step boundary, or before a cell "
                       "there is no time for); the same command continues")
    arena.add_argument("--checkpoints", type=output_folder, metavar="DIR",
                       help="commit each scheme's encoder here as float16 (DIR/SCHEME) at the end of every stage, "
                       "for a stage on another machine to continue or fine-tune from")
    arena.add_argument("--report-only", action="store_true",
                       help="measure nothing: redraw the table, JSON and plots from the cells in --results (after "
                       "pulling another machine's stage, say)")
    for field, parse in ARENA_LIMITS.items():
        arena.add_argument(f"--{field}s", type=parse, metavar=f"{field.upper()}S",
                           help=f"measure only the cells of these {field}s, comma-separated, and the models they "
                           f"need (a cell of no {field} waits for a stage without it); the table still shows every "
                           "cell there is")
    arena.add_argument("overrides", nargs="*", help="key=value overrides of both experiments")
    arena.set_defaults(func=_arena)

    prepare = commands.add_parser("prepare", help="make a complete Week 3 folder (BPE, splits, DAN) from IMDb")
    prepare.add_argument("--output", required=True, type=output_folder,
                         help="folder to create (datasets/ and models/ inside)")
    prepare.add_argument("--dataset", default="stanfordnlp/imdb", help=DATASET_HELP + " (two labels)")
    add_column_arguments(prepare)
    prepare.add_argument("--vocab-size", type=positive_int, default=500, help="256 bytes + merges (the tutorial: 500)")
    prepare.add_argument("--min-freq", type=positive_int, default=5, help="stop merging below this pair count")
    prepare.add_argument("--max-seq", type=positive_int, default=128, help="ids per review in the .pt splits")
    prepare.add_argument("--tokenizer-train-size", type=positive_int,
                         help="train the BPE on the first N training reviews")
    prepare.set_defaults(func=_prepare)

    evaluate = commands.add_parser("evaluate", help="accuracy and F1 of a saved classifier on a split of a dataset")
    evaluate.add_argument("--model", required=True, type=model_with_tokenizer)
    evaluate.add_argument("--dataset", help=DATASET_HELP + " (default: the one the run trained on, as its "
                          "metrics.json says, with its columns and split; stanfordnlp/imdb for a folder without one)")
    add_column_arguments(evaluate)
    evaluate.add_argument("--split", default="test", choices=["train", "validation", "test"])
    evaluate.add_argument("--limit", type=positive_int, help="only the first N reviews of the split")
    evaluate.add_argument("--read-length", "--max-length", type=read_length, help=READ_LENGTH_HELP)
    evaluate.add_argument("--window-stride", type=positive_int, help=WINDOW_STRIDE_HELP)
    evaluate.add_argument("--precision", choices=PRECISIONS, default="auto",
                          help=f"{PRECISION_HELP}; predict, pipeline() and export compute in float32, so a review's "
                               "score differs slightly from theirs under bf16: fp32 gives theirs")
    evaluate.set_defaults(func=_evaluate)

    score_pairs = commands.add_parser("score-pairs", help="exact match by length of a saved sequence-task model on a "
                                      'JSONL file of {"input": ..., "target": ...} pairs (docs/length-tasks.md)')
    score_pairs.add_argument("--model", required=True, type=model_with_tokenizer,
                             help="a run folder of `hf-attn train` on a sequence task")
    score_pairs.add_argument("--pairs", required=True, type=input_file, help="JSONL: input, target, optional length")
    score_pairs.add_argument("--buckets", type=length_buckets,
                             help="inclusive length ranges, e.g. 1-8,9-16,32 (default: the run's task's 1..L, L+1..2L, "
                             "4L; else each length)")
    score_pairs.add_argument("--by-position", action="store_true",
                             help="also each bucket's word accuracy at each answer position: where a longer answer "
                             "starts to go wrong")
    score_pairs.set_defaults(func=_score_pairs)

    write_pairs = commands.add_parser("write-pairs", help="write a generated length task's train / validation / test "
                                      "pairs as JSONL, for score-pairs or another model (docs/length-tasks.md)")
    write_pairs.add_argument("task", help="copy, reverse, sort, addition, ... (an unknown name lists them)")
    write_pairs.add_argument("--max-train-length", type=positive_int, required=True,
                             help="L: train and validation at 1..L, test at L+1..2L and 4L")
    write_pairs.add_argument("--n-train", type=positive_int, required=True)
    write_pairs.add_argument("--n-validation", type=positive_int, required=True)
    write_pairs.add_argument("--n-test-per-length", type=positive_int, required=True)
    write_pairs.add_argument("--seed", type=int, default=0)
    write_pairs.add_argument("--output-dir", type=output_folder, required=True, help="gets SPLIT.jsonl")
    write_pairs.set_defaults(func=_write_pairs)

    predict = commands.add_parser("predict", help="classify texts with a saved model: one result line per text")
    predict.add_argument("--model", required=True, type=model_with_tokenizer)
    predict.add_argument("texts", nargs="*", help="texts to classify (or --input)")
    predict.add_argument("--input", type=input_file, metavar="PATH",
                         help="classify the texts of a file, - for standard input, read by PATH's suffix (or "
                         "--format): a .csv or .tsv by its header, the text in --text-column; .jsonl (or .json) one "
                         "object per line, the text under --text-key; anything else one text per line. Blank lines "
                         "are skipped. CSV, TSV and JSONL come back in their format, each record with \"label\" and "
                         "\"score\" added (a record that has either is refused); lines as label, score and text")
    predict.add_argument("--format", choices=INPUT_FORMATS,
                         help="read --input in this format whatever its name (standard input: lines unless given, "
                         "and a line that is a JSON object is refused)")
    predict.add_argument("--jsonl", action="store_const", const="jsonl", dest="format", help="--format jsonl")
    predict.add_argument("--text-column", "--text-key", metavar="NAME",
                         help="CSV / TSV: the column holding the texts; JSONL: the key (default: text)")
    predict.add_argument("--label-key", default="label", help="the key (column) the predicted label is written under")
    predict.add_argument("--score-key", default="score", help="the key (column) its probability is written under")
    predict.add_argument("--read-length", "--max-length", type=read_length, help=READ_LENGTH_HELP)
    predict.add_argument("--window-stride", type=positive_int, help=WINDOW_STRIDE_HELP)
    predict.set_defaults(func=_predict)

    probe = commands.add_parser("probe", help="hard-review and contextual-vector probes; with --output-dir also "
                                "heatmaps and plots")
    probe.add_argument("--model", required=True, type=model_with_tokenizer)
    probe.add_argument("--output-dir", type=output_folder,
                       help="write self- and cross-attention heatmaps, position plots, probe.json")
    probe.add_argument("--heatmap-text", help="review for the self-attention heatmaps (default: hard review 1)")
    probe.set_defaults(func=_probe)

    explore = commands.add_parser("explore", help="a local page (Gradio) to read texts with saved classifiers: "
                                  "verdicts, windows, attention heatmaps, each position scheme's picture")
    explore.add_argument("--model", required=True, action="append", type=model_with_tokenizer,
                         help="a saved classifier folder; repeat to compare several")
    explore.add_argument("--port", type=positive_int, help="serve on 127.0.0.1:PORT (default: Gradio's, 7860)")
    explore.set_defaults(func=_explore)

    generate = commands.add_parser("generate", help="continue prompts with a saved causal LM (or encoder-decoder)")
    generate.add_argument("--model", required=True, type=model_with_tokenizer)
    generate.add_argument("--max-new-tokens", type=positive_int, default=50)
    generate.add_argument("--max-length", type=positive_int,
                          help="read only the last N tokens of each prompt (default: all of them; a model with "
                          "learned positions refuses a prompt it has no positions for and names the N that fits)")
    generate.add_argument("--num-beams", type=positive_int, default=1,
                          help="beam search with this many beams (1: none)")
    generate.add_argument("--do-sample", action="store_true", help="sample instead of taking the likeliest token")
    generate.add_argument("--temperature", type=float, default=1.0, help="with --do-sample: below 1 sharpens")
    generate.add_argument("--top-k", type=positive_int, default=50,
                          help="with --do-sample: only the k likeliest tokens")
    generate.add_argument("--top-p", type=float, default=1.0, help="with --do-sample: the smallest set of that mass")
    generate.add_argument("--seed", type=int, default=0, help="seeds sampling, so a run can be repeated")
    generate.add_argument("prompts", nargs="+")
    generate.set_defaults(func=_generate)

    perplexity = commands.add_parser("perplexity", help="perplexity of a saved causal LM on validation text at "
                                     "several lengths (non-overlapping windows; the ALiBi paper's Figure 1)")
    perplexity.add_argument("--model", required=True, type=model_with_tokenizer, help="a causal-LM folder")
    perplexity.add_argument("--lengths", required=True, type=lengths_list,
                            help="window lengths, e.g. 64,128,256,512,1024 (1x-16x a training length of 64)")
    perplexity.add_argument("--dataset", default="stanfordnlp/imdb",
                            help="Hub id, parquet folder, aclImdb/ or 'sample': its seed split's validation reviews")
    perplexity.add_argument("--max-tokens", type=positive_int, default=65_536,
                            help="tokens of validation text every length reads (rounded down to whole windows)")
    perplexity.add_argument("--output", type=output_file, help="write the JSON here (e.g. results/causal-lm/rope.json)")
    perplexity.add_argument("--precision", choices=PRECISIONS, default="auto", help=PRECISION_HELP)
    perplexity.set_defaults(func=_perplexity)

    baseline = commands.add_parser("baseline", help="TF-IDF + logistic regression on the first N tokens")
    baseline.add_argument("--dataset", default="stanfordnlp/imdb", help=DATASET_HELP)
    add_column_arguments(baseline)
    baseline.add_argument("--week3", help="tokenizer whose first --max-tokens tokens define the input")
    baseline.add_argument("--max-tokens", type=positive_int, default=128)
    baseline.add_argument("--output", type=output_file,
                          help="write the metrics JSON here (e.g. results/baselines/tfidf-128.json)")
    baseline.set_defaults(func=_baseline)

    card = commands.add_parser("card", help="write the model card of a trained run (from its metrics.json)")
    card.add_argument("--model", required=True, type=model_folder,
                      help="a finished `hf-attn train` or `hf-attn pretrain` --output-dir")
    card.add_argument("--repo-id", required=True, help="the Hub repo the card's loading example names")
    card.add_argument("--output", required=True, type=output_file, help="e.g. model_cards/rope.md")
    card.set_defaults(func=_card)

    push = commands.add_parser("push", help="upload model, tokenizer, code and model card to the Hub")
    push.add_argument("--model", required=True, type=model_folder,
                      help="a finished `hf-attn train` or `hf-attn pretrain` --output-dir, or a checkpoint")
    push.add_argument("--repo-id", required=True, help="e.g. your-name/hf-attn-imdb-rope")
    push.add_argument("--private", action="store_true")
    push.add_argument("--dry-run", metavar="DIR", type=output_folder,
                      help="only write the folder that would be uploaded to DIR")
    push.set_defaults(func=_push)

    export = commands.add_parser("export", help="export a saved classifier to ONNX (with --int8, also ONNX Runtime's "
                                 "dynamic int8) beside its tokenizer and config (docs/serving.md)")
    export.add_argument("--model", required=True, type=model_with_tokenizer)
    export.add_argument("--output", required=True, type=output_folder, help="the folder the ONNX files go to")
    export.add_argument("--int8", action="store_true", help="also model.int8.onnx: int8 weights, dynamic activations")
    export.set_defaults(func=_export)

    checkpoint = commands.add_parser("checkpoint", help="write a run's model as a small float16 from_pretrained "
                                     "folder with its tokenizer, code and card (this repository commits its own with "
                                     "tools/commit_checkpoint.py)")
    checkpoint.add_argument("--model", required=True, type=run_folder,
                            help="a finished `hf-attn train` or `hf-attn pretrain` --output-dir")
    checkpoint.add_argument("--output", required=True, type=output_folder, help="e.g. checkpoints/rope-mlm")
    checkpoint.add_argument("--overwrite", action="store_true", help="replace what --output holds (a refresh)")
    checkpoint.add_argument("--encoder-only", action="store_true",
                            help="keep the encoder without the run's heads (ELECTRA's generator, the masked-LM head): "
                            "what a classifier fine-tunes from, smaller")
    checkpoint.add_argument("--max-mb", type=positive_number,
                            help="refuse a checkpoint over this many megabytes (10^6 bytes), leaving nothing behind")
    checkpoint.add_argument("--max-checkpoints", type=positive_int, metavar="N",
                            help="refuse a new checkpoint beside N others in --output's folder (replacing one is fine)")
    checkpoint.set_defaults(func=_checkpoint)

    commands.add_parser("bench", help="speed against transformers' BERT, RoFormer, ModernBERT and Llama of the same "
                        "shape", add_options=_bench_options)
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
