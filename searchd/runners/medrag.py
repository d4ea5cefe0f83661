"""MedRAG/MIRAGE's `RetrievalSystem`, served by searchd: the same constructor names and the same
`retrieve(question, k=32, rrf_k=100, id_only=False) -> (snippets, scores)`, where each snippet is
`{"id", "title", "content"}` (or `{"id"}`), so MedRAG's `medrag.py` and MIRAGE's evaluation run unchanged
against a medsnip root:

    from searchd.runners.medrag import RetrievalSystem
    system = RetrievalSystem("RRF-4", "MedCorp", server="127.0.0.1:50051")
    snippets, scores = system.retrieve("Which drug lowers LDL cholesterol?", k=32, rrf_k=100)

MedRAG's retriever and corpus names map onto a served root's (`RETRIEVERS`, `CORPORA`; pass your own maps for
other names); the fusion is MedRAG's own (searchd's `medrag`: each retriever's corpora merged by score, then
RRF over retrievers with `rrf_k`), asked at MedRAG's depth (max(2k, 100) per list when fusing)."""

from __future__ import annotations

from pathlib import Path

from searchd.client import DEFAULT_ADDRESS, SearchClient

# MedRAG's names -> the retrievers a medsnip MedCorp root serves (manifests/medcorp-2026.toml)
RETRIEVERS = {
    "BM25": ("bm25",),
    "Contriever": ("dense-contriever",),
    "SPECTER": ("dense-specter",),
    "MedCPT": ("dense-medcpt",),
    "RRF-2": ("bm25", "dense-medcpt"),
    "RRF-4": ("bm25", "dense-contriever", "dense-specter", "dense-medcpt"),
}
CORPORA = {
    "PubMed": ("pubmed",),
    "Textbooks": ("textbooks",),
    "StatPearls": ("statpearls",),
    "Wikipedia": ("wikipedia",),
    "MedText": ("textbooks", "statpearls"),
    "MedCorp": ("pubmed", "textbooks", "statpearls", "wikipedia"),
}


class RetrievalSystem:
    def __init__(
        self,
        retriever_name: str = "MedCPT",
        corpus_name: str = "Textbooks",
        db_dir: str | None = None,
        HNSW: bool = False,  # noqa: N803 - MedRAG's parameter name
        cache: bool = False,
        *,
        server: str = DEFAULT_ADDRESS,
        token: str | None = None,
        tls: bool = False,
        ca_file: Path | None = None,
        retrievers: dict[str, tuple[str, ...]] | None = None,
        corpora: dict[str, tuple[str, ...]] | None = None,
    ):
        """MedRAG's arguments (`db_dir`, `HNSW` and `cache` are accepted and unused: the indexes live in
        searchd), then where searchd is. Unknown names, or names whose retrievers or corpora the server does
        not serve, are a ValueError saying what it serves."""
        retrievers, corpora = retrievers or RETRIEVERS, corpora or CORPORA
        if retriever_name not in retrievers:
            raise ValueError(f"unknown retriever_name {retriever_name!r}; known: {', '.join(retrievers)}")
        if corpus_name not in corpora:
            raise ValueError(f"unknown corpus_name {corpus_name!r}; known: {', '.join(corpora)}")
        self.retriever_name, self.corpus_name = retriever_name, corpus_name
        self.retrievers, self.corpora = list(retrievers[retriever_name]), list(corpora[corpus_name])
        self.client = SearchClient(server, token=token, tls=tls, ca_file=ca_file)
        info = self.client.info()
        served_corpora = {c.name: {i.retriever for i in c.indexes} for c in info.corpora}
        for corpus in self.corpora:
            if corpus not in served_corpora:
                raise ValueError(
                    f"{corpus_name}: searchd at {server} does not serve corpus {corpus!r}; it serves "
                    f"{', '.join(served_corpora) or 'nothing'}"
                )
            missing = [r for r in self.retrievers if r not in served_corpora[corpus]]
            if missing:
                raise ValueError(
                    f"{retriever_name}: searchd at {server} has no {', '.join(missing)} index for {corpus!r}; "
                    f"it has {', '.join(sorted(served_corpora[corpus]))}"
                )

    def retrieve(self, question: str, k: int = 32, rrf_k: int = 100, id_only: bool = False):
        """(snippets, scores), best first, as MedRAG returns them: fused RRF scores when several retrievers
        are named, the retriever's own scores for one."""
        if not isinstance(question, str):
            raise TypeError(f"question must be a str, got {type(question).__name__}")
        fusing = len(self.retrievers) > 1
        response = self.client.search(
            question,
            k=k,
            corpora=self.corpora,
            retrievers=self.retrievers,
            depth=max(2 * k, 100) if fusing else k,
            rrf_k=rrf_k,
            fusion="medrag",
            return_text=not id_only,
        )
        if id_only:
            snippets = [{"id": hit.id} for hit in response.hits]
        else:
            snippets = [{"id": hit.id, "title": hit.title, "content": hit.content} for hit in response.hits]
        return snippets, [hit.score for hit in response.hits]

    def close(self) -> None:
        self.client.close()
