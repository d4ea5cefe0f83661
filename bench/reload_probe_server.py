"""`searchd serve`, with two probes a benchmark reads from outside (bench/reload_bench.py).

Run as `python bench/reload_probe_server.py serve --root ...`: the same click command, in a process that
also answers SIGUSR1: with a file `$PROBE_DIR/start-tracing`, it starts tracing Python's allocations (one
frame each) and removes the file; else it writes `$PROBE_DIR/probe-N.json` (glibc's malloc statistics and
tracemalloc's totals) and, while tracing, `$PROBE_DIR/snapshot-N.pickle`, a tracemalloc snapshot a later one
is diffed against. (SIGUSR2 is the JVM's: HotSpot suspends threads with it.) The JVM's own
accounting is read by `jcmd` from outside. `PROBE_WITHOUT=jvm-collect,malloc-trim` turns those two steps
of a swap off, to measure what each is worth.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


class MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
    ] + [("keepcost", ctypes.c_size_t)]


def malloc_statistics() -> dict:
    """MiB glibc's malloc has taken from the system (`arena`: heaps; `mmapped`: large blocks), how much of
    it is in use and how much is free but kept."""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    info = libc.mallinfo2()
    mib = 2**20
    return {
        "arena_mb": info.arena / mib,
        "mmapped_mb": info.hblkhd / mib,
        "in_use_mb": (info.uordblks + info.hblkhd) / mib,
        "free_kept_mb": info.fordblks / mib,
    }


def _dump(signum, frame) -> None:
    folder = Path(os.environ["PROBE_DIR"])
    if (folder / "start-tracing").exists():
        tracemalloc.start(int(os.environ.get("PROBE_FRAMES", "1")))
        (folder / "start-tracing").unlink()
        return
    number = len(list(folder.glob("probe-*.json")))
    probe = {"malloc": malloc_statistics(), "tracing": tracemalloc.is_tracing()}
    if tracemalloc.is_tracing():
        tracemalloc.take_snapshot().dump(str(folder / f"snapshot-{number}.pickle"))
        probe["traced_mb"] = tracemalloc.get_traced_memory()[0] / 2**20
        probe["tracemalloc_own_mb"] = tracemalloc.get_tracemalloc_memory() / 2**20
    temporary = folder / f"probe-{number}.tmp"
    temporary.write_text(json.dumps(probe))
    temporary.rename(folder / f"probe-{number}.json")


def main() -> None:
    without = set(filter(None, os.environ.get("PROBE_WITHOUT", "").split(",")))
    if "jvm-collect" in without:
        import indexer.jvm

        indexer.jvm.collect_heap = lambda: None
    if "malloc-trim" in without:
        import searchd.hot_swap

        searchd.hot_swap.trim_allocator = lambda: None
    signal.signal(signal.SIGUSR1, _dump)
    from searchd.cli import main as searchd_main

    searchd_main(prog_name="searchd")


if __name__ == "__main__":
    main()
