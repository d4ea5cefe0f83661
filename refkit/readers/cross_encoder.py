"""A reader that is a cross-encoder on disk (sentence-transformers' CrossEncoder: a biomedical reranker,
MedCPT's cross-encoder, bge-reranker), for the one task a scorer can do: may this text answer the question.
Its raw answer is the score; `--reader-threshold` turns it into yes (at or above) or no, so a replay can
decide again at another threshold without the model."""

from __future__ import annotations

from pathlib import Path

from medsnip.encoders import weights_sha256
from refkit.readers.errors import ReaderError


class CrossEncoderReader:
    kind = "cross-encoder"

    def __init__(self, model: str, device: str = "cpu"):
        path = Path(model)
        if not path.is_dir():
            raise ReaderError(f"reader model {model}: not a folder holding a cross-encoder (nothing is downloaded)")
        try:
            from sentence_transformers import CrossEncoder
        except ImportError:
            raise ReaderError(
                "a cross-encoder reader needs sentence-transformers: pip install 'medsnip[readers]'"
            ) from None
        try:
            self.model = CrossEncoder(str(path), device=device, local_files_only=True)
        except (OSError, ValueError) as error:
            raise ReaderError(f"reader model {model}: sentence-transformers cannot load it: {error}") from None
        self.name, self.sha256 = path.name, weights_sha256(path)

    @property
    def identity(self) -> dict:
        return {"kind": self.kind, "model": self.name, "sha256": self.sha256}

    def score(self, question: str, text: str) -> float:
        [value] = self.model.predict([(question, text)], show_progress_bar=False)
        return round(float(value), 4)
