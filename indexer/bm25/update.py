"""Updating a BM25 index with a corpus's change set instead of re-indexing every snippet.

An index in `out` whose build record cites the corpus's parent build (the `parent` of its change set)
is updated: a copy of it made of hard links (Lucene never writes into an existing file), medsnip's
UpdateIndex (indexer/java) deleting the changed and removed ids and adding the added and changed
snippets' lines, analyzed by Anserini's own JsonCollection and document generator; then the copy is
swapped in as build_bm25 swaps a new build. Documents of a parts index go to the part holding their
shard, so every part still holds the shards of its group. Cost: the changed snippets' analysis plus
the JVM's start, against a full build's analysis of every snippet (docs/benchmarks.md).

Lucene counts a deleted document in its segment's statistics until a merge drops it; the index is
searched through LiveSearcher, which subtracts them, so hits and scores equal a full rebuild's. When
the deletions held pass COMPACT_ABOVE of the index, UpdateIndex merges them away (rewriting the
segments that hold them, most of the index): the rule that bounds what deletions cost at search time.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from indexer.bm25.anserini import java_version, medsnip_java_command, run_java
from indexer.bm25.folder import STAGE, index_dirs
from indexer.store import lines_of
from medsnip.buildrecord import read_build_record, read_complete_record, write_build_record
from medsnip.corpus import ChangeSet, Corpus, LineageError, index_record, replace_dir
from medsnip.generations import keep_index, link_tree

COMPACT_ABOVE = 0.10  # deletions held, as a share of the index, past which an update merges them away


def updatable(corpus: Corpus, out: Path, language: str) -> ChangeSet | None:
    """The corpus's change set, if the index in `out` is a complete BM25 index of its parent build
    analyzed as `language`; else None (build in full)."""
    change_set = corpus.change_set()
    record = read_complete_record(out) if change_set is not None else None
    if record is None or record.get("stage") != STAGE:
        return None
    if record.get("upstream", {}).get("lineage_sha256") != change_set.parent:
        return None
    if record["params"].get("language", "en") != language:
        return None
    return change_set


def _apply(index_dir: Path, gone: list[str], lines: list[bytes], language: str, compact_above: float) -> dict:
    """Run UpdateIndex on one Lucene index; its printed counts."""
    with tempfile.TemporaryDirectory(dir=index_dir.parent, prefix=".update-") as work:
        deletes, adds = Path(work) / "deletes.txt", Path(work) / "adds.jsonl"
        deletes.write_text("".join(f"{snippet_id}\n" for snippet_id in gone), encoding="utf-8")
        adds.write_bytes(b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines))
        command = medsnip_java_command(
            "UpdateIndex", str(index_dir), str(deletes), str(adds), language, repr(compact_above)
        )
        output = run_java(command, f"UpdateIndex {index_dir}")
    counts = dict(re.findall(r"^(\w+): (\w+)$", output, flags=re.MULTILINE))
    if "documents" not in counts:
        raise RuntimeError(f"UpdateIndex {index_dir} did not report its counts:\n{output[-2000:]}")
    return {
        "documents": int(counts["documents"]),
        "deleted_held": int(counts["deleted_held"]),
        "compacted": counts["compacted"] == "true",
    }


def update_bm25(
    corpus: Corpus, out: Path, change_set: ChangeSet, log=None, *, compact_above: float | None = None
) -> dict:
    """Apply `change_set` to the BM25 index in `out` (see the module docstring); returns the new record.
    `compact_above`: the share of deleted documents the index may hold (default COMPACT_ABOVE)."""
    compact_above = COMPACT_ABOVE if compact_above is None else compact_above
    started = time.perf_counter()
    old = read_build_record(out)
    params = old["params"]
    language = params.get("language", "en")
    new_lines = lines_of(corpus, change_set.new)
    keep_index(out, corpus.record_hash)
    temp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(temp, ignore_errors=True)
    link_tree(out, temp)
    try:
        dirs = index_dirs(temp)
        part_of_shard = {shard: part for part, group in enumerate(params["groups"]) for shard in group}
        lines_by_part: list[list[bytes]] = [[] for _ in dirs]
        for shard, lines in new_lines.items():
            lines_by_part[part_of_shard[shard] if len(dirs) > 1 else 0].extend(lines)
        results = [
            _apply(index_dir, change_set.gone, lines, language, compact_above)
            for index_dir, lines in zip(dirs, lines_by_part, strict=True)
        ]
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    documents = sum(result["documents"] for result in results)
    if documents != corpus.snippets:
        shutil.rmtree(temp, ignore_errors=True)
        raise LineageError(
            f"{out}: the updated index holds {documents} documents, the corpus has {corpus.snippets} snippets"
        )
    seconds = round(time.perf_counter() - started, 3)
    record = index_record(
        STAGE,
        corpus,
        engine={**old["engine"], "java": java_version()},
        params=params,
        counts={
            "documents": documents,
            "deleted_held": sum(result["deleted_held"] for result in results),
            "parts_built_this_run": 0,
        },
        run={
            "seconds": {"total": seconds},
            "executor": "local",
            "update": {
                "parent": change_set.parent,
                "deleted": len(change_set.gone),
                "added": len(change_set.new),
                "compacted": any(result["compacted"] for result in results),
                "compact_above": compact_above,
            },
        },
    )
    write_build_record(temp, record)
    replace_dir(temp, out)
    if log:
        log(
            f"BM25: updated in place, {len(change_set.gone):,} deleted and {len(change_set.new):,} added "
            f"({documents:,} documents) in {seconds:.1f} s -> {out}"
        )
    return record
