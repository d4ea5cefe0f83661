"""Everything searchd holds in memory: the corpora under a root, their indexes, and hybrid search.

Discovery follows the corpus-root layout of docs/design.md: every `ROOT/<name>/` with a corpusbuild
build.json is a corpus; its `store/` is required, `bm25/` and every `dense-<name>/` index are used
when present, each a retriever named after its folder (`bm25`, `dense-medcpt`, `dense-bge-base`). One
query encoder is loaded per distinct encoder identity and shared by every index built with it, across
corpora. Every index is opened through the indexer's classes, which check lineage and counts, so a
mismatch stops the server at start-up with the indexer's message.

Concurrency: BM25 requests of all corpora are micro-batched into batch searches (indexer.bm25) over
several Lucene threads, made by one batcher thread, the only Python thread that calls into the JVM
(pyjnius is not safe to drive from several threads at once). Dense requests are micro-batched too:
one encoder call for the whole batch, then one FAISS search per corpus for all of its vectors.
"""

from __future__ import annotations

import re
import threading
import time
from collections import defaultdict
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from indexer.dense import DenseIndex
from indexer.jvm import detach_thread
from indexer.kinds import IndexKind, kind_of_record
from indexer.store import SnippetStore
from medsnip.buildrecord import BUILD_RECORD, read_build_record
from medsnip.corpus import Corpus, LineageError, served_index_folders
from medsnip.encoders import DenseEncoder
from medsnip.languages import is_cjk_char
from medsnip.serving import SERVE_FILE, ServePlan
from searchd.batching import MicroBatcher
from searchd.calls import CallScope, QueryRefused
from searchd.fusion import DEFAULT_RRF_K, FusedHit, fuse_medrag, fuse_rrf

BM25 = "bm25"
ALL_DENSE = "dense"  # in a request: every dense retriever of each corpus searched


MAX_CLAUSES = 1024  # Lucene's IndexSearcher.maxClauseCount default, which Anserini keeps


def refuse_too_many_terms(text: str) -> None:
    """Lucene searches a query's distinct terms as one clause each, and refuses more than MAX_CLAUSES: a
    query with more distinct words is refused here, for its caller alone (a batch it joined would fail
    whole; MicroBatcher also serves a failed batch again item by item for what this cannot foresee)."""
    words = distinct_terms(text)
    if words > MAX_CLAUSES:
        raise QueryRefused(
            f"query has {words:,} distinct words, more distinct terms than BM25 can search at once "
            f"(Lucene's limit of {MAX_CLAUSES:,} clauses): shorten it"
        )


def distinct_terms(text: str) -> int:
    """At most how many distinct terms any of searchd's analyzers makes of `text`: its words, and in runs of Han,
    kana or Hangul each character and each pair of neighbours (English's analyzer makes a term of each CJK
    character, the CJK one of each pair; `\\w+` would count a whole run as one word)."""
    lowered = text.lower()
    terms = set(re.findall(r"\w+", "".join(" " if is_cjk_char(c) else c for c in lowered)))
    for run in re.findall(r"\w+", "".join(c if is_cjk_char(c) else " " for c in lowered)):
        terms.update(f"\x00{c}" for c in run)
        terms.update(f"\x01{a}{b}" for a, b in zip(run, run[1:], strict=False))
    return len(terms)


class ServingError(Exception):
    """The root cannot be served (no corpus, a missing store, a lineage mismatch)."""


@dataclass
class LoadedCorpus:
    name: str
    corpus: Corpus
    store: SnippetStore
    text: dict[str, object] = field(default_factory=dict)  # text retrievers (BM25) by name (their folder)
    text_kinds: dict[str, IndexKind] = field(default_factory=dict)
    dense: dict[str, DenseIndex] = field(default_factory=dict)  # retriever name (its folder) -> index
    dense_batchers: dict[str, MicroBatcher] = field(default_factory=dict)  # one per encoder, shared

    @property
    def retrievers(self) -> list[str]:
        return sorted(self.text) + sorted(self.dense)

    def indexes(self) -> list[tuple[str, object]]:
        """(retriever name, index), the text retrievers (BM25) first."""
        return sorted(self.text.items()) + sorted(self.dense.items())

    def wanted(self, retrievers: list[str]) -> list[str]:
        """This corpus's retrievers among those a request names ("dense": all of its dense ones)."""
        return [r for r in self.retrievers if r in retrievers or (r in self.dense and ALL_DENSE in retrievers)]


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
    fusion: str = "rrf"  # medsnip.serving.FUSIONS
    nprobe: int | None = None  # IVF lists to visit; None: the server's default
    refine: int | None = None  # exact re-ranking factor; None: the server's, else each index's own


class DenseAsk(NamedTuple):
    """One query's request to a dense batcher: its (corpus, retriever) targets and list depth, the
    request's nprobe and refine (None: the defaults) and k (re-ranking covers at least refine x k)."""

    text: str
    depth: int
    targets: tuple[tuple[str, str], ...]
    nprobe: int | None
    refine: int | None
    k: int


STAGES = ("encoder", "faiss", "lucene", "fusion", "store", "messages", "json")  # where a search's time goes


@dataclass
class EngineStats:
    bm25_batches: int = 0
    encoder_batches: int = 0
    queries: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))  # summed per stage

    def timed(self, stage: str, began: float) -> None:
        """Add the time since `began` (time.perf_counter) to `stage`'s sum."""
        spent = time.perf_counter() - began
        with self.lock:
            self.seconds[stage] += spent

    def as_dict(self, encoders) -> dict:
        """The counters, and the queries each dense encoder cut at its query max length."""
        with self.lock:
            values = {
                "queries": self.queries,
                "bm25_batches": self.bm25_batches,
                "encoder_batches": self.encoder_batches,
                "seconds": {stage: round(value, 6) for stage, value in self.seconds.items()},
            }
        values["truncated_queries"] = {encoder.spec.name: encoder.truncated["queries"] for encoder in encoders}
        return values


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
        own = root / "build.json"
        if own.is_file() and str(read_build_record(root).get("stage", "")).startswith("corpusbuild."):
            raise ServingError(
                f"{root} is a corpus folder, not a root: serve its parent (searchd serve --root {root.parent}), "
                f"or one corpus of it with --corpora {root.name}"
            )
        raise ServingError(f"{root}: no corpus folders (ROOT/<source>/build.json from corpusbuild)")
    return found


# Query encoders batch up to this many queries (BM25's batches stay at max_batch): a BatchSearch of hundreds
# or thousands of queries (an RL rollout step) fills them, and the encoder's length buckets are fuller in a big
# batch (MiniLM on 2 CPU cores encoded 512 BioASQ questions in 1,173 ms at once, 8 x 167 ms in batches of 64).
# While other callers wait, the batcher shortens its batches (searchd.batching).
DENSE_MAX_BATCH = 1024


class SearchEngine:
    def __init__(
        self,
        root: Path,
        corpora: list[str] | None = None,
        lucene_threads: int = 2,
        max_batch: int = 256,
        wait_ms: float = 2.0,
        device: str = "auto",
        independent_queries: bool = True,
        nprobe: int | None = None,
        previous: SearchEngine | None = None,
        refine: int | None = None,
    ):
        """`independent_queries`: encode each query's vector independently of its micro-batch (exactly
        reproducible dense scores; see DenseEncoder.encode_queries) or pad batches (faster). `nprobe`: the
        default for IVF indexes (a request may ask for another). `previous`: the generation serving now; a
        query encoder of the same identity is taken from it rather than loaded again (a reload then holds
        one copy of each model, not two). `refine`: the re-ranking factor of dense indexes built for it
        [default: each index's own]. The root's serve.json (medsnip.serving) gives the retrievers and
        fusion a request gets when it names none."""
        self.root = Path(root)
        self.independent_queries = independent_queries
        self.corpora: dict[str, LoadedCorpus] = {}
        self.stats = EngineStats()
        self._lucene_threads = lucene_threads
        encoders: dict[str, tuple[DenseEncoder, MicroBatcher]] = {}
        self._encoders = encoders
        # Lucene runs in the JVM: the worker detaches as it ends, or each generation would leave a Java thread
        self._text_batcher = MicroBatcher(self._text_batch, max_batch, wait_ms, "bm25", on_exit=detach_thread)
        self.unfinished: list[str] = []  # "corpus/index" folders without a build record, not served
        serving = {"nprobe": nprobe, "device": device, "refine": refine}
        try:
            self.serve_plan = ServePlan.read(self.root)
            for path in discover_corpora(self.root, corpora):
                corpus = Corpus.open(path)
                if not (path / "store" / BUILD_RECORD).is_file():
                    raise ServingError(f"{path}: no snippet store (run `indexer store {path}`)")
                loaded = LoadedCorpus(path.name, corpus, SnippetStore(path / "store", corpus))
                folders = served_index_folders(path)
                # an index folder without its record: a build under way, killed or out of disk. Served
                # without it, but never silently: Info lists it and the generation health is NOT_SERVING
                self.unfinished += [f"{path.name}/{f.name}" for f in folders if not (f / BUILD_RECORD).is_file()]
                for folder in (f for f in folders if (f / BUILD_RECORD).is_file() and f.name != "store"):
                    kind = kind_of_record(read_build_record(folder))
                    if kind is None or kind.role == "store":
                        raise ServingError(
                            f"{folder}: a {read_build_record(folder).get('stage')} build, not an "
                            "index searchd knows (indexer.kinds)"
                        )
                    # --device places FAISS too: auto searches on the GPUs when faiss-gpu sees any
                    index = kind.open(folder, corpus, store=loaded.store, **serving)
                    if kind.role == "text":
                        loaded.text[folder.name], loaded.text_kinds[folder.name] = index, kind
                    else:
                        self._add_dense(loaded, folder.name, index, previous, device, max_batch, wait_ms)
                if not loaded.retrievers:
                    raise ServingError(f"{path}: no index to search (run `indexer bm25` and/or `indexer dense`)")
                self.corpora[path.name] = loaded
            missing = [name for name in self.serve_plan.retrievers if name not in self.retrievers]
            if missing:
                raise ServingError(
                    f"{self.root / SERVE_FILE}: serves {', '.join(missing)}, which no corpus of the "
                    f"root has (it has {', '.join(self.retrievers)})"
                )
        except (LineageError, ValueError) as error:
            self.close()
            raise ServingError(str(error)) from error

    def _add_dense(
        self, loaded: LoadedCorpus, name: str, index: DenseIndex, previous, device: str, max_batch: int, wait_ms: float
    ) -> None:
        """A dense index served with the query encoder of its identity: one per identity, shared by every
        index built with it (and taken over from the previous generation when it had one)."""
        key = repr(sorted(index.record["encoder"].items()))
        if key not in self._encoders:
            reused = previous.encoder_models.get(key) if previous is not None else None
            encoder = reused or DenseEncoder(index.spec, device=device, queries_only=True)
            batcher = MicroBatcher(self._dense_batch(encoder), max(max_batch, DENSE_MAX_BATCH), wait_ms, "dense")
            self._encoders[key] = (encoder, batcher)
        index.encoder = self._encoders[key][0]
        index.check_encoder(self._encoders[key][0])
        loaded.dense[name] = index
        loaded.dense_batchers[name] = self._encoders[key][1]

    # -- batch functions (each runs in its batcher's thread) --

    def _text_batch(self, items: list[tuple[str, str, str, int, float | None, float | None]]) -> list:
        """(corpus, retriever, text, depth, k1, b) items -> hits: one batched search per (corpus, retriever,
        depth, k1, b), given the request options its kind takes (BM25: Lucene threads, k1, b)."""
        with self.stats.lock:
            self.stats.bm25_batches += 1
        groups: dict[tuple, list[int]] = defaultdict(list)
        for position, (corpus, retriever, _, depth, k1, b) in enumerate(items):
            groups[(corpus, retriever, depth, k1, b)].append(position)
        results: list = [None] * len(items)
        for (corpus, retriever, depth, k1, b), positions in groups.items():
            texts = [items[p][2] for p in positions]
            loaded = self.corpora[corpus]
            offered = {"threads": self._lucene_threads, "k1": k1, "b": b}
            options = {key: offered[key] for key in loaded.text_kinds[retriever].search_options}
            began = time.perf_counter()
            found = loaded.text[retriever].search(texts, depth, **options)
            self.stats.timed("lucene", began)
            for position, hits in zip(positions, found, strict=True):
                results[position] = hits
        return results

    def _dense_batch(self, encoder: DenseEncoder):
        def run(items: list[DenseAsk]) -> list[dict]:
            """DenseAsk items -> {(corpus, retriever): hits}: one encoder call for the batch, then one FAISS
            search per target index, nprobe and refine for all the vectors that want it."""
            with self.stats.lock:
                self.stats.encoder_batches += 1
            began = time.perf_counter()
            vectors = encoder.encode_queries([item.text for item in items], independent=self.independent_queries)
            self.stats.timed("encoder", began)
            results: list[dict] = [{} for _ in items]
            wanted = sorted(
                {(t, item.nprobe or 0, item.refine) for item in items for t in item.targets},
                key=lambda want: (want[0], want[1], -1 if want[2] is None else want[2]),
            )
            for target, nprobe, refine in wanted:
                corpus, retriever = target
                loaded = self.corpora[corpus]
                asks = (target, nprobe, refine)
                rows = [
                    i
                    for i, item in enumerate(items)
                    if asks == (target, item.nprobe or 0, item.refine) and target in item.targets
                ]
                depth = max(items[i].depth for i in rows)
                index = loaded.dense[retriever]
                factor = index.refine if refine is None else refine
                # re-ranked: every hit of the list, and at least refine x k, the hits the fused top k come from
                candidates = max(depth, factor * max(items[i].k for i in rows)) if factor > 1 else 0
                began = time.perf_counter()
                found = index.search_vectors(vectors[rows], depth, nprobe or None, candidates=candidates)
                for i, hits in zip(rows, found, strict=True):
                    results[i][target] = [(loaded.store.id_at(s, r), score) for s, r, score in hits[: items[i].depth]]
                self.stats.timed("faiss", began)
            return results

        return run

    # -- search --

    @property
    def retrievers(self) -> list[str]:
        """Every retriever some corpus has: the text ones ("bm25") first, then the dense ones by name."""
        text = {r for c in self.corpora.values() for r in c.text}
        dense = {r for c in self.corpora.values() for r in c.dense}
        return sorted(text) + sorted(dense - text)

    @property
    def default_retrievers(self) -> list[str]:
        """What a request that names no retriever searches: the root's served set, else every retriever."""
        return list(self.serve_plan.retrievers) or self.retrievers

    def search(self, query: Query, scope: CallScope) -> list[FusedHit]:
        """Every (corpus, retriever) list for the query, fused (`query.fusion`); gives up
        (CallCancelled, DeadlineExceeded) as soon as the call it serves is over, leaving its queued
        lists unserved."""
        return self.search_many([query], scope)[0]

    def search_many(self, queries: list[Query], scope: CallScope) -> list[list[FusedHit]]:
        """`search` for many queries at once (a BatchSearch): every list of every query is queued before
        any is waited for, so the micro-batchers serve them in full batches (one encoder call for up to
        `max_batch` queries) rather than a few at a time."""
        scope.check()
        with self.stats.lock:
            self.stats.queries += len(queries)
        asked = self._submit(queries, scope)
        scope.wait_all([future for text, dense in asked for future in (*text.values(), *dense)])
        fused = []
        began = time.perf_counter()
        for query, (text, dense) in zip(queries, asked, strict=True):
            lists: dict[tuple[str, str], list[tuple[str, float]]] = {}
            for future in dense:
                lists.update(future.result(0))
            for key, future in text.items():
                lists[key] = future.result(0)
            if query.fusion == "medrag":
                fused.append(fuse_medrag(lists, query.k, query.rrf_k, self.lower_is_better))
            else:
                fused.append(fuse_rrf(lists, query.k, query.rrf_k))
        self.stats.timed("fusion", began)
        return fused

    def fuses_ranks(self, corpora: list[str], retrievers: list[str], fusion: str) -> bool:
        """Whether a query's lists are fused by rank (RRF over several lists; MedRAG's fusion over several
        retrievers) rather than one list, or one retriever's lists merged by score, being the answer as it is."""
        lists = [(name, r) for name in corpora for r in self.corpora[name].wanted(retrievers)]
        if fusion == "medrag":
            return len({r for _, r in lists}) > 1
        return len(lists) > 1

    def check(self, query: Query) -> None:
        """Refuse (QueryRefused) a query one of its lists cannot search, before anything is queued: more distinct
        terms than a BM25 index searches at once. The servicer checks every query it builds (searchd.server)."""
        for name in query.corpora:
            loaded = self.corpora[name]
            for retriever in loaded.wanted(query.retrievers):
                if retriever in loaded.text and loaded.text_kinds[retriever].name == BM25:
                    refuse_too_many_terms(query.text)
                    return

    def _submit(self, queries: list[Query], scope: CallScope) -> list[tuple[dict, list]]:
        """Queue every list of every query, one submission per batcher (MicroBatcher.submit_many): per query,
        ({(corpus, retriever): text future}, [dense futures]). Dense asks go first: the encoder is the longest
        stage, and BM25 runs beside it."""
        text_items: list[tuple] = []
        text_owners: list[tuple[int, tuple[str, str]]] = []
        dense: dict[int, tuple[MicroBatcher, list[DenseAsk], list[int]]] = {}
        for number, query in enumerate(queries):
            dense_targets: dict[int, tuple[MicroBatcher, list[tuple[str, str]]]] = {}
            for name in query.corpora:
                loaded = self.corpora[name]
                for retriever in loaded.wanted(query.retrievers):
                    if retriever in loaded.text:
                        text_items.append((name, retriever, query.text, query.depth, query.k1, query.b))
                        text_owners.append((number, (name, retriever)))
                    else:
                        batcher = loaded.dense_batchers[retriever]
                        dense_targets.setdefault(id(batcher), (batcher, []))[1].append((name, retriever))
            for key, (batcher, targets) in dense_targets.items():
                ask = DenseAsk(query.text, query.depth, tuple(targets), query.nprobe, query.refine, query.k)
                _, asks, owners = dense.setdefault(key, (batcher, [], []))
                asks.append(ask)
                owners.append(number)
        dense_futures: list[list[Future]] = [[] for _ in queries]  # fusion sorts the lists: their order is free
        for batcher, asks, owners in dense.values():
            for number, future in zip(owners, batcher.submit_many(asks), strict=True):
                dense_futures[number].append(scope.track(future))
        asked: list[tuple[dict, list]] = [({}, futures) for futures in dense_futures]
        for (number, key), future in zip(text_owners, self._text_batcher.submit_many(text_items), strict=True):
            asked[number][0][key] = scope.track(future)
        return asked

    @property
    def lower_is_better(self) -> set[str]:
        """Dense retrievers whose scores are distances (an L2 index): merged by ascending score."""
        return {name for c in self.corpora.values() for name, index in c.dense.items() if index.metric == "l2"}

    def snippets(self, ids: list[str], corpora: list[str] | None = None) -> dict[str, dict]:
        """Snippets by id; `corpora[i]` (when known, as for search hits) says which store holds ids[i]."""
        found: dict[str, dict] = {}
        if corpora is not None:  # one read per store, for all of its ids
            by_corpus: dict[str, list[str]] = defaultdict(list)
            for snippet_id, name in zip(ids, corpora, strict=True):
                by_corpus[name].append(snippet_id)
            for name, wanted in by_corpus.items():
                for snippet_id, snippet in zip(wanted, self.corpora[name].store.get(wanted), strict=True):
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

    def stats_dict(self) -> dict:
        return self.stats.as_dict([encoder for encoder, _ in self._encoders.values()])

    @property
    def encoder_models(self) -> dict:
        """Each query encoder by its identity (what a reload's new generation may take over)."""
        return {key: encoder for key, (encoder, _) in getattr(self, "_encoders", {}).items()}

    def encoder_identity(self) -> dict | None:
        """The first dense query encoder's identity (Info's `encoder_json`, from before one server held
        several); each index's own is in its IndexInfo."""
        for encoder, _ in self._encoders.values():
            return encoder.identity()
        return None

    def close(self) -> None:
        """Stop the batchers (queued work fails with BatcherClosed), then unmap the stores and close the
        Lucene searchers and FAISS indexes, so a retired generation holds no file map (prune can free its
        disk). The server calls this only once no call is running: a search would find them closed. Every
        reference the batchers' threads and functions hold back to the engine is dropped too, so the
        generation is freed when its last holder lets go, not at some later garbage collection (until
        which each retired generation would stay: searchd would grow by a generation a reload)."""
        if getattr(self, "_text_batcher", None) is not None:
            self._text_batcher.close()
            self._text_batcher = None
        for _, batcher in getattr(self, "_encoders", {}).values():
            batcher.close()
        self._encoders = {}
        for loaded in self.corpora.values():
            loaded.store.close()
            for index in loaded.text.values():  # Lucene's readers and their file maps go with the generation
                index.close()
            loaded.text.clear()
            for index in loaded.dense.values():  # FAISS indexes (memory-mapped) and mapped embeddings
                index.close()
            loaded.dense.clear()
            loaded.dense_batchers.clear()
        self.corpora.clear()
