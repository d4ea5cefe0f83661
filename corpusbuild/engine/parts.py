"""The part format: one input's contribution to every shard, as the map writes it and the reduce reads it.

Per input (or input range) and shard: `sNNNNN.jsonl`, the documents' snippet lines as blocks, each
compressed on its own so the reduce can read any one alone, and `sNNNNN.events.npy`, a sorted index of
events (record, skip, delete) keyed by document; `reasons.json` names the skip reasons.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson
from isal import isal_zlib

from corpusbuild.errors import writing

EVENT_RECORD, EVENT_SKIP, EVENT_DELETE = 0, 1, 2
REASONS_FILE = "reasons.json"
_FLUSH_BYTES = 8 << 20

EVENT_DTYPE = np.dtype(
    [
        ("key", "<i8"),
        ("position", "<i4"),
        ("kind", "u1"),
        ("reason", "<i2"),
        ("offset", "<i8"),
        ("length", "<i4"),
        ("lines", "<i4"),  # snippet lines in the block, so the merge never counts them in the bytes
    ]
)

PART_COMPRESSION_LEVEL = 0  # ISA-L zlib level 0 (its fastest): parts ~4x smaller at ~800 MB/s, docs/benchmarks.md


class PartWriter:
    """Writes one input file's contribution to every shard: blocks of snippet lines + an event index.

    Each document's block is stored zlib-compressed on its own (ISA-L, level 0), so kept work takes
    about a fifth of the shards' bytes instead of a second full copy, and the reduce still reads any
    document alone; offsets and lengths in the index are those of the compressed blocks.

    Blocks are buffered and appended in bulk, so memory stays bounded (a few MB) for any file size.
    The index is a numpy array per shard, sorted by (key, position): 31 bytes per event, so merging a
    shard across thousands of files never holds more than its own events. Keys are integers (the
    PMID for PubMed); skip reasons are stored as codes into `reasons.json`.
    """

    def __init__(self, directory: Path, num_shards: int):
        self.directory = directory
        self.num_shards = num_shards
        self._buffers: dict[int, bytearray] = {}
        self._offsets = [0] * num_shards
        self._index: dict[int, list[tuple]] = {}
        self._reasons: dict[str, int] = {}
        self._position = 0
        self._buffered = 0

    def add(
        self,
        shard: int,
        key: int,
        kind: int,
        block: bytes = b"",
        reason: str | None = None,
        position: int | None = None,
        lines: int | None = None,
    ) -> None:
        """Record one event. `position` (default: a running count) orders events of one key within
        the file and is reported in duplicate-id errors, so line-based sources pass the line number.
        `lines` is the number of snippet lines in `block`, counted here when the caller does not know it."""
        if position is not None:
            self._position = position
        offset = self._offsets[shard]
        if lines is None:
            lines = block.count(b"\n")
        stored = isal_zlib.compress(block, PART_COMPRESSION_LEVEL) if block else b""
        if stored:
            self._buffers.setdefault(shard, bytearray()).extend(stored)
            self._offsets[shard] += len(stored)
            self._buffered += len(stored)
        reason_code = -1 if reason is None else self._reasons.setdefault(reason, len(self._reasons))
        self._index.setdefault(shard, []).append((key, self._position, kind, reason_code, offset, len(stored), lines))
        self._position += 1
        if self._buffered >= _FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        with writing(self.directory):
            for shard, buffer in self._buffers.items():
                if buffer:
                    with open(part_blocks_path(self.directory, shard), "ab") as handle:
                        handle.write(buffer)
                    buffer.clear()
        self._buffered = 0

    def close(self) -> None:
        self._flush()
        with writing(self.directory):
            for shard, entries in self._index.items():
                events = np.array(entries, dtype=EVENT_DTYPE)
                events.sort(order=("key", "position"))
                np.save(part_index_path(self.directory, shard), events, allow_pickle=False)
            (self.directory / REASONS_FILE).write_bytes(orjson.dumps(sorted(self._reasons, key=self._reasons.get)))


def part_blocks_path(directory: Path, shard: int) -> Path:
    return directory / f"s{shard:05d}.jsonl"


def part_index_path(directory: Path, shard: int) -> Path:
    return directory / f"s{shard:05d}.events.npy"


class BlockReader:
    """Reads (offset, length) blocks from many part files with a bounded number of open files."""

    def __init__(self, paths: dict[int, Path], max_open: int = 256):
        self._paths = paths
        self._open: OrderedDict[int, int] = OrderedDict()
        self._max_open = max_open

    def read(self, order: int, offset: int, length: int) -> bytes:
        fd = self._open.get(order)
        if fd is None:
            if len(self._open) >= self._max_open:
                os.close(self._open.popitem(last=False)[1])
            fd = self._open[order] = os.open(self._paths[order], os.O_RDONLY)
        else:
            self._open.move_to_end(order)
        return os.pread(fd, length, offset)

    def documents(self, order: int, offset: int, lengths: list[int]) -> Iterator[bytes]:
        """The snippet lines of consecutive compressed document blocks starting at `offset`: read at once,
        handed out one decompressed block at a time (never all of them at once in memory)."""
        stored = memoryview(self.read(order, offset, sum(lengths)))
        start = 0
        for length in lengths:
            yield isal_zlib.decompress(stored[start : start + length])
            start += length

    def close(self) -> None:
        for fd in self._open.values():
            os.close(fd)
        self._open.clear()
