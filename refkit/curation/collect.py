"""`refkit collect`: candidate references per query from searchd, with provenance, deduplicated.

Each query goes through BatchSearch (hybrid by default: every (corpus, retriever) list fused by RRF
on the server). Every reference keeps where it came from: snippet id, corpus, source, document, fused
rank and score, each retriever's rank and score, and the lineage of the corpus and of each index that
ranked it (from the server's Info). Duplicates by content are dropped best-rank-first (see dedup.py)
and listed with the member they duplicate, so nothing disappears silently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import grpc

from medsnip.queries import QueryItem
from medsnip.serving import DEFAULT_RRF_K
from refkit.connection import ServerError, check_same_generation, server_error
from refkit.curation.dedup import Deduplicator
from searchd.client import SearchClient

CHUNK = 256  # queries searched before their records are written


@dataclass
class RetrievalOptions:
    k: int = 32
    corpora: tuple[str, ...] = ()
    retrievers: tuple[str, ...] = ()
    rrf_k: int = 0
    depth: int = 0
    fusion: str | None = None  # searchd.fusion: "rrf" or "medrag"; None: the root's served fusion

    def served(self, lineage: dict) -> RetrievalOptions:
        """These options with what the server serves by default filled in (its root's serve.json, from
        Info), so records name the fusion and constant that ranked them."""
        serve = lineage.get("serve") or {}
        return replace(
            self,
            fusion=self.fusion or serve.get("fusion", "rrf"),
            rrf_k=self.rrf_k or serve.get("rrf_k", DEFAULT_RRF_K),
        )

    def as_dict(self) -> dict:
        return {
            "k": self.k,
            "corpora": list(self.corpora),
            "retrievers": list(self.retrievers),
            "rrf_k": self.rrf_k or DEFAULT_RRF_K,
            "depth": self.depth or max(2 * self.k, 100),
            "fusion": self.fusion or "rrf",
        }


@dataclass
class DedupOptions:
    threshold: float = 0.8
    shingle_words: int = 3
    num_perm: int = 128
    seed: int = 1

    def new(self) -> Deduplicator:
        return Deduplicator(self.threshold, self.shingle_words, self.num_perm, self.seed)


def reference_from_hit(hit, lineage: dict) -> dict:
    """One search hit as a reference record (the shape collect, noise and assemble share)."""
    corpus = hit.retrievers[0].corpus if hit.retrievers else ""
    corpus_lineage = lineage["corpora"].get(corpus, {})
    used = sorted({r.retriever for r in hit.retrievers})
    return {
        "snippet_id": hit.id,
        "corpus": corpus,
        "source": hit.source,
        "doc_id": hit.doc_id,
        "title": hit.title,
        "content": hit.content,
        "rank": hit.rank,
        "score": round(hit.score, 8),
        "retrievers": [
            {"corpus": r.corpus, "retriever": r.retriever, "rank": r.rank, "score": round(r.score, 6)}
            for r in hit.retrievers
        ],
        "lineage": {"corpus": corpus_lineage.get("corpus", ""), **{r: corpus_lineage.get(r, "") for r in used}},
    }


def search_many(
    client: SearchClient,
    address: str,
    texts: list[str],
    options: RetrievalOptions,
    batch: int = 32,
    progress: Callable[[int], None] | None = None,
    lineage: dict | None = None,
) -> list[list]:
    """Hits (with text) for every text, through BatchSearch in batches; ServerError on any failure.
    `progress(n)` is called after each batch with the number of texts it answered. With `lineage`, the
    server must serve that generation after every batch (refkit.connection.check_same_generation)."""
    results: list[list] = []
    for start in range(0, len(texts), batch):
        chunk = texts[start : start + batch]
        try:
            responses = client.batch_search(
                chunk,
                k=options.k,
                corpora=options.corpora,
                retrievers=options.retrievers,
                rrf_k=options.rrf_k,
                depth=options.depth,
                fusion=options.fusion,
                return_text=True,
            )
        except grpc.RpcError as error:
            raise server_error(address, error) from error
        for text, response in zip(chunk, responses, strict=True):
            if response.error:  # searchd refused this question alone: a question refkit cannot use as given
                problem = ServerError(f"searchd at {address} refused the question {text[:80]!r}: {response.error}")
                problem.rejected = True
                raise problem
            results.append(list(response.hits))
        if lineage is not None:
            check_same_generation(client, address, lineage)
        if progress is not None:
            progress(len(chunk))
    return results


def collect(
    client: SearchClient,
    address: str,
    lineage: dict,
    queries: list[QueryItem],
    options: RetrievalOptions,
    dedup: DedupOptions,
    batch: int = 32,
    progress: Callable[[int], None] | None = None,
) -> Iterator[dict]:
    """One record per query: its deduplicated references and the duplicates dropped, yielded as each chunk
    of `CHUNK` queries is answered (a long run writes as it goes)."""
    for start in range(0, len(queries), CHUNK):
        chunk = queries[start : start + CHUNK]
        hits = search_many(client, address, [q.query for q in chunk], options, batch, progress, lineage)
        yield from _records(chunk, hits, options, dedup, lineage)


def _records(
    queries: list[QueryItem], all_hits: list[list], options: RetrievalOptions, dedup: DedupOptions, lineage: dict
) -> Iterator[dict]:
    for item, hits in zip(queries, all_hits, strict=True):
        deduplicator = dedup.new()
        references, duplicates = [], []
        for hit in hits:
            duplicate = deduplicator.offer(hit.id, hit.content)
            if duplicate is None:
                references.append(reference_from_hit(hit, lineage))
            else:
                duplicates.append({"snippet_id": hit.id, "rank": hit.rank, **duplicate.as_dict()})
        yield {
            "id": item.id,
            "query": item.query,
            "references": references,
            "duplicates": duplicates,
            "retrieval": options.as_dict(),
            "dedup": deduplicator.params(),
            "server_version": lineage["server_version"],
        }
