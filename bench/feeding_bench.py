"""The CPU half of GPU embedding: how fast indexer dense's feeding pipeline turns shard JSON into padded
batches, against the bare fast tokenizer on the same texts and cores, measured in the same run.

The model is a null encoder (NullTextEncoder: its forward returns zeros), so what is timed is all the
host does for a GPU: reading and parsing the shards, the text digests, tokenizing in feeder processes,
the batch plan, padding into tensors, and writing the shard's vectors file. BERT-base shape: the
bundled MiniLM's WordPiece tokenizer (bert-base-uncased's vocabulary) at 512 tokens, 768 dimensions.
The bare tokenizer is transformers' fast tokenizer turning the same texts (already in memory) into id
lists, with its own Rust threads on every core; today's path before the pipeline (a count pass, then
padded tensors 32 at a time) is shown for reference.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from pathlib import Path

import numpy as np
import orjson

from indexer.dense import Feeding, embed_corpus, embeddings_name
from indexer.dense.feeding import BatchPlan
from medsnip.corpus import Corpus
from medsnip.encoders import DenseEncoder, EncoderSpec, TextEncoder, bundled_minilm_path

MAX_LENGTH = 512
DIMENSION = 768


class NullTextEncoder(TextEncoder):
    """A TextEncoder with a real tokenizer and no model: forward returns zeros of BERT-base's width."""

    def __init__(self, max_length: int = MAX_LENGTH, dimension: int = DIMENSION):
        import torch
        from transformers import AutoTokenizer

        self.model_dir = Path(bundled_minilm_path())
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        self.device, self.dtype, self.pooling, self.normalize = "cpu", "float32", "mean", False
        self.max_length, self._dimension = max_length, dimension
        self.truncated, self.last_cut, self.model, self._torch = 0, [], None, torch
        self.batches = 0

    @property
    def dimension(self) -> int:
        return self._dimension

    def forward(self, inputs: dict):
        self.batches += 1
        return self._torch.zeros((inputs["input_ids"].shape[0], self._dimension))


def null_dense_encoder(max_length: int = MAX_LENGTH) -> DenseEncoder:
    """A DenseEncoder whose snippet side is a NullTextEncoder."""
    encoder = DenseEncoder.__new__(DenseEncoder)
    encoder.spec = EncoderSpec("null-bert-base", bundled_minilm_path(), max_length=max_length)
    encoder.documents = encoder.queries = NullTextEncoder(max_length)
    encoder.truncated = {"snippets": 0, "queries": 0}
    encoder._identity = {"name": "null"}
    return encoder


def _texts(corpus: Corpus) -> list[str]:
    return [orjson.loads(line)["contents"] for shard in corpus.shards for line in shard.path.read_bytes().splitlines()]


def _pipeline_seconds(corpus: Corpus, work: Path, feeders: int) -> float:
    out = work / f"feeding-{feeders}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    encoder = null_dense_encoder()
    feeding = Feeding(plan=BatchPlan(rows=512, tokens=65536), feeders=feeders)
    started = time.perf_counter()
    embed_corpus(corpus, out, encoder, 512, feeding=feeding)
    seconds = time.perf_counter() - started
    encoder.documents.feeders.close()
    assert all((out / embeddings_name(shard.index)).is_file() for shard in corpus.shards)
    return seconds


def _bare_tokenizer_seconds(texts: list[str]) -> float:
    tokenizer = NullTextEncoder().tokenizer
    started = time.perf_counter()
    tokenizer(texts, truncation=True, max_length=MAX_LENGTH, verbose=False)["input_ids"]
    return time.perf_counter() - started


def _previous_path_seconds(texts: list[str]) -> float:
    """What the host did per shard before the pipeline: a token-count pass, then padded tensors of 32."""
    tokenizer = NullTextEncoder().tokenizer
    started = time.perf_counter()
    tokenizer(texts, verbose=False)
    order = np.argsort(-np.asarray([len(text) for text in texts]), kind="stable")
    for start in range(0, len(texts), 32):
        batch = [texts[i] for i in order[start : start + 32]]
        tokenizer(batch, truncation=True, max_length=MAX_LENGTH, padding=True, return_tensors="pt")
    return time.perf_counter() - started


def feeding_section(corpus_dir: Path, work: Path, repeats: int = 3) -> list[str]:
    corpus = Corpus.open(corpus_dir)
    texts = _texts(corpus)
    tokens = NullTextEncoder().tokenizer(texts[:2000], truncation=True, max_length=MAX_LENGTH)["input_ids"]
    mean_tokens = statistics.mean(map(len, tokens))
    runs: dict[str, list[float]] = {"bare": [], "previous": [], 0: [], 1: [], 2: []}
    for _ in range(repeats):  # interleaved, best of `repeats`
        runs["bare"].append(_bare_tokenizer_seconds(texts))
        runs["previous"].append(_previous_path_seconds(texts))
        for feeders in (0, 1, 2):
            runs[feeders].append(_pipeline_seconds(corpus, work, feeders))
    best = {key: min(values) for key, values in runs.items()}
    rate = {key: len(texts) / seconds for key, seconds in best.items()}
    rows = [
        ("transformers fast tokenizer, texts (in memory) to id lists, all cores", "bare"),
        ("before: count pass + padded tensors of 32 (the host side of `indexer dense` until now)", "previous"),
        ("indexer dense feeding, tokenizing in the embedding process (`--feeders 0`)", 0),
        ("indexer dense feeding, 1 feeder process", 1),
        ("indexer dense feeding, 2 feeder processes", 2),
    ]
    lines = [
        "## indexer dense: feeding a GPU (host side, null model)",
        "",
        f"- {len(texts):,} real PubMed snippets in {len(corpus.shards)} shards (the indexer benchmark corpus: real "
        f"records under new PMIDs), mean {mean_tokens:.0f} tokens; BERT-base shape (bert-base-uncased WordPiece, "
        f"{MAX_LENGTH} tokens, {DIMENSION} dimensions), a null model whose forward returns zeros; {os.cpu_count()} "
        f"cores; best of {repeats}, interleaved",
        "- the pipeline rows run the real build path (`embed_corpus`): shard JSON read and parsed, text digests, "
        "tokenizing, length-sorted batches by a 65,536-token budget (at most 512 rows), padding, vectors written",
        "",
        "| host path | seconds | snippets/s | vs bare tokenizer |",
        "|---|---:|---:|---:|",
    ]
    for label, key in rows:
        lines.append(f"| {label} | {best[key]:.2f} | {rate[key]:,.0f} | {rate[key] / rate['bare']:.2f}x |")
    lines += [
        "",
        f"Feeder scaling: 2 processes give {rate[2] / rate[1]:.2f}x one process's rate on this {os.cpu_count()}-core "
        "machine (the main process pads and writes while feeders tokenize). On a GPU machine every core the "
        "embedding processes leave free is a feeder by default (at most 16 a device): at one feeder's rate "
        f"here ({rate[1]:,.0f} snippets/s), MiniLM-L6's forward-only ceiling on an H100 (~41,000/s) would take about "
        f"{41_000 / rate[1]:.0f} such cores; measured on an H100 in the GPU section.",
        "",
    ]
    return lines


def cpu_embedding_section(corpus_dir: Path, count: int = 400, repeats: int = 2) -> list[str]:
    """Real MiniLM on this CPU: the encoder's own `encode` (what `indexer dense` ran before the pipeline)
    against the fed path (token-budget batches from feeders), same texts, same run."""
    import torch

    from indexer.dense.device_loop import embed_windows
    from indexer.dense.feeding import Feeders, tokenizer_settings
    from medsnip.encoders import preset

    texts = _texts(Corpus.open(corpus_dir))[:count]
    encoder = DenseEncoder(preset("minilm"), device="cpu").documents
    encoder.encode(texts[:32])  # warm-up
    plan = BatchPlan(rows=32, tokens=32 * encoder.max_length)
    feeders = Feeders(tokenizer_settings(encoder), 0)
    before, now = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        reference = encoder.encode(texts, 32)
        before.append(time.perf_counter() - started)
        started = time.perf_counter()
        windows = [(start, texts[start : start + 4096]) for start in range(0, len(texts), 4096)]
        fed = np.concatenate([vectors for _, _, vectors in embed_windows(encoder, feeders.tokenized(windows), plan)])
        now.append(time.perf_counter() - started)
    difference = float(np.abs(fed - reference).max())
    return [
        "## indexer dense: CPU embedding, before and after the feeding pipeline",
        "",
        f"- {len(texts):,} real PubMed snippets, all-MiniLM-L6-v2 (256 tokens), batches of at most 32, torch "
        f"{torch.__version__} on {torch.get_num_threads()} CPU threads; best of {repeats}, same run",
        "",
        "| path | snippets/s |",
        "|---|---:|",
        f"| before: `TextEncoder.encode` (32 texts a batch, sorted by characters, a count pass) | "
        f"{len(texts) / min(before):,.1f} |",
        f"| now: feeding pipeline (sorted by tokens, token-budget batches, padded to a multiple of 8) | "
        f"{len(texts) / min(now):,.1f} |",
        "",
        f"Largest difference between the two paths' vectors: {difference:.1e} (float32; the index stores float16).",
        "",
    ]
