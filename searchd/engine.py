"""Everything searchd holds in memory: the corpora under a root, their indexes, and hybrid search.

Discovery follows DESIGN.md's corpus-root layout: every `ROOT/<name>/` with a corpusbuild
build.json is a corpus; its `store/` is required, `bm25/` and the `dense-*/` index are used when
present. Every index is opened through the indexer's classes, which check lineage and counts, so a
mismatch stops the server at start-up with the indexer's message.

Concurrency: BM25 requests of all corpora are micro-batched into pyserini batch_search calls over
several Lucene threads, made by one batcher thread, the only Python thread that calls into the JVM
(pyjnius is not safe to drive from several threads at once). Dense requests are micro-batched too:
one encoder call for the whole batch, then one FAISS search per corpus for all of its vectors.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from indexer.bm25 import BM25Index
from indexer.dense import DenseIndex
from indexer.encoders import DenseEncoder
from indexer.store import SnippetStore
from medsnip.buildrecord import BUILD_RECORD, read_build_record
from medsnip.corpus import Corpus, LineageError
from searchd.batching import MicroBatcher
from searchd.calls import CallScope
from searchd.fusion import DEFAULT_RRF_K, FusedHit, fuse_rrf

RETRIEVERS = ("bm25", "dense")


class ServingError(Exception):
    """The root cannot be served (no corpus, a missing store, a lineage mismatch)."""


@dataclass
class LoadedCorpus:
    name: str
    corpus: Corpus
    store: SnippetStore
    bm25: BM25Index | None = None
    dense: DenseIndex | None = None
    dense_batcher: MicroBatcher | None = None  # shared by the corpora whose index has the same encoder

    @property
    def retrievers(self) -> list[str]:
        return [name for name, index in (("bm25", self.bm25), ("dense", self.dense)) if index is not None]


@dataclass
class Query:
    """One search as the engine runs it (validated by the server first)."""

    text: str
    k: int
    corpora: list[str]
    retrievers: list[str]
    depth: int
    rrf_k: int = DEFAULT_RRF_K
    k1: float | None = None
    b: float | None = None


@dataclass
class EngineStats:
    bm25_batches: int = 0
    encoder_batches: int = 0
    queries: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def discover_corpora(root: Path, names: list[str] | None = None) -> list[Path]:
    """Corpus folders under `root` (those with a corpusbuild build.json), or the named ones."""
    root = Path(root)
    if names:
        found = [root / name for name in names]
        missing = [str(p) for p in found if not (p / BUILD_RECORD).is_file()]
        if missing:
            raise ServingError(f"not corpora (no build.json): {', '.join(missing)}")
        return found
    found = []
    for child in sorted(root.iterdir()) if root.is_dir() else []:
        record_path = child / BUILD_RECORD
        if record_path.is_file() and str(read_build_record(child).get("stage", "")).startswith("corpusbuild."):
            found.append(child)
    if not found:
        raise ServingError(f"{root}: no corpus folders (ROOT/<source>/build.json from corpusbuild)")
    return found


class SearchEngine:
    def __init__(
        self,
        root: Path,
        corpora: list[str] | None = None,
        lucene_threads: int = 2,
        max_batch: int = 64,
        wait_ms: float = 2.0,
        device: str = "auto",
        independent_queries: bool = True,
    ):
        """`independent_queries`: encode each query's vector independently of its micro-batch (exactly
        reproducible dense scores; see DenseEncoder.encode_queries) or pad batches (faster)."""
        self.root = Path(root)
        self.independent_queries = independent_queries
        self.corpora: dict[str, LoadedCorpus] = {}
        self.stats = EngineStats()
        self._lucene_threads = lucene_threads
        encoders: dict[str, tuple[DenseEncoder, MicroBatcher]] = {}
        self._encoders = encoders
        self._bm25_batcher = MicroBatcher(self._bm25_batch, max_batch, wait_ms, "bm25")
        try:
            for path in discover_corpora(self.root, corpora):
                corpus = Corpus.open(path)
                if not (path / "store" / BUILD_RECORD).is_file():
                    raise ServingError(f"{path}: no snippet store (run `indexer store {path}`)")
                loaded = LoadedCorpus(path.name, corpus, SnippetStore(path / "store", corpus))
                if (path / "bm25" / BUILD_RECORD).is_file():
                    loaded.bm25 = BM25Index(path / "bm25", corpus)
                dense_dirs = sorted(p for p in path.glob("dense-*") if (p / BUILD_RECORD).is_file())
                if dense_dirs:
                    loaded.dense = DenseIndex(dense_dirs[0], corpus, store=loaded.store)
                    key = repr(sorted(loaded.dense.record["encoder"].items()))
                    if key not in encoders:
                        encoder = DenseEncoder(loaded.dense.spec, device=device, queries_only=True)
                        batcher = MicroBatcher(self._dense_batch(encoder), max_batch, wait_ms, "dense")
                        encoders[key] = (encoder, batcher)
                    loaded.dense.encoder = encoders[key][0]
                    loaded.dense.check_encoder(encoders[key][0])
                    loaded.dense_batcher = encoders[key][1]
                if not loaded.retrievers:
                    raise ServingError(f"{path}: no index to search (run `indexer bm25` and/or `indexer dense`)")
                self.corpora[path.name] = loaded
        except LineageError as error:
            self.close()
            raise ServingError(str(error)) from error

    # -- batch functions (each runs in its batcher's thread) --

    def _bm25_batch(self, items: list[tuple[str, str, int, float | None, float | None]]) -> list:
        """(corpus, text, depth, k1, b) items -> hits, one batch_search per (corpus, depth, k1, b)."""
        with self.stats.lock:
            self.stats.bm25_batches += 1
        groups: dict[tuple, list[int]] = defaultdict(list)
        for position, (corpus, _, depth, k1, b) in enumerate(items):
            groups[(corpus, depth, k1, b)].append(position)
        results: list = [None] * len(items)
        for (corpus, depth, k1, b), positions in groups.items():
            texts = [items[p][1] for p in positions]
            index = self.corpora[corpus].bm25
            found = index.search(texts, depth, threads=self._lucene_threads, k1=k1, b=b)
            for position, hits in zip(positions, found, strict=True):
                results[position] = hits
        return results

    def _dense_batch(self, encoder: DenseEncoder):
        def run(items: list[tuple[str, int, tuple[str, ...]]]) -> list[dict[str, list[tuple[str, float]]]]:
            """(text, depth, corpora) items -> {corpus: hits}: one encoder call, one FAISS search per corpus."""
            with self.stats.lock:
                self.stats.encoder_batches += 1
            vectors = encoder.encode_queries([text for text, _, _ in items], independent=self.independent_queries)
            results: list[dict] = [{} for _ in items]
            for name in sorted({c for _, _, corpora in items for c in corpora}):
                loaded = self.corpora[name]
                rows = [i for i, (_, _, corpora) in enumerate(items) if name in corpora]
                depth = max(items[i][1] for i in rows)
                found = loaded.dense.search_vectors(vectors[rows], depth)
                for i, hits in zip(rows, found, strict=True):
                    results[i][name] = [(loaded.store.id_at(s, r), score) for s, r, score in hits[: items[i][1]]]
            return results

        return run

    # -- search --

    @property
    def retrievers(self) -> list[str]:
        return [r for r in RETRIEVERS if any(r in c.retrievers for c in self.corpora.values())]

    def search(self, query: Query, scope: CallScope) -> list[FusedHit]:
        """Every (corpus, retriever) list for the query, fused by RRF; gives up (CallCancelled,
        DeadlineExceeded) as soon as the call it serves is over, leaving its queued lists unserved."""
        scope.check()
        with self.stats.lock:
            self.stats.queries += 1
        bm25 = {}
        dense_corpora: dict[int, tuple[MicroBatcher, list[str]]] = {}
        for name in query.corpora:
            loaded = self.corpora[name]
            if "bm25" in query.retrievers and loaded.bm25 is not None:
                item = (name, query.text, query.depth, query.k1, query.b)
                bm25[(name, "bm25")] = scope.track(self._bm25_batcher.submit(item))
            if "dense" in query.retrievers and loaded.dense is not None:
                dense_corpora.setdefault(id(loaded.dense_batcher), (loaded.dense_batcher, []))[1].append(name)
        dense = [
            scope.track(batcher.submit((query.text, query.depth, tuple(names))))
            for batcher, names in dense_corpora.values()
        ]
        scope.wait_all([*dense, *bm25.values()])
        lists: dict[tuple[str, str], list[tuple[str, float]]] = {}
        for future in dense:
            for name, hits in future.result(0).items():
                lists[(name, "dense")] = hits
        for key, future in bm25.items():
            lists[key] = future.result(0)
        return fuse_rrf(lists, query.k, query.rrf_k)

    def snippets(self, ids: list[str], corpora: list[str] | None = None) -> dict[str, dict]:
        """Snippets by id; `corpora[i]` (when known, as for search hits) says which store holds ids[i]."""
        found: dict[str, dict] = {}
        if corpora is not None:
            for snippet_id, name in zip(ids, corpora, strict=True):
                snippet = self.corpora[name].store.get([snippet_id])[0]
                if snippet is not None:
                    found[snippet_id] = snippet
            return found
        for loaded in self.corpora.values():
            wanted = [i for i in ids if i not in found]
            if not wanted:
                break
            for snippet_id, snippet in zip(wanted, loaded.store.get(wanted), strict=True):
                if snippet is not None:
                    found[snippet_id] = snippet
        return found

    def encoder_identity(self) -> dict | None:
        for encoder, _ in self._encoders.values():
            return encoder.identity()
        return None

    def close(self) -> None:
        """Stop the batchers (queued work fails with BatcherClosed), then unmap the stores. The server
        calls this only once no call is running: a search still reading a store would find it unmapped."""
        if getattr(self, "_bm25_batcher", None) is not None:
            self._bm25_batcher.close()
        for _, batcher in getattr(self, "_encoders", {}).values():
            batcher.close()
        for loaded in self.corpora.values():
            loaded.store.close()
