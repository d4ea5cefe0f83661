"""MedRAG/MIRAGE's `RetrievalSystem` and `DocExtracter`, served by searchd: MedRAG's constructor arguments (by
position too) and calls, `retrieve(question, k=32, rrf_k=100, id_only=False) -> (snippets, scores)` with each
snippet `{"id", "title", "content"}` (or `{"id"}`), and `extract(ids)`, so MedRAG's `medrag.py` runs unedited
against a medsnip root once its module's two names point here (`patch_medrag`):

    import src.medrag
    from searchd.runners.medrag import patch_medrag
    patch_medrag(src.medrag)        # src.medrag.RetrievalSystem and .DocExtracter are now these
    medrag = src.medrag.MedRAG(llm_name=..., rag=True, retriever_name="RRF-4", corpus_name="MedCorp")

MedRAG constructs them itself, so where searchd is comes from $SEARCHD_ADDRESS (else 127.0.0.1:50051) unless
`server=` is given. MedRAG's retriever and corpus names map onto a served root's (`RETRIEVERS`, `CORPORA`);
`retrievers=` and `corpora=` add names or override some, the others keep their defaults. The fusion is MedRAG's
own (searchd's `medrag`: each retriever's corpora merged by score, then RRF over retrievers with `rrf_k`), asked
at MedRAG's depth (max(2k, 100) per list when fusing, k for one retriever: searchd's default for this fusion)."""

from __future__ import annotations

import functools
from pathlib import Path

from searchd.client import SearchClient

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
        server: str | None = None,
        token: str | None = None,
        tls: bool = False,
        ca_file: Path | None = None,
        retrievers: dict[str, tuple[str, ...]] | None = None,
        corpora: dict[str, tuple[str, ...]] | None = None,
    ):
        """MedRAG's arguments (`db_dir`, `HNSW` and `cache` are accepted and unused: the indexes live in
        searchd), then where searchd is (None: $SEARCHD_ADDRESS, else 127.0.0.1:50051) and names to add to
        the default maps or override in them. Unknown names, or names whose retrievers or corpora the server
        does not serve, are a ValueError saying what it serves."""
        retrievers, corpora = {**RETRIEVERS, **(retrievers or {})}, {**CORPORA, **(corpora or {})}
        if retriever_name not in retrievers:
            raise ValueError(f"unknown retriever_name {retriever_name!r}; known: {', '.join(retrievers)}")
        if corpus_name not in corpora:
            raise ValueError(f"unknown corpus_name {corpus_name!r}; known: {', '.join(corpora)}")
        self.retriever_name, self.corpus_name = retriever_name, corpus_name
        self.retrievers, self.corpora = list(retrievers[retriever_name]), list(corpora[corpus_name])
        self.client = SearchClient(server, token=token, tls=tls, ca_file=ca_file)
        server = self.client.address  # the one it resolved (searchd.client.default_address)
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
        response = self.client.search(  # at searchd's depth for MedRAG's fusion (SearchEngine.fuses_ranks)
            question,
            k=k,
            corpora=self.corpora,
            retrievers=self.retrievers,
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


class DocExtracter:
    """MedRAG's `DocExtracter` (its `snippets_ids=` path): snippets by id, from the served root instead of a
    cloned copy of the corpus. `extract(ids)` takes ids or `{"id": ...}` dicts, as MedRAG's does, and returns
    one snippet per id, in order: `{"id", "title", "content"}`, with `contents` too when `cache` is False (the
    whole line, as MedRAG's reads it from the chunk file); an id the root does not hold is a KeyError naming
    it. The ids are the root's: MedRAG's own in a MedRAG-compatible root (docs/corpus/medrag.md)."""

    def __init__(
        self,
        db_dir: str = "./corpus",
        cache: bool = False,
        corpus_name: str = "MedCorp",
        *,
        server: str | None = None,
        token: str | None = None,
        tls: bool = False,
        ca_file: Path | None = None,
    ):
        self.db_dir, self.cache, self.corpus_name = db_dir, cache, corpus_name
        self.client = SearchClient(server, token=token, tls=tls, ca_file=ca_file)
        self._per_call: int | None = None  # the server's --max-k: GetSnippets takes that many ids a call at most

    def extract(self, ids) -> list[dict]:
        wanted = [i if isinstance(i, str) else i["id"] for i in ids]
        if self._per_call is None and len(wanted) > 1:
            self._per_call = max(1, self.client.info().max_k)
        per_call = self._per_call or 1
        found = {}
        for start in range(0, len(wanted), per_call):
            response = self.client.get_snippets(wanted[start : start + per_call])
            found.update({snippet.id: snippet for snippet in response.snippets})
        output = []
        for snippet_id in wanted:
            if snippet_id not in found:
                raise KeyError(f"{snippet_id}: the served root holds no snippet of this id")
            snippet = found[snippet_id]
            item = {"id": snippet.id, "title": snippet.title, "content": snippet.content}
            if not self.cache:
                item["contents"] = snippet.contents
            output.append(item)
        return output

    def close(self) -> None:
        self.client.close()


def patch_medrag(
    module,
    server: str | None = None,
    retrievers: dict[str, tuple[str, ...]] | None = None,
    corpora: dict[str, tuple[str, ...]] | None = None,
) -> None:
    """Point MedRAG's module (`src.medrag`, or `medrag` with src/ on the path) at searchd: its `RetrievalSystem`
    and `DocExtracter`, the two names it constructs, with MedRAG's own arguments; `server`, `retrievers` and
    `corpora` (names added to the defaults) reach them as keywords. Nothing of MedRAG's files changes."""
    module.RetrievalSystem = functools.partial(RetrievalSystem, server=server, retrievers=retrievers, corpora=corpora)
    module.DocExtracter = functools.partial(DocExtracter, server=server)
