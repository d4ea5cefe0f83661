"""Any JSONL collection (BEIR's corpus.jsonl is the main case) to snippets.

One JSON object per line with an id, an optional title and a text field (names configurable). Other
fields are kept in `meta`. `--no-chunk` keeps one snippet per document, so relevance judgments keyed by
document id still apply. Ids must be unique across the whole collection: a repeat is reported with
its file and line (the first occurrence is kept). Ids, titles, texts and big integers are checked per
line (corpusbuild.ids, `parse_record`): a bad line is reported with its file and line and skipped.
"""

from __future__ import annotations

import codecs
import json
import re

from corpusbuild.chunking import ChunkingParams
from corpusbuild.cleaning import clean_text, visible_or_empty
from corpusbuild.errors import InputError, InputProblem
from corpusbuild.ids import BadId, text_id
from corpusbuild.inputs import DECOMPRESSION_ERRORS, decompressed
from corpusbuild.shardbuild import EVENT_RECORD, FileTask, PartWriter
from medsnip.buildrecord import HashingReader
from medsnip.jsonl import loads_object
from medsnip.snippet import document_key, shard_of, snippet_lines

SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.bz2")


def map_jsonl_file(task: FileTask, reader: HashingReader, magic: bytes, writer: PartWriter) -> dict:
    """Map task for one JSONL file; a bad line is reported with its line number and skipped."""
    params = ChunkingParams.from_dict(task.params)
    source = task.params["source"]
    id_field, title_field, text_field = task.params["id_field"], task.params["title_field"], task.params["text_field"]
    own_fields = {id_field, title_field, text_field}
    stats = {"documents_read": 0, "snippets": 0, "bad_records": 0}
    problems: list[dict] = []

    def bad(line_number: int, message: str) -> None:
        stats["bad_records"] += 1
        problems.append(InputProblem(task.path, message, line=line_number).to_dict())

    lines_seen = 0
    try:
        for line_number, raw in enumerate(decompressed(reader, magic), 1):
            if line_number == 1 and raw.startswith(codecs.BOM_UTF8):  # written by some Windows tools
                raw = raw[len(codecs.BOM_UTF8) :]
            if not raw.strip():
                continue
            lines_seen += 1
            try:
                record = parse_record(raw)
                doc_id = text_id(record.get(id_field), f"id field {id_field!r}")
                title, text = text_field_of(record, title_field, "title"), text_field_of(record, text_field, "text")
            except (RecordError, BadId) as error:
                bad(line_number, str(error))
                continue
            if text is None:
                bad(line_number, f"missing text field {text_field!r}")
                continue
            stats["documents_read"] += 1
            title, text = visible_or_empty(clean_text(title or "")), visible_or_empty(clean_text(text))
            if not title and not text:
                bad(line_number, f"empty text field {text_field!r} and no title: nothing to index")
                continue
            chunks = params.chunks(text) or [""]  # a title without text is a title-only snippet
            shard, key = shard_of(doc_id, task.num_shards), document_key(doc_id)
            meta = {name: value for name, value in record.items() if name not in own_fields}
            stats["snippets"] += len(chunks)
            block = snippet_lines(source, doc_id, title, chunks, meta)
            writer.add(shard, key, EVENT_RECORD, block, position=line_number, lines=len(chunks))
    except DECOMPRESSION_ERRORS as error:
        raise InputError(InputProblem(task.path, f"truncated or corrupt compressed stream ({error})")) from error
    if lines_seen == 0:
        raise InputError(InputProblem(task.path, "empty file: no JSON lines"))
    return {"stats": stats, "problems": problems}


class RecordError(ValueError):
    """One line that cannot become a document (the caller adds file and line)."""


# A whole number of 19+ digits outside a string's quotes may not fit 64 bits, which orjson would turn
# into a float (silently changing the value); such lines are parsed again exactly to find out.
_LONG_INTEGER = re.compile(rb"(?<![\w.])-?[0-9]{19,}(?![0-9.eE])")
_INT_RANGE = (-(2**63), 2**64 - 1)  # what orjson reads and writes exactly


def parse_record(raw: bytes) -> dict:
    """One JSONL line as an object; RecordError when it is not JSON, not an object, or holds an
    integer that no 64-bit type holds (it could not be written back unchanged)."""
    try:
        record = loads_object(raw)
    except ValueError as error:
        raise RecordError(str(error)) from None
    if _LONG_INTEGER.search(raw):
        field = _field_beyond_64_bits(json.loads(raw))
        if field is not None:
            raise RecordError(f"field {field} holds an integer beyond 64 bits: write it as a JSON string")
    return record


def _field_beyond_64_bits(value, path: str = "") -> str | None:
    """The path ('meta.counts[2]') of the first integer outside 64 bits, or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (path or "<record>") if not _INT_RANGE[0] <= value <= _INT_RANGE[1] else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _field_beyond_64_bits(item, f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]")
        if found is not None:
            return found.lstrip(".")
    return None


def text_field_of(record: dict, field: str, what: str) -> str | None:
    """A field that must hold text: a string, or None when absent or null; RecordError otherwise (a list
    title would otherwise be indexed as its Python repr)."""
    value = record.get(field)
    if value is None or isinstance(value, str):
        return value
    raise RecordError(f"{what} field {field!r} is a JSON {_json_type(value)}, not text")


def _json_type(value) -> str:
    return {bool: "boolean", int: "number", float: "number", list: "array", dict: "object"}.get(type(value), "value")
