"""Every bundled sample, built by today's engine with 1 and 3 workers, gives the shards (sha256 per
shard), counts and per-input statistics that corpusbuild gave before its part format changed
(tests/golden/sample_builds.json, made by commit dc1f041 with engine format 4; re-hashed once, when
`contents` took MedRAG's concat rule, after checking that nothing else changed): refactors of the engine
and of the kept work may change how a build runs, never what it publishes. The kept work (compressed
parts) stays well under the shards' size."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest

from conftest import REPO, SAMPLES

GOLDEN = orjson.loads((REPO / "tests" / "golden" / "sample_builds.json").read_bytes())["builds"]
COMMANDS = {
    "pubmed": ["pubmed", SAMPLES / "pubmed"],
    # the two real dump slices (the demo's first-80-pages file is cut from the first of them)
    "wikipedia": [
        "wikipedia",
        SAMPLES / "wikipedia" / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",
        SAMPLES / "wikipedia" / "enwiki-table-markup.xml.bz2",
    ],
    "statpearls": ["statpearls", SAMPLES / "nxml"],
    "textbooks": ["textbooks", SAMPLES / "textbooks" / "books"],
    "jsonl": ["jsonl", SAMPLES / "ir" / "pubmedqa-beir" / "corpus.jsonl", "--source", "pubmedqa", "--no-chunk"],
}


@pytest.mark.parametrize("kind", sorted(COMMANDS))
@pytest.mark.parametrize("workers", [1, 3])
def test_sample_builds_publish_the_golden_bytes(run_corpusbuild, tmp_path, kind, workers):
    out = tmp_path / kind
    result = run_corpusbuild(*COMMANDS[kind], "--out", out, "--shards", 4, "--workers", workers, "--quiet")
    assert result.exit_code == 0, result.output
    found = {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(out.glob("shard-*.jsonl"))}
    assert found == GOLDEN[kind]["shards"]
    record = orjson.loads((out / "build.json").read_bytes())
    assert record["counts"] == GOLDEN[kind]["counts"]
    inputs = [{"file": Path(entry.pop("path")).name, **entry} for entry in record["inputs"]]
    for entry in inputs:
        entry.pop("ranges", None)  # how many ranges a split input was parsed in depends on --workers
    assert inputs == GOLDEN[kind]["inputs"]
    shard_bytes = sum(path.stat().st_size for path in out.glob("shard-*.jsonl"))
    work_bytes = sum(path.stat().st_size for path in (out / ".work").rglob("*") if path.is_file())
    assert 0 < work_bytes < shard_bytes / 2  # before compressed parts: about 1.01x the shards
