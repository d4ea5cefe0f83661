"""Searching a built dense index: every shard searched for k and the hits merged by score, ties by (shard, row);
IVF lists probed, exact re-ranking from the stored embeddings, FAISS on GPUs where it sees any."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from indexer.dense.files import STAGE
from indexer.store import SnippetStore
from medsnip.corpus import Corpus, LineageError, open_index_record
from medsnip.encoders import DenseEncoder, EncoderSpec


class DenseIndex:
    """Searches every shard's FAISS index and merges exactly (see the module docstring)."""

    def __init__(
        self,
        path: Path,
        corpus: Corpus,
        encoder: DenseEncoder | None = None,
        nprobe: int | None = None,
        store: SnippetStore | None = None,
        device: str = "cpu",
        refine: int | None = None,
    ):
        """`store`: the corpus's snippet store when the caller already has it open (else opened on use).
        `device`: where FAISS searches: "cpu" (memory-mapped files), "cuda" (every shard copied to the
        GPUs, round-robin; an error without faiss-gpu and a GPU), or "auto" (the GPUs when FAISS sees any).
        `refine`: re-rank refine x k candidates exactly from the kept embeddings [default: the index's own,
        `indexer dense --refine`; 0 or 1: no re-ranking]. `nprobe` [default: the index's own, `indexer dense
        --nprobe`, else FAISS's 1]."""
        import faiss

        self.path = Path(path)
        record = self.record = open_index_record(self.path, STAGE, "dense index", corpus)
        self.corpus = corpus
        self.metric = record["params"]["metric"]
        self.dimension = record["encoder"]["dimension"]
        self.refine = record["params"].get("refine", 0) if refine is None else refine
        nprobe = nprobe or record["params"].get("nprobe") or None  # the server's, else the index's own
        self._indexes = []
        for shard, entry in zip(corpus.shards, record["shards"], strict=True):
            index = _read_index(self.path / entry["faiss"])
            if index.ntotal != shard.records or entry["rows"] != shard.records:
                raise LineageError(f"{self.path / entry['faiss']}: {index.ntotal} rows, shard has {shard.records}")
            if nprobe is not None and faiss.try_extract_index_ivf(index) is not None:  # others have no lists
                faiss.ParameterSpace().set_index_parameter(index, "nprobe", nprobe)
            self._indexes.append(index)
        self._embeddings: list | None = None  # memory-mapped on the first re-ranking search
        self.device = resolve_faiss_device(device)
        self._quantizer = None
        if self.device == "cuda":
            self._gpu_resources, self._indexes = indexes_to_gpus(self._indexes)
        elif "training" in record:  # every shard started from one trained index: one coarse quantizer serves all
            self._quantizer = share_coarse_quantizer(self._indexes)
        self.encoder = encoder
        if encoder is not None:
            self.check_encoder(encoder)
        self._store = store

    @classmethod
    def open(cls, path: Path, corpus_path: Path | None = None, **kwargs) -> DenseIndex:
        path = Path(path)
        return cls(path, Corpus.open(corpus_path or path.parent), **kwargs)

    @property
    def spec(self) -> EncoderSpec:
        return EncoderSpec.from_dict(self.record["encoder"])

    def check_encoder(self, encoder: DenseEncoder) -> None:
        """Refuse a query encoder other than the one this index was built for. The recorded spec is read
        through EncoderSpec, so a field added since the index was built counts at its default."""
        recorded = self.record["encoder"]
        built = {**recorded, **self.spec.to_dict()}
        actual = encoder.identity()
        keys = [
            k
            for k in (
                "model",
                "query_model",
                "pooling",
                "normalize",
                "query_prefix",
                "document_prefix",
                "dimension",
                "weights_sha256",
                "query_weights_sha256",
            )
            if built.get(k) != actual.get(k)
        ]
        if keys:
            details = ", ".join(f"{k}: index {built.get(k)!r} vs encoder {actual.get(k)!r}" for k in keys)
            raise LineageError(f"{self.path} was built with another encoder ({details})")

    @property
    def is_ivf(self) -> bool:
        """Whether the shards are IVF indexes (so `nprobe` means something)."""
        import faiss

        return bool(self._indexes) and faiss.try_extract_index_ivf(self._indexes[0]) is not None

    def search_vectors(
        self,
        vectors: np.ndarray,
        k: int,
        nprobe: int | None = None,
        refine: int | None = None,
        candidates: int | None = None,
    ) -> list[list[tuple[int, int, float]]]:
        """Top-k (shard, row, score) per query vector, best first, over all shards. `nprobe`: inverted
        lists an IVF index visits for this call (thread-safe search parameters; the index's own setting
        is untouched); ignored by other index types. `refine` (else the index's): the best refine x k
        candidates by the index's compressed codes are scored again exactly against their float16
        embeddings, memory-mapped from the index folder, and the best k of those are returned;
        `candidates` sets that count directly (searchd: max(depth, refine x the request's k); 0: no
        re-ranking)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dimension:
            raise ValueError(f"query vectors must be (n, {self.dimension}), got {vectors.shape}")
        if candidates is None:
            factor = self.refine if refine is None else refine
            candidates = k * factor if factor > 1 else 0
        if not candidates:  # no re-ranking: the index's own scores
            return self._candidates(vectors, k, nprobe)
        found = self._candidates(vectors, max(candidates, k), nprobe)
        return [self._rescored(vectors[query], hits, k) for query, hits in enumerate(found)]

    def _candidates(self, vectors: np.ndarray, k: int, nprobe: int | None) -> list[list[tuple[int, int, float]]]:
        """Top-k (shard, row, score) by the indexes' own scores, merged over the shards."""
        nprobe = nprobe or (self._quantizer.nprobe if self._quantizer is not None else None)
        params = _ivf_params(self._indexes[0], nprobe) if nprobe and self._indexes else None
        assigned = None
        if self._quantizer is not None:  # the lists to visit are found once for all shards
            assigned = self._quantizer.index.search(vectors, params.nprobe)
        found_scores, found_rows, found_shards = [], [], []
        for shard, index in enumerate(self._indexes):
            take = min(k, index.ntotal)
            if take == 0:
                continue
            if assigned is not None:
                centroid_scores, lists = assigned
                scores, rows = _search_preassigned(
                    self._quantizer.ivfs[shard], vectors, take, lists, centroid_scores, params
                )
            elif params:
                scores, rows = index.search(vectors, take, params=params)
            else:
                scores, rows = index.search(vectors, take)
            found_scores.append(scores)
            found_rows.append(rows)
            found_shards.append(np.full(rows.shape, shard, dtype=np.int64))
        if not found_scores:
            return [[] for _ in range(len(vectors))]
        scores, rows, shards = (np.concatenate(part, axis=1) for part in (found_scores, found_rows, found_shards))
        # Best first, ties by (shard, row): the same order as sorting (score, shard, row) tuples, built in
        # numpy so only the k kept hits of each query become Python objects.
        sort_scores = -scores if self.metric == "ip" else scores
        results = []
        for query in range(len(vectors)):
            valid = rows[query] >= 0
            query_scores, query_rows, query_shards = scores[query][valid], rows[query][valid], shards[query][valid]
            order = np.lexsort((query_rows, query_shards, sort_scores[query][valid]))[:k]
            kept = (query_shards[order].tolist(), query_rows[order].tolist(), query_scores[order].tolist())
            results.append(list(zip(*kept, strict=True)))
        return results

    def _rescored(self, vector: np.ndarray, found: list[tuple[int, int, float]], k: int) -> list[tuple]:
        """The best k of `found` by exact scores against the kept float16 embeddings."""
        if not found:
            return []
        if self._embeddings is None:
            self._embeddings = [
                np.load(self.path / entry["embeddings"], mmap_mode="r") for entry in self.record["shards"]
            ]
        shards = np.fromiter((shard for shard, _, _ in found), dtype=np.int64, count=len(found))
        rows = np.fromiter((row for _, row, _ in found), dtype=np.int64, count=len(found))
        exact = np.empty(len(found), dtype=np.float32)
        for shard in np.unique(shards):
            mine = np.flatnonzero(shards == shard)
            order = mine[np.argsort(rows[mine])]  # rows in file order: fewer, sequential page reads
            stored = self._embeddings[shard][rows[order]].astype(np.float32)
            if self.metric == "ip":
                exact[order] = stored @ vector
            else:
                exact[order] = ((stored - vector) ** 2).sum(axis=1)
        best = np.lexsort((rows, shards, -exact if self.metric == "ip" else exact))[:k]
        return list(zip(shards[best].tolist(), rows[best].tolist(), exact[best].tolist(), strict=True))

    def search(self, queries: list[str] | np.ndarray, k: int = 10) -> list[list[tuple[str, float]]]:
        """Top-k (snippet id, score) per query text (encoded with the index's query encoder) or vector."""
        if isinstance(queries, np.ndarray):
            vectors = queries
        else:
            if self.encoder is None:
                raise ValueError("this DenseIndex was opened without an encoder: pass vectors or an encoder")
            vectors = self.encoder.encode_queries(list(queries))
        store = self.store()
        return [
            [(store.id_at(shard, row), score) for shard, row, score in hits] for hits in self.search_vectors(vectors, k)
        ]

    def close(self) -> None:
        """Let go of the shards' FAISS indexes and the mapped embeddings (each shard's quantizer given back
        first: see SharedQuantizer). Searching afterwards is an error."""
        if getattr(self, "_quantizer", None) is not None:
            self._quantizer.restore()
            self._quantizer = None
        self._indexes = []
        self._embeddings = None

    def __del__(self):
        self.close()

    def store(self) -> SnippetStore:
        """The corpus's snippet store (row -> id), opened on first use."""
        if self._store is None:
            self._store = SnippetStore(self.corpus.path / "store", self.corpus)
        return self._store


class SharedQuantizer:
    """The coarse quantizer every IVF shard of one index shares (they all started from one trained index),
    searched once per query batch instead of once per shard, its centroids in memory once."""

    def __init__(self, ivfs: list):
        self.ivfs = ivfs  # each shard's IVF level, searched with the lists found once
        self.index = ivfs[0].quantizer
        self.nprobe = ivfs[0].nprobe
        # Every other shard's own quantizer, kept (and given back by restore) rather than deleted: FAISS
        # deletes what an index owns with the index, and deleting it from Python instead crashed the
        # interpreter's last collection once a search had run in another thread (FAISS 1.15). Nothing
        # reads them meanwhile, so their mapped pages stay on disk.
        self.own = [ivf.quantizer for ivf in ivfs[1:]]
        for ivf in ivfs[1:]:
            ivf.quantizer = self.index

    def restore(self) -> None:
        """Give every shard its own quantizer back, before the shards' indexes are deleted (each deletes
        its own: the shared one must be deleted once, by the first shard)."""
        for ivf, own in zip(self.ivfs[1:], self.own, strict=True):
            ivf.quantizer = own
        self.own = []


def _search_preassigned(ivf, vectors: np.ndarray, k: int, lists: np.ndarray, centroid_scores: np.ndarray, params):
    """An IVF level's top k for queries whose lists are already chosen (FAISS's Python wrapper of
    search_preassigned takes no search parameters, and nprobe must come from them to stay per call)."""
    import faiss

    count = len(vectors)
    scores = np.empty((count, k), dtype=np.float32)
    rows = np.empty((count, k), dtype=np.int64)
    lists = np.ascontiguousarray(lists, dtype=np.int64)
    centroid_scores = np.ascontiguousarray(centroid_scores, dtype=np.float32)
    ivf.search_preassigned_c(
        count,
        faiss.swig_ptr(vectors),
        k,
        faiss.swig_ptr(lists),
        faiss.swig_ptr(centroid_scores),
        faiss.swig_ptr(scores),
        faiss.swig_ptr(rows),
        False,
        params,
    )
    return scores, rows


def share_coarse_quantizer(indexes: list) -> SharedQuantizer | None:
    """Point every shard's IVF at the first shard's coarse quantizer (at MedCorp scale each shard's copy
    is lists x dimension x 4 bytes: 201 MB at 65,536 lists and 768 d). None (nothing changed) for indexes
    without plain inverted lists (Flat, HNSW, or behind a transform such as OPQ, whose queries must be
    transformed before the quantizer sees them)."""
    import faiss

    if not indexes or any(isinstance(index, faiss.IndexPreTransform) for index in indexes):
        return None
    ivfs = [faiss.try_extract_index_ivf(index) for index in indexes]
    if any(ivf is None for ivf in ivfs):
        return None
    if any(ivf.nlist != ivfs[0].nlist or ivf.quantizer.d != ivfs[0].quantizer.d for ivf in ivfs):
        return None
    return SharedQuantizer(ivfs)


def faiss_gpus() -> int:
    """GPUs FAISS can use (0 with faiss-cpu)."""
    import faiss

    return faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0


def resolve_faiss_device(device: str) -> str:
    if device not in ("cpu", "cuda", "auto"):
        raise ValueError(f"FAISS device must be cpu, cuda or auto, got {device!r}")
    if device == "auto":
        return "cuda" if faiss_gpus() else "cpu"
    if device == "cuda" and not faiss_gpus():
        raise ValueError(
            "FAISS sees no GPU: install the gpu extra (faiss-gpu) on a CUDA machine, or search on the CPU "
            "(--device cpu)"
        )
    return device


def indexes_to_gpus(indexes: list) -> tuple[list, list]:
    """Each shard's index copied to a GPU (shard i on GPU i mod n), with one scratch-memory pool per GPU.
    IVF-PQ shards use float16 lookup tables (half the GPU shared memory, the usual GPU setting); Flat
    and SQ shards keep their own precision, so a GPU Flat search returns the CPU's hits."""
    import faiss

    count = faiss_gpus()
    resources = [faiss.StandardGpuResources() for _ in range(count)]
    moved = []
    for shard, index in enumerate(indexes):
        options = faiss.GpuClonerOptions()
        ivf = faiss.try_extract_index_ivf(index)
        options.useFloat16 = ivf is not None and isinstance(ivf, faiss.IndexIVFPQ)
        moved.append(faiss.index_cpu_to_gpu(resources[shard % count], shard % count, index, options))
    return resources, moved


def _ivf_params(index, nprobe: int):
    """FAISS search parameters setting `nprobe` for an IVF index (behind an OPQ/PCA transform too), or
    None for an index without inverted lists."""
    import faiss

    if faiss.try_extract_index_ivf(index) is None:
        return None
    ivf = faiss.SearchParametersIVF(nprobe=int(nprobe))
    if isinstance(index, faiss.IndexPreTransform):
        wrapped = faiss.SearchParametersPreTransform()
        wrapped.index_params = ivf
        wrapped.ivf = ivf  # keep the Python object (and the C++ one it owns) alive with the wrapper
        return wrapped
    return ivf


def _read_index(path: Path):
    """A FAISS index memory-mapped where the type allows it, else read into memory.

    IO_FLAG_MMAP_IFC maps the codes in place and keeps FAISS's ordinary in-memory list type. The older
    IO_FLAG_MMAP turns IVF lists into OnDiskInvertedLists, whose per-list bookkeeping made one query at
    nprobe 32 cost 1.1 ms per shard instead of 0.05 ms (measured on a 7,400-vector IVF1024,SQ8 shard).

    An L2 IVF-PQ index is read without its precomputed distance table (IO_FLAG_SKIP_PRECOMPUTE_TABLE):
    FAISS would otherwise build lists x M x 256 floats per shard at load, 400 MB for IVF4096,PQ96 and
    1.6 GB at 16,384 lists, for a per-list table searches then compute as they go instead."""
    import faiss

    skip = getattr(faiss, "IO_FLAG_SKIP_PRECOMPUTE_TABLE", 0)
    flags = [faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY | skip]
    if hasattr(faiss, "IO_FLAG_MMAP_IFC"):  # FAISS >= 1.10
        flags.insert(0, faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY | skip)
    for flag in flags:
        try:
            return faiss.read_index(str(path), flag)
        except RuntimeError:
            continue
    return faiss.read_index(str(path), skip)
