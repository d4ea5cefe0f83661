"""Indexes updated with a corpus's change set (indexer.bm25.update, the store's shard reuse) equal a full
rebuild, and what they replace is kept as a generation until pruned (medsnip.generations).

The corpus is the 500 real PubMedQA abstracts: version 1 holds the first 450, version 2 drops 50 of
them, adds the last 50 and gives 30 others another abstract's text (changed). The queries are the
real PubMedQA questions, searched at depth 100, so most of each ranking is long-tail scores where a
statistic off by one document shows."""

from __future__ import annotations

import json
import os
import shutil
import socket

import orjson
import pytest

from conftest import SAMPLES, run_indexer
from indexer.bm25 import BM25Index, build_bm25
from indexer.store import SnippetStore
from medsnip.buildrecord import lineage_hash, read_build_record
from medsnip.corpus import Corpus
from medsnip.generations import GENERATIONS, kept_generations, prune, remove_lease, write_lease
from medsnip.queries import query_texts

DEPTH = 100


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    folder = tmp_path_factory.mktemp("versions")
    lines = [
        orjson.loads(line) for line in (SAMPLES / "ir" / "pubmedqa-beir" / "corpus.jsonl").read_bytes().splitlines()
    ]
    first = lines[:450]
    second = [dict(line) for line in lines[50:]]
    for position in range(0, 60, 2):  # 30 kept abstracts take the text of the one after them
        second[position]["text"] = lines[50 + position + 1]["text"]
    for name, records in (("v1", first), ("v2", second)):
        (folder / f"{name}.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return folder


def build_corpus(run_corpusbuild, versions, version, out):
    result = run_corpusbuild(
        "jsonl",
        versions / f"{version}.jsonl",
        "--source",
        "pubmedqa",
        "--no-chunk",
        "--out",
        out,
        "--shards",
        3,
        "--workers",
        1,
        "--quiet",
    )
    assert result.exit_code == 0, result.output


def questions() -> list[str]:
    return list(query_texts(SAMPLES / "ir" / "pubmedqa-beir" / "queries.tsv").values())[:60]


def plain_pyserini(path):
    """The index read as any Lucene tool reads it: pyserini's own LuceneSearcher, no medsnip reader."""
    from indexer.jvm import start_jvm

    start_jvm()
    from pyserini.search.lucene import LuceneSearcher

    searcher = LuceneSearcher(str(path / "index"))
    searcher.set_bm25(0.9, 0.4)
    return [[(hit.docid, hit.score) for hit in searcher.search(query, DEPTH)] for query in questions()]


def ranking(corpus_dir, name="bm25"):
    index = BM25Index(corpus_dir / name, Corpus.open(corpus_dir))
    try:
        return index.search(questions(), DEPTH)
    finally:
        index.close()


@pytest.fixture(scope="module")
def updated(tmp_path_factory, versions, run_corpusbuild):
    """Version 1 with store, BM25 (merged) and BM25 as 2 parts, then version 2 built over it and every
    index updated; beside it a fresh build of version 2."""
    root = tmp_path_factory.mktemp("incremental")
    live, fresh = root / "live" / "pubmedqa", root / "fresh" / "pubmedqa"
    build_corpus(run_corpusbuild, versions, "v1", live)
    parent = lineage_hash(read_build_record(live))
    run_indexer("store", live)
    run_indexer("bm25", live)
    run_indexer("bm25", live, "--out", live / "bm25-parts", "--workers", 2, "--layout", "parts")
    before = {name: read_build_record(live / name) for name in ("store", "bm25", "bm25-parts")}
    build_corpus(run_corpusbuild, versions, "v2", live)
    build_corpus(run_corpusbuild, versions, "v2", fresh)
    for target in (live, fresh):  # 80 of 530 documents deleted: BM25 keeps them (past the default share)
        run_indexer("store", target)
        run_indexer("bm25", target, "--compact-above", 1)
        run_indexer(
            "bm25", target, "--out", target / "bm25-parts", "--workers", 2, "--layout", "parts", "--compact-above", 1
        )
    return {"live": live, "fresh": fresh, "parent": parent, "before": before}


def test_bm25_updated_by_id_equals_a_full_rebuild_in_hits_and_scores(updated):
    live, fresh = updated["live"], updated["fresh"]
    change_set = Corpus.open(live).change_set()
    counts = change_set.summary
    assert (counts["added"], counts["changed"], counts["removed"]) == (50, 30, 50)
    record = read_build_record(live / "bm25")
    assert record["run"]["update"] == {
        "parent": updated["parent"],
        "deleted": 80,
        "added": 80,
        "compacted": False,
        "compact_above": 1.0,
    }
    assert record["counts"]["documents"] == 450 and record["counts"]["deleted_held"] == 80
    assert "update" not in read_build_record(fresh / "bm25")["run"]
    expected = ranking(fresh)
    assert sum(len(hits) for hits in expected) > 50 * DEPTH * 0.9
    assert ranking(live) == expected
    # the parts layout: each part took the changes of its own shards, and reads as one index
    parts = read_build_record(live / "bm25-parts")
    assert parts["run"]["update"]["deleted"] == 80 and parts["params"]["layout"] == "parts"
    assert ranking(live, "bm25-parts") == expected
    # what the live statistics correct: Lucene's own reader still counts the 80 deleted documents
    assert plain_pyserini(live / "bm25") != plain_pyserini(fresh / "bm25")


def copy_of_live(updated, target):
    """The live corpus folder at version 2 with its BM25 index as version 1 had it (no store: the
    update then reads the changed lines from the shards)."""
    live = updated["live"]
    shutil.copytree(live, target, ignore=shutil.ignore_patterns(GENERATIONS, "bm25*", "store"))
    shutil.copytree(live / GENERATIONS / updated["parent"][:16] / "bm25", target / "bm25")
    return target


def test_an_update_past_the_compaction_share_merges_deletions_away(updated, tmp_path):
    """With the compaction share at 0 every deletion is merged away: the index then scores like a fresh
    build in plain pyserini too."""
    from indexer.bm25.update import update_bm25

    v2 = copy_of_live(updated, tmp_path / "pubmedqa")
    corpus = Corpus.open(v2)
    record = update_bm25(corpus, v2 / "bm25", corpus.change_set(), compact_above=0.0)
    assert record["run"]["update"]["compacted"] and record["counts"]["deleted_held"] == 0
    assert plain_pyserini(v2 / "bm25") == plain_pyserini(updated["fresh"] / "bm25")
    assert ranking(v2) == ranking(updated["fresh"])


def test_a_killed_update_leaves_the_index_as_it_was_and_a_rerun_finishes_it(updated, tmp_path, monkeypatch):
    import indexer.bm25.update as bm25_update

    v2 = copy_of_live(updated, tmp_path / "pubmedqa")
    before = {path.name: path.read_bytes() for path in (v2 / "bm25").rglob("*") if path.is_file()}
    real_apply = bm25_update._apply

    def killed(*args, **kwargs):
        real_apply(*args, **kwargs)  # Lucene committed into the copy, then the job dies
        raise KeyboardInterrupt

    monkeypatch.setattr(bm25_update, "_apply", killed)
    with pytest.raises(KeyboardInterrupt):
        build_bm25(Corpus.open(v2), v2 / "bm25")
    assert {path.name: path.read_bytes() for path in (v2 / "bm25").rglob("*") if path.is_file()} == before
    assert not [path for path in v2.iterdir() if path.name.startswith(".bm25.tmp-")]
    monkeypatch.setattr(bm25_update, "_apply", real_apply)
    run_indexer("bm25", v2)  # past the default share: the deletions are merged away
    update = read_build_record(v2 / "bm25")["run"]["update"]
    assert update["deleted"] == 80 and update["compacted"] and update["compact_above"] == 0.1
    assert ranking(v2) == ranking(updated["fresh"])


def test_the_store_reuses_unchanged_shards_and_equals_a_full_build(updated, tmp_path, run_corpusbuild, versions):
    live, fresh = updated["live"], updated["fresh"]
    names = ("id_hashes.npy", "id_rows.npy", *(f"offsets-{shard:05d}.npy" for shard in range(3)))
    for name in names:
        assert (live / "store" / name).read_bytes() == (fresh / "store" / name).read_bytes(), name
    # the same corpus built again over a copy: no shard changed, every shard's rows are reused
    again = tmp_path / "pubmedqa"
    shutil.copytree(live, again, ignore=shutil.ignore_patterns(GENERATIONS, "bm25*"))
    build_corpus(run_corpusbuild, versions, "v2", again)
    run_indexer("store", again)
    assert read_build_record(again / "store")["counts"]["shards_reused"] == 3
    for name in names:
        assert (again / "store" / name).read_bytes() == (fresh / "store" / name).read_bytes(), name
    with SnippetStore(again / "store", Corpus.open(again)) as store:
        every = list(store.scan())
        assert [store.id_at(*store.locate(snippet["id"])) for snippet in every] == [s["id"] for s in every]


def test_replaced_versions_are_kept_as_generations_until_no_server_uses_them(updated):
    live, parent = updated["live"], updated["parent"]
    kept = live / GENERATIONS / parent[:16]
    assert sorted(path.name for path in kept.iterdir()) == ["bm25", "bm25-parts", "corpus", "store"]
    for name, record in updated["before"].items():
        assert read_build_record(kept / name) == record  # the index as it was, byte for byte its record
    assert lineage_hash(read_build_record(kept / "corpus")) == parent
    old = Corpus.open(kept / "corpus")  # the kept corpus still opens: its shards are the old bytes
    index = BM25Index(kept / "bm25", old)
    assert len(index.search(["asthma"], 5)[0]) == 5
    index.close()

    # a server serving the old version holds a lease: prune keeps what it uses
    write_lease({live}, {parent})
    try:
        assert [found.leased_by for found in kept_generations(live)] == [(f"{socket.gethostname()}-{os.getpid()}",)]
        assert prune(live) == [] and kept.is_dir()
    finally:
        remove_lease({live})
    removed = prune(live, dry_run=True)
    assert [found.path for found in removed] == [kept] and kept.is_dir()
    assert removed[0].bytes_only_here > 0  # the old shards and segments exist only there
    prune(live)
    assert not kept.exists()
    # the current generation is untouched
    assert ranking(live) == ranking(updated["fresh"])


def test_watch_sees_a_generation_only_once_every_served_index_cites_its_corpus(updated, tmp_path):
    """searchd --watch reads root_state: a root in the middle of an update (an index of the earlier
    corpus version, or an index folder without its record while it is rebuilt) is not a generation."""
    from searchd.hot_swap import root_state

    corpus = tmp_path / "pubmedqa"
    shutil.copytree(updated["live"], corpus, ignore=shutil.ignore_patterns(GENERATIONS, "bm25-parts"))
    state = root_state([corpus])
    assert state is not None and [name for name, _ in state[0][2]] == ["store", "bm25"]
    record = read_build_record(corpus / "bm25")
    (corpus / "bm25" / "build.json").write_text(
        json.dumps({**record, "upstream": {**record["upstream"], "lineage_sha256": updated["parent"]}})
    )
    assert root_state([corpus]) is None  # BM25 still of the earlier version: an update under way
    (corpus / "bm25" / "build.json").write_text(json.dumps(record))
    assert root_state([corpus]) == state
    (corpus / "dense-minilm").mkdir()  # a dense build under way: no build.json yet
    assert root_state([corpus]) is None
