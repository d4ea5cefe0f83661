"""The sharded build engine's own pieces: part files, event order, bounded file handles."""

from __future__ import annotations

import numpy as np
from isal import isal_zlib

from corpusbuild.engine.parts import (
    EVENT_DELETE,
    EVENT_RECORD,
    EVENT_SKIP,
    BlockReader,
    PartWriter,
    part_blocks_path,
    part_index_path,
)
from corpusbuild.engine.reducetask import ShardTask, run_shard_task


def test_part_writer_sorts_events_by_key_then_position(tmp_path):
    writer = PartWriter(tmp_path, num_shards=1)
    writer.add(0, 30, EVENT_RECORD, b'{"a":1}\n')
    writer.add(0, 10, EVENT_SKIP, reason="no_abstract")
    writer.add(0, 30, EVENT_DELETE)
    writer.add(0, 20, EVENT_RECORD, b'{"b":2}\n')
    writer.close()
    events = np.load(part_index_path(tmp_path, 0))
    assert events["key"].tolist() == [10, 20, 30, 30]
    assert events["position"].tolist() == [1, 3, 0, 2]
    blocks = part_blocks_path(tmp_path, 0).read_bytes()
    first = events[events["key"] == 20][0]
    stored = blocks[first["offset"] : first["offset"] + first["length"]]
    assert isal_zlib.decompress(stored) == b'{"b":2}\n' and first["lines"] == 1  # each block compressed alone


def test_merge_replays_versions_in_input_order(tmp_path):
    """File 0 adds 1 and 2; file 1 deletes 1 and replaces 2; file 2 re-adds 1 and deletes 9 (unseen)."""
    parts = []
    for order, events in enumerate(
        [
            [(1, EVENT_RECORD, b'{"v":"1a"}\n'), (2, EVENT_RECORD, b'{"v":"2a"}\n')],
            [(2, EVENT_RECORD, b'{"v":"2b"}\n'), (1, EVENT_DELETE, b"")],
            [(1, EVENT_RECORD, b'{"v":"1c"}\n'), (9, EVENT_DELETE, b"")],
        ]
    ):
        folder = tmp_path / f"part{order}"
        folder.mkdir()
        writer = PartWriter(folder, num_shards=1)
        for key, kind, block in events:
            writer.add(0, key, kind, block)
        writer.close()
        parts.append((order, str(folder)))
    out = tmp_path / "out"
    out.mkdir()
    result = run_shard_task(ShardTask(0, 1, tuple(parts), str(out)))
    assert (out / "shard-00000-of-00001.jsonl").read_bytes() == b'{"v":"1c"}\n{"v":"2b"}\n'
    assert (result["replaced"], result["deleted"], result["delete_unmatched"]) == (1, 1, 1)
    assert (result["documents"], result["records"]) == (2, 2)


def test_block_reader_keeps_a_bounded_number_of_files_open(tmp_path):
    paths = {}
    for order in range(5):
        paths[order] = tmp_path / f"f{order}"
        paths[order].write_bytes(bytes([65 + order]) * 10)
    reader = BlockReader(paths, max_open=2)
    for order in [0, 1, 2, 3, 4, 0, 4, 2]:
        assert reader.read(order, 3, 2) == bytes([65 + order]) * 2
        assert len(reader._open) <= 2
    reader.close()


def test_snippet_lines_are_the_canonical_snippet_bytes():
    from medsnip.snippet import dumps_snippet, make_snippet, snippet_lines

    meta = {"pmid": 1, "mesh": [{"ui": "D1", "name": "Ünïcode", "major": True, "qualifiers": []}]}
    chunks = ["first chunk", "second “chunk”", ""]
    expected = b"".join(dumps_snippet(make_snippet("pubmed", "1", i, "A title", c, meta)) for i, c in enumerate(chunks))
    assert snippet_lines("pubmed", "1", "A title", chunks, meta) == expected
