"""searchd with several dense indexes per corpus, as a real server over two real corpora (PubMedQA
abstracts): every `dense-<name>` index is a retriever of its own, listed by Info with its encoder,
selectable by name (or all of them as "dense"); fusion `rrf` and MedRAG's `medrag` equal what is
computed here from the indexer's own lists."""

from __future__ import annotations

import json
import signal

import grpc
import pytest

from conftest import SAMPLES, build_pubmedqa, run_indexer
from helpers import rrf_by_hand, tiny_static_model
from medsnip.corpus import Corpus
from medsnip.queries import query_texts
from searchd.client import SearchClient
from searchd.launch import start_background_server

BEIR = SAMPLES / "ir" / "pubmedqa-beir"
RETRIEVERS = ["bm25", "dense-minilm", "dense-static"]


@pytest.fixture(scope="module")
def root(tmp_path_factory, run_corpusbuild):
    """Corpora `a` and `b` (80 real abstracts each), both with BM25 and two dense indexes of different
    encoders: MiniLM (its preset, a transformer) and a static model (model2vec, another dimension)."""
    folder = tmp_path_factory.mktemp("retrievers")
    static = tiny_static_model(folder / "static-model")
    lines = (BEIR / "corpus.jsonl").read_bytes().splitlines(keepends=True)
    for name, part in (("a", lines[:80]), ("b", lines[80:160])):
        corpus = build_pubmedqa(run_corpusbuild, part, folder / f"{name}.jsonl", folder / "root" / name, 2)
        run_indexer("store", corpus)
        run_indexer("bm25", corpus)
        # MiniLM cut at 128 tokens: the test is about choosing and fusing retrievers, not MiniLM's reach
        run_indexer("dense", corpus, "--preset", "minilm", "--batch-size", 64, "--max-length", 128)
        run_indexer(
            "dense",
            corpus,
            "--model",
            static,
            "--pooling",
            "static",
            "--max-length",
            128,
            "--normalize",
            "--out",
            corpus / "dense-static",
        )
    return folder / "root"


@pytest.fixture(scope="module")
def server(root):
    process, address = start_background_server(root)
    yield address
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0


@pytest.fixture(scope="module")
def questions():
    return list(query_texts(BEIR / "queries.tsv").values())[:4]


@pytest.fixture(scope="module")
def indexer_lists(root):
    """lists(question, depth) -> {(corpus, retriever): [(id, score)]} from the indexer's classes."""
    from indexer.bm25 import BM25Index
    from indexer.dense import DenseIndex
    from medsnip.encoders import DenseEncoder

    indexes = {}
    for corpus in ("a", "b"):
        indexes[(corpus, "bm25")] = BM25Index.open(root / corpus / "bm25")
        for name in RETRIEVERS[1:]:
            dense = DenseIndex.open(root / corpus / name)
            dense.encoder = DenseEncoder(dense.spec, queries_only=True)
            indexes[(corpus, name)] = dense

    def lists(question: str, depth: int) -> dict:
        return {key: index.search([question], depth)[0] for key, index in indexes.items()}

    return lists


def test_info_lists_every_dense_index_with_its_encoder(server, root):
    with SearchClient(server) as client:
        info = client.info()
    assert list(info.retrievers) == RETRIEVERS
    for corpus_info in info.corpora:
        assert [index.retriever for index in corpus_info.indexes] == RETRIEVERS
        encoders = {index.retriever: index.encoder_json for index in corpus_info.indexes}
        assert encoders["bm25"] == ""
        assert json.loads(encoders["dense-minilm"])["pooling"] == "mean"
        assert json.loads(encoders["dense-static"])["pooling"] == "static"
        corpus = Corpus.open(root / corpus_info.name)
        assert all(index.lineage_sha256 == corpus.record_hash for index in corpus_info.indexes)


def test_retrievers_are_chosen_by_name_or_all_dense(server, questions):
    with SearchClient(server) as client:
        one = client.search(questions[0], k=10, retrievers=["dense-static"])
        assert {r.retriever for hit in one.hits for r in hit.retrievers} == {"dense-static"}
        dense = client.search(questions[0], k=50, retrievers=["dense"])
        assert {r.retriever for hit in dense.hits for r in hit.retrievers} == {"dense-minilm", "dense-static"}
        with pytest.raises(grpc.RpcError) as refused:
            client.search(questions[0], k=10, retrievers=["dense-nope"])
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "dense-static" in refused.value.details()


def test_rrf_fuses_every_corpus_and_retriever_list(server, questions, indexer_lists):
    with SearchClient(server) as client:
        for question in questions:
            response = client.search(question, k=10, rrf_k=60)
            lists = indexer_lists(question, 100)  # six lists: 2 corpora x 3 retrievers
            expected = rrf_by_hand(lists.values(), 10, 60)
            assert [hit.id for hit in response.hits] == [i for i, _ in expected]
            assert [hit.score for hit in response.hits] == pytest.approx([score for _, score in expected], rel=1e-6)


def _medrag_by_hand(lists: dict, retrievers: list[str], k: int, rrf_k: int) -> list[tuple[str, float]]:
    """MedRAG's RetrievalSystem.merge, written out: per retriever the corpora's hits concatenated and
    sorted by score (descending), then RRF over those merged lists (ranks from 1); one retriever: the
    merged list itself."""
    merged = {}
    for retriever in retrievers:
        hits = [hit for (corpus, name), found in sorted(lists.items()) if name == retriever for hit in found]
        merged[retriever] = sorted(hits, key=lambda hit: -hit[1])
    if len(retrievers) == 1:
        return merged[retrievers[0]][:k]
    scores: dict[str, float] = {}
    for hits in merged.values():
        for rank, (snippet_id, _) in enumerate(hits, 1):
            scores[snippet_id] = scores.get(snippet_id, 0.0) + 1 / (rrf_k + rank)
    ranked = sorted(scores.items(), key=lambda item: -item[1])
    return ranked[:k]


@pytest.mark.parametrize("retrievers", [RETRIEVERS, ["bm25", "dense-minilm"], ["dense-static"]])
def test_medrag_fusion_merges_corpora_by_score_then_fuses_retrievers(server, questions, indexer_lists, retrievers):
    with SearchClient(server) as client:
        for question in questions:
            response = client.search(question, k=10, retrievers=retrievers, fusion="medrag", rrf_k=100)
            lists = {key: hits for key, hits in indexer_lists(question, 100).items() if key[1] in retrievers}
            expected = _medrag_by_hand(lists, retrievers, 10, 100)
            got = [(hit.id, hit.score) for hit in response.hits]
            assert [score for _, score in got] == pytest.approx([score for _, score in expected], rel=1e-6)
            # ids too, except where MedRAG's own order is undefined (equal scores)
            for (got_id, got_score), (want_id, _) in zip(got, expected, strict=True):
                tied = sum(1 for _, score in expected if score == pytest.approx(got_score, rel=1e-9)) > 1
                assert got_id == want_id or tied
            if len(retrievers) == 1:  # the merged list: each hit's own score, its corpus and rank in it
                assert all(hit.retrievers[0].rank == hit.rank for hit in response.hits)
