"""`medsnip update` (pipeline.update) on the real update chain: a corpus built from the baseline and the
real update file pubmed20n1016, with store, BM25 and dense indexes, takes a later update file (a
DeleteCitation, a revision, an abstract removed). The corpus is then byte for byte a fresh build of all
three files, BM25 (updated by id) gives a fresh build's hits and scores, dense embeds only the changed
snippets and finds what a fresh build finds, and running the job again changes nothing."""

from __future__ import annotations

import json
import shutil

from click.testing import CliRunner

from conftest import run_indexer
from helpers import shard_bytes
from indexer.bm25 import BM25Index
from indexer.dense import DenseIndex
from medsnip.buildrecord import read_build_record
from medsnip.corpus import Corpus
from medsnip.encoders import DenseEncoder, preset
from pipeline.cli import main as medsnip_main

QUESTIONS = ["mutation analysis in patients", "cell proliferation", "treatment outcome", "influenza vaccine"]


def build(run_corpusbuild, out, *inputs):
    result = run_corpusbuild("pubmed", *inputs, "--out", out, "--shards", 2, "--workers", 1, "--quiet")
    assert result.exit_code == 0, result.output
    run_indexer("store", out)
    run_indexer("bm25", out)
    run_indexer("dense", out, "--preset", "minilm", "--batch-size", 64)


def test_the_daily_update_equals_a_fresh_build_and_embeds_only_what_changed(tmp_path, update_chain, run_corpusbuild):
    chain = update_chain
    updates = tmp_path / "updates"
    updates.mkdir()
    shutil.copy(chain["n1017"], updates)
    corpus, fresh = tmp_path / "live" / "pubmed", tmp_path / "fresh" / "pubmed"
    build(run_corpusbuild, corpus, chain["baseline"], chain["n1016"])
    build(run_corpusbuild, fresh, chain["baseline"], chain["n1016"], updates / chain["n1017"].name)

    result = CliRunner().invoke(
        medsnip_main, ["update", str(corpus), "--pubmed-updates", str(updates)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.splitlines()[-1])
    assert summary["applied"] == [chain["n1017"].name]
    changes = summary["changes"]
    assert changes["removed"] >= 1 and changes["added"] + changes["changed"] >= 1
    assert shard_bytes(corpus) == shard_bytes(fresh)

    live, reference = Corpus.open(corpus), Corpus.open(fresh)
    # BM25 took the change set by id (indexer.bm25.update) rather than indexing every snippet again
    assert read_build_record(corpus / "bm25")["run"]["update"]["parent"] == changes["parent"]
    assert BM25Index(corpus / "bm25", live).search(QUESTIONS, 10) == BM25Index(fresh / "bm25", reference).search(
        QUESTIONS, 10
    )
    counts = read_build_record(corpus / "dense-minilm")["counts"]
    assert 0 < counts["snippets_embedded_this_run"] <= changes["added"] + changes["changed"] < live.snippets
    encoder = DenseEncoder(preset("minilm"))
    vectors = encoder.encode_queries(QUESTIONS)
    ours = DenseIndex(corpus / "dense-minilm", live).search(vectors, 5)
    theirs = DenseIndex(fresh / "dense-minilm", reference).search(vectors, 5)
    assert [[hit for hit, _ in hits] for hits in ours] == [[hit for hit, _ in hits] for hits in theirs]

    records = {name: (corpus / name / "build.json").read_bytes() for name in ("", "store", "bm25", "dense-minilm")}
    again = CliRunner().invoke(
        medsnip_main, ["update", str(corpus), "--pubmed-updates", str(updates)], catch_exceptions=False
    )
    assert again.exit_code == 0 and json.loads(again.stdout.splitlines()[-1])["applied"] == []
    assert shard_bytes(corpus) == shard_bytes(fresh)
    # nothing is rebuilt, nothing embedded: every build record (and the change set it names) is as it was
    assert records == {name: (corpus / name / "build.json").read_bytes() for name in records}
