"""The reduce task: one shard merged from every input's parts, in input order.

For each document the events of all inputs are replayed in input order: the last version wins and a
deletion withdraws it (NLM's "latest version of each citation"), or, for sources whose ids must be
unique, the first copy is kept and the others reported. The shard is written under a temp name and
renamed, with a marker recording its bytes and sha256.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

from corpusbuild.engine.parts import (
    EVENT_DELETE,
    EVENT_DTYPE,
    EVENT_SKIP,
    REASONS_FILE,
    BlockReader,
    part_blocks_path,
    part_index_path,
)
from corpusbuild.errors import InputProblem, writing
from medsnip.buildrecord import read_json, sha256_file, write_json
from medsnip.snippet import shard_name

_COPY_BYTES = 4 << 20  # the most the reduce copies from a part in one read


@dataclass(frozen=True)
class ShardTask:
    """Merge every file's part for one shard into the final shard file (picklable)."""

    shard: int
    num_shards: int
    parts: tuple[tuple[int, str], ...]  # (input order, part folder), in input order
    out_dir: str
    on_duplicate: str = "replace"  # "replace": the last version wins; "error": ids must be unique
    inputs: tuple[str, ...] = ()  # input paths by order, to name files in duplicate-id errors
    position_name: str = "record"  # what an event's position counts in this source ("line" for JSONL)
    publish_dir: str = ""  # where the shard is published (moved) once every shard is merged

    @property
    def name(self) -> str:
        return shard_name(self.shard, self.num_shards)

    @property
    def marker(self) -> Path:
        return Path(self.out_dir) / f"{self.name}.done.json"


def _load_shard_events(task: ShardTask) -> tuple[np.ndarray, np.ndarray, dict[int, list[str]], dict[int, Path]]:
    """Every file's events for this shard, sorted by (key, input order, position in file)."""
    arrays, orders = [], []
    reasons: dict[int, list[str]] = {}
    blocks: dict[int, Path] = {}
    for order, part_dir in task.parts:
        index_path = part_index_path(Path(part_dir), task.shard)
        if not index_path.is_file():
            continue
        events = np.load(index_path, allow_pickle=False)
        arrays.append(events)
        orders.append(np.full(len(events), order, dtype=np.int32))
        reasons[order] = orjson.loads((Path(part_dir) / REASONS_FILE).read_bytes())
        blocks[order] = part_blocks_path(Path(part_dir), task.shard)
    if not arrays:
        return np.empty(0, dtype=EVENT_DTYPE), np.empty(0, dtype=np.int32), reasons, blocks
    events = np.concatenate(arrays)
    order = np.concatenate(orders)
    sort = np.lexsort((events["position"], order, events["key"]))
    return events[sort], order[sort], reasons, blocks


def run_shard_task(task: ShardTask) -> dict:
    """Reduce one shard: for each document the last event across files (in input order) wins."""
    started = time.perf_counter()
    events, orders, reasons, blocks = _load_shard_events(task)
    keys = events["key"]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]).tolist() if len(keys) else []
    ends = [*starts[1:], len(keys)] if starts else []
    kinds = events["kind"].tolist()
    reason_codes = events["reason"].tolist()
    offsets = events["offset"].tolist()
    lengths = events["length"].tolist()
    lines = events["lines"].tolist()
    positions = events["position"].tolist()
    orders = orders.tolist()
    out_dir = Path(task.out_dir)
    final_path = out_dir / task.name
    temp_path = out_dir / f".{task.name}.tmp-{os.getpid()}"
    counts: Counter = Counter()
    skipped: Counter = Counter()
    problems: list[dict] = []
    digest = hashlib.sha256()
    reader = BlockReader(blocks)
    try:
        with writing(temp_path), open(temp_path, "wb", buffering=1 << 20) as out:
            pending = [-1, 0, 0, []]  # (part, start, end, block lengths) of blocks read as one

            def write_pending() -> None:
                order, start, end, block_lengths = pending
                if end > start:
                    for block in reader.documents(order, start, block_lengths):
                        out.write(block)
                        digest.update(block)
                        counts["bytes"] += len(block)
                pending[:] = [-1, 0, 0, []]

            def emit(event: int) -> None:
                """Write the document of a record event, or count the skip of a skip event.

                Winners whose blocks follow each other in one part (the common case: PubMed files are
                sorted by PMID) are copied with one read, up to _COPY_BYTES at a time."""
                if kinds[event] == EVENT_SKIP:
                    skipped[reasons[orders[event]][reason_codes[event]]] += 1
                    return
                counts["documents"] += 1
                counts["snippets"] += lines[event]
                order, offset, length = orders[event], offsets[event], lengths[event]
                if pending[0] != order or pending[2] != offset or pending[2] - pending[1] >= _COPY_BYTES:
                    write_pending()
                    pending[:] = [order, offset, offset, []]
                pending[2] += length
                pending[3].append(length)

            for first, end in zip(starts, ends, strict=True):
                winner = first
                if end - first > 1 and task.on_duplicate == "error":
                    kept = _first_of_each_id(
                        task, range(first, end), kinds, orders, positions, offsets, lengths, reader
                    )
                    for event, problem in kept:
                        if problem:
                            problems.append(problem)
                        else:
                            emit(event)
                    continue
                if end - first > 1:  # several versions of one document: replay them in order
                    winner = None
                    for event in range(first, end):
                        if kinds[event] == EVENT_DELETE:
                            if winner is not None:
                                counts["deleted"] += 1
                                winner = None
                            else:
                                counts["delete_unmatched"] += 1
                        else:
                            if winner is not None:
                                counts["replaced"] += 1
                            winner = event
                    if winner is None:
                        continue
                if kinds[winner] == EVENT_DELETE:
                    counts["delete_unmatched"] += 1
                else:
                    emit(winner)
            write_pending()
            out.flush()
            os.fsync(out.fileno())
        with writing(final_path):
            os.replace(temp_path, final_path)
    finally:
        reader.close()
        temp_path.unlink(missing_ok=True)
    result = {
        "shard": task.shard,
        "path": task.name,
        "records": counts["snippets"],
        "documents": counts["documents"],
        "bytes": counts["bytes"],
        "sha256": digest.hexdigest(),
        "replaced": counts["replaced"],
        "deleted": counts["deleted"],
        "delete_unmatched": counts["delete_unmatched"],
        "skipped": dict(sorted(skipped.items())),
        "problems": problems,
        "seconds": round(time.perf_counter() - started, 3),
    }
    with writing(task.marker):
        write_json(task.marker, result)
    return result


def _first_of_each_id(
    task, events, kinds, orders, positions, offsets, lengths, reader
) -> list[tuple[int, dict | None]]:
    """For sources whose ids must be unique: events sharing a key are either one id seen twice (the
    first occurrence is kept, the others reported) or different ids whose 63-bit keys collide (all
    kept, in id order). Returns (event, problem-or-None) in output order."""
    by_id: dict[str, list[int]] = {}
    for event in events:
        if kinds[event] == EVENT_SKIP:
            by_id.setdefault(f"\x00skip{event}", []).append(event)
            continue
        block = next(reader.documents(orders[event], offsets[event], [lengths[event]]))
        first_line = block.split(b"\n", 1)[0]
        by_id.setdefault(orjson.loads(first_line)["doc_id"], []).append(event)
    result: list[tuple[int, dict | None]] = []
    for doc_id in sorted(by_id):
        kept, *others = by_id[doc_id]
        result.append((kept, None))
        for other in others:
            first_at = f"{task.inputs[orders[kept]]} {task.position_name} {positions[kept]}"
            message = f"duplicate id {doc_id!r} (first at {first_at}); this copy is dropped"
            where = {"line": positions[other]} if task.position_name == "line" else {}
            problem = InputProblem(task.inputs[orders[other]], message, **where)
            result.append((other, problem.to_dict()))
    return result


def load_finished_shard_task(task: ShardTask) -> dict | None:
    """The result of a merge done before, if its shard (still in the merge folder, or already published)
    has exactly the bytes its marker records; else None and the shard is merged again. A published shard
    edited by hand is therefore never published again as if it were the merge's output."""
    if not task.marker.is_file():
        return None
    result = read_json(task.marker)
    for folder in (task.out_dir, task.publish_dir):
        path = Path(folder) / task.name if folder else None
        if path is not None and path.is_file() and path.stat().st_size == result["bytes"]:
            if sha256_file(path)[0] == result["sha256"]:
                return result
    return None
