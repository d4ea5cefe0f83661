"""Static embedding models (`--pooling static`, model2vec's format) and the distillation that derives
one from a transformer (indexer/dense/static_distill.py). The models here are tiny: seeded random rows over
the bundled MiniLM's tokenizer, or a distillation of a 2-layer random BERT, so the tests run in
seconds; the real distillation of MiniLM is exercised by the scale benchmark."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import SAMPLES, run_indexer
from helpers import pubmedqa_abstracts
from indexer.dense.static_distill import distill, post_process, token_frequencies
from medsnip.buildrecord import read_build_record
from medsnip.encoders import DenseEncoder, EncoderSpec, bundled_minilm_path, resolve_model_dir
from medsnip.snippet import join_contents

BEIR = SAMPLES / "ir" / "pubmedqa-beir"


@pytest.fixture(scope="module")
def abstracts() -> list[dict]:
    return pubmedqa_abstracts(40)


@pytest.fixture(scope="module")
def tiny_static(tmp_path_factory):
    """A model2vec folder: seeded random 16-dim rows for every MiniLM WordPiece token."""
    from model2vec import StaticModel
    from tokenizers import Tokenizer

    folder = tmp_path_factory.mktemp("tiny-static")
    tokenizer = Tokenizer.from_file(str(resolve_model_dir(bundled_minilm_path()) / "tokenizer.json"))
    rows = np.random.default_rng(20261124).standard_normal((tokenizer.get_vocab_size(), 16)).astype(np.float32)
    StaticModel(rows, tokenizer, normalize=True, max_length=None).save_pretrained(folder)
    return folder


def static_spec(folder, max_length=512) -> EncoderSpec:
    return EncoderSpec("tiny-static", str(folder), pooling="static", max_length=max_length, query_max_length=8)


def test_static_vectors_equal_model2vec_and_cuts_are_counted(tiny_static, abstracts):
    from model2vec import StaticModel

    encoder = DenseEncoder(static_spec(tiny_static))
    vectors = encoder.encode_snippets(abstracts)
    reference = StaticModel.from_pretrained(tiny_static, normalize=True, max_length=None)
    np.testing.assert_allclose(vectors, reference.encode([s["contents"] for s in abstracts]), atol=1e-6)
    assert encoder.truncated == {"snippets": 0, "queries": 0}

    cut = DenseEncoder(static_spec(tiny_static, max_length=64))
    cut_vectors = cut.encode_snippets(abstracts)
    longer = sum(len(ids) > 64 for ids in reference.tokenize([s["contents"] for s in abstracts]))
    assert cut.truncated["snippets"] == longer > 0
    np.testing.assert_allclose(
        cut_vectors, reference.encode([s["contents"] for s in abstracts], max_length=64), atol=1e-6
    )
    queries = ["what is the role of aspirin in preventing stroke in elderly patients with atrial fibrillation"]
    alone = cut.encode_queries(queries)
    assert cut.truncated["queries"] == 1
    np.testing.assert_array_equal(alone, cut.encode_queries(queries + ["aspirin"])[:1])  # batch-independent


def test_indexer_dense_builds_and_searches_with_a_static_model(tmp_path, tiny_static, run_corpusbuild):
    from indexer.dense import DenseIndex

    source = tmp_path / "corpus.jsonl"
    source.write_bytes(b"".join(line + b"\n" for line in (BEIR / "corpus.jsonl").read_bytes().splitlines()[:30]))
    corpus = tmp_path / "pubmedqa"
    result = run_corpusbuild(
        "jsonl", source, "--source", "pubmedqa", "--no-chunk", "--out", corpus, "--shards", 2, "--workers", 1, "--quiet"
    )
    assert result.exit_code == 0, result.output
    run_indexer("store", corpus)
    run_indexer("dense", corpus, "--model", tiny_static, "--pooling", "static", "--max-length", 128, "--normalize")
    record = read_build_record(corpus / "dense-tiny-static0")
    assert record["encoder"]["pooling"] == "static" and record["encoder"]["dimension"] == 16
    assert record["counts"]["vectors"] == 30
    index = DenseIndex.open(
        corpus / "dense-tiny-static0", encoder=DenseEncoder(EncoderSpec.from_dict(record["encoder"]))
    )
    first = json.loads((BEIR / "corpus.jsonl").read_bytes().splitlines()[0])
    hits = index.search([join_contents(first["title"], first["text"])], k=3)[0]
    assert hits[0][0] == f"pubmedqa:{first['_id']}:0" and hits[0][1] > 0.99  # itself (float16 rows)


def test_post_processing_centres_removes_the_top_directions_and_downweights_frequent_tokens():
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((50, 6)) + 5.0  # a strong common direction, as raw token vectors have
    frequency = rng.dirichlet(np.ones(50))
    processed = post_process(vectors, frequency, remove_components=2)
    centred = vectors - frequency @ vectors
    _, _, directions = np.linalg.svd(centred * np.sqrt(frequency)[:, None], full_matrices=False)
    unweighted = processed / (1e-3 / (1e-3 + frequency))[:, None]
    np.testing.assert_allclose(unweighted @ directions[:2].T, 0, atol=1e-4)  # top directions gone
    np.testing.assert_allclose(frequency @ unweighted, 0, atol=1e-4)  # centred on the weighted mean
    frequent, rare = int(np.argmax(frequency)), int(np.argmin(frequency))
    assert np.linalg.norm(processed[frequent]) / np.linalg.norm(unweighted[frequent]) < np.linalg.norm(
        processed[rare]
    ) / np.linalg.norm(unweighted[rare])


def test_distilling_a_tiny_bert_gives_a_loadable_static_model(tmp_path, abstracts, run_corpusbuild):
    """`indexer distill-static` on a corpus: frequencies from its snippets, a model `--pooling static` loads."""
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer, BertConfig, BertModel

    teacher = tmp_path / "tiny-bert"
    tokenizer = AutoTokenizer.from_pretrained(bundled_minilm_path())
    torch.manual_seed(20261124)
    BertModel(
        BertConfig(
            vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
        )
    ).save_pretrained(teacher)
    tokenizer.save_pretrained(teacher)
    texts = [s["contents"] for s in abstracts]
    frequency = token_frequencies(Tokenizer.from_file(str(teacher / "tokenizer.json")), texts, len(tokenizer))
    assert frequency.sum() == pytest.approx(1.0) and frequency[tokenizer.convert_tokens_to_ids("the")] > 0.01

    source = tmp_path / "corpus.jsonl"
    source.write_bytes(b"".join(line + b"\n" for line in (BEIR / "corpus.jsonl").read_bytes().splitlines()[:40]))
    corpus = tmp_path / "pubmedqa"
    result = run_corpusbuild("jsonl", source, "--source", "pubmedqa", "--no-chunk", "--out", corpus, "--quiet")
    assert result.exit_code == 0, result.output
    out = tmp_path / "static"
    run_indexer("distill-static", corpus, "--model", teacher, "--out", out, "--remove-components", 2)
    encoder = DenseEncoder(EncoderSpec("distilled", str(out), pooling="static"))
    vectors = encoder.encode_snippets(abstracts)
    assert vectors.shape == (len(abstracts), 16)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert len({tuple(np.round(v, 4)) for v in vectors}) == len(abstracts)  # distinct texts, distinct vectors
    built = [json.loads(line)["contents"] for shard in sorted(corpus.glob("shard-*.jsonl")) for line in shard.open()]
    same = distill(str(teacher), tmp_path / "again", built, remove_components=2)  # the API on the same snippets
    again = DenseEncoder(EncoderSpec("again", str(same), pooling="static"))
    np.testing.assert_allclose(again.encode_snippets(abstracts), vectors, atol=1e-5)
