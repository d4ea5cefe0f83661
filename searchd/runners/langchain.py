"""A LangChain retriever over searchd (extra `langchain`: langchain-core):

    from searchd.runners.langchain import SearchdRetriever
    retriever = SearchdRetriever(address="127.0.0.1:50051", k=5, corpora=["pubmed"])
    documents = retriever.invoke("statins and myopathy")

Each Document carries the snippet's text as `page_content`, its id as `id`, and in `metadata` its title,
corpus, source, document id, fused rank and score, and each retriever's rank (searchd.runners.hits)."""

from __future__ import annotations

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import PrivateAttr

from searchd.client import SearchClient
from searchd.runners.hits import hit_metadata


class SearchdRetriever(BaseRetriever):
    """searchd's fused hits as LangChain Documents. Fields are SearchRequest's: `retrievers` and `fusion`
    left empty take the root's served defaults (serve.json)."""

    address: str | None = None  # None: $SEARCHD_ADDRESS, else 127.0.0.1:50051
    k: int = 10
    corpora: list[str] = []
    retrievers: list[str] = []
    fusion: str | None = None
    rrf_k: int = 0
    token: str | None = None
    tls: bool = False
    ca_file: str | None = None
    timeout: float = 60.0
    _client: SearchClient | None = PrivateAttr(default=None)

    def _searchd(self) -> SearchClient:
        if self._client is None:
            self._client = SearchClient(
                self.address, token=self.token, tls=self.tls, ca_file=self.ca_file, timeout=self.timeout
            )
        return self._client

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        response = self._searchd().search(
            query, k=self.k, corpora=self.corpora, retrievers=self.retrievers, fusion=self.fusion, rrf_k=self.rrf_k
        )
        return [Document(page_content=hit.content, metadata=hit_metadata(hit), id=hit.id) for hit in response.hits]
