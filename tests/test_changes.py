"""A build over an earlier one records what changed (corpusbuild.changes): on the real update chain
(a baseline, the real update file pubmed20n1016 with its revisions and DeleteCitation, a later update
that deletes and revises), the change set equals the difference of the two builds' snippets computed
here by hand, names its parent build, is checked by verify, and is empty for a rebuild."""

from __future__ import annotations

import orjson

from corpusbuild.changes import read_changes
from helpers import all_snippets
from medsnip.buildrecord import lineage_hash, read_build_record


def by_id(out) -> dict[str, bytes]:
    return {snippet["id"]: orjson.dumps(snippet) for snippet in all_snippets(out)}


def by_hand(before: dict[str, bytes], after: dict[str, bytes]) -> dict[str, set[str]]:
    return {
        "added": set(after) - set(before),
        "changed": {i for i in set(after) & set(before) if after[i] != before[i]},
        "removed": set(before) - set(after),
    }


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
    later = build(run_corpusbuild, out, update_chain["baseline"], update_chain["n1016"], update_chain["n1017"],
                  shards=2)  # fmt: skip
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
