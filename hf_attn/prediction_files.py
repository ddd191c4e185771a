"""The texts `hf-attn predict` reads and what it writes back: one text per line, a CSV or TSV by its columns, JSONL by
its keys; each record comes back in its own format with the prediction beside its fields.

The format is the file's suffix's (`.csv`, `.tsv`, `.jsonl` or `.json`; anything else and standard input are lines)
unless chosen. Blank lines are skipped in every format; a record whose text is empty is classified. A problem in the
input is a ValueError naming its line and the option that fixes it.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from .tokenization_hf_attn import check_encodable

# The formats, and the field separator of those that have columns.
INPUT_FORMATS = ("lines", "csv", "tsv", "jsonl")
DELIMITERS = {"csv": ",", "tsv": "\t"}
FORMAT_OF_SUFFIX = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}
TEXT_KEY = "text"  # where a record holds its text unless --text-column says (a plain line: always)


def input_format(path: str | None, chosen: str | None = None) -> str:
    """The format `path` (None: texts given as arguments; `-`: standard input) is read in: `chosen`, else its
    suffix's, else lines."""
    if chosen is not None:
        return chosen
    if path is None or path == "-":
        return "lines"
    return FORMAT_OF_SUFFIX.get(Path(path).suffix.lower(), "lines")


def text_key(kind: str, chosen: str | None) -> str:
    """The column or key a record of the format `kind` holds its text under: `chosen` (--text-column), else `text`;
    lines have no columns to choose from (a ValueError)."""
    if chosen is not None and kind == "lines":
        raise ValueError(f"--text-column {chosen} names a column of CSV, TSV or JSONL input, but the input is read as "
                         "one text per line; name the format with --format (standard input, another suffix)")
    return chosen or TEXT_KEY


def check_prediction_keys(text: str, keys: Sequence[str]) -> None:
    """The label and score keys differ from each other and from the text's column (a ValueError)."""
    if len(set(keys)) < len(keys) or text in keys:
        raise ValueError(f"--label-key and --score-key must differ from each other and from the text's column "
                         f"{text!r}, got {tuple(keys)}")


def read_records(
    stream: Iterable[str], kind: str, text: str = TEXT_KEY, prediction_keys: Sequence[str] = ()
) -> Iterator[dict[str, Any]]:
    """The records of `stream` in the format `kind`, read lazily, each with its text (a string) under `text`.

    A line that is not UTF-8 (read with `errors="surrogateescape"`) is a ValueError naming it, and so is a record
    that already has one of the `prediction_keys` (gold labels, say): the prediction is written beside the record's
    fields, never over them. A line of plain text that is a JSON object is refused (JSONL read as text would be
    classified as its JSON).
    """
    lines = _checked_lines(stream)
    if kind == "lines":
        return _line_records(lines)
    if kind == "jsonl":
        return _json_records(lines, text, prediction_keys)
    return _table_records(lines, DELIMITERS[kind], text, prediction_keys)


def write_predictions(
    predictions: Iterable[tuple[dict[str, Any], dict[str, Any]]], kind: str, text: str, keys: tuple[str, str],
    out: TextIO
) -> None:
    """One line per record of the format `kind` as it comes: for lines, the label, the score and the text; for the
    other formats the record in its format with the label and score under `keys` (a table's header first)."""
    label_key, score_key = keys
    writer = csv.writer(out, delimiter=DELIMITERS[kind], lineterminator="\n") if kind in DELIMITERS else None
    for number, (record, prediction) in enumerate(predictions):
        if writer is not None:
            if number == 0:
                writer.writerow([*record, label_key, score_key])
            writer.writerow([*record.values(), prediction["label"], prediction["score"]])
        elif kind == "jsonl":
            print(json.dumps({**record, label_key: prediction["label"], score_key: prediction["score"]},
                             ensure_ascii=False), file=out)
        else:
            print(f"{prediction['label']}\t{prediction['score']:.3f}\t{record[text]}", file=out)


def _checked_lines(stream: Iterable[str]) -> Iterator[tuple[int, str]]:
    """Each line with its number, checked to be UTF-8, without its newline."""
    for number, line in enumerate(stream, 1):
        line = line.removesuffix("\n")
        check_encodable(line, f"--input line {number}")
        yield number, line


def _line_records(lines: Iterator[tuple[int, str]]) -> Iterator[dict[str, Any]]:
    for number, line in lines:
        if not line.strip():
            continue
        if line.lstrip().startswith("{") and isinstance(_json_or_none(line), dict):
            raise ValueError(f"--input line {number} is a JSON object, and the input is read as one text per line; "
                             "read JSONL with --format jsonl (or a PATH ending in .jsonl)")
        yield {TEXT_KEY: line}


def _json_or_none(line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return None


def _json_records(
    lines: Iterator[tuple[int, str]], text: str, prediction_keys: Sequence[str]
) -> Iterator[dict[str, Any]]:
    for number, line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"--input line {number} is not valid JSON ({error}); write one object per line") from None
        if not isinstance(record, dict) or not isinstance(record.get(text), str):
            raise ValueError(f'--input line {number} has no "{text}" string; each line needs {{"{text}": "..."}}, or '
                             "name the text's key with --text-key")
        _refuse_prediction_keys(record, prediction_keys, f"--input line {number}")
        yield record


def _table_records(
    lines: Iterator[tuple[int, str]], delimiter: str, text: str, prediction_keys: Sequence[str]
) -> Iterator[dict[str, Any]]:
    """The rows of a CSV or TSV whose first non-blank row is its header, as records by column name (a quoted field
    may hold newlines)."""
    reader = csv.reader((f"{line}\n" for _, line in lines), delimiter=delimiter)
    rows = (row for row in reader if any(field.strip() for field in row))
    header = next(rows, None)
    if header is None:
        return
    if text not in header:
        raise ValueError(f"--input has no column {text!r} (its header: {', '.join(header)}); name the text's column "
                         "with --text-column")
    _refuse_prediction_keys(dict.fromkeys(header), prediction_keys, "--input's header")
    separator = "a tab" if delimiter == "\t" else "a comma"
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"--input line {reader.line_num} has {len(row)} fields where its header has "
                             f"{len(header)}; quote a field that holds {separator}")
        yield dict(zip(header, row, strict=True))


def _refuse_prediction_keys(record: dict[str, Any], prediction_keys: Sequence[str], where: str) -> None:
    for key, option in zip(prediction_keys, ("--label-key", "--score-key"), strict=False):
        if key in record:
            raise ValueError(f'{where} already has "{key}", which the prediction would overwrite; name the '
                             f"prediction's key with {option} (for example {option} predicted_{key})")
