"""IR file formats every stage shares: relevance judgements (TREC qrels or BEIR) and TREC run files.
Queries are read by medsnip.queries (one reader for every query file format)."""

from __future__ import annotations

from pathlib import Path

from medsnip.buildrecord import atomic_write_bytes
from medsnip.jsonl import InputFileError


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """TREC qrels (`qid 0 docid rel`) or BEIR's `query-id<TAB>corpus-id<TAB>score` (with header); a file
    that is not one is an InputFileError naming the file and the line."""
    qrels: dict[str, dict[str, int]] = {}
    try:
        handle = open(path, "rb")
    except OSError as error:
        raise InputFileError(f"{path}: cannot read ({error.strerror or error})") from error
    expected = "expected 'qid 0 docid relevance' or 'qid docid relevance'"
    with handle:
        for number, raw in enumerate(handle, 1):
            try:
                parts = raw.decode("utf-8-sig" if number == 1 else "utf-8").split()
            except UnicodeDecodeError as error:
                raise InputFileError(f"{path}:{number}: not UTF-8 text ({error.reason}); not a qrels file?") from None
            if not parts or (number == 1 and parts[0].lower() in ("query-id", "qid", "query_id")):
                continue
            if len(parts) == 4:
                qid, _, docid, rel = parts
            elif len(parts) == 3:
                qid, docid, rel = parts
            else:
                raise InputFileError(f"{path}:{number}: {expected}")
            try:
                qrels.setdefault(qid, {})[docid] = int(rel)
            except ValueError:
                raise InputFileError(f"{path}:{number}: relevance {rel!r} is not an integer; {expected}") from None
    return qrels


def write_trec_run(path: Path, run: dict[str, list[tuple[str, float]]], tag: str) -> None:
    """TREC run lines `qid Q0 docid rank score tag`, ranks from 1; written whole (a temp file renamed over
    `path`), so a failed or interrupted command leaves the previous file or none."""
    lines = [
        f"{qid} Q0 {docid} {rank} {score:.6f} {tag}\n"
        for qid, hits in run.items()
        for rank, (docid, score) in enumerate(hits, 1)
    ]
    atomic_write_bytes(Path(path), "".join(lines).encode("utf-8"))
