"""`indexer` command line."""

from medsnip.pending import not_built_yet


def main() -> None:
    not_built_yet("indexer", "Lucene BM25, sharded FAISS and the snippet store land with the indexer issue")
