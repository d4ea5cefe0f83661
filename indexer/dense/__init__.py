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

from indexer.dense.building import UNFINISHED_PARAMS, build_dense, concrete_factory, lists_for, training_sample_size
from indexer.dense.embedding import EmbeddingError, Feeding, close_feeders, embed_corpus, load_encoder
from indexer.dense.files import (
    RETRAIN_SHARE,
    STAGE,
    TRAIN_SAMPLE_MAX,
    TRAIN_SAMPLE_SEED,
    TRAINED,
    embeddings_name,
    faiss_name,
)
from indexer.dense.searching import DenseIndex, faiss_gpus, resolve_faiss_device

__all__ = [
    "RETRAIN_SHARE",
    "STAGE",
    "TRAIN_SAMPLE_MAX",
    "TRAIN_SAMPLE_SEED",
    "TRAINED",
    "UNFINISHED_PARAMS",
    "DenseIndex",
    "EmbeddingError",
    "Feeding",
    "build_dense",
    "close_feeders",
    "concrete_factory",
    "embed_corpus",
    "embeddings_name",
    "faiss_gpus",
    "faiss_name",
    "lists_for",
    "load_encoder",
    "resolve_faiss_device",
    "training_sample_size",
]
