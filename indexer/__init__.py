"""indexer: a corpus version's indexes, each in its own folder beside the shards and each citing the
corpus lineage it was built from: the snippet store (row and id lookups), Lucene BM25 through Anserini
(built whole, sharded across workers, or updated by id from a change set) and dense FAISS indexes per
shard (embedding fed by indexer.dense.feeding, on CPUs, GPUs or Ray actors)."""
