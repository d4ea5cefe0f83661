"""The sharded, resumable build engine every source uses.

Map: one task per input file parses it and writes, per output shard, the snippet lines of each
document plus a sorted index of events (record, skip, delete) keyed by document. Reduce: one task per
shard merges those indexes across files in input order; the last event for a document wins, which
gives NLM's "latest version of each citation" semantics however many workers ran. Publish: shards are
hard-linked into the output folder under temp names and renamed; build.json is written last and is
the commit point.

Every task writes into a temp name and renames on completion, with a marker; re-running the same
command skips tasks whose marker matches (same input stat, same parameters), so a killed run resumes
and ends byte-identical to an uninterrupted one.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import shutil
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson
from isal import isal_zlib

from corpusbuild.errors import InputError, InputProblem, OutputError, writing
from corpusbuild.wikidump_ranges import SplitPlan
from medsnip import __version__
from medsnip.buildrecord import (
    BUILD_RECORD,
    RECORD_SCHEMA,
    HashingReader,
    dumps_record,
    read_json,
    sha256_file,
    tool_identity,
    write_json,
)
from medsnip.executor import Executor, LocalExecutor
from medsnip.snippet import SHARD_GLOB, shard_name

EVENT_RECORD, EVENT_SKIP, EVENT_DELETE = 0, 1, 2
WORK_DIR = ".work"
TASK_MARKER = "task.json"
REASONS_FILE = "reasons.json"
ENGINE_FORMAT = 5  # bump when part files change shape or readers change what they emit, so old caches are not reused
_FLUSH_BYTES = 8 << 20
_COPY_BYTES = 4 << 20  # the most the reduce copies from a part in one read

MapFunction = Callable[["FileTask", HashingReader, bytes, "PartWriter"], dict]


class BuildAborted(Exception):
    """--strict stopped the build at its first problem; nothing was published."""

    def __init__(self, problem: InputProblem):
        super().__init__(str(problem))
        self.problem = problem


EVENT_DTYPE = np.dtype(
    [
        ("key", "<i8"),
        ("position", "<i4"),
        ("kind", "u1"),
        ("reason", "<i2"),
        ("offset", "<i8"),
        ("length", "<i4"),
        ("lines", "<i4"),  # snippet lines in the block, so the merge never counts them in the bytes
    ]
)


PART_COMPRESSION_LEVEL = 0  # ISA-L zlib level 0 (its fastest): parts ~4x smaller at ~800 MB/s, docs/benchmarks.md


class PartWriter:
    """Writes one input file's contribution to every shard: blocks of snippet lines + an event index.

    Each document's block is stored zlib-compressed on its own (ISA-L, level 0), so kept work takes
    about a fifth of the shards' bytes instead of a second full copy, and the reduce still reads any
    document alone; offsets and lengths in the index are those of the compressed blocks.

    Blocks are buffered and appended in bulk, so memory stays bounded (a few MB) for any file size.
    The index is a numpy array per shard, sorted by (key, position): 31 bytes per event, so merging a
    shard across thousands of files never holds more than its own events. Keys are integers (the
    PMID for PubMed); skip reasons are stored as codes into `reasons.json`.
    """

    def __init__(self, directory: Path, num_shards: int):
        self.directory = directory
        self.num_shards = num_shards
        self._buffers: dict[int, bytearray] = {}
        self._offsets = [0] * num_shards
        self._index: dict[int, list[tuple]] = {}
        self._reasons: dict[str, int] = {}
        self._position = 0
        self._buffered = 0

    def add(
        self,
        shard: int,
        key: int,
        kind: int,
        block: bytes = b"",
        reason: str | None = None,
        position: int | None = None,
        lines: int | None = None,
    ) -> None:
        """Record one event. `position` (default: a running count) orders events of one key within
        the file and is reported in duplicate-id errors, so line-based sources pass the line number.
        `lines` is the number of snippet lines in `block`, counted here when the caller does not know it."""
        if position is not None:
            self._position = position
        offset = self._offsets[shard]
        if lines is None:
            lines = block.count(b"\n")
        stored = isal_zlib.compress(block, PART_COMPRESSION_LEVEL) if block else b""
        if stored:
            self._buffers.setdefault(shard, bytearray()).extend(stored)
            self._offsets[shard] += len(stored)
            self._buffered += len(stored)
        reason_code = -1 if reason is None else self._reasons.setdefault(reason, len(self._reasons))
        self._index.setdefault(shard, []).append((key, self._position, kind, reason_code, offset, len(stored), lines))
        self._position += 1
        if self._buffered >= _FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        with writing(self.directory):
            for shard, buffer in self._buffers.items():
                if buffer:
                    with open(part_blocks_path(self.directory, shard), "ab") as handle:
                        handle.write(buffer)
                    buffer.clear()
        self._buffered = 0

    def close(self) -> None:
        self._flush()
        with writing(self.directory):
            for shard, entries in self._index.items():
                events = np.array(entries, dtype=EVENT_DTYPE)
                events.sort(order=("key", "position"))
                np.save(part_index_path(self.directory, shard), events, allow_pickle=False)
            (self.directory / REASONS_FILE).write_bytes(orjson.dumps(sorted(self._reasons, key=self._reasons.get)))


def part_blocks_path(directory: Path, shard: int) -> Path:
    return directory / f"s{shard:05d}.jsonl"


def part_index_path(directory: Path, shard: int) -> Path:
    return directory / f"s{shard:05d}.events.npy"


class BlockReader:
    """Reads (offset, length) blocks from many part files with a bounded number of open files."""

    def __init__(self, paths: dict[int, Path], max_open: int = 256):
        self._paths = paths
        self._open: OrderedDict[int, int] = OrderedDict()
        self._max_open = max_open

    def read(self, order: int, offset: int, length: int) -> bytes:
        fd = self._open.get(order)
        if fd is None:
            if len(self._open) >= self._max_open:
                os.close(self._open.popitem(last=False)[1])
            fd = self._open[order] = os.open(self._paths[order], os.O_RDONLY)
        else:
            self._open.move_to_end(order)
        return os.pread(fd, length, offset)

    def documents(self, order: int, offset: int, lengths: list[int]) -> bytes:
        """The snippet lines of consecutive compressed document blocks starting at `offset`, read at once
        and decompressed block by block."""
        stored = memoryview(self.read(order, offset, sum(lengths)))
        pieces, start = [], 0
        for length in lengths:
            pieces.append(isal_zlib.decompress(stored[start : start + length]))
            start += length
        return b"".join(pieces)

    def close(self) -> None:
        for fd in self._open.values():
            os.close(fd)
        self._open.clear()


@dataclass(frozen=True)
class FileTask:
    """Parse one input file into parts (picklable: it crosses into worker processes)."""

    path: str
    order: int
    key: str
    parts_root: str
    num_shards: int
    params: dict
    part: dict | None = None  # one byte range of a split input (corpusbuild.wikidump_ranges), else None

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


def run_file_task(task: FileTask, map_function: MapFunction) -> dict:
    """Run one map task; returns its result (also saved as the task marker when it succeeded)."""
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
            outcome = map_function(task, reader, magic, writer)
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
                    block = reader.documents(order, start, block_lengths)
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
        first_line = reader.documents(orders[event], offsets[event], [lengths[event]]).split(b"\n", 1)[0]
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


@dataclass
class BuildCallbacks:
    """Hooks the CLI uses for progress; all optional."""

    file_done: Callable[[dict, bool], None] = lambda result, reused: None
    shard_done: Callable[[dict, bool], None] = lambda result, reused: None
    phase: Callable[[str, int], None] = lambda name, total: None


@dataclass
class BuildOutcome:
    record: dict
    problems: list[dict] = field(default_factory=list)
    kept_work_bytes: int = 0  # what OUT/.work holds after the build (0 with --no-keep-work)

    @property
    def ok(self) -> bool:
        return not self.problems


def _split_finished(tasks: Sequence, load: Callable, key: Callable) -> tuple[dict[int, dict], list]:
    """Split tasks into those a marker says are done (their results, by key) and those still to run."""
    finished: dict[int, dict] = {}
    todo = []
    for task in tasks:
        result = load(task)
        if result is None:
            todo.append(task)
        else:
            finished[key(task)] = result
    return finished, todo


class BuildLocked(Exception):
    """Another build is writing to the same output folder."""


_held_locks: set[int] = set()  # lock file descriptors this process holds (workers close their copies)


@contextmanager
def _exclusive(out_dir: Path):
    """Hold an exclusive lock on the output folder so two builds cannot interleave their shards."""
    lock_path = out_dir / WORK_DIR / "lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+b") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as error:
            raise BuildLocked(f"{out_dir}: another corpusbuild is writing to this folder") from error
        _held_locks.add(handle.fileno())
        try:
            yield
        finally:
            _held_locks.discard(handle.fileno())


def drop_inherited_locks() -> None:
    """In each forked worker: drop the inherited copy of the folder lock (a flock lives as long as any
    process holds its file), so a killed build leaves nothing that keeps the folder locked against the
    resumed run (the executor makes the worker die with the driver)."""
    for fd in _held_locks:
        os.close(fd)
    _held_locks.clear()


_MMAP_THRESHOLD = 8 << 20  # allocations above this still get their own mapping
_TRIM_THRESHOLD = 32 << 20  # freed memory kept at the top of the heap before it is given back


def keep_freed_memory() -> None:
    """Stop glibc's malloc from giving memory back to the kernel after every parsed batch.

    A build allocates and frees the same sizes over and over: a ~128 KB batch document, its libxml2
    tree, a part buffer. With glibc's defaults each 128 KB+ block gets its own mmap and munmap, and a
    freed tree shrinks the heap only to fault the same pages in again for the next batch: about 60,000
    page faults and 0.3 s of kernel time on a 30,000-citation file, 4x fewer faults with these
    settings. The cost is at most _TRIM_THRESHOLD of freed memory kept mapped (peak RSS measured +4 MB).
    Forked workers inherit the setting. Elsewhere than glibc this does nothing."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, _MMAP_THRESHOLD)  # M_MMAP_THRESHOLD (also ends the threshold's self-tuning)
        libc.mallopt(-1, _TRIM_THRESHOLD)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


def run_sharded_build(*, out_dir: Path, **options) -> BuildOutcome:
    """Map every input, reduce every shard, publish (see `_run_build`), holding the folder's lock."""
    keep_freed_memory()
    out_dir.mkdir(parents=True, exist_ok=True)
    with _exclusive(out_dir):
        return _run_build(out_dir=out_dir, **options)


def _run_build(
    *,
    source: str,
    inputs: Sequence[Path],
    input_problems: Sequence[InputProblem],
    out_dir: Path,
    num_shards: int,
    params: dict,
    map_function: MapFunction,
    workers: int = 1,
    executor: Executor | None = None,
    strict: bool = False,
    keep_work: bool = True,
    on_duplicate: str = "replace",
    position_name: str = "record",
    split_function: Callable[[Path, int], SplitPlan | None] | None = None,
    command: str = "",
    callbacks: BuildCallbacks | None = None,
) -> BuildOutcome:
    """Map every input, reduce every shard, publish; returns the build record written.

    `on_duplicate` says what two records with the same key mean: "replace" (a later version; PubMed)
    or "error" (ids must be unique; the first is kept and the others reported). `split_function` may
    cut one input into byte ranges parsed as separate tasks, in order (corpusbuild.wikidump_ranges).
    `executor` runs the tasks (medsnip.executor; a local pool of `workers` by default): the shards are
    the same bytes whichever runs them.
    """
    if num_shards < 1:
        raise ValueError(f"--shards must be >= 1, got {num_shards}")
    callbacks = callbacks or BuildCallbacks()
    executor = executor or LocalExecutor(workers, drop_inherited_locks)
    started = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    work = out_dir / WORK_DIR
    parts_root = work / "parts"
    parts_root.mkdir(parents=True, exist_ok=True)
    problems: list[dict] = [problem.to_dict() for problem in input_problems]

    tasks = []
    plans: dict[str, SplitPlan] = {}
    for path in inputs:
        try:
            plan = split_function(path, workers) if split_function else None
            for part in plan.parts if plan else [None]:
                key = file_task_key(path, num_shards, source, params, part)
                tasks.append(FileTask(str(path), len(tasks), key, str(parts_root), num_shards, params, part))
        except OSError as error:  # vanished or unreadable since the inputs were listed
            problems.append(InputProblem(str(path), f"cannot read: {error.strerror or error}").to_dict())
            continue
        if plan:
            plans[str(path)] = plan
    if strict and problems:
        raise BuildAborted(InputProblem(**problems[0]))
    results, todo = _split_finished(tasks, load_finished_file_task, lambda task: task.order)
    reused_files = len(results)
    callbacks.phase("parse", len(tasks))
    for task in tasks:
        if task.order in results:
            callbacks.file_done(results[task.order], True)

    def on_file(task: FileTask, result: dict) -> bool:
        results[task.order] = result
        callbacks.file_done(result, False)
        if strict and result["problems"]:
            raise BuildAborted(InputProblem(**result["problems"][0]))
        return True

    map_started = time.perf_counter()
    executor.run(todo, run_file_task, (map_function,), on_file)
    map_seconds = time.perf_counter() - map_started

    ordered = _per_input([results[task.order] for task in tasks], plans)
    for result in ordered:
        problems.extend(result["problems"])
    failed_paths = {result["path"] for result in ordered if result["status"] != "ok"}
    good = [(task.order, str(task.final_dir)) for task in tasks if task.path not in failed_paths]
    reduce_key = hashlib.sha256(
        orjson.dumps({"parts": [Path(d).name for _, d in good], "shards": num_shards, "duplicates": on_duplicate})
    ).hexdigest()[:24]
    reduce_dir = work / "reduce" / reduce_key
    reduce_dir.mkdir(parents=True, exist_ok=True)
    paths = tuple(task.path for task in tasks)
    shard_tasks = [
        ShardTask(shard, num_shards, tuple(good), str(reduce_dir), on_duplicate, paths, position_name, str(out_dir))
        for shard in range(num_shards)
    ]
    shard_results, shard_todo = _split_finished(shard_tasks, load_finished_shard_task, lambda task: task.shard)
    reused_shards = len(shard_results)
    callbacks.phase("merge", num_shards)
    for result in shard_results.values():
        callbacks.shard_done(result, True)

    def on_shard(task: ShardTask, result: dict) -> bool:
        shard_results[task.shard] = result
        callbacks.shard_done(result, False)
        return True

    reduce_started = time.perf_counter()
    executor.run(shard_todo, run_shard_task, (), on_shard)
    reduce_seconds = time.perf_counter() - reduce_started

    outputs = [shard_results[shard] for shard in range(num_shards)]
    for output in outputs:
        problems.extend(output.get("problems", []))
    record = _build_record(
        source=source,
        command=command,
        params=params,
        num_shards=num_shards,
        ordered=ordered,
        outputs=outputs,
        problems=problems,
        run={
            "workers": workers,
            "executor": executor.name,
            "reused_file_tasks": reused_files,
            "reused_shard_tasks": reused_shards,
            "seconds": {
                "parse": round(map_seconds, 3),
                "merge": round(reduce_seconds, 3),
                "total": round(time.perf_counter() - started, 3),
            },
        },
    )
    _publish(out_dir, reduce_dir, [result["path"] for result in outputs], record)
    if keep_work:
        _prune_work(work, {Path(d).name for _, d in good}, reduce_key)
    else:
        shutil.rmtree(parts_root, ignore_errors=True)
        shutil.rmtree(work / "reduce", ignore_errors=True)
    return BuildOutcome(record=record, problems=problems, kept_work_bytes=_folder_bytes(work))


def _folder_bytes(folder: Path) -> int:
    return sum(entry.stat().st_size for entry in folder.rglob("*") if entry.is_file()) if folder.is_dir() else 0


def _per_input(results: list[dict], plans: dict[str, SplitPlan]) -> list[dict]:
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


def _build_record(*, source, command, params, num_shards, ordered, outputs, problems, run) -> dict:
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
        "inputs": [_input_entry(result) for result in ordered],
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


def _input_entry(result: dict) -> dict:
    entry = {"path": result["path"], "status": result["status"]}
    if result["status"] == "ok":
        entry.update(bytes=result["bytes"], sha256=result["sha256"], stats=result["stats"])
    else:
        entry["error"] = result["error"]
    if "ranges" in result:
        entry["ranges"] = result["ranges"]  # parsed as this many byte ranges in parallel
    return entry


def _publish(out_dir: Path, reduce_dir: Path, names: list[str], record: dict) -> None:
    """Move the new shards in and write build.json last (the commit point).

    Nothing that needs disk space happens after the first change to the folder: the new record is
    written to a temp file first (a full disk stops the build here, the earlier build untouched), and
    the rest are renames. The old build.json goes before the shards move, so a kill during the swap
    leaves a folder that says "unfinished" rather than an old record describing new files; re-running
    finishes the swap (load_finished_shard_task finds each shard where it is). Shards are moved, not
    linked: a published shard shares no bytes with the work folder, so editing one cannot edit the cache.
    Each shard's mtime goes into the record (`run.shard_mtime_ns`), so later stages can tell a shard
    changed since its build without hashing it (medsnip.corpus).
    """
    sources = {name: reduce_dir / name if (reduce_dir / name).is_file() else out_dir / name for name in names}
    record["run"]["shard_mtime_ns"] = {name: path.stat().st_mtime_ns for name, path in sources.items()}
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
            os.replace(temp_record, record_path)
    finally:
        temp_record.unlink(missing_ok=True)


def _prune_work(work: Path, keep_parts: set[str], keep_reduce: str) -> None:
    """Drop cached parts and merges that the current inputs no longer use (and dead temp folders)."""
    for entry in (work / "parts").iterdir():
        if entry.name not in keep_parts:
            shutil.rmtree(entry, ignore_errors=True)
    for entry in (work / "reduce").iterdir():
        if entry.name != keep_reduce:
            shutil.rmtree(entry, ignore_errors=True)
