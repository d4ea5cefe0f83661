"""Split one Wikipedia dump into byte ranges that several workers parse at once.

A `pages-articles-multistream.xml.bz2` dump is a series of independent bzip2 streams of ~100 pages
each (the first holds only the `<mediawiki>` start tag and `<siteinfo>`); its companion
`...-multistream-index.txt.bz2` lists every stream's byte offset. A range of whole streams
decompresses to a run of whole `<page>` elements, so it can be parsed on its own once it is given the
dump's header (XML declaration, root start tag, siteinfo) in front and `</mediawiki>` behind.

Stream offsets come from the index file when it lies beside the dump, and otherwise from a scan of
the compressed bytes for the stream header (`BZh` + level + the block magic `1AY&SY`, which starts
every stream on a byte boundary). An uncompressed `.xml` dump is split before `<page>` start tags
(in XML text a "<" is always markup). A `.xml.gz` or a single-stream `.bz2` dump cannot be split
without decompressing it all, so it stays one task.

Planning reads the whole file once (it also yields the file's sha256 for the build record); the
ranges depend only on the file's size and the number of workers, so a resumed run with the same
workers reuses every finished range, and the output is byte-identical to an unsplit build.
"""

from __future__ import annotations

import bz2
import hashlib
import re
from bisect import bisect_left
from pathlib import Path

from corpusbuild.splits import SplitPlan

RANGE_BYTES = 64 << 20  # file bytes per range for big dumps (enwiki multistream: ~350 ranges)
_READ_BYTES = 8 << 20
_HEAD_LIMIT = 16 << 20  # the header before the first <page> is a few KB; give up beyond this
_BZ2_STREAM_RE = re.compile(rb"BZh[1-9]1AY&SY")
_PAGE_START_RE = re.compile(rb"<page[\s>]")  # a page start tag (any attributes, e.g. a namespace)
_ASCII_COMPATIBLE_START = re.compile(rb"^(\xef\xbb\xbf)?\s*<")  # UTF-8 (with or without BOM), not UTF-16/32


def index_path_for(dump: Path) -> Path | None:
    """The multistream index beside a dump (`X-multistream.xml.bz2` -> `X-multistream-index.txt.bz2`)."""
    name = dump.name
    if "multistream" not in name or not name.endswith(".xml.bz2"):
        return None
    candidate = dump.with_name(name.removesuffix(".xml.bz2") + "-index.txt.bz2")
    return candidate if candidate.is_file() else None


def read_index_offsets(index: Path) -> list[int]:
    """Distinct stream offsets from a multistream index (`offset:page_id:title` lines), ascending."""
    offsets = set()
    with bz2.open(index, "rb") as lines:
        for number, line in enumerate(lines, 1):
            head, _, _ = line.partition(b":")
            if not head.strip().isdigit():
                raise ValueError(f"{index}: line {number}: expected 'offset:page_id:title', got {line[:80]!r}")
            offsets.add(int(head))
    return sorted(offsets)


def _targets(size: int, workers: int, range_bytes: int) -> list[int]:
    """Byte positions where ranges should start (the first boundary at or after each is used)."""
    range_bytes = max(1, min(range_bytes, -(-size // max(1, workers))))
    return list(range(range_bytes, size, range_bytes))


def _scan(
    path: Path, pattern: re.Pattern[bytes], targets: list[int], count_lines: bool
) -> tuple[str, int, dict[int, int | None]]:
    """(sha256, size, {boundary: line it starts on}): one read of the file, hashing it and keeping
    the first match of `pattern` at or after each target (lines only with `count_lines`)."""
    digest = hashlib.sha256()
    boundaries: dict[int, int | None] = {}
    pending = list(reversed(targets))
    keep = 16  # longer than any match, so a match across two reads is still found
    carry = b""
    offset = 0  # file offset of window[0]
    newlines = 0  # newlines in the file before `offset`
    with open(path, "rb") as handle:
        while chunk := handle.read(_READ_BYTES):
            digest.update(chunk)
            window = carry + chunk
            while pending:
                start = max(0, pending[-1] - offset)
                match = pattern.search(window, start) if start < len(window) else None
                if match is None:
                    break
                position = offset + match.start()
                line = newlines + window.count(b"\n", 0, match.start()) + 1 if count_lines else None
                boundaries[position] = line
                while pending and pending[-1] <= position:
                    pending.pop()
            consumed = len(window) - keep if len(window) > keep else 0
            if count_lines:
                newlines += window.count(b"\n", 0, consumed)
            carry = window[consumed:]
            offset += consumed
    return digest.hexdigest(), offset + len(carry), boundaries


def _starts_a_stream(path: Path, offset: int, probe: int = 1 << 16) -> bool:
    """Whether the bytes at `offset` decompress as a bzip2 stream (a range must start at a real one: a
    stream header inside damaged or appended bytes would make the split differ from reading it whole)."""
    with open(path, "rb") as handle:
        handle.seek(offset)
        data = handle.read(probe)
    try:
        bz2.BZ2Decompressor().decompress(data, max_length=1)
    except OSError:
        return False
    return True


def _bz2_head(path: Path) -> bytes | None:
    """Decompressed bytes before the first <page> (the dump's header), or None if not found."""
    decompressor = bz2.BZ2Decompressor()
    text = b""
    with open(path, "rb") as handle:
        while len(text) < _HEAD_LIMIT:
            if decompressor.eof:
                rest = decompressor.unused_data
                decompressor = bz2.BZ2Decompressor()
                chunk = rest
            else:
                chunk = handle.read(1 << 16)
                if not chunk:
                    return None
            text += decompressor.decompress(chunk)
            match = _PAGE_START_RE.search(text)
            if match:
                return text[: match.start()]
    return None


def _plain_head(path: Path) -> bytes | None:
    with open(path, "rb") as handle:
        text = handle.read(_HEAD_LIMIT)
    match = _PAGE_START_RE.search(text)
    return text[: match.start()] if match else None


def plan_dump_split(path: Path, workers: int, range_bytes: int = RANGE_BYTES) -> SplitPlan | None:
    """Ranges of about `range_bytes` (fewer, larger ones when that gives each worker one) for one dump,
    or None when it is parsed whole: one worker, under a quarter of `range_bytes`, or not splittable."""
    size = path.stat().st_size
    if workers <= 1 or range_bytes <= 0 or size < range_bytes // 4:
        return None
    targets = _targets(size, workers, range_bytes)
    if not targets:
        return None
    with open(path, "rb") as handle:
        magic = handle.read(10)
    if _BZ2_STREAM_RE.match(magic):
        head = _bz2_head(path)
        pattern = _BZ2_STREAM_RE
    elif path.name.endswith(".xml"):
        head = _plain_head(path)
        pattern = _PAGE_START_RE
    else:
        return None
    if head is None or not _ASCII_COMPATIBLE_START.match(head) or b"<mediawiki" not in head:
        return None
    compressed = pattern is _BZ2_STREAM_RE
    sha256, size, lines = _scan(path, pattern, targets, count_lines=not compressed)
    index = index_path_for(path) if compressed else None
    if index is not None:
        offsets = read_index_offsets(index)
        lines = {offsets[i]: None for i in (bisect_left(offsets, t) for t in targets) if i < len(offsets)}
    boundaries = sorted(b for b in lines if 0 < b < size)
    if compressed and index is None:  # found by their header alone, which any bytes may happen to hold
        boundaries = [offset for offset in boundaries if _starts_a_stream(path, offset)]
    if not boundaries:
        return None
    starts = [0, *boundaries]
    ends = [*boundaries, size]
    lines[0] = None if compressed else 1
    parts = [
        {"start": start, "end": end, "index": number, "count": len(starts), "head": head, "first_line": lines[start]}
        for number, (start, end) in enumerate(zip(starts, ends, strict=True))
    ]
    return SplitPlan(sha256=sha256, size=size, parts=parts)


def range_position(part: dict, line: int | None) -> tuple[int | None, str]:
    """(line in the file, element text) for an error at `line` of a range's XML (its framing header
    included). Plain XML gets the file's own line; a compressed range names its first byte and the
    line within the range, since the file's decompressed line is unknown without decompressing it all."""
    where = f"pages from byte {part['start']} (part {part['index'] + 1}/{part['count']})"
    if line is None or part["index"] == 0:
        return line, where
    line -= part["head"].count(b"\n")
    if part["first_line"] is not None:
        return part["first_line"] + line - 1, where
    return None, f"line {line} of the {where}"
