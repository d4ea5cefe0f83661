"""Process hygiene shared by every stage: children that die with their parent and keep none of its
folder locks, and the temp folders of processes that were killed before they could clean up.

Every stage writes `.NAME.tmp-PID` (and swaps through `.NAME.old-PID`) beside what it builds, so a
killed run never leaves a half-written output under its final name; these helpers make sure it does
not leave the half-written copies, or a child still writing them, behind either.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_TEMP_NAME = re.compile(r"^\..+\.(?:tmp|old)-(\d+)$")
_PR_SET_PDEATHSIG = 1


_held_locks: set[int] = set()  # flock'ed file descriptors this process holds (forked workers close their copies)


@contextmanager
def held_lock(fd: int) -> Iterator[None]:
    """Mark `fd` (an flock this process took) as one forked workers must not keep: a flock lives as long
    as any process holds its file, so a worker outliving its killed driver would keep the folder locked
    against the resumed run."""
    _held_locks.add(fd)
    try:
        yield
    finally:
        _held_locks.discard(fd)


def drop_inherited_locks() -> None:
    """In each forked worker (medsnip.executor does it first thing): close the inherited lock copies."""
    for fd in _held_locks:
        os.close(fd)
    _held_locks.clear()


def die_with_parent(parent: int) -> None:
    """Run in a child (a forked worker, or a subprocess's preexec_fn): Linux sends it SIGKILL when its
    parent exits, so a killed build or indexer leaves no worker or JVM behind that keeps writing."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: children end when they find their parent gone
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def run_dying_with_us(command: list[str], **options) -> subprocess.CompletedProcess:
    """subprocess.run for a program that must end when this process ends (a JVM building an index).
    util-linux's `setpriv --pdeathsig KILL` sets the death signal and execs it, so no Python runs in the
    forked child: a preexec_fn would, and in a process that holds a gRPC channel (refkit collecting
    while an update runs) the child then runs gRPC's fork handlers and can abort before its exec."""
    setpriv = shutil.which("setpriv")
    if setpriv:
        # A parent that dies between the fork and setpriv's prctl is past signalling: the shell setpriv
        # execs checks that its parent is still this process before it becomes the program.
        guard = 'if [ "$PPID" != "$1" ]; then exit 1; fi; shift; exec "$@"'
        launched = [setpriv, "--pdeathsig", "KILL", "--", "/bin/sh", "-c", guard, "sh", str(os.getpid()), *command]
        return subprocess.run(launched, **options)
    return subprocess.run(command, preexec_fn=functools.partial(die_with_parent, os.getpid()), **options)


def is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def remove_stale_temps(folder: Path) -> list[Path]:
    """Delete the `.NAME.tmp-PID` / `.NAME.old-PID` entries of `folder` whose process is gone (a
    reused PID keeps its entry: never delete what a live process may be writing). Returns them."""
    removed = []
    if not Path(folder).is_dir():
        return removed
    for entry in Path(folder).iterdir():
        match = _TEMP_NAME.match(entry.name)
        if match and int(match.group(1)) != os.getpid() and not is_alive(int(match.group(1))):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


FAULT_SIGNALS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL)
_SIGACTION_BYTES = 512  # more than any libc's struct sigaction: saved and restored as opaque bytes


def save_fault_handlers() -> dict:
    """The process's native handlers of the fault signals (what `sigaction` reports, not Python's).

    A JVM running in this process (pyserini's Lucene) handles SIGSEGV itself: its safepoint polls and
    implicit null checks fault on purpose. `ray.init` installs Ray's own crash handler over it and
    `ray.shutdown` resets it to the default, after which the JVM's next deliberate fault kills the
    process; restoring what was there first keeps both working (Ray's workers keep their handler)."""
    saved = {}
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        for number in FAULT_SIGNALS:
            action = ctypes.create_string_buffer(_SIGACTION_BYTES)
            if libc.sigaction(int(number), None, action) == 0:
                saved[int(number)] = action
    except (OSError, AttributeError):  # not a libc with sigaction: nothing to keep
        pass
    return saved


def restore_fault_handlers(saved: dict) -> None:
    """Put back the handlers `save_fault_handlers` returned."""
    if not saved:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for number, action in saved.items():
        libc.sigaction(number, action, None)
