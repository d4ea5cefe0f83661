"""`medsnip update` never publishes a corpus that silently lost its inputs: a corpus built with a relative
input path is updated correctly from another directory (inputs are recorded absolute), a baseline that
was moved away stops the update before anything is published, and so does a truncated or stray file in
the updates folder. Real files: the update chain of conftest (a baseline and NLM's pubmed20n1016)."""

from __future__ import annotations

import gzip
import json
import shutil

from click.testing import CliRunner

from helpers import shard_bytes
from pipeline.cli import main as medsnip_main


def update(corpus, updates):
    return CliRunner().invoke(
        medsnip_main, ["update", str(corpus), "--pubmed-updates", str(updates)], catch_exceptions=False
    )


def test_a_relative_baseline_is_found_from_anywhere_and_a_moved_one_publishes_nothing(
    tmp_path, update_chain, run_corpusbuild, monkeypatch
):
    inputs, elsewhere, updates = tmp_path / "inputs", tmp_path / "elsewhere", tmp_path / "updates"
    for folder in (inputs, elsewhere, updates):
        folder.mkdir()
    shutil.copy(update_chain["baseline"], inputs)
    corpus = tmp_path / "corpus"
    monkeypatch.chdir(inputs)
    result = run_corpusbuild(
        "pubmed", update_chain["baseline"].name, "--out", corpus, "--shards", 2, "--workers", 1, "--quiet"
    )
    assert result.exit_code == 0, result.output
    baseline_only = json.loads((corpus / "build.json").read_text())["counts"]["snippets"]

    monkeypatch.chdir(elsewhere)
    shutil.copy(update_chain["n1016"], updates)
    result = update(corpus, updates)
    assert result.exit_code == 0, result.output
    record = json.loads((corpus / "build.json").read_text())
    assert [entry["path"] for entry in record["inputs"]] == [
        str(inputs / update_chain["baseline"].name),
        str(updates / update_chain["n1016"].name),
    ]
    assert record["complete"] and record["counts"]["snippets"] > baseline_only

    published, shards = (corpus / "build.json").read_bytes(), shard_bytes(corpus)
    (inputs / update_chain["baseline"].name).rename(tmp_path / "moved.xml.gz")
    shutil.copy(update_chain["n1017"], updates)
    result = update(corpus, updates)
    assert result.exit_code == 1
    assert f"{inputs / update_chain['baseline'].name}: recorded input is missing" in result.output
    assert "Nothing was published" in result.output
    assert (corpus / "build.json").read_bytes() == published and shard_bytes(corpus) == shards


def test_a_truncated_download_or_a_stray_file_is_refused_before_anything_is_published(
    tmp_path, update_chain, run_corpusbuild
):
    corpus, updates = tmp_path / "corpus", tmp_path / "updates"
    updates.mkdir()
    result = run_corpusbuild(
        "pubmed", update_chain["baseline"], "--out", corpus, "--shards", 2, "--workers", 1, "--quiet"
    )
    assert result.exit_code == 0, result.output
    published, shards = (corpus / "build.json").read_bytes(), shard_bytes(corpus)

    whole = update_chain["n1016"].read_bytes()
    cut = updates / update_chain["n1016"].name
    cut.write_bytes(whole[: len(whole) // 2])  # a download that stopped half way
    result = update(corpus, updates)
    assert result.exit_code == 1 and f"{cut}: cannot be decompressed to its end" in result.output
    assert (corpus / "build.json").read_bytes() == published and shard_bytes(corpus) == shards

    cut.unlink()
    stray = updates / "feed.xml"
    stray.write_text('<?xml version="1.0"?>\n<rss version="2.0"><channel><title>PubMed</title></channel></rss>\n')
    result = update(corpus, updates)
    assert result.exit_code == 1 and f"{stray}: not a PubMed update file" in result.output
    assert (corpus / "build.json").read_bytes() == published and shard_bytes(corpus) == shards

    stray.unlink()
    shutil.copy(update_chain["n1016"], updates)  # the good file: the update goes through
    result = update(corpus, updates)
    assert result.exit_code == 0, result.output
    assert json.loads((corpus / "build.json").read_text())["complete"]
    assert gzip.decompress(whole)  # the real file was whole all along


def test_an_index_build_killed_before_its_record_is_finished_by_the_next_update(
    tmp_path, update_chain, run_corpusbuild
):
    """A kill (or a full disk) inside the dense stage leaves dense-minilm without build.json: the next
    `medsnip update`, even with no new file, finishes it (same vectors as a build that was never
    killed) instead of skipping it for good."""
    from conftest import run_indexer

    corpus = tmp_path / "corpus"
    result = run_corpusbuild("pubmed", update_chain["baseline"], "--out", corpus, "--shards", 2, "--quiet")
    assert result.exit_code == 0, result.output
    run_indexer("store", corpus)
    run_indexer("dense", corpus, "--preset", "minilm", "--batch-size", 16)
    dense = corpus / "dense-minilm"
    finished = {path.name: path.read_bytes() for path in dense.glob("emb-*.npy")}
    (dense / "build.json").unlink()  # what a kill between embedding and the record leaves
    (dense / sorted(finished)[-1]).unlink()
    result = update(corpus, update_chain["baseline"])  # no new file: only the unfinished index to finish
    assert result.exit_code == 0, result.output
    assert "dense-minilm: rebuilt" in result.output
    assert json.loads((dense / "build.json").read_text())["complete"]
    assert {path.name: path.read_bytes() for path in dense.glob("emb-*.npy")} == finished


def test_a_crash_between_the_two_renames_of_a_swap_is_undone(tmp_path, update_chain, run_corpusbuild):
    """A crash between replace_dir's renames leaves no bm25/, only .bm25.old-PID: the next update (or
    index build) puts it back instead of exiting 0 without an index or deleting it as a stale temp; a
    killed run's .bm25.tmp-PID is never taken for an index."""
    import subprocess
    import sys

    from conftest import run_indexer

    corpus = tmp_path / "corpus"
    result = run_corpusbuild("pubmed", update_chain["baseline"], "--out", corpus, "--shards", 2, "--quiet")
    assert result.exit_code == 0, result.output
    run_indexer("store", corpus)
    run_indexer("bm25", corpus)
    record = (corpus / "bm25" / "build.json").read_bytes()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that no longer runs: the crashed job's
    shutil.copytree(corpus / "bm25", corpus / f".bm25.tmp-{gone.pid}")
    (corpus / "bm25").rename(corpus / f".bm25.old-{gone.pid}")
    result = update(corpus, update_chain["baseline"])
    assert result.exit_code == 0, result.output
    assert "bm25: restored from a swap a crash interrupted" in result.output
    assert (corpus / "bm25" / "build.json").read_bytes() == record
    assert ".bm25.tmp" not in result.output
