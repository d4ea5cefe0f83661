"""Dense indexes: snippet embeddings per corpus shard, one FAISS index per shard, exact top-k merge.

Build, per corpus shard s: embeddings of its snippets in row order saved as float16
`emb-s.npy` (each written atomically, so a killed run resumes at the first shard without one), then
one FAISS index per shard from any `index_factory` string; a type that needs training is trained once,
on a seeded sample of all embeddings, and every shard's index starts from that trained copy (kept as
trained.index and reused by later builds of an updated corpus until RETRAIN_SHARE of the vectors
were embedded after it: _trained_template). Indexes
are written as CPU indexes and opened memory-mapped where FAISS supports it. FAISS row i of shard s is
the i-th snippet of shard s (the corpus row mapping), checked by counts at open time.

Search: every shard is searched for k and the hits are merged by score, ties broken by (shard, row),
so a sharded Flat index returns exactly what one Flat index over all vectors returns.
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import orjson

from indexer.dense.device_loop import compile_model, embed_windows
from indexer.dense.feeding import (
    FEEDER_TIMEOUT,
    BatchPlan,
    FeederError,
    Feeders,
    SnippetWindow,
    text_digest,
    tokenizer_settings,
)
from indexer.store import SnippetStore
from medsnip.buildrecord import read_complete_record, sha256_file, write_build_record
from medsnip.corpus import Corpus, LineageError, index_record, open_index_record
from medsnip.encoders import DenseEncoder, EncoderSpec, TextEncoder
from medsnip.generations import keep_index
from medsnip.processes import remove_stale_temps

STAGE = "indexer.dense"
TRAIN_SAMPLE_SEED = 20261122
TRAIN_SAMPLE_MAX = 256 * 1024
TRAINED = "trained.index"  # the trained, empty index every shard starts from (kept for the next build)
RETRAIN_SHARE = 0.20  # retrain once the vectors embedded since training pass this share of the index


def _emb_name(shard: int) -> str:
    return f"emb-{shard:05d}.npy"


def _faiss_name(shard: int) -> str:
    return f"faiss-{shard:05d}.index"


def _save_atomic_npy(path: Path, array: np.ndarray) -> None:
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(temp, "wb") as handle:
        np.save(handle, array)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def _metric(name: str) -> int:
    import faiss

    metrics = {"ip": faiss.METRIC_INNER_PRODUCT, "l2": faiss.METRIC_L2}
    if name not in metrics:
        raise ValueError(f"metric must be 'ip' or 'l2', got {name!r}")
    return metrics[name]


def load_encoder(
    spec: dict, dtype: str, torch_threads: int | None, compile_model_too: bool, device: str
) -> DenseEncoder:
    """A device worker's setup (executor.run_on_devices): the snippet encoder loaded once on `device`.
    CPU workers sharing a machine split its cores (`torch_threads` each) instead of oversubscribing."""
    if torch_threads and device == "cpu":
        import torch

        torch.set_num_threads(torch_threads)
    encoder = DenseEncoder(EncoderSpec.from_dict(spec), device=device, dtype=dtype)
    if compile_model_too and isinstance(encoder.documents, TextEncoder):
        compile_model(encoder.documents)
    return encoder


@dataclass
class ShardWork:
    """One shard's embedding in progress: its rows' text digests (`keys`), the vectors and cut flags of
    the rows embedded now (`embedded`), and the shard's earlier embeddings (`previous`, see
    _previous_rows) for the rows whose text has not changed."""

    task: dict
    started: float
    keys: np.ndarray
    previous: tuple | None
    vectors: np.ndarray
    cut: np.ndarray
    embedded: np.ndarray | None = None

    @classmethod
    def start(cls, task: dict, rows: int, dimension: int, started: float) -> ShardWork:
        """The shard's vectors are written straight into a memory-mapped temp file beside the output
        (renamed into place by `finish`): a big shard's vectors never have to fit in memory."""
        out = Path(task["out"])
        if rows:
            temp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
            vectors = np.lib.format.open_memmap(temp, mode="w+", dtype=np.float16, shape=(rows, dimension))
        else:
            vectors = np.zeros((0, dimension), dtype=np.float16)
        return cls(
            task,
            started,
            np.zeros((rows, 16), dtype=np.uint8),
            _previous_rows(out),
            vectors,
            np.zeros(rows, dtype=bool),
        )

    @property
    def rows(self) -> int:
        return len(self.keys)

    def _publish_vectors(self, out: Path) -> None:
        if not isinstance(self.vectors, np.memmap):
            _save_atomic_npy(out, self.vectors)
            return
        self.vectors.flush()
        temp = Path(self.vectors.filename)
        with open(temp, "rb+") as handle:
            os.fsync(handle.fileno())
        self.vectors = np.zeros((0, self.vectors.shape[1]), dtype=np.float16)  # unmapped before the rename
        os.replace(temp, out)

    def take(self, rows: np.ndarray, vectors: np.ndarray, cut: np.ndarray) -> None:
        self.vectors[rows], self.cut[rows] = vectors.astype(np.float16), cut
        self.embedded = rows if self.embedded is None else np.concatenate((self.embedded, rows))

    def finish(self, documents) -> dict:
        """Rows not embedded now take their earlier vectors; the shard's files are written (embed_shards)."""
        embedded = np.zeros(0, dtype=np.int64) if self.embedded is None else self.embedded
        mask = np.ones(self.rows, dtype=bool)
        mask[embedded] = False
        reused = np.flatnonzero(mask)
        if len(reused):
            rows_before, vectors, cut = self.previous
            old = np.fromiter(
                (rows_before[self.keys[row].tobytes()] for row in reused), dtype=np.int64, count=len(reused)
            )
            self.vectors[reused], self.cut[reused] = vectors[old], cut[old]
        out = Path(self.task["out"])
        keys_path, cut_path = _keys_path(out), _cut_path(out)
        _save_atomic_npy(keys_path, self.keys)
        _save_atomic_npy(cut_path, self.cut)
        out.unlink(missing_ok=True)  # the earlier vectors (in memory now) must not outlive the record below
        truncated = int(self.cut.sum())
        _write_atomic(
            _truncated_path(out),
            orjson.dumps(
                {
                    "rows": self.rows,
                    "truncated": truncated,
                    "shard_sha256": self.task.get("sha256"),
                    "keys_sha256": sha256_file(keys_path)[0],
                    "embedded": len(embedded),
                    "reused": len(reused),
                    "dtype": getattr(documents, "dtype", "float32"),
                }
            ),
        )
        self._publish_vectors(out)  # last: the task's completion marker
        return {
            "rows": self.rows,
            "truncated": truncated,
            "embedded": len(embedded),
            "seconds": time.perf_counter() - self.started,
            "device": documents.device,
        }


def embed_shard(encoder: DenseEncoder, task: dict) -> dict:
    """One embedding task (a device worker's unit): see embed_shards."""
    return next(embed_shards(encoder, [task]))[1]


def embed_shards(encoder: DenseEncoder, tasks: list[dict]) -> Iterator[tuple[dict, dict]]:
    """(task, result) per task: a shard's snippets in row order -> float16 `emb-NNNNN.npy`.

    A transformer is fed by indexer.dense.feeding: feeder processes read the shards in windows (parse, key
    and tokenize their texts) ahead of the device, so the next shard is read while this one embeds, and
    batches are cut by a token budget (task["plan"], the same for every task of a build). Static and
    USE encoders read a shard whole, here.

    Vectors are keyed by the digest of the text the encoder reads (`emb-NNNNN.keys`, with which rows
    were cut at the max length in `emb-NNNNN.cut`): when the shard held other bytes before (a corpus
    rebuilt with a day's update), rows whose text is unchanged are copied from the earlier embeddings and
    only added or changed text is embedded. The sidecar `emb-NNNNN.truncated.json` names the shard's
    sha256 and the keys file's, so embeddings are reused only for the bytes they were made from. The
    vectors file is the task's completion marker: the old one is removed before the new sidecar is
    written and the new one written last, so vectors on disk always match their sidecar, whenever a run
    is killed."""
    documents = encoder.documents
    if documents is None:
        raise ValueError("this encoder was loaded with queries_only")
    if isinstance(documents, TextEncoder):
        yield from _fed_shards(encoder, documents, tasks)
        return
    for task in tasks:
        started = time.perf_counter()
        snippets = [orjson.loads(line) for line in Path(task["shard"]).read_bytes().splitlines()]
        texts = encoder.snippet_inputs(snippets)
        work = ShardWork.start(task, len(texts), encoder.queries.dimension, started)
        work.keys[:] = np.frombuffer(b"".join(map(text_digest, texts)), dtype=np.uint8).reshape(-1, 16)
        known = work.previous[0] if work.previous else {}
        todo = np.fromiter((row for row, key in enumerate(work.keys) if key.tobytes() not in known), dtype=np.int64)
        if len(todo):
            before = documents.truncated
            vectors = documents.encode([texts[row] for row in todo], task["batch_size"])
            work.take(todo, vectors, np.asarray(documents.last_cut, dtype=bool))
            encoder.truncated["snippets"] += documents.truncated - before
        yield task, work.finish(documents)


def _fed_shards(encoder: DenseEncoder, documents: TextEncoder, tasks: list[dict]) -> Iterator[tuple[dict, dict]]:
    plan = BatchPlan(**tasks[0]["plan"]) if tasks else BatchPlan()
    works: dict[int, ShardWork] = {}
    spec = encoder.spec

    def windows():
        for number, task in enumerate(tasks):
            started = time.perf_counter()
            with _mapped(Path(task["shard"])) as data:  # windows are copied out of the map one at a time
                ends = _line_ends(data)
                work = works[number] = ShardWork.start(task, len(ends), encoder.queries.dimension, started)
                known = frozenset(work.previous[0]) if work.previous else None
                firsts = range(0, work.rows, plan.window) or [0]  # an empty shard: one empty window, to finish it
                for window, first in enumerate(firsts):
                    begin = int(ends[first - 1]) if first else 0
                    end = int(ends[min(first + plan.window, work.rows) - 1]) if work.rows else 0
                    payload = SnippetWindow(data[begin:end], spec.pair_input, spec.document_prefix, known)
                    yield (number, window == len(firsts) - 1, first), payload

    first = tasks[0] if tasks else {}
    feeders = _feeders(documents, first.get("feeders", 0), first.get("feeder_timeout", FEEDER_TIMEOUT))
    try:
        yield from _finished_shards(
            embed_windows(documents, feeders.tokenized(windows()), plan), works, documents, encoder
        )
    except FeederError as error:
        number, _, first = error.key
        shard = Path(tasks[number]["shard"]).name
        raise EmbeddingError(
            f"{shard}: texts from row {first} (a window of up to {plan.window} texts): "
            f"{error.why}; that shard's embeddings were not written, and the index is not "
            "built"
        ) from None


class EmbeddingError(RuntimeError):
    """A shard could not be embedded (a feeder died, hung or failed on a text); the message names the shard
    and the rows. Nothing of the shard is written and no index is built from a partial set."""


def _finished_shards(fed_windows, works: dict, documents, encoder) -> Iterator[tuple[dict, dict]]:
    for (number, last, first), fed, vectors in fed_windows:
        work = works[number]
        work.keys[first : first + len(fed.keys)] = fed.keys
        work.take(first + fed.todo, vectors, fed.tokens.cut)
        cut = int(fed.tokens.cut.sum())
        documents.truncated += cut
        encoder.truncated["snippets"] += cut
        if last:
            yield work.task, works.pop(number).finish(documents)


def _line_ends(data, block: int = 1 << 22) -> np.ndarray:
    """Offsets just past each line of `data` (the last line may lack its newline), found a block at a
    time so that no array of the file's size is made."""
    ends = []
    for start in range(0, len(data), block):
        chunk = np.frombuffer(data, dtype=np.uint8, count=min(block, len(data) - start), offset=start)
        ends.append(np.flatnonzero(chunk == ord("\n")) + (start + 1))
    found = np.concatenate(ends) if ends else np.zeros(0, dtype=np.int64)
    if len(data) and data[-1:] != b"\n":
        found = np.append(found, len(data))
    return found


@contextlib.contextmanager
def _mapped(path: Path):
    """The file's bytes, memory-mapped (an empty file as b"")."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            yield b""
            return
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            yield data


def close_feeders(encoder: DenseEncoder) -> None:
    """Stop the feeder processes embed_shards started for `encoder` (they are kept between shards)."""
    feeders = getattr(encoder.documents, "feeders", None)
    if feeders is not None:
        feeders.close()


def _feeders(documents: TextEncoder, count: int, timeout: float = FEEDER_TIMEOUT) -> Feeders:
    """The encoder's feeder processes, started once per process that embeds (a device worker keeps its
    own) and reused for every shard (new ones after a failure killed them)."""
    feeders = getattr(documents, "feeders", None)
    if feeders is None or feeders.count != count:
        if feeders is not None:
            feeders.close()
        feeders = documents.feeders = Feeders(tokenizer_settings(documents), count, timeout=timeout)
    feeders.timeout = timeout
    return feeders


def _keys_path(embeddings: Path) -> Path:
    return embeddings.with_suffix(".keys")


def _cut_path(embeddings: Path) -> Path:
    return embeddings.with_suffix(".cut")


def _previous_rows(out: Path) -> tuple[dict[bytes, int], np.ndarray, np.ndarray] | None:
    """(text digest -> row, vectors, cut flags) of the shard's earlier complete embeddings, or None when
    there are none, or they are not a consistent set (a run killed while replacing them)."""
    sidecar = _truncated_path(out)
    if not (sidecar.is_file() and out.is_file() and _keys_path(out).is_file() and _cut_path(out).is_file()):
        return None
    made = orjson.loads(sidecar.read_bytes())
    if made.get("keys_sha256") != sha256_file(_keys_path(out))[0]:
        return None
    keys, vectors, cut = np.load(_keys_path(out)), np.load(out), np.load(_cut_path(out))
    if not len(keys) == len(vectors) == len(cut) == made["rows"]:
        return None
    return {key.tobytes(): row for row, key in enumerate(keys)}, vectors, cut


def _truncated_path(embeddings: Path) -> Path:
    return embeddings.with_suffix(".truncated.json")


def _write_atomic(path: Path, data: bytes) -> None:
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    temp.write_bytes(data)
    os.replace(temp, path)


def truncated_snippets(out: Path, corpus: Corpus) -> int:
    """Snippets cut at the encoder's max length, over every shard (the per-shard counts embed_shard
    wrote beside the embeddings)."""
    total = 0
    for shard in corpus.shards:
        path = _truncated_path(out / _emb_name(shard.index))
        total += orjson.loads(path.read_bytes())["truncated"] if path.is_file() else 0
    return total


def _embedded(path: Path, shard) -> bool:
    """Whether `path` holds the embeddings of exactly this shard's bytes: a rebuilt corpus may keep a
    shard's snippet count while its text changed (a daily update revises citations), so the count alone
    would reuse stale vectors; embeddings made before the shard's sha256 was recorded are made again."""
    sidecar = _truncated_path(path)
    if not (path.is_file() and sidecar.is_file()):
        return False
    made_from = orjson.loads(sidecar.read_bytes()).get("shard_sha256")
    return made_from == shard.sha256 and np.load(path, mmap_mode="r").shape[0] == shard.records


@dataclass(frozen=True)
class Feeding:
    """How a build feeds its encoder: the batch plan (every device uses the same one), the feeder
    processes per device (0: tokenize in the embedding process), the precision asked for (`auto`: half
    on GPUs, see encoders.resolve_dtype) and whether to torch.compile the model."""

    plan: BatchPlan | None = None  # None: `batch_size` rows, as many tokens as they can hold
    feeders: int = 0
    dtype: str = "float32"
    compile: bool = False
    timeout: float = FEEDER_TIMEOUT  # seconds a feeder may take over a window

    def plan_for(self, encoder: DenseEncoder, batch_size: int) -> BatchPlan:
        if self.plan is not None:
            return self.plan
        return BatchPlan(rows=batch_size, tokens=rows_budget(encoder, batch_size))


def rows_budget(encoder: DenseEncoder, rows: int) -> int:
    """The tokens `rows` texts of the encoder's max length take: a budget that limits a batch by its row
    count alone."""
    return rows * (getattr(encoder.documents, "max_length", 0) or 512)


def embed_corpus(
    corpus: Corpus,
    out: Path,
    encoder: DenseEncoder,
    batch_size: int,
    log=None,
    *,
    executor=None,
    devices: list[str] | None = None,
    feeding: Feeding = Feeding(),
) -> tuple[list[int], int]:
    """Embed every shard that has no embeddings of its current bytes yet; returns (the shards embedded
    now, the snippets they had to embed: text unchanged since the shard's earlier embeddings is reused).

    With one device on the local executor the shards are embedded here with `encoder`; otherwise each
    device gets a worker (a process, or a Ray actor with `num_gpus=1`) that loads the encoder once, starts
    its own feeders and takes shards as they come."""
    plan = feeding.plan_for(encoder, batch_size).to_dict()
    tasks = []
    for shard in corpus.shards:
        path = out / _emb_name(shard.index)
        if _embedded(path, shard):
            continue
        tasks.append(
            {
                "index": shard.index,
                "name": shard.path.name,
                "shard": str(shard.path),
                "out": str(path),
                "batch_size": batch_size,
                "sha256": shard.sha256,
                "plan": plan,
                "feeders": feeding.feeders,
                "feeder_timeout": feeding.timeout,
            }
        )
    done = []
    embedded = [0]

    def on_result(task: dict, result: dict) -> bool:
        done.append(task["index"])
        embedded[0] += result["embedded"]
        if log:
            rate = result["embedded"] / max(result["seconds"], 1e-9)
            reused = result["rows"] - result["embedded"]
            log(
                f"embedded {task['name']} on {result['device']}: {result['embedded']:,} snippets, {rate:,.0f}/s"
                + (f" ({reused:,} unchanged, reused)" if reused else "")
            )
        return True

    devices = devices or [encoder.device]
    if executor is None or (executor.name == "local" and len(devices) == 1):
        try:
            for task, result in embed_shards(encoder, tasks):
                on_result(task, result)
        finally:
            close_feeders(encoder)
    else:
        cpu_workers = sum(device == "cpu" for device in devices)
        threads = max(1, (os.cpu_count() or 1) // cpu_workers) if cpu_workers else None
        setup = functools.partial(load_encoder, encoder.spec.to_dict(), feeding.dtype, threads, feeding.compile)
        executor.run_on_devices(tasks, setup, embed_shard, devices, on_result, teardown=close_feeders)
    return sorted(done), embedded[0]


def embedding_dtypes(out: Path, corpus: Corpus) -> list[str]:
    """The precisions the shards' current embeddings were computed in (their sidecars say)."""
    found = set()
    for shard in corpus.shards:
        path = _truncated_path(out / _emb_name(shard.index))
        if path.is_file():
            found.add(orjson.loads(path.read_bytes()).get("dtype") or "float32")
    return sorted(found)


def training_sample_size(vectors: int, lists: int) -> int:
    """How many vectors train an index: TRAIN_SAMPLE_MAX, or 40 a list where an IVF has more lists than
    that sample trains well (k-means wants 39 points a centroid: FAISS warns below), at most every vector."""
    return min(vectors, max(TRAIN_SAMPLE_MAX, 40 * lists))


def _training_sample(out: Path, corpus: Corpus, dimension: int, lists: int = 0) -> np.ndarray:
    """A seeded sample of training_sample_size embeddings drawn across all shards."""
    total = corpus.snippets
    rng = np.random.default_rng(TRAIN_SAMPLE_SEED)
    count = training_sample_size(total, lists)
    chosen = np.sort(rng.choice(total, size=count, replace=False)) if count < total else np.arange(total)
    sample = np.empty((count, dimension), dtype=np.float32)
    start = filled = 0
    for shard in corpus.shards:
        vectors = np.load(out / _emb_name(shard.index), mmap_mode="r")
        rows = chosen[(chosen >= start) & (chosen < start + shard.records)] - start
        sample[filled : filled + len(rows)] = vectors[rows]
        filled += len(rows)
        start += shard.records
    return sample


def _reusable_training(out: Path, index_factory: str, metric: str, identity: dict) -> dict | None:
    """The training record of the index in `out`, when its trained.index can start this build too: the
    same index type, metric and encoder, and the file the record names."""
    record = read_complete_record(out)
    if record is None:
        return None
    training = record.get("training")
    params = record.get("params", {})
    built = params.get("index_factory_built", params.get("index_factory"))
    if (
        not training
        or built != index_factory
        or params.get("metric") != metric
        or record.get("encoder") != identity
        or not (out / TRAINED).is_file()
    ):
        return None
    if sha256_file(out / TRAINED)[0] != training["sha256"]:
        return None
    return training


def _trained_template(out: Path, corpus: Corpus, template, previous: dict | None, embedded_now: int, dimension: int):
    """(the trained index every shard starts from, the training record) for an index type that needs
    training. The earlier build's trained index is reused while the vectors embedded since it was
    trained stay within RETRAIN_SHARE of the index: an update's new and changed snippets are assigned
    to the lists the earlier snippets defined, so lists stay comparable between days; past that share
    the sample no longer stands for the corpus and the index is trained again on a new one."""
    import faiss

    since = (previous["embedded_since_training"] + embedded_now) if previous else None
    if previous is not None and since <= RETRAIN_SHARE * corpus.snippets:
        template = faiss.read_index(str(out / TRAINED))
        training = {**previous, "embedded_since_training": since, "reused": True}
    else:
        ivf = faiss.try_extract_index_ivf(template)
        sample = _training_sample(out, corpus, dimension, ivf.nlist if ivf is not None else 0)
        template = _train(template, sample)
        temp = out / f".{TRAINED}.tmp-{os.getpid()}"
        faiss.write_index(template, str(temp))
        os.replace(temp, out / TRAINED)
        training = {
            "trained_on_vectors": corpus.snippets,
            "sample": len(sample),
            "embedded_since_training": 0,
            "reused": False,
        }
    training["sha256"] = sha256_file(out / TRAINED)[0]
    training["retrain_share"] = RETRAIN_SHARE
    return template, training


def lists_for(vectors: int) -> int:
    """Inverted lists for `vectors`: about 4 sqrt(n) as a power of two (FAISS's guideline of 4-16 sqrt(n),
    at its cheap end: fewer centroids to train and to search per query), at most 65,536, and few enough
    that every list gets 39 training vectors (training_sample_size takes 40 a list where it can)."""
    wanted = 2 ** round(np.log2(max(4 * np.sqrt(max(vectors, 1)), 1)))
    trainable = 2 ** int(np.log2(max(vectors // 39, 1)))
    return int(max(1, min(wanted, trainable, 65_536)))


def concrete_factory(index_factory: str, vectors: int) -> str:
    """`index_factory` with `{lists}` sized to the corpus (lists_for), and exact `Flat` where the corpus
    is too small to train what it asks for (a PQ codebook needs 256 vectors; IVF at least one list):
    a recipe's MedCorp index then builds on the sample corpora too, as an exact index."""
    factory = index_factory.replace("{lists}", str(lists_for(vectors)))
    if "{" in factory:
        raise ValueError(f"index factory {index_factory!r}: the only placeholder is {{lists}}")
    needs_codebook = any(part.startswith(("PQ", "OPQ", "IVF")) and "PQ" in part for part in factory.split(","))
    if needs_codebook and vectors < 256:
        return "Flat"
    return factory


UNFINISHED_PARAMS = "build-params.json"  # written first, so an unfinished build can be finished by a later run


def build_dense(
    corpus: Corpus,
    out: Path,
    encoder: DenseEncoder,
    *,
    index_factory: str = "Flat",
    metric: str = "ip",
    batch_size: int = 32,
    log=None,
    executor=None,
    devices: list[str] | None = None,
    feeding: Feeding = Feeding(),
    refine: int = 0,
    nprobe: int = 0,
) -> dict:
    """Embed (resumably, across `devices` through `executor`: see embed_corpus) and index `corpus` into
    `out`; build.json is written last. An index in `out` of another corpus version is kept as a
    generation first (medsnip.generations: hard links, so every file below is replaced by renaming,
    never rewritten in place). `index_factory` may hold `{lists}` (sized to the corpus: lists_for);
    `refine`: searches re-rank refine x k candidates exactly from the kept embeddings; `nprobe`: the
    inverted lists an IVF search visits (both recorded as the index's defaults; 0: none / FAISS's 1)."""
    import faiss

    started = time.perf_counter()
    keep_index(out, corpus.record_hash)
    out.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(out)  # half-written embeddings or FAISS files of a killed earlier run
    identity = encoder.identity()
    built_factory = concrete_factory(index_factory, corpus.snippets)
    previous_training = _reusable_training(out, built_factory, metric, identity)
    identity_file = out / "encoder.json"
    if identity_file.is_file() and orjson.loads(identity_file.read_bytes()) != identity:
        for stale in out.glob("emb-*"):  # embeddings (and counts) of another model: never mix them
            stale.unlink()
    _write_atomic(identity_file, orjson.dumps(identity, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    (out / "build.json").unlink(missing_ok=True)  # the output is incomplete until build.json is rewritten
    plan = feeding.plan_for(encoder, batch_size)
    # what a later run needs to finish this build if it is killed before build.json (medsnip update)
    _write_atomic(
        out / UNFINISHED_PARAMS,
        orjson.dumps(
            {
                "index_factory": index_factory,
                "metric": metric,
                "batch_size": batch_size,
                "batch_plan": plan.to_dict(),
                "dtype_asked": feeding.dtype,
                "refine": refine,
                "nprobe": nprobe,
            },
            option=orjson.OPT_SORT_KEYS,
        ),
    )
    embed_started = time.perf_counter()
    devices = devices or [encoder.device]
    feeding = replace(feeding, plan=plan)
    embedded_now, snippets_embedded = embed_corpus(
        corpus, out, encoder, batch_size, log, executor=executor, devices=devices, feeding=feeding
    )
    embed_seconds = time.perf_counter() - embed_started

    dimension = identity["dimension"]
    index_started = time.perf_counter()
    template = faiss.index_factory(dimension, built_factory, _metric(metric))
    ivf = faiss.try_extract_index_ivf(template)
    if ivf is not None and hasattr(faiss.downcast_index(ivf), "do_polysemous_training"):
        # The factory turns on polysemous training for IVF-PQ: it reorders each codebook so that Hamming
        # distances between codes follow real ones, for a Hamming pre-filter searches here never use.
        # ADC scores do not depend on the order, so the hits are the same; training took 2,000x longer
        # (IVF4,PQ96 on 300 vectors: 214 s against 0.1 s).
        faiss.downcast_index(ivf).do_polysemous_training = False
    training = None
    if not template.is_trained:
        template, training = _trained_template(out, corpus, template, previous_training, snippets_embedded, dimension)
    shard_entries = []
    for shard in corpus.shards:
        vectors = np.load(out / _emb_name(shard.index)).astype(np.float32)
        index = faiss.clone_index(template)
        index.add(vectors)
        path = out / _faiss_name(shard.index)
        temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        faiss.write_index(index, str(temp))
        os.replace(temp, path)
        shard_entries.append(
            {"shard": shard.index, "rows": int(index.ntotal), "faiss": path.name, "embeddings": _emb_name(shard.index)}
        )
    index_seconds = time.perf_counter() - index_started
    record = index_record(
        STAGE,
        corpus,
        encoder=identity,
        params={
            "index_factory": index_factory,
            "index_factory_built": built_factory,
            "refine": refine,
            "nprobe": nprobe,
            "metric": metric,
            "batch_size": batch_size,
            "batch_plan": plan.to_dict(),
            "feeders": feeding.feeders,
            "compile": feeding.compile,
            "dtype_asked": feeding.dtype,
            "dtype": ",".join(embedding_dtypes(out, corpus)),
            "train_sample_seed": TRAIN_SAMPLE_SEED,
            "train_sample_max": TRAIN_SAMPLE_MAX,
            "embeddings_dtype": "float16",
            "device": ",".join(devices),
        },
        engine={"faiss": faiss.__version__},
        shards=shard_entries,
        **({"training": training} if training else {}),
        counts={
            "vectors": sum(entry["rows"] for entry in shard_entries),
            "embedded_this_run": len(embedded_now),
            "snippets_embedded_this_run": snippets_embedded,
            "truncated_snippets": truncated_snippets(out, corpus),
        },
        run={
            "executor": getattr(executor, "name", "local"),
            "seconds": {
                "embed": round(embed_seconds, 3),
                "index": round(index_seconds, 3),
                "total": round(time.perf_counter() - started, 3),
            },
        },
    )
    write_build_record(out, record)
    if log:
        truncated = record["counts"]["truncated_snippets"]
        cut = f"; {truncated:,} snippets cut at {identity['max_length']} tokens" if truncated else ""
        log(f"dense: {record['counts']['vectors']:,} vectors ({built_factory}, {metric}){cut} -> {out}")
    return record


def _train(index, sample: np.ndarray):
    """Train on the GPUs when faiss-gpu sees any (k-means is the slow part), else on the CPU; the
    trained index comes back as a CPU index either way."""
    import faiss

    gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
    if gpus:
        try:
            on_gpu = faiss.index_cpu_to_all_gpus(index)
        except RuntimeError:  # a type faiss-gpu does not implement: train it on the CPU
            on_gpu = None
        if on_gpu is not None:
            on_gpu.train(sample)
            return faiss.index_gpu_to_cpu(on_gpu)
    index.train(sample)
    return index


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
