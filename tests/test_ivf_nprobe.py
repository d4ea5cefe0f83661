"""IVF dense indexes: trained once on a seeded sample and shared by every shard, memory-mapped when
opened, OPQ-rotated IVF-PQ too, searched with a per-call nprobe (DenseIndex.search_vectors, searchd's
`nprobe`): visiting every inverted list gives exact search, fewer lists fewer of the exact hits, and the
index's own setting is untouched; FAISS on a GPU is asked for by device. Built from the session's real
PubMedQA embeddings (no re-embedding)."""

from __future__ import annotations

import shutil
from pathlib import Path

import grpc
import numpy as np
import pytest

from conftest import SAMPLES, copy_corpus, run_indexer
from medsnip.corpus import Corpus
from medsnip.queries import query_texts
from searchd.client import SearchClient

LISTS = 8


def with_embeddings(corpus_dir, out):
    """A new index folder holding the corpus's MiniLM embeddings, so only the FAISS step runs there."""
    out.mkdir()
    for path in (corpus_dir / "dense-minilm").glob("emb-*"):
        shutil.copy(path, out / path.name)
    shutil.copy(corpus_dir / "dense-minilm" / "encoder.json", out / "encoder.json")
    return out


@pytest.fixture(scope="module")
def pubmedqa(search_root, tmp_path_factory) -> Path:
    """The shared root's PubMedQA corpus with its Flat index, copied: these tests build indexes from it."""
    return copy_corpus(search_root / "pubmedqa", tmp_path_factory.mktemp("ivf-corpus"), "bm25")


@pytest.fixture(scope="module")
def indexes(pubmedqa, tmp_path_factory):
    """(exact Flat index, IVF8,Flat index, query vectors) over the PubMedQA corpus."""
    from indexer.dense import DenseIndex
    from medsnip.encoders import DenseEncoder

    corpus_dir = pubmedqa
    out = with_embeddings(corpus_dir, tmp_path_factory.mktemp("ivf") / "dense-ivf")
    run_indexer("dense", corpus_dir, "--preset", "minilm", "--index-factory", f"IVF{LISTS},Flat", "--out", out)
    corpus = Corpus.open(corpus_dir)
    flat, ivf = DenseIndex(corpus_dir / "dense-minilm", corpus), DenseIndex(out, corpus)
    encoder = DenseEncoder(flat.spec, queries_only=True)
    vectors = encoder.encode_queries(list(query_texts(SAMPLES / "ir" / "pubmedqa-beir" / "queries.tsv").values())[:60])
    return flat, ivf, vectors


def test_every_list_visited_is_exact_search(indexes):
    flat, ivf, vectors = indexes
    assert ivf.is_ivf and not flat.is_ivf
    exact = flat.search_vectors(vectors, 10)
    full = ivf.search_vectors(vectors, 10, nprobe=LISTS)
    assert [[(s, r) for s, r, _ in hits] for hits in full] == [[(s, r) for s, r, _ in hits] for hits in exact]
    np.testing.assert_allclose([[x for *_, x in h] for h in full], [[x for *_, x in h] for h in exact], rtol=1e-5)


def test_fewer_lists_find_fewer_exact_hits_and_leave_the_index_setting(indexes):
    flat, ivf, vectors = indexes
    exact = [{(s, r) for s, r, _ in hits} for hits in flat.search_vectors(vectors, 10)]
    one = [{(s, r) for s, r, _ in hits} for hits in ivf.search_vectors(vectors, 10, nprobe=1)]
    recall_one = np.mean([len(a & b) / 10 for a, b in zip(one, exact, strict=True)])
    assert recall_one < 1.0
    default = [{(s, r) for s, r, _ in hits} for hits in ivf.search_vectors(vectors, 10)]  # the index's nprobe (1)
    assert default == one
    assert flat.search_vectors(vectors, 10, nprobe=1) == flat.search_vectors(vectors, 10)  # Flat ignores it


def test_searchd_refuses_an_nprobe_out_of_range(search_root):
    from searchd.launch import start_background_server

    process, address = start_background_server(search_root, "--nprobe", "4")
    try:
        with SearchClient(address) as client:
            assert client.search("aspirin", k=3, nprobe=16).hits  # Flat indexes ignore it
            with pytest.raises(grpc.RpcError) as refused:
                client.search("aspirin", k=3, nprobe=0)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "nprobe" in refused.value.details()
    finally:
        process.terminate()
        assert process.wait(timeout=60) == 0


def test_training_is_seeded_and_shared_by_every_shard(indexes, pubmedqa, tmp_path):
    import faiss

    _, ivf, _ = indexes
    corpus_dir = pubmedqa
    again = with_embeddings(corpus_dir, tmp_path / "dense-ivf-again")
    run_indexer("dense", corpus_dir, "--preset", "minilm", "--index-factory", f"IVF{LISTS},Flat", "--out", again)
    shards = sorted(ivf.path.glob("faiss-*.index"))
    assert len(shards) > 1
    assert [p.read_bytes() for p in shards] == [(again / p.name).read_bytes() for p in shards]  # same bytes
    opened = [faiss.read_index(str(p)) for p in shards]  # kept alive: the quantizers below belong to them
    centroids = [faiss.extract_index_ivf(index).quantizer.reconstruct_n(0, LISTS) for index in opened]
    for other in centroids[1:]:
        np.testing.assert_array_equal(other, centroids[0])  # one coarse quantizer for all shards


def test_shard_indexes_are_memory_mapped_not_read(indexes):
    _, ivf, _ = indexes
    mapped = {line.split()[-1] for line in open("/proc/self/maps") if "faiss-" in line}
    assert {str(p.resolve()) for p in ivf.path.glob("faiss-*.index")} <= mapped


def test_opq_ivf_pq_takes_nprobe_through_its_rotation(pubmedqa, tmp_path, indexes):
    from indexer.dense import DenseIndex

    flat, _, vectors = indexes
    corpus_dir = pubmedqa
    out = with_embeddings(corpus_dir, tmp_path / "dense-opq")
    run_indexer("dense", corpus_dir, "--preset", "minilm", "--index-factory", f"OPQ16,IVF{LISTS},PQ16x4", "--out", out)
    per_call = DenseIndex(out, flat.corpus).search_vectors(vectors, 10, nprobe=LISTS)
    set_on_index = DenseIndex(out, flat.corpus, nprobe=LISTS).search_vectors(vectors, 10)
    assert per_call == set_on_index
    assert per_call != DenseIndex(out, flat.corpus).search_vectors(vectors, 10, nprobe=1)
    exact = [{(s, r) for s, r, _ in hits} for hits in flat.search_vectors(vectors, 10)]
    found = [{(s, r) for s, r, _ in hits} for hits in per_call]
    assert np.mean([len(a & b) / 10 for a, b in zip(found, exact, strict=True)]) > 0.3  # compressed, not random


def test_faiss_on_gpu_is_asked_for_by_device(indexes):
    from indexer.dense import DenseIndex, faiss_gpus, resolve_faiss_device

    flat, _, _ = indexes
    assert resolve_faiss_device("cpu") == "cpu"
    if faiss_gpus():
        assert resolve_faiss_device("auto") == "cuda"
        pytest.skip("a GPU is here: the CPU-only refusal cannot be checked")
    assert resolve_faiss_device("auto") == "cpu"
    with pytest.raises(ValueError, match="FAISS sees no GPU"):
        DenseIndex(flat.path, flat.corpus, device="cuda")
