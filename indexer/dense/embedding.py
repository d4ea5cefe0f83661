"""Embedding a corpus for a dense index: shard by shard, resumable (each shard's embeddings written atomically),
reusing the rows of an earlier build whose text did not change, fed by tokenizer processes on a CPU and windows on a
GPU."""

from __future__ import annotations

import contextlib
import functools
import mmap
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
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
from indexer.dense.files import embeddings_name, save_atomic_npy, write_atomic
from medsnip.buildrecord import sha256_file
from medsnip.corpus import Corpus
from medsnip.encoders import DenseEncoder, EncoderSpec, TextEncoder


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
            save_atomic_npy(out, self.vectors)
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
        save_atomic_npy(keys_path, self.keys)
        save_atomic_npy(cut_path, self.cut)
        out.unlink(missing_ok=True)  # the earlier vectors (in memory now) must not outlive the record below
        truncated = int(self.cut.sum())
        write_atomic(
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


def truncated_snippets(out: Path, corpus: Corpus) -> int:
    """Snippets cut at the encoder's max length, over every shard (the per-shard counts embed_shard
    wrote beside the embeddings)."""
    total = 0
    for shard in corpus.shards:
        path = _truncated_path(out / embeddings_name(shard.index))
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
        path = out / embeddings_name(shard.index)
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
        path = _truncated_path(out / embeddings_name(shard.index))
        if path.is_file():
            found.add(orjson.loads(path.read_bytes()).get("dtype") or "float32")
    return sorted(found)
