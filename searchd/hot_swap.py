"""Hot swap: the engine new calls get, and the retired ones finishing the calls they started.

`searchd reload` (or SIGHUP) loads the root again beside the engine that is serving: every corpus and
index is opened and its lineage checked as at start-up. Only a complete, consistent load replaces the
current engine, in one step under a lock: a call takes its engine when it starts and keeps it to its
end (BatchSearch jobs too), so in-flight calls finish on the old generation and new calls see the new
one; a retired engine is closed when its last call leaves. A load that fails leaves the current engine
serving; the error is logged and reported by Info (`stats_json` -> `generation.last_error`) and by
the health service `searchd.generation` (NOT_SERVING until a load succeeds). Indexes are replaced on
disk by renaming new folders over old ones (every indexer stage does), and the version replaced is
kept as a generation folder (medsnip.generations); the server leases every corpus version it still
serves (the current engine and retired ones finishing their calls), so `medsnip prune` never deletes
what it reads.

`--watch`: the root's build records are read every few seconds, and a new *complete* generation (every
served index citing its corpus's current lineage) is loaded as SIGHUP loads it; a half-updated root
(the corpus rebuilt, its indexes not yet) is left alone until the update finishes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from medsnip.buildrecord import lineage_hash, read_build_record
from medsnip.corpus import served_index_folders
from medsnip.generations import remove_lease, write_lease

log = logging.getLogger("searchd")


def root_state(corpus_dirs: list[Path]) -> tuple | None:
    """What generation the root holds on disk: (corpus folder, corpus lineage, index lineages) per
    corpus; None while it is not complete: a record unreadable or marked incomplete, an index folder
    without its record (a build under way, or one killed and not finished), or an index citing another
    corpus version than its corpus's (an update under way)."""
    state = []
    for corpus_dir in corpus_dirs:
        try:
            corpus = read_build_record(corpus_dir)
            lineage = lineage_hash(corpus)
            indexes = []
            for folder in served_index_folders(corpus_dir):
                record = read_build_record(folder)
                if not record.get("complete") or record.get("upstream", {}).get("lineage_sha256") != lineage:
                    return None
                indexes.append((folder.name, lineage_hash(record)))
        except (OSError, ValueError, KeyError):
            return None
        if not corpus.get("complete"):
            return None
        state.append((str(corpus_dir), lineage, tuple(indexes)))
    return tuple(state)


def trim_allocator() -> None:
    """Give the C allocator's free pages back to the system (glibc's malloc_trim): without it RSS stays at
    its peak, freed memory kept in the allocator's arenas for reuse."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the allocator keeps what it keeps
        pass


def settle_loaded_objects() -> None:
    """Exempt every object alive now (the libraries, models, tokenizers and indexes a generation loaded: about
    450k objects on the realistic root) from the cyclic collector's full passes (gc.freeze). Each full pass
    walked all of them, 250 ms with the GIL held every few bulk calls, stalling every search in flight (the
    slow calls of docs/benchmarks.md's runners section); it now walks only what the calls made since. Reference
    counting frees them as ever; _close_and_free unfreezes before it collects a retired generation's cycles."""
    import gc

    gc.freeze()


def _close_and_free(retired: list) -> None:
    """Close a retired generation, taken out of `retired` so that no reference of the caller's keeps it alive,
    and give its memory back at once: a collection frees whatever cycles still tie its objects together (with
    every object the collector was told to skip back in view), one in the JVM frees its Lucene searchers'
    garbage (and lets the heap shrink), and the allocator is trimmed; what is alive after is settled again
    (settle_loaded_objects). A generation retired while a call still held it is freed when that call ends, its
    caller's reference still alive here: its cycles wait for the next retirement's collection."""
    import gc

    from indexer import jvm

    engine = retired.pop()
    engine.close()
    del engine
    gc.unfreeze()
    gc.collect()
    settle_loaded_objects()
    jvm.collect_heap()
    trim_allocator()


class ServingFewer(RuntimeError):
    """A reload whose generation lacks a retriever the serving one has: refused, never a silent downgrade."""


def fewer_retrievers(current, new) -> str:
    """What `current` serves that `new` would not, per corpus ("pubmed: dense-minilm"); "" when nothing."""
    lost = []
    for name, loaded in getattr(current, "corpora", {}).items():
        kept = getattr(new, "corpora", {}).get(name)
        missing = sorted(set(loaded.retrievers) - set(kept.retrievers)) if kept else ["the whole corpus"]
        if missing:
            lost.append(f"{name}: {', '.join(missing)}")
    return "; ".join(lost)


def served(engine) -> tuple[set[Path], set[str]]:
    """(folders holding generations, corpus lineages) of what an engine serves: its leases."""
    folders, lineages = set(), set()
    for loaded in getattr(engine, "corpora", {}).values():
        folders.add(Path(loaded.corpus.path))
        lineages.add(loaded.corpus.record_hash)
        for _, index in loaded.indexes():
            folders.add(Path(index.path).parent)
    return folders, lineages


def corpus_generations(engine) -> dict:
    """Per corpus: its lineage, how many inputs it was built from and the newest ones (for PubMed, the
    update files applied last), and its change set's counts: what Info reports of a generation."""
    described = {}
    for name, loaded in getattr(engine, "corpora", {}).items():
        record = loaded.corpus.record
        inputs = [Path(entry["path"]).name for entry in record.get("inputs", [])]
        changes = record.get("changes")
        described[name] = {
            "lineage_sha256": loaded.corpus.record_hash,
            "inputs": len(inputs),
            "newest_inputs": inputs[-5:],
            "changes": {key: changes[key] for key in ("parent", "added", "changed", "removed")} if changes else None,
        }
    return described


class EngineHolder:
    def __init__(
        self, engine, load: Callable[[], object] | None = None, state: Callable[[], tuple | None] | None = None
    ):
        """`engine`: the one loaded at start-up; `load(current)`: makes a new one from the root, given the one
        serving (whose query encoders it may take over; None: no reload);
        `state`: what generation the root holds on disk (root_state), for --watch."""
        self._lock = threading.Lock()
        self._reloading = threading.Lock()
        self._current = engine
        self._users: dict[int, int] = {id(engine): 0}
        self._retired: dict[int, object] = {}
        self._load = load
        self.generation = 1
        self.loaded_at = time.time()
        self.last_error: dict | None = None
        self._state = state
        self._loaded_state = state() if state else None
        self._failed_state = None
        self._leased: set[Path] = set()
        self.refresh_leases()

    def refresh_leases(self) -> None:
        """Write this server's leases: every corpus version the current and retired engines serve (a
        retired one still finishes calls on its files). Folders no longer served lose their lease."""
        with self._lock:
            engines = [self._current, *self._retired.values()]
        folders, lineages = set(), set()
        for engine in engines:
            more_folders, more_lineages = served(engine)
            folders |= more_folders
            lineages |= more_lineages
        write_lease(folders, lineages)
        remove_lease(self._leased - folders)
        self._leased = folders

    @property
    def current(self):
        return self._current

    def acquire(self):
        """The engine for a call that starts now; give it back with release()."""
        with self._lock:
            engine = self._current
            self._users[id(engine)] += 1
            return engine

    def retain(self, engine) -> None:
        """One more user of an engine the caller already holds (a BatchSearch job)."""
        with self._lock:
            self._users[id(engine)] += 1

    def release(self, engine) -> None:
        with self._lock:
            self._users[id(engine)] -= 1
            done = id(engine) in self._retired and self._users[id(engine)] == 0
            if done:
                del self._retired[id(engine)], self._users[id(engine)]
        if done:
            _close_and_free([engine])
            self.refresh_leases()

    def reload(self) -> bool:
        """Load the root again and switch to it; False (the current engine serving on) when that fails.
        One reload at a time: a second request while one loads waits for it, then loads again."""
        if self._load is None:
            raise RuntimeError("this server was started without a way to reload")
        with self._reloading:
            started = time.perf_counter()
            state = self._state() if self._state else None
            try:
                engine = self._load(self._current)
                fewer = fewer_retrievers(self._current, engine)
                if fewer:
                    engine.close()
                    raise ServingFewer(
                        f"the new generation would serve fewer retrievers than the current one ({fewer}: an index "
                        "still building, killed or moved away); the current generation keeps serving. To serve "
                        "fewer on purpose, restart searchd"
                    )
            except Exception as error:  # noqa: BLE001 - any failure keeps the current generation serving
                self.last_error = {"at": time.time(), "error": f"{type(error).__name__}: {error}"[:2000]}
                log.error(
                    '{"reload": "failed, generation %d keeps serving", "error": %r}',
                    self.generation,
                    self.last_error["error"],
                )
                self._failed_state = state
                return False
            with self._lock:
                old = self._current
                self._current = engine
                self._users[id(engine)] = 0
                self.generation += 1
                self.loaded_at = time.time()
                self.last_error = None
                self._loaded_state, self._failed_state = state, None
                idle = self._users[id(old)] == 0
                if idle:
                    del self._users[id(old)]
                else:
                    self._retired[id(old)] = old
            if idle:
                retired = [old]
                del old
                _close_and_free(retired)
            self.refresh_leases()
            log.info(
                '{"reload": "generation %d serving", "seconds": %.2f}', self.generation, time.perf_counter() - started
            )
            return True

    def new_generation_on_disk(self) -> bool:
        """True when the root holds a complete generation other than the one serving and other than one
        that failed to load (--watch reloads then; a failed one is tried again once it changes)."""
        if self._state is None:
            return False
        state = self._state()
        return state is not None and state != self._loaded_state and state != self._failed_state

    def status(self) -> dict:
        with self._lock:
            retired = len(self._retired)
            engine = self._current
        return {
            "generation": self.generation,
            "loaded_at": self.loaded_at,
            "retired_still_finishing": retired,
            "last_error": self.last_error,
            "corpora": corpus_generations(engine),
            "unfinished_indexes": list(getattr(engine, "unfinished", [])),
        }

    def complete(self) -> bool:
        """Is the serving generation whole (no index of the root left out for want of its record)?"""
        return not getattr(self._current, "unfinished", [])

    def close(self) -> None:
        """Close every engine (at shutdown, once no call is running)."""
        with self._lock:
            engines = [self._current, *self._retired.values()]
            self._retired.clear()
        for engine in engines:
            engine.close()
        remove_lease(self._leased)
        self._leased = set()
