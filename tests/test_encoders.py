"""Encoders by configuration (medsnip/encoders/): document prefixes, last-token pooling with EOS for
decoder encoders (on a tiny local decoder, since no decoder weights can be installed here), and texts
cut at the max length counted, in the encoder, the dense build record and searchd's stats."""

from __future__ import annotations

import json
import signal

import numpy as np
import pytest

from conftest import SAMPLES, run_indexer
from helpers import pubmedqa_abstracts
from medsnip.buildrecord import read_build_record
from medsnip.encoders import DenseEncoder, EncoderSpec, TextEncoder, bundled_minilm_path, preset
from medsnip.queries import query_texts

BEIR = SAMPLES / "ir" / "pubmedqa-beir"


@pytest.fixture(scope="module")
def abstracts() -> list[dict]:
    return pubmedqa_abstracts(12)


@pytest.fixture(scope="module")
def tiny_decoder(tmp_path_factory):
    """A 2-layer GPT-2 with random (seeded) weights and the bundled MiniLM's WordPiece tokenizer, whose
    [SEP] is declared its EOS; saved as a local model folder."""
    import torch
    from transformers import AutoTokenizer, GPT2Config, GPT2Model

    folder = tmp_path_factory.mktemp("tiny-decoder")
    tokenizer = AutoTokenizer.from_pretrained(bundled_minilm_path())
    tokenizer.add_special_tokens({"eos_token": "[SEP]"})
    torch.manual_seed(20261124)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=128, n_embd=32, n_layer=2, n_head=2)
    GPT2Model(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_last_token_pooling_reads_the_eos_state_whatever_the_padding(tiny_decoder):
    import torch

    encoder = TextEncoder(str(tiny_decoder), "last-token", max_length=64, normalize=False, device="cpu")
    texts = ["aspirin", "aspirin and myocardial infarction in elderly patients", "statins lower LDL cholesterol"]
    batched = encoder.encode(texts, batch_size=8)  # right-padded to the longest
    for text, vector in zip(texts, batched, strict=True):
        ids = encoder.tokenizer(text)["input_ids"]
        assert ids[-1] == encoder.tokenizer.eos_token_id  # the tokenizer's own [SEP] is the EOS: not doubled
        with torch.inference_mode():
            state = encoder.model(input_ids=torch.tensor([ids])).last_hidden_state[0, -1].numpy()
        np.testing.assert_allclose(vector, state, rtol=1e-5, atol=1e-5)
    independent = encoder.encode_independent(texts)
    np.testing.assert_allclose(independent, batched, rtol=1e-5, atol=1e-5)


def test_a_missing_eos_is_appended_and_the_cut_leaves_room_for_it(tiny_decoder):
    encoder = TextEncoder(str(tiny_decoder), "last-token", max_length=8, normalize=False, device="cpu")
    encoder.tokenizer.add_special_tokens({"eos_token": "[unused1]"})  # a tokenizer that does not end with EOS
    tokens = encoder._tokenize(["one two three four five six seven eight nine ten", "one"], 8)
    eos = encoder.tokenizer.eos_token_id
    for ids, mask in zip(tokens["input_ids"].tolist(), tokens["attention_mask"].tolist(), strict=True):
        real = [token for token, keep in zip(ids, mask, strict=True) if keep]
        assert real[-1] == eos and len(real) <= 8
    assert encoder._token_counts(["one two three four five six seven eight nine ten"])[0] > 8


def test_texts_cut_at_the_max_length_are_counted(abstracts):
    spec = preset("minilm", max_length=32, query_max_length=16)
    encoder = DenseEncoder(spec, device="cpu")
    tokenizer = encoder.documents.tokenizer
    encoder.encode_snippets(abstracts)
    longer = sum(len(tokenizer(s["contents"])["input_ids"]) > 32 for s in abstracts)
    assert encoder.truncated == {"snippets": longer, "queries": 0} and longer > 0
    encoder.encode_queries(["aspirin", " ".join(["word"] * 40)])
    assert encoder.truncated["queries"] == 1


def test_document_prefix_goes_before_every_snippet(abstracts):
    plain = DenseEncoder(preset("minilm"), device="cpu")
    prefixed = DenseEncoder(preset("minilm", document_prefix="passage: "), device="cpu")
    expected = plain.documents.encode(["passage: " + s["contents"] for s in abstracts[:4]])
    np.testing.assert_array_equal(prefixed.encode_snippets(abstracts[:4]), expected)
    assert prefixed.identity()["document_prefix"] == "passage: "


def test_presets_carry_the_model_cards_settings():
    e5 = preset("e5-base")
    assert (e5.query_prefix, e5.document_prefix, e5.pooling, e5.max_length) == ("query: ", "passage: ", "mean", 512)
    assert preset("e5-mistral").pooling == "last-token" and preset("e5-mistral").max_length == 4096
    assert preset("bge-base-zh").query_prefix.startswith("为这个句子")
    assert preset("medcpt").query_max_length == 64  # MedCPT's query encoder was trained on 64 tokens
    assert EncoderSpec.from_dict({"name": "old", "model": "m"}).document_prefix == ""  # indexes built before


def test_build_record_and_server_count_truncation(tmp_path, run_corpusbuild):
    from searchd.client import SearchClient
    from searchd.launch import start_background_server

    source = tmp_path / "corpus.jsonl"
    source.write_bytes(b"".join(line + b"\n" for line in (BEIR / "corpus.jsonl").read_bytes().splitlines()[:12]))
    corpus = tmp_path / "root" / "pubmedqa"
    result = run_corpusbuild(
        "jsonl", source, "--source", "pubmedqa", "--no-chunk", "--out", corpus, "--shards", 2, "--workers", 1, "--quiet"
    )
    assert result.exit_code == 0, result.output
    run_indexer("store", corpus)
    run_indexer("dense", corpus, "--preset", "minilm", "--max-length", 32, "--query-max-length", 16)
    record = read_build_record(corpus / "dense-minilm")
    tokenizer = TextEncoder(bundled_minilm_path(), "mean", 32, True, "cpu").tokenizer
    snippets = [json.loads(line) for shard in sorted(corpus.glob("shard-*.jsonl")) for line in shard.open()]
    longer = sum(len(tokenizer(s["contents"])["input_ids"]) > 32 for s in snippets)
    assert record["counts"]["truncated_snippets"] == longer > 0
    process, address = start_background_server(tmp_path / "root")
    try:
        with SearchClient(address) as client:
            question = list(query_texts(BEIR / "queries.tsv").values())[0]
            client.search(question, k=5)
            client.search("aspirin", k=5)
            stats = json.loads(client.info().stats_json)
        assert stats["queries"] == 2
        assert stats["truncated_queries"] == {"minilm": int(len(tokenizer(question)["input_ids"]) > 16)}
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
