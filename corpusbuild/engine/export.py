"""`corpusbuild export`: a built corpus as MedRAG JSONL, full JSONL or Parquet, checked as it streams.

Shards are read one at a time in shard order (bounded memory); each is hashed while read and compared
with build.json, so an export never silently carries a corrupted shard. Written to a temp name and
renamed when complete.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from medsnip.buildrecord import NotACorpus, read_corpus_record

PARQUET_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("title", pa.string()),
        ("content", pa.string()),
        ("contents", pa.string()),
        ("source", pa.string()),
        ("doc_id", pa.string()),
        ("chunk", pa.int32()),
        ("meta", pa.string()),  # JSON text: its shape differs by source
    ]
)
_BATCH = 10_000


class ExportError(Exception):
    pass


def medrag_id(snippet: dict) -> str:
    """MedRAG's id: the snippet's own id when it was built in MedRAG-compatible mode (`PMID:123`,
    `Anatomy_Gray_12`), else MedRAG's style made from medsnip's: `<doc_id>_<chunk>`."""
    if snippet["meta"].get("medrag"):
        return snippet["id"]
    return f"{snippet['doc_id']}_{snippet['chunk']}"


def _checked_lines(directory: Path) -> Iterator[bytes]:
    try:
        record = read_corpus_record(directory)
    except NotACorpus as error:
        raise ExportError(str(error)) from error
    if not record.get("complete", False):
        raise ExportError(f"{directory}/build.json marks the build incomplete; fix its errors and rebuild first")
    for output in record["outputs"]:
        path = directory / output["path"]
        if not path.is_file():
            raise ExportError(f"{path}: listed in build.json but missing")
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for line in handle:
                digest.update(line)
                yield line
        if digest.hexdigest() != output["sha256"]:
            raise ExportError(f"{path}: sha256 differs from build.json (run `corpusbuild verify`)")


def _write_jsonl(lines: Iterator[bytes], handle, medrag: bool) -> int:
    written = 0
    for line in lines:
        if medrag:
            snippet = orjson.loads(line)
            line = (
                orjson.dumps(
                    {
                        "id": medrag_id(snippet),
                        "title": snippet["title"],
                        "content": snippet["content"],
                        "contents": snippet["contents"],
                    }
                )
                + b"\n"
            )
        handle.write(line)
        written += 1
    return written


def _write_parquet(lines: Iterator[bytes], temp: Path) -> int:
    written = 0
    columns: dict[str, list] = {name: [] for name in PARQUET_SCHEMA.names}
    with pq.ParquetWriter(temp, PARQUET_SCHEMA, compression="zstd") as writer:

        def flush() -> None:
            writer.write_table(pa.table(columns, schema=PARQUET_SCHEMA))
            for values in columns.values():
                values.clear()

        for line in lines:
            snippet = orjson.loads(line)
            for name in PARQUET_SCHEMA.names:
                value = snippet[name]
                columns[name].append(orjson.dumps(value).decode() if name == "meta" else value)
            written += 1
            if len(columns["id"]) >= _BATCH:
                flush()
        if columns["id"] or written == 0:
            flush()
    return written


def export_corpus(directory: Path, fmt: str, out_path: Path) -> int:
    """Export every snippet of a built corpus; returns how many were written."""
    out_path.parent.mkdir(parents=True, exist_ok=True)
    temp = out_path.with_name(f".{out_path.name}.tmp-{os.getpid()}")
    try:
        lines = _checked_lines(directory)
        if fmt == "parquet":
            written = _write_parquet(lines, temp)
        else:
            with open(temp, "wb") as handle:
                written = _write_jsonl(lines, handle, medrag=fmt == "medrag")
        os.replace(temp, out_path)
    finally:
        temp.unlink(missing_ok=True)
    return written
