"""The sharded, resumable build engine every source uses: it plans the tasks and runs them.

Map (corpusbuild.engine.maptask): one task per input file, or byte range of a split one, runs the source's
reader and writes its documents into parts (corpusbuild.engine.parts). Reduce (corpusbuild.engine.reducetask): one
task per shard merges the parts in input order; the last event for a document wins, which gives NLM's
"latest version of each citation" semantics however many workers ran. Publish (corpusbuild.engine.publish):
shards are moved into the output folder; build.json is written last and is the commit point. Tasks
run on an executor (medsnip.executor: a local process pool or Ray).

Every task writes under a temp name and renames on completion, with a marker; re-running the same
command skips tasks whose marker matches (same input stat, same parameters), so a killed run resumes
and ends byte-identical to an uninterrupted one.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import shutil
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from corpusbuild.engine.maptask import FileTask, file_task_key, load_finished_file_task, run_file_task
from corpusbuild.engine.publish import build_record, folder_bytes, per_input, prune_work, publish
from corpusbuild.engine.reducetask import ShardTask, load_finished_shard_task, run_shard_task
from corpusbuild.errors import InputProblem
from corpusbuild.events import Reader
from corpusbuild.splits import SplitPlan
from medsnip.executor import Executor, LocalExecutor
from medsnip.processes import held_lock

WORK_DIR = ".work"


class BuildAborted(Exception):
    """--strict stopped the build at its first problem; nothing was published."""

    def __init__(self, problem: InputProblem):
        super().__init__(str(problem))
        self.problem = problem


class NothingRead(Exception):
    """Every input failed (unreadable, corrupt, not of the source's kind): there is nothing to publish, and
    publishing would replace an earlier build with an empty one. `unreported`: the problems found before
    any file was parsed (the parsed files' failures went to the file_done callback)."""

    def __init__(self, problems: list[dict], unreported: list[dict]):
        super().__init__(f"none of the {len(problems)} input file(s) could be read")
        self.problems = problems
        self.unreported = unreported


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
        with held_lock(handle.fileno()):  # forked workers close their copies (medsnip.processes)
            yield


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
    read: Reader,
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

    `read` is the source's reader (corpusbuild.events). `on_duplicate` says what two records with the
    same key mean: "replace" (a later version; PubMed) or "error" (ids must be unique; the first is kept
    and the others reported). `split_function` may cut one input into byte ranges parsed as separate
    tasks, in order (corpusbuild.sources.wikipedia.dump_ranges).
    `executor` runs the tasks (medsnip.executor; a local pool of `workers` by default): the shards are
    the same bytes whichever runs them.
    """
    if num_shards < 1:
        raise ValueError(f"--shards must be >= 1, got {num_shards}")
    callbacks = callbacks or BuildCallbacks()
    executor = executor or LocalExecutor(workers)
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
    planned_problems = list(problems)
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
    executor.run(todo, run_file_task, (read,), on_file)
    map_seconds = time.perf_counter() - map_started

    ordered = per_input([results[task.order] for task in tasks], plans)
    for result in ordered:
        problems.extend(result["problems"])
    failed_paths = {result["path"] for result in ordered if result["status"] != "ok"}
    good = [(task.order, str(task.final_dir)) for task in tasks if task.path not in failed_paths]
    if not good:  # nothing to publish: an earlier build in the folder stays as it was
        raise NothingRead(problems, planned_problems)
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
    record = build_record(
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
    publish(out_dir, reduce_dir, [result["path"] for result in outputs], record)
    if keep_work:
        prune_work(work, {Path(d).name for _, d in good}, reduce_key)
    else:
        shutil.rmtree(parts_root, ignore_errors=True)
        shutil.rmtree(work / "reduce", ignore_errors=True)
    return BuildOutcome(record=record, problems=problems, kept_work_bytes=folder_bytes(work))
