"""`hf-attn predict`: classify texts with a saved model, given as arguments or read from a file or standard input
(lines, CSV, TSV or JSONL), one result per text, written back in the input's format."""

from __future__ import annotations

import argparse
import contextlib
import sys

from ..arguments import input_file, model_with_tokenizer, positive_int, read_length, reading_policy
from ..prediction_files import INPUT_FORMATS
from .common import READ_LENGTH_HELP, WINDOW_STRIDE_HELP, text_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, type=model_with_tokenizer)
    parser.add_argument("texts", nargs="*", help="texts to classify (or --input)")
    parser.add_argument("--input", type=input_file, metavar="PATH",
                        help="classify the texts of a file, - for standard input, read by PATH's suffix (or "
                        "--format): a .csv or .tsv by its header, the text in --text-column; .jsonl (or .json) one "
                        "object per line, the text under --text-key; anything else one text per line. Blank lines "
                        "are skipped. CSV, TSV and JSONL come back in their format, each record with \"label\" and "
                        "\"score\" added (a record that has either is refused); lines as label, score and text")
    parser.add_argument("--format", choices=INPUT_FORMATS,
                        help="read --input in this format whatever its name (standard input: lines unless given, "
                        "and a line that is a JSON object is refused)")
    parser.add_argument("--jsonl", action="store_const", const="jsonl", dest="format", help="--format jsonl")
    parser.add_argument("--text-column", "--text-key", metavar="NAME",
                        help="CSV / TSV: the column holding the texts; JSONL: the key (default: text)")
    parser.add_argument("--label-key", default="label", help="the key (column) the predicted label is written under")
    parser.add_argument("--score-key", default="score", help="the key (column) its probability is written under")
    parser.add_argument("--read-length", "--max-length", type=read_length, help=READ_LENGTH_HELP)
    parser.add_argument("--window-stride", type=positive_int, help=WINDOW_STRIDE_HELP)


def run(args: argparse.Namespace) -> None:
    """Classify the texts (in batches) and write one result per text to standard output, in the input's format;
    options that contradict each other, or a record that already holds the result's keys, are refused first."""
    from ..prediction_files import check_prediction_keys, input_format, read_records, text_key, write_predictions
    from ..saved import classifier_pipeline, classify_in_batches

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
