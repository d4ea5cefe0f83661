"""Hot swap: the engine new calls get, and the retired ones finishing the calls they started.

`searchd reload` (or SIGHUP) loads the root again beside the engine that is serving: every corpus and
index is opened and its lineage checked as at start-up. Only a complete, consistent load replaces the
current engine, in one step under a lock: a call takes its engine when it starts and keeps it to its
end (BatchSearch jobs too), so in-flight calls finish on the old generation and new calls see the new
one; a retired engine is closed when its last call leaves. A load that fails leaves the current engine
serving; the error is logged and reported by Info (`stats_json` -> `generation.last_error`). Indexes
are replaced on disk by renaming new folders over old ones (every indexer stage does), so the files a
retired engine has open or mapped stay readable until it closes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("searchd")


class EngineHolder:
    def __init__(self, engine, load: Callable[[], object] | None = None):
        """`engine`: the one loaded at start-up; `load`: makes a new one from the root (None: no reload)."""
        self._lock = threading.Lock()
        self._reloading = threading.Lock()
        self._current = engine
        self._users: dict[int, int] = {id(engine): 0}
        self._retired: dict[int, object] = {}
        self._load = load
        self.generation = 1
        self.loaded_at = time.time()
        self.last_error: dict | None = None

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
            engine.close()

    def reload(self) -> bool:
        """Load the root again and switch to it; False (the current engine serving on) when that fails.
        One reload at a time: a second request while one loads waits for it, then loads again."""
        if self._load is None:
            raise RuntimeError("this server was started without a way to reload")
        with self._reloading:
            started = time.perf_counter()
            try:
                engine = self._load()
            except Exception as error:  # noqa: BLE001 - any failure keeps the current generation serving
                self.last_error = {"at": time.time(), "error": f"{type(error).__name__}: {error}"[:2000]}
                log.error('{"reload": "failed, generation %d keeps serving", "error": %r}', self.generation,
                          self.last_error["error"])  # fmt: skip
                return False
            with self._lock:
                old = self._current
                self._current = engine
                self._users[id(engine)] = 0
                self.generation += 1
                self.loaded_at = time.time()
                self.last_error = None
                idle = self._users[id(old)] == 0
                if idle:
                    del self._users[id(old)]
                else:
                    self._retired[id(old)] = old
            if idle:
                old.close()
            log.info('{"reload": "generation %d serving", "seconds": %.2f}', self.generation,
                     time.perf_counter() - started)  # fmt: skip
            return True

    def status(self) -> dict:
        with self._lock:
            retired = len(self._retired)
        return {"generation": self.generation, "loaded_at": self.loaded_at, "retired_still_finishing": retired,
                "last_error": self.last_error}  # fmt: skip

    def close(self) -> None:
        """Close every engine (at shutdown, once no call is running)."""
        with self._lock:
            engines = [self._current, *self._retired.values()]
            self._retired.clear()
        for engine in engines:
            engine.close()
