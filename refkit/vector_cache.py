"""MiniLM vectors of texts kept between runs: what refkit embeds again and again (every candidate
reference and rewrite the noise rules measure, every text the minilm judge scores) is embedded once per
machine.

The bundled MiniLM's query vectors are independent of their batch (medsnip.encoders: `encode_queries`
with `independent`), so a stored vector is bit for bit the one a new run would compute, and outputs stay
byte-identical with or without the cache. Vectors are stored normalised (float32) in a SQLite file in
`medsnip.cache.cache_folder()`, named by the sha256 of the model's files and the padding the vectors were computed
with (medsnip.encoders.transformer.PAD_MULTIPLE), and keyed by the sha256 of each text; SQLite's
locking lets several processes (parallel tests, two noise runs) share it.
"""

from __future__ import annotations

import functools
import hashlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np

from medsnip.cache import cache_folder

_MODEL_FILES = {".safetensors", ".bin", ".json", ".txt"}
BATCH = 256


def model_digest(model_dir: Path) -> str:
    """sha256 of a model folder's weight, configuration and vocabulary files."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(model_dir).rglob("*") if p.is_file() and p.suffix in _MODEL_FILES):
        digest.update(path.relative_to(model_dir).as_posix().encode())
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
    return digest.hexdigest()


class TextVectors:
    """Normalised MiniLM query vectors of texts: from memory, then the SQLite cache, then the model."""

    def __init__(self, cache: Path | None = None):
        from medsnip.encoders import preset
        from medsnip.encoders.transformer import PAD_MULTIPLE

        self.spec = preset("minilm")
        name = f"minilm-vectors-{model_digest(Path(self.spec.model))[:16]}-pad{PAD_MULTIPLE}.sqlite"
        self.path = Path(cache or cache_folder()) / name
        self._encoder = None
        self._memory: dict[str, np.ndarray] = {}
        self._db: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=120)
            self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL)")
            self._db.commit()
        except (OSError, sqlite3.Error):
            self._db = None  # a read-only or full disk: everything is embedded, as without a cache

    def matrix(self, texts: list[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """One row per text, in order."""
        wanted = [t for t in dict.fromkeys(texts) if t not in self._memory]
        if wanted:
            self._load(wanted)
            missing = [t for t in wanted if t not in self._memory]
            for start in range(0, len(missing), BATCH):
                self._embed(missing[start : start + BATCH])
                if progress:
                    progress(len(missing[start : start + BATCH]))
        if not texts:
            return np.zeros((0, 1), np.float32)
        return np.stack([self._memory[t] for t in texts])

    def _load(self, texts: list[str]) -> None:
        if self._db is None:
            return
        keys = {_key(t): t for t in texts}
        listed = list(keys)
        try:
            for start in range(0, len(listed), 500):
                chunk = listed[start : start + 500]
                rows = self._db.execute(
                    f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(chunk))})", chunk
                ).fetchall()
                for key, blob in rows:
                    self._memory[keys[bytes(key)]] = np.frombuffer(blob, dtype=np.float32).copy()
        except sqlite3.Error:
            pass  # an unreadable cache is a cache miss

    def _embed(self, texts: list[str]) -> None:
        if self._encoder is None:
            from medsnip.encoders import DenseEncoder

            self._encoder = DenseEncoder(self.spec, queries_only=True)
        vectors = np.asarray(self._encoder.encode_queries(texts), dtype=np.float32)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        for text, vector in zip(texts, vectors, strict=True):
            self._memory[text] = vector
        if self._db is not None:
            try:
                self._db.executemany(
                    "INSERT OR IGNORE INTO vectors VALUES (?, ?)",
                    [(_key(t), v.tobytes()) for t, v in zip(texts, vectors, strict=True)],
                )
                self._db.commit()
            except sqlite3.Error:
                pass  # not stored: embedded again next time


@functools.cache
def shared() -> TextVectors:
    """The process's one store: the model's files hashed, its SQLite opened and the model loaded once,
    however many parts of refkit (the noise filters, corpus support, the judge) ask."""
    return TextVectors()


def _key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()
