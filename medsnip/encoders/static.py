"""A static embedding model (model2vec's format): no transformer, a text's vector is a mean of rows."""

from __future__ import annotations

import numpy as np

from medsnip.encoders.spec import resolve_model_dir


class StaticTextEncoder:
    """A static embedding model (model2vec's folder format): a text's vector is the mean of its tokens'
    rows (times the model's token weights, when it has them), normalised if configured. The same
    interface as TextEncoder. Vectors equal model2vec's `StaticModel.encode` (tested); the tokens are
    counted here, so texts cut at `max_length` are counted as for the transformer encoders."""

    def __init__(self, model: str, max_length: int, normalize: bool):
        from model2vec import StaticModel

        self.model_dir = resolve_model_dir(model)
        self.model = StaticModel.from_pretrained(self.model_dir, max_length=None)  # normalised here, per the spec
        self.device = "cpu"
        self.max_length, self.normalize = max_length, normalize
        self.truncated = 0
        self.last_cut: list[bool] = []

    @property
    def dimension(self) -> int:
        return int(self.model.dim)

    def encode(self, texts: list, batch_size: int = 1024) -> np.ndarray:
        """float32 vectors, one per text (a sentence pair is read as its two texts joined by a space)."""
        from scipy.sparse import csr_matrix

        texts = [" ".join(t) if isinstance(t, tuple) else t for t in texts]
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        batch_size = max(batch_size, 1024)  # the tokenizer runs a batch in parallel: small ones waste cores
        model = self.model
        self.last_cut = []
        for start in range(0, len(texts), batch_size):
            token_lists = model.tokenize(texts[start : start + batch_size])
            cut = [len(ids) > self.max_length for ids in token_lists]
            self.truncated += sum(cut)
            self.last_cut += cut
            kept = [ids[: self.max_length] for ids in token_lists]
            counts = np.fromiter(map(len, kept), dtype=np.int64, count=len(kept))
            ids = np.fromiter((token for ids in kept for token in ids), dtype=np.int64, count=int(counts.sum()))
            rows = ids if model.token_mapping is None else model.token_mapping[ids]
            # every text's mean in one sparse product: weight 1/length (times the token's weight) per token
            weights = np.repeat(1.0 / np.maximum(counts, 1), counts).astype(np.float32)
            if model.weights is not None:
                weights *= model.weights[ids]
            pointers = np.concatenate(([0], np.cumsum(counts)))
            averaging = csr_matrix((weights, rows, pointers), shape=(len(kept), model.embedding.shape[0]))
            out[start : start + len(kept)] = averaging @ model.embedding.astype(np.float32, copy=False)
        if self.normalize:
            out /= np.linalg.norm(out, axis=1, keepdims=True) + 1e-32
        return out

    def encode_independent(self, texts: list[str], batch_size: int = 1024) -> np.ndarray:
        """Every vector depends on its text alone already (no padding, no attention)."""
        return self.encode(texts, batch_size)
