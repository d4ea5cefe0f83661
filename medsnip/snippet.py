"""The snippet record every stage reads and writes: its fields, its bytes on disk, and its shard.

One JSON object per line. Field order is fixed so that the same snippet always serialises to the same
bytes; that is what makes shards byte-identical across rebuilds and worker counts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

SNIPPET_FIELDS = ("id", "title", "content", "contents", "source", "doc_id", "chunk", "meta")
SHARD_GLOB = "shard-*-of-*.jsonl"


def snippet_id(source: str, doc_id: str, chunk: int) -> str:
    """Globally unique, rebuild-stable id: `<source>:<doc_id>:<chunk>`, e.g. `pubmed:12345678:0`."""
    return f"{source}:{doc_id}:{chunk}"


SENTENCE_ENDS = (".", "?", "!")


def join_contents(title: str, content: str) -> str:
    """The text BM25 and the encoders read, joined as MedRAG's `concat` joins it: the title, then ". "
    (only a space when the title already ends in ".", "?" or "!", so a PubMed title ending in a full
    stop does not give ".."), then the content; either alone if the other is empty (a title-only
    snippet kept by `--keep-no-abstract`)."""
    title, content = title.strip(), content.strip()
    if title and content:
        return f"{title} {content}" if title.endswith(SENTENCE_ENDS) else f"{title}. {content}"
    return title or content


def make_snippet(
    source: str, doc_id: str, chunk: int, title: str, content: str, meta: dict[str, Any]
) -> dict[str, Any]:
    """Build a snippet dict with the fields in their canonical order."""
    return {
        "id": snippet_id(source, doc_id, chunk),
        "title": title,
        "content": content,
        "contents": join_contents(title, content),
        "source": source,
        "doc_id": doc_id,
        "chunk": chunk,
        "meta": meta,
    }


def dumps_snippet(snippet: dict[str, Any]) -> bytes:
    """One JSON line, UTF-8, no spaces, keys in insertion order (canonical bytes)."""
    return orjson.dumps(snippet) + b"\n"


def snippet_lines(source: str, doc_id: str, title: str, chunks: list[str], meta: dict[str, Any]) -> bytes:
    """The lines of every chunk of one document: the same bytes as `dumps_snippet(make_snippet(...))`
    per chunk, with `meta` serialised once for the document instead of once per chunk."""
    meta_json = b',"meta":' + orjson.dumps(meta) + b"}\n"
    lines = []
    for index, content in enumerate(chunks):
        head = orjson.dumps(
            {
                "id": snippet_id(source, doc_id, index),
                "title": title,
                "content": content,
                "contents": join_contents(title, content),
                "source": source,
                "doc_id": doc_id,
                "chunk": index,
            }
        )
        lines.append(head[:-1] + meta_json)
    return b"".join(lines)


def stable_hash(doc_id: str) -> int:
    """First 8 bytes (big-endian) of BLAKE2b-64 over the UTF-8 doc_id.

    Documented and platform-independent, unlike Python's salted `hash()`; shard = stable_hash % N.
    """
    return int.from_bytes(hashlib.blake2b(doc_id.encode("utf-8"), digest_size=8).digest(), "big")


def document_key(doc_id: str) -> int:
    """Sort key of a document whose id is not a number: stable_hash(doc_id) >> 1 (fits a signed int64).

    Shards are ordered by this key (PubMed and Wikipedia use their numeric ids instead)."""
    return stable_hash(doc_id) >> 1


def shard_of(doc_id: str, num_shards: int) -> int:
    """The shard a document (and all of its chunks) goes to."""
    return stable_hash(doc_id) % num_shards


def shard_name(index: int, num_shards: int) -> str:
    """File name of shard `index` of `num_shards`, e.g. `shard-00003-of-00032.jsonl`."""
    return f"shard-{index:05d}-of-{num_shards:05d}.jsonl"


def iter_snippets(path: Path) -> Iterator[dict[str, Any]]:
    """Stream the snippets of one shard file."""
    with open(path, "rb") as handle:
        for line in handle:
            yield orjson.loads(line)
