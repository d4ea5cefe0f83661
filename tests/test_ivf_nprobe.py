"""IVF dense indexes searched with a per-call nprobe (DenseIndex.search_vectors, searchd's `nprobe`):
visiting every inverted list gives exact search, fewer lists fewer of the exact hits, and the index's
own setting is untouched. Built from the session's real PubMedQA embeddings (no re-embedding)."""

from __future__ import annotations

import shutil

import grpc
import numpy as np
import pytest

from conftest import SAMPLES, run_indexer
from medsnip.corpus import Corpus
from medsnip.queries import query_texts
from searchd.client import SearchClient

LISTS = 8


@pytest.fixture(scope="module")
def indexes(search_root, tmp_path_factory):
    """(exact Flat index, IVF8,Flat index, query vectors) over the PubMedQA corpus."""
    from indexer.dense import DenseIndex
    from indexer.encoders import DenseEncoder

    corpus_dir = search_root / "pubmedqa"
    out = tmp_path_factory.mktemp("ivf") / "dense-ivf"
    out.mkdir()
    for path in (corpus_dir / "dense-minilm").glob("emb-*"):  # the embeddings: only the FAISS step reruns
        shutil.copy(path, out / path.name)
    shutil.copy(corpus_dir / "dense-minilm" / "encoder.json", out / "encoder.json")
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
