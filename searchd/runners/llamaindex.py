"""A LlamaIndex retriever over searchd (extra `llamaindex`: llama-index-core):

    from llama_index.core.query_engine import RetrieverQueryEngine
    from searchd.runners.llamaindex import SearchdRetriever
    engine = RetrieverQueryEngine.from_args(SearchdRetriever(address="127.0.0.1:50051", k=5), llm=your_llm)

Each NodeWithScore holds a TextNode whose `id_` is the snippet's id and whose metadata says its title,
corpus, source, document id, fused rank and each retriever's rank (searchd.runners.hits); its score is
searchd's fused score."""

from __future__ import annotations

from pathlib import Path

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from searchd.client import SearchClient
from searchd.runners.hits import hit_metadata

# provenance the LLM need not read in every prompt (the title and corpus it does)
_HIDDEN_FROM_LLM = ["id", "source", "doc_id", "rank", "score", "retrievers"]


class SearchdRetriever(BaseRetriever):
    def __init__(
        self,
        address: str | None = None,
        k: int = 10,
        corpora: list[str] | tuple = (),
        retrievers: list[str] | tuple = (),
        fusion: str | None = None,
        rrf_k: int = 0,
        token: str | None = None,
        tls: bool = False,
        ca_file: Path | None = None,
        timeout: float = 60.0,
        **kwargs,
    ):
        """SearchRequest's fields: `retrievers` and `fusion` left empty take the root's served defaults."""
        super().__init__(**kwargs)
        self.client = SearchClient(address, token=token, tls=tls, ca_file=ca_file, timeout=timeout)
        self.k, self.corpora, self.retrievers = k, list(corpora), list(retrievers)
        self.fusion, self.rrf_k = fusion, rrf_k

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        response = self.client.search(
            query_bundle.query_str,
            k=self.k,
            corpora=self.corpora,
            retrievers=self.retrievers,
            fusion=self.fusion,
            rrf_k=self.rrf_k,
        )
        nodes = []
        for hit in response.hits:
            node = TextNode(
                id_=hit.id,
                text=hit.content,
                metadata=hit_metadata(hit),
                excluded_llm_metadata_keys=_HIDDEN_FROM_LLM,
                excluded_embed_metadata_keys=_HIDDEN_FROM_LLM,
            )
            nodes.append(NodeWithScore(node=node, score=hit.score))
        return nodes
