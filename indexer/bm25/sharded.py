"""BM25 built in parallel: one Anserini IndexCollection per group of corpus shards, as executor tasks,
then either merged into one Lucene index (`IndexWriter.addIndexes`, layout "merged") or kept as parts
that the searcher reads as one (`MultiReader`, layout "parts").

Either way the hits and scores equal a single IndexCollection run's: Lucene's BM25 takes its
statistics (document count, document frequency, average length) over every segment an IndexSearcher
sees, and merging copies segments without re-analyzing them, so no part scores with its own IDF.

Each group task is pure: shard paths in, a part index and a marker (`part-N.json`, written last) out,
in a work folder beside the index (`.NAME.parts`) that outlives a killed run; a rerun builds only the
parts without a marker, for the same plan (the corpus's lineage hash and the groups).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson

from indexer.bm25.anserini import INDEX_FLAGS, index_collection, link_shards, medsnip_java_command, run_java
from medsnip.corpus import Corpus, LineageError, Shard

LAYOUTS = ("merged", "parts")


def shard_groups(shards: tuple[Shard, ...], groups: int) -> list[list[Shard]]:
    """Consecutive runs of shards of about equal bytes, at most `groups` of them, none empty."""
    groups = max(1, min(groups, len(shards)))
    total = sum(shard.bytes for shard in shards) or 1
    result: list[list[Shard]] = [[] for _ in range(groups)]
    filled = 0
    for shard in shards:
        # the group whose share of the bytes this shard's middle falls in
        middle = filled + shard.bytes / 2
        result[min(groups - 1, int(middle * groups / total))].append(shard)
        filled += shard.bytes
    return [group for group in result if group]


def _plan(corpus: Corpus, groups: list[list[Shard]], language: str) -> dict:
    plan = {
        "lineage_sha256": corpus.record_hash,
        "flags": list(INDEX_FLAGS),
        "groups": [[shard.path.name for shard in group] for group in groups],
    }
    if language != "en":
        plan["language"] = language
    return plan


def _marker(work: Path, part: int) -> Path:
    return work / f"part-{part:03d}.json"


def build_part(task: dict) -> dict:
    """One group: IndexCollection over links to its shards into `part-N/`, then the marker. Runs in a
    worker (local pool or Ray); the JVM dies with the worker."""
    work, part = Path(task["work"]), task["part"]
    target = work / f"part-{part:03d}"
    links = work / f"input-{part:03d}"
    for stale in (target, links):
        shutil.rmtree(stale, ignore_errors=True)
    link_shards([Path(path) for path in task["shards"]], links)
    try:
        documents = index_collection(links, target, 1, task.get("language", "en"))
    finally:
        shutil.rmtree(links, ignore_errors=True)
    result = {"part": part, "documents": documents, "shards": [Path(path).name for path in task["shards"]]}
    marker = _marker(work, part)
    temp = marker.with_name(f".{marker.name}.tmp-{os.getpid()}")
    temp.write_bytes(orjson.dumps(result))
    os.replace(temp, marker)
    return result


def build_parts(
    corpus: Corpus, work: Path, groups: list[list[Shard]], executor, log=None, language: str = "en"
) -> tuple[list[dict], int]:
    """Build every group's part index that has no marker yet; returns (per-part results, parts built now)."""
    plan = _plan(corpus, groups, language)
    plan_file = work / "plan.json"
    if work.is_dir() and (not plan_file.is_file() or orjson.loads(plan_file.read_bytes()) != plan):
        shutil.rmtree(work)  # parts of another corpus or grouping: never mix them
    work.mkdir(parents=True, exist_ok=True)
    plan_file.write_bytes(orjson.dumps(plan))
    results: dict[int, dict] = {}
    tasks = []
    for part, group in enumerate(groups):
        marker = _marker(work, part)
        if marker.is_file() and (work / f"part-{part:03d}").is_dir():
            results[part] = orjson.loads(marker.read_bytes())
            continue
        tasks.append(
            {"work": str(work), "part": part, "shards": [str(shard.path) for shard in group], "language": language}
        )

    def on_result(task: dict, result: dict) -> bool:
        results[task["part"]] = result
        if log:
            log(f"BM25 part {task['part']}: {result['documents']:,} documents")
        return True

    executor.run(tasks, build_part, (), on_result)
    ordered = [results[part] for part in range(len(groups))]
    for result, group in zip(ordered, groups, strict=True):
        expected = sum(shard.records for shard in group)
        if result["documents"] != expected:
            raise LineageError(
                f"BM25 part {result['part']}: Anserini indexed {result['documents']} documents, "
                f"its shards hold {expected} snippets"
            )
    return ordered, len(tasks)


def merge_command(target: Path, parts: list[Path]) -> list[str]:
    return medsnip_java_command("MergeIndexes", str(target), *map(str, parts))


def merge_parts(target: Path, parts: list[Path]) -> int:
    """addIndexes every part into a new index at `target`; returns the merged document count."""
    log = run_java(merge_command(target, parts), "merging BM25 parts")
    return int(log.rsplit("merged:", 1)[1].split()[0])
