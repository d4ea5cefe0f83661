"""The files of a dense index folder: their names, their atomic writes, the metric names FAISS takes."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

STAGE = "indexer.dense"
TRAIN_SAMPLE_SEED = 20261122
TRAIN_SAMPLE_MAX = 256 * 1024
TRAINED = "trained.index"  # the trained, empty index every shard starts from (kept for the next build)
RETRAIN_SHARE = 0.20  # retrain once the vectors embedded since training pass this share of the index


def embeddings_name(shard: int) -> str:
    return f"emb-{shard:05d}.npy"


def faiss_name(shard: int) -> str:
    return f"faiss-{shard:05d}.index"


def save_atomic_npy(path: Path, array: np.ndarray) -> None:
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(temp, "wb") as handle:
        np.save(handle, array)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def metric_code(name: str) -> int:
    import faiss

    metrics = {"ip": faiss.METRIC_INNER_PRODUCT, "l2": faiss.METRIC_L2}
    if name not in metrics:
        raise ValueError(f"metric must be 'ip' or 'l2', got {name!r}")
    return metrics[name]


def write_atomic(path: Path, data: bytes) -> None:
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    temp.write_bytes(data)
    os.replace(temp, path)
