"""refkit.disk_cache: an entry is read instead of rebuilt, never for other inputs or other code, a damaged one is
rebuilt, `MEDSNIP_REFKIT_CACHE=off` writes nothing; and a real lexicon build and noise's rewriter over it give the
same from a cold cache, a warm one and none; refkit's MiniLM vectors are stored per padding (refkit.vector_cache)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import PUBMED_SAMPLES
from refkit import disk_cache
from refkit.cli import main as refkit_main


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("MEDSNIP_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("MEDSNIP_REFKIT_CACHE", raising=False)
    return tmp_path / "cache" / "refkit"


def test_an_entry_is_read_for_the_same_inputs_only_and_a_damaged_one_is_rebuilt(cache, tmp_path, monkeypatch):
    built = []

    def build(value):
        built.append(value)
        return {"value": value}

    source = tmp_path / "table.tsv"
    source.write_text("a\tb\n", encoding="utf-8")
    key = {"table": disk_cache.file_digest(source)}
    assert disk_cache.cached("test", key, lambda: build(1)) == {"value": 1}
    assert disk_cache.cached("test", key, lambda: build(2)) == {"value": 1}  # read, not built
    assert built == [1]
    [entry] = cache.glob("test-*.pickle")
    assert pickle.loads(entry.read_bytes()) == {"value": 1}
    assert not list(cache.glob("*.partial"))
    source.write_text("a\tc\n", encoding="utf-8")  # other bytes: another entry
    assert disk_cache.cached("test", {"table": disk_cache.file_digest(source)}, lambda: build(3)) == {"value": 3}
    entry.write_bytes(b"\x80\x05 truncated")  # a killed writer cannot leave this, a damaged disk can
    assert disk_cache.cached("test", key, lambda: build(4)) == {"value": 4}
    assert pickle.loads(entry.read_bytes()) == {"value": 4}
    monkeypatch.setattr(disk_cache, "code_version", lambda: "other code")  # a changed rule never reads old entries
    assert disk_cache.cached("test", key, lambda: build(5)) == {"value": 5}
    assert built == [1, 3, 4, 5]


def test_off_builds_every_time_and_writes_nothing(cache, monkeypatch):
    monkeypatch.setenv("MEDSNIP_REFKIT_CACHE", "off")
    assert disk_cache.cached("test", {"k": 1}, lambda: 1) == 1
    assert disk_cache.cached("test", {"k": 1}, lambda: 2) == 2
    assert not cache.exists()


def test_a_lexicon_and_its_rewriter_are_the_same_from_a_cold_cache_and_a_warm_one(
    cache, tmp_path, monkeypatch, run_corpusbuild
):
    """Every MeSH name with both clinicians' dictionaries and the PubMed sample's records mined from its shards: a
    cold cache writes the MeSH names, the two dictionaries and the names matcher (building them as no cache does),
    a warm one reads them into the same lexicon bytes; `refkit noise`'s rewriter over that file reads the very
    matcher the lexicon build counted mentions with, and finds what it finds without the cache."""
    from refkit.noise import QueryRewriter
    from refkit.vocabulary.lexicon import read_lexicon
    from refkit.vocabulary.matcher import read_aspects

    corpus = tmp_path / "pubmed"
    result = run_corpusbuild("pubmed", PUBMED_SAMPLES, "--out", corpus, "--shards", 1, "--workers", 1, "--quiet")
    assert result.exit_code == 0, result.output
    outputs = {}
    for run in ("cold", "warm"):
        out = tmp_path / f"lexicon-{run}.tsv"
        result = CliRunner().invoke(
            refkit_main, ["lexicon", "--mesh-names", "--corpus", str(corpus), "--out", str(out)], catch_exceptions=False
        )
        assert result.exit_code == 0, result.output
        outputs[run] = out.read_bytes()
        if run == "cold":
            kinds = sorted(p.name.rsplit("-", 1)[0] for p in cache.glob("*.pickle"))
            assert kinds == ["clinical-dictionary", "clinical-dictionary", "mesh-names", "names-matcher"], kinds
    assert outputs["cold"] == outputs["warm"]
    question = "Do statins cause myopathy in patients taking warfarin?"
    found = {}
    for run in ("none", "warm"):
        monkeypatch.setenv("MEDSNIP_REFKIT_CACHE", "off" if run == "none" else "on")
        analysis = QueryRewriter(read_lexicon(tmp_path / "lexicon-cold.tsv"), read_aspects()).analyse(question)
        found[run] = [(m.text, m.payload.name, m.payload.type) for m in analysis.entities]
    assert len(list(cache.glob("names-matcher-*.pickle"))) == 1  # the rewriter read the lexicon build's matcher
    assert found["warm"] == found["none"]
    assert {"statins", "myopathy", "warfarin"} <= {text.lower() for text, _, _ in found["warm"]}, found


def test_minilm_vectors_are_stored_per_padding(tmp_path, monkeypatch):
    """A query vector's last bits depend on the padding it was computed with (PAD_MULTIPLE): vectors stored
    under one padding are never read under another, so a cached run stays byte-identical to an uncached one."""
    from medsnip.encoders import transformer
    from refkit.vector_cache import TextVectors

    now = TextVectors(tmp_path).path
    monkeypatch.setattr(transformer, "PAD_MULTIPLE", transformer.PAD_MULTIPLE * 4)
    other = TextVectors(tmp_path).path
    assert now != other and now.parent == other.parent == tmp_path
