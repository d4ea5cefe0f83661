"""The command-line face of medsnip/executor.py, shared by every stage's CLI: the `--workers`,
`--executor` and `--ray-address` options and the executor they ask for."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

from medsnip.cli_errors import Unreachable
from medsnip.executor import EXECUTORS, RayExecutor, RayUnavailable, RayUnreachable, make_executor


def with_options(options: list):
    """Decorate a click command with a list of options, in the order listed."""

    def apply(command):
        for option in reversed(options):
            command = option(command)
        return command

    return apply


def executor_options(what: str, workers: int | None = None, workers_help: str | None = "Worker processes") -> list:
    """Click options; `what` names the tasks in the help text ("the parse and merge tasks"); `workers` is
    the default worker count [default: the CPUs]; `workers_help` None leaves --workers out (a stage whose
    workers are its devices)."""
    worker_option = (
        []
        if workers_help is None
        else [
            click.option(
                "--workers",
                default=workers or os.cpu_count() or 1,
                show_default=True,
                type=click.IntRange(1),
                help=f"{workers_help} (with --executor ray, no --ray-address: a private cluster's CPUs).",
            ),
        ]
    )
    return [
        *worker_option,
        click.option(
            "--executor",
            default="local",
            show_default=True,
            type=click.Choice(EXECUTORS),
            help=f"Run {what} in a local process pool or on a Ray cluster.",
        ),
        click.option(
            "--ray-address",
            help="With --executor ray: join this cluster (auto or HOST:PORT) "
            "instead of starting a private one. Every node must see the output at the same path.",
        ),
    ]


@contextmanager
def executor_from_options(options: dict, initializer: Callable[[], None] | None = None) -> Iterator:
    """The executor the options ask for, shut down (a private Ray cluster) when the block ends; a bad
    combination is a usage error (exit status 2), a cluster that does not answer exit status 3."""
    try:
        workers = options.get("workers") or os.cpu_count() or 1
        executor = make_executor(
            options.get("executor", "local"), workers, options.get("ray_address"), initializer=initializer
        )
    except RayUnreachable as error:
        raise Unreachable(str(error)) from None
    except (RayUnavailable, ValueError) as error:
        raise click.UsageError(str(error)) from error
    try:
        yield executor
    finally:
        if isinstance(executor, RayExecutor):
            executor.shutdown()
