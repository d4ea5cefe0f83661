"""BM25 built per group of shards (indexer/bm25/sharded.py) on the real PubMedQA collection: merged
(addIndexes) or kept as parts (MultiReader), the hits and every float32 score equal the single
IndexCollection run's, for the index's BM25 parameters and for overridden ones; a killed build resumes
from the finished groups; groups run as tasks on a real local Ray cluster give the same index."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from conftest import REPO, SAMPLES, copy_corpus, run_indexer
from helpers import kill_when
from indexer.bm25.sharded import shard_groups
from medsnip.buildrecord import read_build_record
from medsnip.corpus import Corpus
from medsnip.queries import query_texts


@pytest.fixture(scope="module")
def corpus_dir(search_root, tmp_path_factory):
    """4 shards, with the single-run bm25 index (a copy: the tests build indexes from it)."""
    return copy_corpus(search_root / "pubmedqa", tmp_path_factory.mktemp("sharded"), "dense-*")


@pytest.fixture(scope="module")
def texts():
    return list(query_texts(SAMPLES / "ir" / "pubmedqa-beir" / "queries.tsv").values())


def _search(index_dir, corpus_dir, texts, **params):
    from indexer.bm25 import BM25Index

    index = BM25Index(index_dir, Corpus.open(corpus_dir))
    try:
        return index.search(texts, k=100, threads=2, **params)
    finally:
        index.close()


@pytest.mark.parametrize("workers, layout", [(2, "merged"), (3, "parts")])
def test_groups_search_exactly_like_one_index(corpus_dir, texts, tmp_path, workers, layout):
    out = tmp_path / f"bm25-{layout}"
    run_indexer("bm25", corpus_dir, "--out", out, "--workers", workers, "--layout", layout)
    record = read_build_record(out)
    assert record["params"]["layout"] == layout and len(record["params"]["groups"]) == workers
    assert sorted(shard for group in record["params"]["groups"] for shard in group) == [0, 1, 2, 3]
    assert (out / "parts").is_dir() == (layout == "parts") and not (tmp_path / ".bm25-merged.parts").exists()
    reference = _search(corpus_dir / "bm25", corpus_dir, texts)
    assert sum(map(len, reference)) > 10_000
    assert _search(out, corpus_dir, texts) == reference
    # statistics are global for other BM25 parameters too (no part scores with its own IDF or length)
    assert _search(out, corpus_dir, texts, k1=1.2, b=0.75) == _search(
        corpus_dir / "bm25", corpus_dir, texts, k1=1.2, b=0.75
    )


def test_a_merged_index_is_a_plain_lucene_index_pyserini_opens(corpus_dir, tmp_path, texts):
    from indexer.jvm import start_jvm

    out = tmp_path / "bm25"
    run_indexer("bm25", corpus_dir, "--out", out, "--workers", 2)
    start_jvm()
    from pyserini.search.lucene import LuceneSearcher

    searcher = LuceneSearcher(str(out / "index"))
    assert searcher.num_docs == 500
    hits = searcher.search(texts[0], k=10)
    assert [(hit.docid, hit.score) for hit in hits] == _search(out, corpus_dir, texts[:1], k1=0.9, b=0.4)[0][:10]


def test_groups_are_consecutive_and_balanced_by_bytes(corpus_dir):
    shards = Corpus.open(corpus_dir).shards
    for groups in range(1, 6):
        found = shard_groups(shards, groups)
        assert [shard for group in found for shard in group] == list(shards)
        assert len(found) == min(groups, len(shards)) and all(found)


def test_a_killed_build_resumes_from_the_finished_groups(corpus_dir, texts, tmp_path):
    out = tmp_path / "bm25"
    command = [sys.executable, "-m", "indexer.cli", "bm25", str(corpus_dir), "--out", str(out), "--workers", "4"]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    work = tmp_path / ".bm25.parts"
    kill_when(process, lambda: len(list(work.glob("part-*.json"))) >= 1, timeout=120)
    assert process.returncode == -signal.SIGKILL and not out.exists()
    finished = len(list(work.glob("part-*.json")))
    assert 1 <= finished < 4
    run_indexer("bm25", corpus_dir, "--out", out, "--workers", "4")
    assert read_build_record(out)["counts"]["parts_built_this_run"] == 4 - finished
    assert not work.exists() and not list(tmp_path.glob(".bm25.tmp-*"))
    assert _search(out, corpus_dir, texts) == _search(corpus_dir / "bm25", corpus_dir, texts)


def test_groups_on_a_real_ray_cluster_give_the_same_index(corpus_dir, texts, tmp_path):
    """`--executor ray`: each group an IndexCollection run inside a Ray task on a private 2-CPU cluster."""
    out = tmp_path / "bm25"
    command = [
        sys.executable,
        "-m",
        "indexer.cli",
        "bm25",
        str(corpus_dir),
        "--out",
        str(out),
        "--workers",
        "2",
        "--executor",
        "ray",
    ]
    completed = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert read_build_record(out)["run"]["executor"] == "ray"
    assert _search(out, corpus_dir, texts) == _search(corpus_dir / "bm25", corpus_dir, texts)
