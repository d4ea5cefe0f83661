"""The map task: one input file (or byte range) through its source's reader into parts.

The reader yields typed events (corpusbuild.events); this task alone decides where each goes: the
shard of its document id, written through a PartWriter. The task is pure (an input, the parameters
and the shard count in; a part folder and its `task.json` marker out), written under a temp name and
renamed when complete, so a killed build resumes by skipping tasks whose marker is there.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from corpusbuild.engine.parts import EVENT_DELETE, EVENT_RECORD, EVENT_SKIP, PartWriter
from corpusbuild.errors import InputError, InputProblem, OutputError, writing
from corpusbuild.events import Delete, Problem, Reader, ReaderInput, Record, Skip
from medsnip import __version__
from medsnip.buildrecord import HashingReader, read_json, write_json
from medsnip.snippet import shard_of

TASK_MARKER = "task.json"

ENGINE_FORMAT = 6  # bump when part files change shape or readers change what they emit, so old caches are not reused


@dataclass(frozen=True)
class FileTask:
    """Parse one input file into parts (picklable: it crosses into worker processes)."""

    path: str
    order: int
    key: str
    parts_root: str
    num_shards: int
    params: dict
    part: dict | None = None  # one byte range of a split input (corpusbuild.sources.wikipedia.dump_ranges), else None

    @property
    def final_dir(self) -> Path:
        return Path(self.parts_root) / self.key


def file_task_key(path: Path, num_shards: int, source: str, params: dict, part: dict | None = None) -> str:
    """Resume key of a map task: the input's identity (resolved path, size, mtime) and everything that
    shapes its parts. A changed input or parameter gives a new key, so stale parts are never reused."""
    stat = path.stat()
    identity = {
        "engine": ENGINE_FORMAT,
        "version": __version__,
        "source": source,
        "path": str(path.resolve()),
        "bytes": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "shards": num_shards,
        "params": params,
    }
    if part is not None:
        identity["range"] = [part["start"], part["end"]]
    return hashlib.sha256(orjson.dumps(identity, option=orjson.OPT_SORT_KEYS)).hexdigest()[:24]


def run_file_task(task: FileTask, read: Reader) -> dict:
    """Run one map task with the source's reader; returns its result (also saved as the task marker
    when it succeeded)."""
    final_dir = task.final_dir
    temp_dir = final_dir.with_name(f"{task.key}.tmp-{os.getpid()}")
    shutil.rmtree(temp_dir, ignore_errors=True)
    with writing(temp_dir):
        temp_dir.mkdir(parents=True)
    started = time.perf_counter()
    try:
        with open(task.path, "rb") as raw:
            start = task.part["start"] if task.part else 0
            raw.seek(start)
            magic = raw.read(4)
            raw.seek(start)
            reader = HashingReader(raw, task.part["end"] - start if task.part else None)
            writer = PartWriter(temp_dir, task.num_shards)
            outcome = write_events(read(ReaderInput(task.path, reader, magic, task.params, task.part)), writer)
            reader.drain()
            writer.close()
    except InputError as error:
        shutil.rmtree(temp_dir, ignore_errors=True)
        return _failed(task, error.problem, started)
    except OSError as error:  # reading the input (writing raises OutputError)
        shutil.rmtree(temp_dir, ignore_errors=True)
        return _failed(task, InputProblem(task.path, f"cannot read: {error.strerror or error}"), started)
    except BaseException:  # OutputError (the build stops), an interrupt: free the space at once
        shutil.rmtree(temp_dir, ignore_errors=True)
        raise
    result = {
        "status": "ok",
        "key": task.key,
        "path": task.path,
        "order": task.order,
        "bytes": reader.bytes_read,
        "sha256": reader.hexdigest(),
        "stats": outcome.get("stats", {}),
        "problems": outcome.get("problems", []),
        "seconds": round(time.perf_counter() - started, 3),
    }
    try:
        with writing(temp_dir):
            write_json(temp_dir / TASK_MARKER, result)
            shutil.rmtree(final_dir, ignore_errors=True)
            os.replace(temp_dir, final_dir)
    except OutputError:
        shutil.rmtree(temp_dir, ignore_errors=True)
        raise
    return result


def write_events(events, writer: PartWriter) -> dict:
    """Place every event of a reader in its document's shard and write it; the reader's counters and
    the problems it reported, as the task result carries them."""
    num_shards = writer.num_shards
    problems: list[dict] = []
    while True:
        try:
            event = next(events)
        except StopIteration as finished:  # the reader's return value: its counters
            return {"stats": finished.value.to_dict(), "problems": problems}
        kind = type(event)
        if kind is Record:
            shard = shard_of(event.doc_id, num_shards)
            writer.add(shard, event.key, EVENT_RECORD, event.lines, position=event.position, lines=event.count)
        elif kind is Skip:
            writer.add(
                shard_of(event.doc_id, num_shards), event.key, EVENT_SKIP, reason=event.reason, position=event.position
            )
        elif kind is Delete:
            writer.add(shard_of(event.doc_id, num_shards), event.key, EVENT_DELETE)
        elif kind is Problem:
            problems.append(event.problem.to_dict())
        else:
            raise TypeError(f"a reader yielded {event!r}, not a corpusbuild.events event")


def _failed(task: FileTask, problem: InputProblem, started: float) -> dict:
    return {
        "status": "failed",
        "key": task.key,
        "path": task.path,
        "order": task.order,
        "error": problem.to_dict(),
        "problems": [problem.to_dict()],
        "seconds": round(time.perf_counter() - started, 3),
    }


def load_finished_file_task(task: FileTask) -> dict | None:
    marker = task.final_dir / TASK_MARKER
    if not marker.is_file():
        return None
    result = read_json(marker)
    result["order"] = task.order
    return result if result.get("status") == "ok" else None
