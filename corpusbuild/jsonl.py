"""Any JSONL collection (BEIR's corpus.jsonl is the main case) to snippets.

One JSON object per line with an id, an optional title and a text field (names configurable). Other
fields are kept in `meta`. `--no-chunk` keeps one snippet per document, so relevance judgments keyed by
document id still apply. Ids must be unique across the whole collection: a repeat is reported with
its file and line (the first occurrence is kept).
"""

from __future__ import annotations

import orjson

from corpusbuild.chunking import ChunkingParams
from corpusbuild.cleaning import clean_text
from corpusbuild.errors import InputError, InputProblem
from corpusbuild.inputs import DECOMPRESSION_ERRORS, decompressed
from corpusbuild.shardbuild import EVENT_RECORD, EVENT_SKIP, FileTask, PartWriter
from medsnip.buildrecord import HashingReader
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
            if not raw.strip():
                continue
            lines_seen += 1
            try:
                record = orjson.loads(raw)
            except orjson.JSONDecodeError as error:
                bad(line_number, f"not JSON ({error.msg} at column {error.colno})")
                continue
            if not isinstance(record, dict):
                bad(line_number, f"a JSON {type(record).__name__}, not an object")
                continue
            doc_id = record.get(id_field)
            if not isinstance(doc_id, str | int) or isinstance(doc_id, bool) or str(doc_id) == "":
                bad(line_number, f"missing or empty id field {id_field!r}")
                continue
            text = record.get(text_field)
            if not isinstance(text, str):
                bad(line_number, f"missing text field {text_field!r} (or not a string)")
                continue
            doc_id = str(doc_id)
            stats["documents_read"] += 1
            title = clean_text(str(record.get(title_field) or ""))
            chunks = params.chunks(clean_text(text)) or ([""] if title else [])
            shard, key = shard_of(doc_id, task.num_shards), document_key(doc_id)
            if not chunks:
                writer.add(shard, key, EVENT_SKIP, reason="empty_document", position=line_number)
                continue
            meta = {name: value for name, value in record.items() if name not in own_fields}
            stats["snippets"] += len(chunks)
            block = snippet_lines(source, doc_id, title, chunks, meta)
            writer.add(shard, key, EVENT_RECORD, block, position=line_number, lines=len(chunks))
    except DECOMPRESSION_ERRORS as error:
        raise InputError(InputProblem(task.path, f"truncated or corrupt compressed stream ({error})")) from error
    if lines_seen == 0:
        raise InputError(InputProblem(task.path, "empty file: no JSON lines"))
    return {"stats": stats, "problems": problems}
