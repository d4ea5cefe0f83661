"""Where a stage's tasks run: a local process pool, or a Ray cluster.

A task is pure: an input description and parameters in, files and a small result dict out, with a
completion marker written last, so a stage resumes by skipping tasks whose marker is there and any
executor may run any task anywhere the output folder is reachable. Executors only run tasks and hand
each result to the stage's `on_result` in the driver (which alone records and publishes); they never
decide what a task writes, so the output is the same bytes whatever runs it.

- `LocalExecutor(workers)`: tasks inline with one worker, else a fork-based process pool whose workers
  die with the driver (PDEATHSIG) and run a stage-given initializer (corpusbuild drops its inherited
  folder lock there).
- `RayExecutor(address)`: the same functions as Ray tasks (`num_cpus=1` each, retried when a worker
  dies). `address=None` starts a private local cluster of `num_cpus` CPUs for this run; "auto" or
  HOST:PORT joins a running one (`ray start --head`). Every node must see the output folder at the same
  path (one machine, or a shared file system) and run the same medsnip version.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, Protocol

from medsnip.processes import die_with_parent

OnResult = Callable[[Any, dict], bool]  # (task, result) -> keep going?
EXECUTORS = ("local", "ray")


class Executor(Protocol):
    name: str

    @property
    def slots(self) -> int:
        """How many tasks run at once (what a stage sizes its work by)."""

    def run(self, tasks: Sequence, function: Callable, extra_args: tuple, on_result: OnResult) -> None:
        """Run `function(task, *extra_args)` for every task; `on_result` (in this process) gets each result
        as it comes and returns False to stop early (tasks not started are cancelled)."""


class LocalExecutor:
    name = "local"

    def __init__(self, workers: int = 1, initializer: Callable[[], None] | None = None):
        self.workers = max(1, workers)
        self.initializer = initializer

    @property
    def slots(self) -> int:
        return self.workers

    def run(self, tasks: Sequence, function: Callable, extra_args: tuple, on_result: OnResult) -> None:
        if self.workers <= 1 or len(tasks) <= 1:
            for task in tasks:
                if not on_result(task, function(task, *extra_args)):
                    return
            return
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=self.workers, mp_context=context, initializer=_local_worker_start,
                                 initargs=(os.getpid(), self.initializer)) as pool:  # fmt: skip
            pending: dict[Future, Any] = {pool.submit(function, task, *extra_args): task for task in tasks}
            try:
                while pending:
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        task = pending.pop(future)
                        if not on_result(task, future.result()):
                            return
            finally:
                for other in pending:
                    other.cancel()


def _local_worker_start(parent: int, initializer: Callable[[], None] | None) -> None:
    """In each forked worker: die with the driver, so a killed build leaves no worker writing behind it."""
    if initializer is not None:
        initializer()
    die_with_parent(parent)


class RayUnavailable(RuntimeError):
    """`--executor ray` without the `ray` package, or a cluster that cannot be reached."""


class RayExecutor:
    name = "ray"

    def __init__(self, address: str | None = None, num_cpus: int | None = None, task_retries: int = 3):
        try:
            import ray
        except ImportError as error:
            raise RayUnavailable("--executor ray needs the ray package: pip install 'medsnip[ray]'") from error
        self._ray = ray
        self.task_retries = task_retries
        self._started_here = not ray.is_initialized()
        if self._started_here:
            options = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
            try:
                if address:
                    ray.init(address=address, **options)
                else:  # a private cluster for this run, even where `ray start` runs one; it ends with the run
                    ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1, **options)
            except (ConnectionError, RuntimeError, ValueError) as error:
                where = address or "a new local one"
                raise RayUnavailable(f"cannot reach a Ray cluster at {where}: {error}") from error

    @property
    def slots(self) -> int:
        return max(1, int(self._ray.cluster_resources().get("CPU", 1)))

    def run(self, tasks: Sequence, function: Callable, extra_args: tuple, on_result: OnResult) -> None:
        ray = self._ray
        if not tasks:
            return
        remote = ray.remote(num_cpus=1, max_retries=self.task_retries)(_call)
        pending = {remote.remote(function, task, *extra_args): task for task in tasks}
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for reference in done:
                    task = pending.pop(reference)
                    try:
                        result = ray.get(reference)
                    except ray.exceptions.RayTaskError as error:  # the task's own exception, as raised there
                        raise error.as_instanceof_cause() from None
                    if not on_result(task, result):
                        return
        finally:
            for reference in pending:
                ray.cancel(reference, force=True)

    def shutdown(self) -> None:
        if self._started_here and self._ray.is_initialized():
            self._ray.shutdown()


def _call(function: Callable, task: Any, *extra_args) -> dict:
    return function(task, *extra_args)


def make_executor(kind: str, workers: int, address: str | None = None,
                  initializer: Callable[[], None] | None = None) -> LocalExecutor | RayExecutor:  # fmt: skip
    """The executor a stage's `--executor`, `--workers` and `--ray-address` options ask for."""
    if kind == "ray":
        return RayExecutor(address, num_cpus=None if address else workers)
    if address:
        raise ValueError("--ray-address goes with --executor ray")
    return LocalExecutor(workers, initializer)
