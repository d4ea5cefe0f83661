"""Where a stage's tasks run: a local process pool, or a Ray cluster.

A task is pure: an input description and parameters in, files and a small result dict out, with a
completion marker written last, so a stage resumes by skipping tasks whose marker is there and any
executor may run any task anywhere the output folder is reachable. Executors only run tasks and hand
each result to the stage's `on_result` in the driver (which alone records and publishes); they never
decide what a task writes, so the output is the same bytes whatever runs it.

- `LocalExecutor(workers)`: tasks inline with one worker, else a fork-based process pool whose workers
  die with the driver (PDEATHSIG), close their copies of its folder locks (medsnip.processes) and run
  a stage-given initializer.
- `RayExecutor(address)`: the same functions as Ray tasks (`num_cpus=1` each, retried when a worker
  dies). `address=None` starts a private local cluster of `num_cpus` CPUs for this run; "auto" or
  HOST:PORT joins a running one (`ray start --head`). Every node must see the output folder at the same
  path (one machine, or a shared file system) and run the same medsnip version.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol

from medsnip.processes import die_with_parent, drop_inherited_locks, restore_fault_handlers, save_fault_handlers

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

    def run_on_devices(
        self,
        tasks: Sequence,
        setup: Callable[[str], Any],
        function: Callable,
        devices: Sequence[str],
        on_result: OnResult,
        teardown: Callable[[Any], None] | None = None,
    ) -> None:
        """One long-lived worker per device: `setup(device)` once (load a model there), then
        `function(state, task)` for each task it is handed, the next task going to whichever worker is
        free, so a faster device takes more tasks; `teardown(state)` in each worker at the end (stop
        what the worker started, such as its feeder processes)."""


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
        with ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=context,
            initializer=_local_worker_start,
            initargs=(os.getpid(), self.initializer),
        ) as pool:
            pending: dict[Future, Any] = {pool.submit(function, task, *extra_args): task for task in tasks}
            try:
                while pending:
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        task = pending.pop(future)
                        if not on_result(task, future.result()):
                            return
            except KeyboardInterrupt:
                _stop_now(pool)
                raise
            finally:
                for other in pending:
                    other.cancel()

    def run_on_devices(
        self,
        tasks: Sequence,
        setup: Callable[[str], Any],
        function: Callable,
        devices: Sequence[str],
        on_result: OnResult,
        teardown: Callable[[Any], None] | None = None,
    ) -> None:
        if len(devices) == 1:
            state = setup(devices[0])
            try:
                for task in tasks:
                    if not on_result(task, function(state, task)):
                        return
            finally:
                if teardown is not None:
                    teardown(state)
            return
        # spawned, not forked: a worker initialises CUDA (or torch's thread pools) itself, which a fork
        # of a process that already did cannot
        context = multiprocessing.get_context("spawn")
        pools = [
            ProcessPoolExecutor(
                max_workers=1,
                mp_context=context,
                initializer=_device_worker_start,
                initargs=(os.getpid(), setup, device),
            )
            for device in devices
        ]
        waiting = list(tasks)
        pending: dict[Future, tuple[Any, ProcessPoolExecutor]] = {}

        def hand_out(pool: ProcessPoolExecutor) -> None:
            if waiting:
                task = waiting.pop(0)
                pending[pool.submit(_device_call, function, task)] = (task, pool)

        interrupted = False
        try:
            for pool in pools:
                hand_out(pool)
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    task, pool = pending.pop(future)
                    if not on_result(task, future.result()):
                        return
                    hand_out(pool)
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            for pool in pools:
                if interrupted:  # the workers go at once, and their feeders with them (die_with_parent)
                    _stop_now(pool)
                    continue
                if teardown is not None:  # a worker's own processes end before it does
                    try:
                        pool.submit(_device_call, _torn_down, teardown).result()
                    except (BrokenProcessPool, RuntimeError):  # the worker died: its processes with it
                        pass
                pool.shutdown(wait=True, cancel_futures=True)


_device_state: Any = None  # in a device worker: what setup(device) returned


def _device_worker_start(parent: int, setup: Callable[[str], Any], device: str) -> None:
    global _device_state
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle (_stop_now)
    drop_inherited_locks()
    die_with_parent(parent)
    _device_state = setup(device)


def _device_call(function: Callable, task: Any) -> dict:
    return function(_device_state, task)


def _torn_down(state: Any, teardown: Callable[[Any], None]) -> None:
    teardown(state)


def _local_worker_start(parent: int, initializer: Callable[[], None] | None) -> None:
    """In each forked worker: hold none of the driver's folder locks and die with the driver, so a killed
    build leaves no worker writing behind it nor keeping its folder locked. Ctrl-C, which a terminal sends to
    every process of the job, is the driver's to handle: it stops the workers (_stop_now), so none prints a
    traceback of its own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    drop_inherited_locks()
    if initializer is not None:
        initializer()
    die_with_parent(parent)


def _stop_now(pool: ProcessPoolExecutor) -> None:
    """Ctrl-C in the driver: kill the pool's workers rather than wait for their tasks (which may run for
    minutes, and ignore SIGINT). A killed task leaves only scratch the next run redoes: tasks write their
    completion marker last."""
    workers = list((getattr(pool, "_processes", None) or {}).values())  # CPython's: no public way to stop one
    pool.shutdown(wait=False, cancel_futures=True)
    for worker in workers:
        worker.kill()


class RayUnavailable(RuntimeError):
    """`--executor ray` without the `ray` package, or a cluster that cannot be reached."""


class RayUnreachable(RayUnavailable):
    """A --ray-address where no cluster answers."""


RAY_CONNECT_TIMEOUT = 30.0  # seconds; MEDSNIP_RAY_CONNECT_TIMEOUT overrides it


def ray_connect_timeout() -> float:
    value = os.environ.get("MEDSNIP_RAY_CONNECT_TIMEOUT", "")
    try:
        return float(value) if value else RAY_CONNECT_TIMEOUT
    except ValueError:
        raise RayUnavailable(f"MEDSNIP_RAY_CONNECT_TIMEOUT={value!r}: not a number of seconds") from None


def wait_for_listener(address: str, timeout: float) -> None:
    """Fail within `timeout` seconds when nothing listens at a cluster's HOST:PORT: `ray.init` itself
    keeps retrying a dead address for minutes."""
    target = address.split("://", 1)[-1]
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise RayUnavailable(f"--ray-address {address!r}: expected auto or HOST:PORT")
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=min(2.0, max(0.1, timeout))):
                return
        except OSError as error:
            if time.monotonic() >= deadline:
                raise RayUnreachable(
                    f"cannot reach a Ray cluster at {address}: nothing answered within {timeout:.0f} s ({error}); "
                    "is `ray start --head` running there? (MEDSNIP_RAY_CONNECT_TIMEOUT sets the wait)"
                ) from None
            time.sleep(0.5)


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
        self._fault_handlers = save_fault_handlers()  # a JVM's, if one runs here (processes.py)
        if self._started_here:
            options = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
            if address and address != "auto":
                wait_for_listener(address, ray_connect_timeout())
            try:
                if address:
                    ray.init(address=address, **options)
                else:  # a private cluster for this run, even where `ray start` runs one; it ends with the run
                    ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1, **options)
            except (ConnectionError, RuntimeError, ValueError) as error:
                where = address or "a new local one"
                raise RayUnreachable(f"cannot reach a Ray cluster at {where}: {error}") from error
            finally:
                restore_fault_handlers(self._fault_handlers)

    @property
    def slots(self) -> int:
        return max(1, int(self.cluster_resources().get("CPU", 1)))

    def cluster_resources(self) -> dict:
        """What the cluster has in all ({"CPU": 32.0, "GPU": 4.0, ...})."""
        return self._ray.cluster_resources()

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

    def run_on_devices(
        self,
        tasks: Sequence,
        setup: Callable[[str], Any],
        function: Callable,
        devices: Sequence[str],
        on_result: OnResult,
        teardown: Callable[[Any], None] | None = None,
    ) -> None:
        """One Ray actor per device: `num_gpus=1` for a CUDA device (Ray picks the GPU and sets
        CUDA_VISIBLE_DEVICES, so the actor sees it as "cuda"), one CPU otherwise; an actor whose process
        dies is restarted (setup again) and its task retried."""
        ray = self._ray
        if not tasks:
            return
        worker_class = ray.remote(_DeviceActor)
        actors = []
        for device in devices:
            on_gpu = device.startswith("cuda")
            options = {
                "num_cpus": 1,
                "num_gpus": 1 if on_gpu else 0,
                "max_restarts": 1,
                "max_task_retries": self.task_retries,
            }
            actors.append(worker_class.options(**options).remote(setup, "cuda" if on_gpu else device))
        waiting = list(tasks)
        pending: dict = {}

        def hand_out(actor) -> None:
            if waiting:
                task = waiting.pop(0)
                pending[actor.call.remote(function, task)] = (task, actor)

        try:
            for actor in actors:
                hand_out(actor)
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for reference in done:
                    task, actor = pending.pop(reference)
                    try:
                        result = ray.get(reference)
                    except ray.exceptions.RayTaskError as error:
                        raise error.as_instanceof_cause() from None
                    if not on_result(task, result):
                        return
                    hand_out(actor)
        finally:
            if teardown is not None:
                try:
                    ray.get([actor.call.remote(_torn_down, teardown) for actor in actors], timeout=60)
                except Exception:  # noqa: BLE001 - a dead actor's processes died with it
                    pass
            for actor in actors:
                ray.kill(actor, no_restart=True)

    def shutdown(self) -> None:
        if self._started_here and self._ray.is_initialized():
            self._ray.shutdown()
            restore_fault_handlers(self._fault_handlers)


class _DeviceActor:
    """A Ray actor holding what `setup(device)` returned (a loaded model) across the tasks it runs."""

    def __init__(self, setup: Callable[[str], Any], device: str):
        _die_with_raylet()
        self.state = setup(device)

    def call(self, function: Callable, task: Any) -> dict:
        return function(self.state, task)


def _call(function: Callable, task: Any, *extra_args) -> dict:
    _die_with_raylet()
    return function(task, *extra_args)


def _die_with_raylet() -> None:
    """In a Ray worker: end with the node's raylet. Ray's own check notices a dead raylet only after a
    minute or more, during which a worker of a killed private cluster keeps computing (and writing
    outputs the rerun writes again); with PDEATHSIG it goes when its raylet does."""
    parent = os.getppid()
    try:
        with open(f"/proc/{parent}/comm", encoding="ascii") as handle:
            if handle.read().strip() != "raylet":
                return
    except OSError:
        return
    die_with_parent(parent)


def make_executor(
    kind: str, workers: int, address: str | None = None, initializer: Callable[[], None] | None = None
) -> LocalExecutor | RayExecutor:
    """The executor a stage's `--executor`, `--workers` and `--ray-address` options ask for."""
    if kind == "ray":
        return RayExecutor(address, num_cpus=None if address else workers)
    if address:
        raise ValueError("--ray-address goes with --executor ray")
    return LocalExecutor(workers, initializer)
