"""Readers on their own (corpusbuild.events): a reader yields typed events and returns its counters,
with no shard, part file or engine in sight; the map task alone places each event in its shard."""

from __future__ import annotations

from collections import Counter

import numpy as np
import orjson

from conftest import REPO, SAMPLES
from corpusbuild.chunking import ChunkingParams
from corpusbuild.engine.maptask import write_events
from corpusbuild.engine.parts import EVENT_RECORD, PartWriter, part_index_path
from corpusbuild.events import Delete, Problem, ReaderInput, Record, Skip
from corpusbuild.sources import KINDS
from medsnip.buildrecord import HashingReader
from medsnip.snippet import shard_of

CHUNKING = ChunkingParams(chunk=True, chunk_size=1000, chunk_overlap=200)
GOLDEN = orjson.loads((REPO / "tests" / "golden" / "sample_builds.json").read_bytes())["builds"]


def read_all(kind: str, path, source_name: str = ""):
    """Every event of one input, and the counters the reader returned."""
    params = KINDS[kind].params(CHUNKING, source_name or kind)
    with open(path, "rb") as raw:
        magic = raw.read(4)
        raw.seek(0)
        events = KINDS[kind].read(ReaderInput(str(path), HashingReader(raw), magic, params))
        found = []
        while True:
            try:
                found.append(next(events))
            except StopIteration as finished:
                return found, finished.value


def test_a_pubmed_update_file_is_records_skips_and_deletions():
    path = SAMPLES / "pubmed" / "pubmed20n1016.xml.gz"
    events, stats = read_all("pubmed", path)
    kinds = Counter(type(event).__name__ for event in events)
    assert kinds == {"Delete": 262, "Record": 23, "Skip": 3}
    assert sum(event.count for event in events if isinstance(event, Record)) == 51
    assert {event.reason for event in events if isinstance(event, Skip)} == {"no_abstract"}
    assert all(event.doc_id == str(event.key) for event in events if isinstance(event, Record | Skip | Delete))
    golden = next(entry for entry in GOLDEN["pubmed"]["inputs"] if entry["file"] == path.name)
    assert stats.to_dict() == golden["stats"]  # what build.json lists for this file


def test_a_bad_jsonl_line_is_a_problem_event_with_its_line(tmp_path):
    path = tmp_path / "corpus.jsonl"
    lines = (SAMPLES / "ir" / "pubmedqa-beir" / "corpus.jsonl").read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + b"{not json\n" + b'{"_id": "x1", "title": "t"}\n' + lines[1])
    events, stats = read_all("jsonl", path, "pubmedqa")
    assert [type(event) for event in events] == [Record, Problem, Problem, Record]
    assert [event.problem.line for event in events if isinstance(event, Problem)] == [2, 3]
    assert [event.position for event in events if isinstance(event, Record)] == [1, 4]
    snippets = sum(event.count for event in events if isinstance(event, Record))
    assert stats.to_dict() == {"documents_read": 2, "snippets": snippets, "bad_records": 2}


def test_the_map_task_places_each_document_in_the_shard_of_its_id(tmp_path):
    events, stats = read_all("pubmed", SAMPLES / "pubmed" / "pubmed20n1016.xml.gz")

    def replay():  # the same events and counters, as the reader gave them
        yield from events
        return stats

    writer = PartWriter(tmp_path, num_shards=4)
    result = write_events(replay(), writer)
    writer.close()
    assert result["problems"] == [] and result["stats"]["snippets"] == 51
    placed = {}
    for shard in range(4):
        index = np.load(part_index_path(tmp_path, shard))
        for key in index["key"][index["kind"] == EVENT_RECORD].tolist():
            placed[key] = shard
    records = [event for event in events if isinstance(event, Record)]
    assert placed == {event.key: shard_of(event.doc_id, 4) for event in records}
