"""One job at a time on a corpus folder's versions: `medsnip update` (which writes a new generation and
keeps the old one) and `medsnip prune` (which deletes kept generations) never run at once on the same
folder, so prune can never delete the generation an update is writing. The lock is an flock on
FOLDER/.generations/.job.lock (released by the kernel when its holder dies: a killed job never leaves
the folder locked); the file names the holder, for the refusal message."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from medsnip.generations import GENERATIONS
from medsnip.processes import held_lock

LOCK_NAME = ".job.lock"


class FolderBusy(RuntimeError):
    """Another update or prune holds the folder."""


@contextmanager
def folder_job(folder: Path, what: str) -> Iterator[None]:
    """Hold `folder`'s job lock while `what` ("update", "prune") runs; FolderBusy when another holds it."""
    path = Path(folder) / GENERATIONS / LOCK_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another job"
            raise FolderBusy(
                f"{folder}: {holder} is running on this folder; run {what} again once it has finished"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"medsnip {what} (pid {os.getpid()})\n")
        handle.flush()
        try:
            with held_lock(handle.fileno()):  # a forked worker outliving a killed holder keeps nothing locked
                yield
        finally:
            handle.seek(0)
            handle.truncate()
