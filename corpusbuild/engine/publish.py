"""The end of a build: per-input results folded, build.json composed, the shards moved in with
build.json written last (the commit point), and the kept work pruned."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

from corpusbuild.engine.changes import compute_changes, previous_record
from corpusbuild.errors import writing
from corpusbuild.splits import SplitPlan
from medsnip.buildrecord import BUILD_RECORD, RECORD_SCHEMA, dumps_record, lineage_hash, tool_identity
from medsnip.corpus import CHANGES
from medsnip.generations import keep_corpus
from medsnip.snippet import SHARD_GLOB


def folder_bytes(folder: Path) -> int:
    return sum(entry.stat().st_size for entry in folder.rglob("*") if entry.is_file()) if folder.is_dir() else 0


def per_input(results: list[dict], plans: dict[str, SplitPlan]) -> list[dict]:
    """One result per input file: the results of a split file's ranges folded into one (stats summed,
    problems kept, the whole file's size and sha256 from its plan). A file fails if any range failed,
    and then none of its ranges is used, as when it is parsed whole."""
    merged: list[dict] = []
    by_path: dict[str, dict] = {}
    for result in results:
        plan = plans.get(result["path"])
        if plan is None:
            merged.append(result)
            continue
        entry = by_path.get(result["path"])
        if entry is None:
            entry = {**result, "stats": {}, "problems": [], "seconds": 0.0, "ranges": len(plan.parts)}
            by_path[result["path"]] = entry
            entry.update(bytes=plan.size, sha256=plan.sha256)
            merged.append(entry)
        entry["problems"] = entry["problems"] + result["problems"]
        entry["seconds"] = round(entry["seconds"] + result["seconds"], 3)
        if result["status"] != "ok":
            entry.update(status="failed", error=result.get("error"))
        else:
            entry["stats"] = _add_stats(entry["stats"], result["stats"])
    return merged


def _add_stats(total: dict, more: dict) -> dict:
    """Numbers added key by key (nested dicts too); anything else keeps its first value."""
    combined = dict(total)
    for name, value in more.items():
        if isinstance(value, dict):
            combined[name] = _add_stats(combined.get(name, {}), value)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            combined[name] = combined.get(name, 0) + value
        else:
            combined.setdefault(name, value)
    return combined


def build_record(*, source, command, params, num_shards, ordered, outputs, problems, run) -> dict:
    skipped: Counter = Counter()
    for output in outputs:
        skipped.update(output["skipped"])
    parse_totals: Counter = Counter()  # what the files held, before replacements and deletions
    for result in ordered:
        stats = result.get("stats", {})
        for name in ("articles", "documents_read", "deletions", "bad_records", "ids_normalised"):
            if name in stats:
                parse_totals[name] += stats[name]
    failed = [result for result in ordered if result["status"] != "ok"]
    return {
        "schema": RECORD_SCHEMA,
        "tool": tool_identity(),
        "stage": f"corpusbuild.{source}",
        "source": source,
        "command": command,
        "complete": not problems,
        "params": {
            **params,
            "shards": num_shards,
            "shard_hash": "blake2b(doc_id utf-8, digest_size=8) big-endian mod shards",
            "order_in_shard": "document key ascending, then chunk",
        },
        "inputs": [input_entry(result) for result in ordered],
        "outputs": [
            {key: output[key] for key in ("path", "records", "documents", "bytes", "sha256")} for output in outputs
        ],
        "counts": {
            "input_files": len(ordered),
            "input_files_failed": len(failed),
            **dict(sorted(parse_totals.items())),
            "documents": sum(output["documents"] for output in outputs),
            "snippets": sum(output["records"] for output in outputs),
            "replaced": sum(output["replaced"] for output in outputs),
            "deleted": sum(output["deleted"] for output in outputs),
            "delete_unmatched": sum(output["delete_unmatched"] for output in outputs),
            "skipped": dict(sorted(skipped.items())),
            "errors": len(problems),
        },
        "errors": problems,
        "upstream": None,
        "run": run,
    }


def input_entry(result: dict) -> dict:
    entry = {"path": result["path"], "status": result["status"]}  # absolute: run_build makes them so
    if result["status"] == "ok":
        entry.update(bytes=result["bytes"], sha256=result["sha256"], stats=result["stats"])
    else:
        entry["error"] = result["error"]
    if "ranges" in result:
        entry["ranges"] = result["ranges"]  # parsed as this many byte ranges in parallel
    return entry


def publish(out_dir: Path, reduce_dir: Path, names: list[str], record: dict) -> None:
    """Move the new shards in and write build.json last (the commit point).

    Nothing that needs disk space happens after the first change to the folder: the new record is
    written to a temp file first (a full disk stops the build here, the earlier build untouched), and
    the rest are renames. The old build.json goes before the shards move, so a kill during the swap
    leaves a folder that says "unfinished" rather than an old record describing new files; re-running
    finishes the swap (load_finished_shard_task finds each shard where it is). Shards are moved, not
    linked: a published shard shares no bytes with the work folder, so editing one cannot edit the cache.
    Each shard's mtime goes into the record (`run.shard_mtime_ns`), so later stages can tell a shard
    changed since its build without hashing it (medsnip.corpus). Over an earlier complete build, the
    change set against it (corpusbuild.engine.changes) is computed first and moved in with the shards, and
    the earlier build itself is kept as a generation (hard links, medsnip.generations) for the servers
    that still read it until `medsnip prune`.
    """
    sources = {name: reduce_dir / name if (reduce_dir / name).is_file() else out_dir / name for name in names}
    record["run"]["shard_mtime_ns"] = {name: path.stat().st_mtime_ns for name, path in sources.items()}
    parent = previous_record(out_dir, record["source"])
    changes = compute_changes(out_dir, reduce_dir, sources, record, parent)
    if changes is not None:
        record["changes"] = changes
    if parent is not None and lineage_hash(parent) != lineage_hash(record):
        keep_corpus(out_dir, parent, [output["path"] for output in parent["outputs"]])
    record_path = out_dir / BUILD_RECORD
    temp_record = out_dir / f".{BUILD_RECORD}.publish-{os.getpid()}"
    try:
        with writing(temp_record):
            with open(temp_record, "wb") as handle:
                handle.write(dumps_record(record))
                handle.flush()
                os.fsync(handle.fileno())
            record_path.unlink(missing_ok=True)
            for name, source in sources.items():
                if source != out_dir / name:
                    os.replace(source, out_dir / name)
            wanted = set(names)
            for stale in out_dir.glob(SHARD_GLOB):
                if stale.name not in wanted:
                    stale.unlink()
            if changes is None:
                (out_dir / CHANGES).unlink(missing_ok=True)  # an older build's set describes another build
            elif (reduce_dir / CHANGES).is_file():
                os.replace(reduce_dir / CHANGES, out_dir / CHANGES)
            os.replace(temp_record, record_path)
    finally:
        temp_record.unlink(missing_ok=True)


def prune_work(work: Path, keep_parts: set[str], keep_reduce: str) -> None:
    """Drop cached parts and merges that the current inputs no longer use (and dead temp folders)."""
    for entry in (work / "parts").iterdir():
        if entry.name not in keep_parts:
            shutil.rmtree(entry, ignore_errors=True)
    for entry in (work / "reduce").iterdir():
        if entry.name != keep_reduce:
            shutil.rmtree(entry, ignore_errors=True)
