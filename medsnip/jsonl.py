"""JSONL in and out: refkit's files and query files.

Outputs are written whole, to a temp file renamed over the target, so a failed or interrupted command
leaves either the previous file or none, never half of one. Lines are orjson with the keys in the
order the code builds them: the same inputs give the same bytes.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from medsnip.buildrecord import atomic_write_bytes


class InputFileError(ValueError):
    """An input file that cannot be used (the message names the file, line and field)."""


def dumps_line(record: dict[str, Any]) -> bytes:
    return orjson.dumps(record) + b"\n"


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> int:
    """Write all records atomically; returns how many."""
    lines = [dumps_line(record) for record in records]
    atomic_write_bytes(Path(path), b"".join(lines))
    return len(lines)


def loads_object(line: bytes) -> dict[str, Any]:
    """One line as a JSON object; ValueError saying why not ("not JSON (... at column 7)", "a JSON list,
    not an object"), for the caller to place in its file."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError as problem:
        raise ValueError(f"not JSON ({problem.msg} at column {problem.colno})") from None
    if not isinstance(record, dict):
        raise ValueError(f"a JSON {type(record).__name__}, not an object")
    return record


def cut_torn_last_line(path: Path) -> None:
    """Cut a last line without its newline (a writer killed in the middle of it) off the file."""
    size = os.path.getsize(path)
    if size == 0:
        return
    with open(path, "rb") as handle:
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return
        handle.seek(0)
        whole = handle.read().rfind(b"\n") + 1
    os.truncate(path, whole)


def read_jsonl(
    path: Path,
    required: tuple[str, ...] = (),
    error: type[InputFileError] = InputFileError,
    complete_lines_only: bool = False,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; a line that is not a JSON object, or lacks a
    `required` field, raises `error` naming the file, the line and the field. `complete_lines_only`
    leaves out a last line without its newline (a writer killed in the middle of it)."""
    path = Path(path)
    try:
        handle = open(path, "rb")
    except OSError as problem:
        raise error(f"{path}: cannot read ({problem.strerror})") from problem
    with handle:
        for number, line in enumerate(handle, 1):
            if complete_lines_only and not line.endswith(b"\n"):
                break
            if number == 1 and line.startswith(codecs.BOM_UTF8):  # a byte-order mark is not JSON
                line = line[len(codecs.BOM_UTF8) :]
            if not line.strip():
                continue
            try:
                record = loads_object(line)
            except ValueError as problem:
                raise error(f"{path}:{number}: {problem}") from problem
            for field in required:
                if field not in record:
                    raise error(f"{path}:{number}: missing field '{field}'")
            yield number, record
