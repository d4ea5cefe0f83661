"""indexer: Lucene BM25, sharded FAISS and the snippet store land with the indexer issue."""
