"""A build over an earlier one records what changed (corpusbuild.engine.changes): on the real update chain
(a baseline, the real update file pubmed20n1016 with its revisions and DeleteCitation, a later update
that deletes and revises), the change set equals the difference of the two builds' snippets computed
here by hand, names its parent build, is checked by verify, and is empty for a rebuild."""

from __future__ import annotations

import numpy as np
import orjson

from helpers import all_snippets
from medsnip.buildrecord import lineage_hash, read_build_record
from medsnip.corpus import Corpus


def by_id(out) -> dict[str, bytes]:
    return {snippet["id"]: orjson.dumps(snippet) for snippet in all_snippets(out)}


def by_hand(before: dict[str, bytes], after: dict[str, bytes]) -> dict[str, set[str]]:
    return {
        "added": set(after) - set(before),
        "changed": {i for i in set(after) & set(before) if after[i] != before[i]},
        "removed": set(before) - set(after),
    }


def read_changes(out) -> tuple[dict, dict[str, list[str]]] | None:
    change_set = Corpus.open(out).change_set()
    return None if change_set is None else (change_set.summary, change_set.ids)


def build(run_corpusbuild, out, *inputs, shards=4):
    result = run_corpusbuild("pubmed", *inputs, "--out", out, "--shards", shards, "--workers", 1, "--quiet")
    assert result.exit_code == 0, result.output
    return by_id(out)


def test_each_build_over_an_earlier_one_records_its_changes(tmp_path, update_chain, run_corpusbuild):
    out = tmp_path / "pubmed"
    baseline = build(run_corpusbuild, out, update_chain["baseline"])
    assert read_changes(out) is None and not (out / "changes.jsonl").exists()  # a first build has no parent
    parent = lineage_hash(read_build_record(out))
    updated = build(run_corpusbuild, out, update_chain["baseline"], update_chain["n1016"])
    summary, ids = read_changes(out)
    expected = by_hand(baseline, updated)
    assert {kind: set(found) for kind, found in ids.items()} == expected
    assert summary["parent"] == parent
    assert (summary["added"], summary["changed"], summary["removed"]) == tuple(len(expected[k]) for k in expected)
    assert any(i.startswith("pubmed:31844204:") for i in ids["removed"])  # n1016's DeleteCitation
    assert any(i.startswith("pubmed:30137523:") for i in ids["changed"] + ids["added"])  # revised by n1016
    assert expected["added"] and expected["removed"]
    assert run_corpusbuild("verify", out).exit_code == 0
    (out / "changes.jsonl").write_bytes((out / "changes.jsonl").read_bytes().replace(b"removed", b"added", 1))
    result = run_corpusbuild("verify", out)
    assert result.exit_code != 0 and "changes.jsonl: sha256 expected" in result.output

    # the later update (a deletion, a revision, an abstract removed), into 2 shards instead of 4
    parent = lineage_hash(read_build_record(out))
    later = build(
        run_corpusbuild, out, update_chain["baseline"], update_chain["n1016"], update_chain["n1017"], shards=2
    )
    summary, ids = read_changes(out)
    assert summary["parent"] == parent
    assert {kind: set(found) for kind, found in ids.items()} == by_hand(updated, later)
    assert any(i.startswith("pubmed:40000001:") for i in ids["removed"])

    # the same inputs again: nothing changed, relative to the build just made
    parent = lineage_hash(read_build_record(out))
    build(run_corpusbuild, out, update_chain["baseline"], update_chain["n1016"], update_chain["n1017"], shards=2)
    summary, ids = read_changes(out)
    assert summary["parent"] == parent and not any(ids.values())
    assert lineage_hash(read_build_record(out)) == parent  # same bytes, same lineage: indexes stay valid


def test_a_dense_rebuild_embeds_only_changed_text_and_never_keeps_stale_vectors(tmp_path, run_corpusbuild):
    """Two real abstracts swap texts: every shard keeps its snippet count, its bytes change. Rebuilding
    the dense index in place embeds exactly the two changed texts (vectors are keyed by the text the
    encoder reads) and reuses the rest, never the old vectors of a changed text."""
    from conftest import SAMPLES, run_indexer

    lines = [
        orjson.loads(line) for line in (SAMPLES / "ir" / "pubmedqa-beir" / "corpus.jsonl").read_bytes().splitlines()
    ]
    first, second = lines[:20], [dict(line) for line in lines[:20]]
    second[3]["text"], second[11]["text"] = first[11]["text"], first[3]["text"]
    for name, records in (("v1", first), ("v2", second)):
        (tmp_path / f"{name}.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    corpus, fresh = tmp_path / "corpus", tmp_path / "fresh"
    for version, target in (("v1", corpus), ("v2", corpus), ("v2", fresh)):
        result = run_corpusbuild(
            "jsonl",
            tmp_path / f"{version}.jsonl",
            "--source",
            "q",
            "--no-chunk",
            "--out",
            target,
            "--shards",
            2,
            "--workers",
            1,
            "--quiet",
        )
        assert result.exit_code == 0, result.output
        run_indexer("dense", target, "--preset", "minilm", "--batch-size", 64)
    # the two changed texts are embedded again, the 18 others reused; a text embedded in a batch of 2
    # rather than 20 is padded differently, which moves its float16 vector in the last digits only
    # (a stale vector would be another text's: cosine ~0.3 here)
    rebuilt = np.concatenate([np.load(corpus / "dense-minilm" / f"emb-{shard:05d}.npy") for shard in range(2)])
    expected = np.concatenate([np.load(fresh / "dense-minilm" / f"emb-{shard:05d}.npy") for shard in range(2)])
    assert np.allclose(rebuilt.astype(np.float32), expected.astype(np.float32), atol=2e-3)
    counts = read_build_record(corpus / "dense-minilm")["counts"]
    assert counts["embedded_this_run"] == 2 and counts["snippets_embedded_this_run"] == 2


def test_an_ivf_index_keeps_its_quantizer_across_updates_until_the_retrain_share(tmp_path, run_corpusbuild):
    """IVF over 60 real abstracts. An update that changes 5 texts assigns them with the trained index of
    the build before (trained.index kept, no training), and finds each changed abstract by its own text;
    a later one that changes 20 more (25 of 60 embedded since training, past RETRAIN_SHARE) trains again."""
    from conftest import SAMPLES, run_indexer
    from indexer.dense import RETRAIN_SHARE, TRAINED, DenseIndex
    from medsnip.encoders import DenseEncoder, preset

    lines = [
        orjson.loads(line) for line in (SAMPLES / "ir" / "pubmedqa-beir" / "corpus.jsonl").read_bytes().splitlines()
    ]
    first = lines[:60]
    second = [dict(line) for line in first]
    for position in range(5):
        second[position]["text"] = lines[100 + position]["text"]
    third = [dict(line) for line in second]
    for position in range(10, 30):
        third[position]["text"] = lines[200 + position]["text"]
    corpus = tmp_path / "corpus"
    records, trained = [], []
    for number, version in enumerate((first, second, third)):
        (tmp_path / f"v{number}.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in version))
        result = run_corpusbuild(
            "jsonl",
            tmp_path / f"v{number}.jsonl",
            "--source",
            "q",
            "--no-chunk",
            "--out",
            corpus,
            "--shards",
            2,
            "--workers",
            1,
            "--quiet",
        )
        assert result.exit_code == 0, result.output
        run_indexer("dense", corpus, "--preset", "minilm", "--batch-size", 64, "--index-factory", "IVF4,Flat")
        records.append(read_build_record(corpus / "dense-minilm")["training"])
        trained.append((corpus / "dense-minilm" / TRAINED).read_bytes())
        if number == 1:  # the changed abstracts are found by their own text with the reused quantizer
            encoder = DenseEncoder(preset("minilm"))
            index = DenseIndex(corpus / "dense-minilm", Corpus.open(corpus), nprobe=4)
            texts = [line["text"] for line in second[:5]]
            hits = index.search(encoder.encode_queries(texts), 1)
            assert [found[0][0] for found in hits] == [f"q:{line['_id']}:0" for line in second[:5]]
    assert [record["reused"] for record in records] == [False, True, False]
    assert [record["embedded_since_training"] for record in records] == [0, 5, 0]
    assert trained[0] == trained[1] != trained[2]
    assert records[1]["retrain_share"] == RETRAIN_SHARE and 25 > RETRAIN_SHARE * 60
