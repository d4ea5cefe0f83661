"""The snippet store: snippet id -> snippet and (shard, row) -> snippet without loading the corpus.

Per shard, a numpy array of line offsets into the shard file (row i is line i, the row mapping FAISS
uses); for ids, a sorted array of 64-bit id hashes with each id's (shard, row). All arrays are
memory-mapped, and so are the shard files, so opening costs nothing and a lookup is a binary search
plus a slice of the mapped shard (no system call, no numpy-subclass overhead on the hot path):
fetching 100 snippets takes well under a millisecond at any corpus size. The shards themselves are the
snippets' only copy.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson

from medsnip.buildrecord import read_complete_record, write_build_record
from medsnip.corpus import (
    Corpus,
    LineageError,
    index_record,
    open_index_record,
    replace_dir,
    restore_interrupted_swaps,
)
from medsnip.generations import keep_index
from medsnip.processes import remove_stale_temps

STAGE = "indexer.store"
_ID_HASHES = "id_hashes.npy"
_ID_ROWS = "id_rows.npy"


def id_hash(snippet_id: str) -> int:
    """blake2b-64 of the UTF-8 id, as an unsigned integer (the store's lookup key)."""
    return int.from_bytes(hashlib.blake2b(snippet_id.encode("utf-8"), digest_size=8).digest(), "big")


def _offsets_name(shard: int) -> str:
    return f"offsets-{shard:05d}.npy"


def _line_id(mapped, start: int, stop: int) -> str:
    """The id of the snippet line mapped[start:stop], decoded from the line's head only: snippet lines
    start with `{"id":...,"title":` (make_snippet's key order), and a `","title":` inside the id would
    be escaped, so the first one ends the id."""
    end = mapped.find(b',"title":', start, stop)
    if end < 0:
        return orjson.loads(mapped[start:stop])["id"]
    head = mapped[start:end]
    if head.startswith(b'{"id":"') and b"\\" not in head:  # no escapes: the bytes are the id
        return head[7:-1].decode()
    return orjson.loads(head + b"}")["id"]


def _line_spans(mapped) -> Iterator[tuple[int, int]]:
    """(start, end) of every line of a mapped shard, its newline included."""
    start, size = 0, len(mapped)
    while start < size:
        stop = mapped.find(b"\n", start)
        stop = size if stop < 0 else stop + 1
        yield start, stop
        start = stop


def _scan_shard(shard) -> tuple[np.ndarray, np.ndarray]:
    """(line offsets with the end appended, id hashes) of a shard: one pass over a map of the file that
    finds each line's end and reads its id from the head (no line is parsed whole)."""
    mapped = _map_file(shard.path)
    try:
        offsets, hashes = [], []
        for start, stop in _line_spans(mapped):
            offsets.append(start)
            hashes.append(id_hash(_line_id(mapped, start, stop)))
        size = len(mapped)
        offsets.append(size)
    finally:
        if isinstance(mapped, mmap.mmap):
            mapped.close()
    if len(hashes) != shard.records or size != shard.bytes:
        raise LineageError(
            f"{shard.path}: {len(hashes)} lines of {size} bytes, the corpus build.json says "
            f"{shard.records} of {shard.bytes}"
        )
    return np.array(offsets, dtype=np.uint64), np.array(hashes, dtype=np.uint64)


def _reusable_shards(out: Path, corpus: Corpus) -> set[int]:
    """Shards of the store in `out` whose bytes the corpus still has (same name, same sha256): their
    offsets and id hashes are reused as they are. Only a complete store records its shards."""
    record = read_complete_record(out)
    if record is None or record.get("stage") != STAGE:
        return set()
    before = {entry["path"]: entry["sha256"] for entry in record.get("shards", [])}
    return {shard.index for shard in corpus.shards if before.get(shard.path.name) == shard.sha256}


def build_store(corpus: Corpus, out: Path) -> dict:
    """Write the store of `corpus` to `out` (atomically: a temp folder renamed into place).

    The corpus is opened with its shards hashed (Corpus.open(verify="full"), as the indexer does), so
    building reads each shard once, for its line ends and ids. A shard whose sha256 equals the one
    the store in `out` recorded is not read again: its rows are linked from the earlier store. The
    earlier store, if it belongs to another corpus version, is kept as a generation (medsnip.generations)."""
    started = time.perf_counter()
    restore_interrupted_swaps(out.parent)  # an output a crash mid-swap left only as .NAME.old-PID
    remove_stale_temps(out.parent)  # what a killed earlier run left
    keep_index(out, corpus.record_hash)
    temp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir(parents=True)
    reusable = _reusable_shards(out, corpus)
    previous = None
    if reusable:
        old_hashes, old_rows = np.load(out / _ID_HASHES), np.load(out / _ID_ROWS)
        previous = (old_hashes, old_rows, old_rows >> np.uint64(32))
    hashes, rows = [], []
    try:
        for shard in corpus.shards:
            if shard.index in reusable:
                os.link(out / _offsets_name(shard.index), temp / _offsets_name(shard.index))
                old_hashes, old_rows, old_shards = previous
                mine = old_shards == np.uint64(shard.index)
                hashes.append(old_hashes[mine])
                rows.append(old_rows[mine])
                continue
            offsets, shard_hashes = _scan_shard(shard)
            np.save(temp / _offsets_name(shard.index), offsets)
            hashes.append(shard_hashes)
            rows.append((np.uint64(shard.index) << np.uint64(32)) | np.arange(len(shard_hashes), dtype=np.uint64))
        all_hashes = np.concatenate(hashes) if hashes else np.empty(0, np.uint64)
        all_rows = np.concatenate(rows) if rows else np.empty(0, np.uint64)
        order = np.lexsort((all_rows, all_hashes))  # by hash, then by place: the same arrays however built
        np.save(temp / _ID_HASHES, all_hashes[order])
        np.save(temp / _ID_ROWS, all_rows[order])
        record = index_record(
            STAGE,
            corpus,
            counts={"snippets": int(len(all_hashes)), "shards": len(corpus.shards), "shards_reused": len(reusable)},
            layout="offsets-SSSSS.npy: uint64 line offsets (rows+1); id_hashes.npy: sorted blake2b-64 of ids; "
            "id_rows.npy: shard << 32 | row",
            shards=[{"path": shard.path.name, "sha256": shard.sha256} for shard in corpus.shards],
            run={"seconds": round(time.perf_counter() - started, 3)},
        )
        write_build_record(temp, record)
        replace_dir(temp, out)  # (an interrupted build leaves no temp folder either)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return record


class SnippetStore:
    """Random access to the snippets of one corpus (see the module docstring)."""

    def __init__(self, path: Path, corpus: Corpus):
        self.path = Path(path)
        self.corpus = corpus
        self.record = open_index_record(self.path, STAGE, "snippet store", corpus)
        # np.asarray drops the np.memmap subclass: same mapped pages, plain-ndarray indexing speed.
        self._hashes = np.asarray(np.load(self.path / _ID_HASHES, mmap_mode="r"))
        self._rows = np.asarray(np.load(self.path / _ID_ROWS, mmap_mode="r"))
        self._offsets = [np.asarray(np.load(self.path / _offsets_name(s.index), mmap_mode="r")) for s in corpus.shards]
        for shard, offsets in zip(corpus.shards, self._offsets, strict=True):
            if len(offsets) != shard.records + 1 or int(offsets[-1]) != shard.bytes:
                raise LineageError(f"{self.path}: offsets of {shard.path.name} do not match the shard")
        self._maps = [_map_file(shard.path) for shard in corpus.shards]

    @classmethod
    def open(cls, path: Path, corpus_path: Path | None = None) -> SnippetStore:
        """Open a store; its corpus is the folder above it unless given."""
        path = Path(path)
        return cls(path, Corpus.open(corpus_path or path.parent))

    def close(self) -> None:
        for mapped in self._maps:
            if isinstance(mapped, mmap.mmap):
                mapped.close()
        self._maps = []

    def __enter__(self) -> SnippetStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self._hashes)

    def raw_row(self, shard: int, row: int) -> bytes:
        offsets = self._offsets[shard]
        return self._maps[shard][int(offsets[row]) : int(offsets[row + 1])]

    def scan(self) -> Iterator[dict]:
        """Every snippet, parsed, in store order (shard by shard, row by row)."""
        for shard, offsets in enumerate(self._offsets):
            for row in range(len(offsets) - 1):
                yield self.row(shard, row)

    def row(self, shard: int, row: int) -> dict:
        """The snippet at (shard, row): FAISS row `row` of dense shard `shard`."""
        return orjson.loads(self.raw_row(shard, row))

    def _find(self, snippet_id: str) -> tuple[int, int, dict] | None:
        """(shard, row, snippet) of an id: binary search on the hash, then the line itself confirms the
        id (64-bit hashes can collide) and is returned parsed."""
        key = np.uint64(id_hash(snippet_id))
        position = int(np.searchsorted(self._hashes, key))
        while position < len(self._hashes) and self._hashes[position] == key:
            packed = int(self._rows[position])
            shard, row = packed >> 32, packed & 0xFFFFFFFF
            snippet = orjson.loads(self.raw_row(shard, row))
            if snippet["id"] == snippet_id:
                return shard, row, snippet
            position += 1
        return None

    def locate(self, snippet_id: str) -> tuple[int, int] | None:
        """(shard, row) of a snippet id, or None if the corpus has no such id."""
        found = self._find(snippet_id)
        return None if found is None else found[:2]

    def get(self, ids: list[str]) -> list[dict | None]:
        """The snippets of `ids`, in order; None for an id the corpus does not have."""
        return [None if (found := self._find(i)) is None else found[2] for i in ids]

    def id_at(self, shard: int, row: int) -> str:
        """The id of the snippet at (shard, row), read from the line's head (_line_id)."""
        offsets = self._offsets[shard]
        return _line_id(self._maps[shard], int(offsets[row]), int(offsets[row + 1]))


def _map_file(path: Path) -> mmap.mmap | bytes:
    """A read-only map of a shard file (b"" for an empty one, which mmap refuses)."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return b""
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)


def lines_of(corpus: Corpus, ids: list[str]) -> dict[int, list[bytes]]:
    """The shard lines of `ids` (each id's line as the corpus holds it), by shard index, in shard order:
    looked up in the corpus's store when it is current (a binary search each), else read from one pass
    over the shards. An id the corpus does not have raises LineageError."""
    wanted = set(ids)
    found: dict[int, list[tuple[int, bytes]]] = {}
    try:
        store = SnippetStore(corpus.path / "store", corpus)
    except (OSError, ValueError, KeyError, LineageError):
        store = None
    if store is not None:
        with store:
            for snippet_id in ids:
                place = store.locate(snippet_id)
                if place is None:
                    raise LineageError(f"{corpus.path}: the change set names {snippet_id!r}, the corpus has no such id")
                found.setdefault(place[0], []).append((place[1], bytes(store.raw_row(*place))))
    else:
        for shard in corpus.shards:
            mapped = _map_file(shard.path)
            try:
                for row, (start, stop) in enumerate(_line_spans(mapped)):
                    if _line_id(mapped, start, stop) in wanted:
                        found.setdefault(shard.index, []).append((row, bytes(mapped[start:stop])))
            finally:
                if isinstance(mapped, mmap.mmap):
                    mapped.close()
        missing = len(wanted) - sum(len(lines) for lines in found.values())
        if missing:
            raise LineageError(f"{corpus.path}: {missing} ids of the change set are not in the corpus")
    return {shard: [line for _, line in sorted(lines)] for shard, lines in sorted(found.items())}
