"""What a build changed since the previous build of the same folder: its change set.

When a build publishes over an earlier complete build of the same source, the snippets of the two are
compared and every snippet id that was added, changed (its line's bytes differ: text, title or meta)
or removed is written to `changes.jsonl` beside build.json, one `{"id", "change"}` object per line
(shard by shard: added and changed ids in the new shard's order, then removed ones), and build.json's
`changes` says which build it is relative to (`parent`: that build's lineage hash), the counts, and
the file's sha256 (`corpusbuild verify` checks it). Incremental indexes read it
(medsnip.corpus.Corpus.change_set): they update an index whose lineage is the parent with exactly
these snippets, and never re-embed text that did not change. The lineage hash itself leaves the
change set out, so a corpus rebuilt to the same bytes keeps its indexes.

Cost: a shard whose sha256 equals the parent's shard of the same name is skipped unread; any other
pair of shards is read once each and compared by a 16-byte digest per line, one shard's ids in memory
at a time (the same shard count puts every document in the same shard in both builds; with another
shard count every id of the parent is held in memory). The set is computed before the swap and kept
in the work folder, so a publish killed mid-swap resumes with it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import orjson

from medsnip.buildrecord import lineage_hash, read_complete_record, read_json, sha256_file
from medsnip.corpus import CHANGES, KINDS


def _digests(path: Path) -> dict[str, bytes]:
    """snippet id -> 16-byte digest of its line, for one shard."""
    digests = {}
    with open(path, "rb") as handle:
        for line in handle:
            digests[orjson.loads(line)["id"]] = hashlib.blake2b(line, digest_size=16).digest()
    return digests


def _diff(old: dict[str, bytes], new: dict[str, bytes]) -> list[tuple[str, str]]:
    changes = [
        (snippet_id, "added" if snippet_id not in old else "changed")
        for snippet_id, digest in new.items()
        if old.get(snippet_id) != digest
    ]
    changes += [(snippet_id, "removed") for snippet_id in old if snippet_id not in new]
    return changes


def previous_record(out_dir: Path, source: str) -> dict | None:
    """The complete build of `source` that `out_dir` holds now, if any."""
    record = read_complete_record(out_dir)
    if record is None or record.get("source") != source or not isinstance(record.get("outputs"), list):
        return None
    return record


def compute_changes(
    out_dir: Path, reduce_dir: Path, new_shards: dict[str, Path], record: dict, parent: dict | None
) -> dict | None:
    """The change set of `record` (about to be published from `new_shards`) against `parent`, the build
    `out_dir` holds now (previous_record): written to reduce_dir/changes.jsonl, its summary returned for
    build.json; None when there is no earlier complete build of the same source.

    A publish killed mid-swap has already removed the parent's build.json: the set computed before the
    swap (kept in `reduce_dir`, or already moved to `out_dir`) is reused. A set kept from a build against
    another parent (the same inputs built twice) is computed again."""
    summary_path = reduce_dir / "changes.json"
    if summary_path.is_file():
        kept = read_json(summary_path)
        written = [path for path in (reduce_dir / CHANGES, out_dir / CHANGES) if path.is_file()]
        if (parent is None or lineage_hash(parent) == kept["parent"]) and any(
            sha256_file(path)[0] == kept["sha256"] for path in written
        ):
            return kept
    if parent is None:
        return None
    old_outputs = {output["path"]: output for output in parent["outputs"]}
    new_outputs = {output["path"]: output for output in record["outputs"]}
    changes: list[tuple[str, str]] = []
    if set(old_outputs) == set(new_outputs):
        for name in sorted(new_outputs):
            if old_outputs[name]["sha256"] != new_outputs[name]["sha256"]:
                changes += _diff(_digests(out_dir / name), _digests(new_shards[name]))
    else:  # another shard count: documents moved between shards
        old: dict[str, bytes] = {}
        for name in sorted(old_outputs):
            old.update(_digests(out_dir / name))
        new: dict[str, bytes] = {}
        for name in sorted(new_outputs):
            new.update(_digests(new_shards[name]))
        changes = _diff(old, new)
    temp = reduce_dir / f".{CHANGES}.tmp-{os.getpid()}"
    with open(temp, "wb") as handle:
        for snippet_id, change in changes:
            handle.write(orjson.dumps({"id": snippet_id, "change": change}) + b"\n")
    os.replace(temp, reduce_dir / CHANGES)
    summary = {
        "parent": lineage_hash(parent),
        "file": CHANGES,
        "sha256": sha256_file(reduce_dir / CHANGES)[0],
        **{kind: sum(1 for _, change in changes if change == kind) for kind in KINDS},
    }
    summary_path.write_bytes(orjson.dumps(summary))
    return summary
