"""Parse an XML file whose root holds many records in batches of whole records, one C call each.

Why: lxml's iterparse takes the GIL back from libxml2 for every element it sees, and the records
must then be cleared one by one; on PubMed that bookkeeping costs about a fifth of the parse.
Cutting the byte stream after record end tags and parsing each batch with `etree.fromstring`, behind
the file's own prolog (XML declaration, DOCTYPE, root start tag), builds the same elements with the
same parser options, so records read from a batch are the records iterparse would give.

Exactness is kept by construction, not by hoping the input is clean:
- a batch is cut only at a line break that follows a record end tag, so every batch but the first
  starts at column 1 of a line whose number is known (the first starts right after the prolog);
- when a batch does not parse (malformed input, or an end tag inside a comment or CDATA that fooled
  the cut), when no cut turns up within `MAX_BATCH_BYTES` (a file written on one line), or at the end
  of the file when the tail is not a clean close, batching stops and `rest` gives a stream that
  replays the file from that batch's first byte behind the prolog and as many line breaks as came
  before it. A streaming parser reading `rest` is then at the same line and column as in a whole-file
  parse, so its records and its errors (message, line, column) are exactly the whole-file ones.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from lxml import etree

from corpusbuild.inputs import DECOMPRESSION_ERRORS, ChainedReader

READ_BYTES = 1 << 17  # a batch is about this much XML: its tree stays small enough for the CPU cache
MAX_BATCH_BYTES = 8 << 20  # no cut in this much: give the rest of the file to the streaming parser
_MARKER = b"<_/>"  # an empty element closing every cut batch; its line is the batch's last line
_BIG_LINE = 65535  # libxml2 stores exact line numbers only below this


@dataclass(frozen=True)
class Prolog:
    """Everything before the root's first child: XML declaration, DOCTYPE, the root start tag."""

    data: bytes
    root_tag: str
    newlines: int  # line breaks in `data`

    @property
    def closing(self) -> bytes:
        return b"</" + self.root_tag.encode() + b">"


@dataclass(frozen=True)
class Batch:
    """The parsed records of one batch: children of a stand-in root (with the marker at the end of a
    cut batch). A line in the batch is `element.sourceline + line_offset` in the file."""

    root: etree._Element
    line_offset: int


def read_prolog(stream: io.BufferedReader, root_tags: Sequence[str], parser: etree.XMLParser) -> Prolog | None:
    """Consume and return the prolog when the stream starts with one that ends in a start tag named in
    `root_tags` (no namespace) and parses on its own; otherwise consume nothing and return None."""
    head = stream.peek(1 << 13)
    names = "|".join(re.escape(tag) for tag in root_tags)
    match = re.search(rb"<(" + names.encode() + rb")(?:\s[^<>]*)?(?<!/)>", head)
    if match is None:
        return None
    data = bytes(head[: match.end()])
    prolog = Prolog(data, match.group(1).decode(), data.count(b"\n"))
    try:
        root = etree.fromstring(prolog.data + prolog.closing, parser)
    except etree.XMLSyntaxError:
        return None  # the match sat inside a comment or the DOCTYPE, or the declaration is odd
    if root.tag != prolog.root_tag:
        return None
    stream.read(len(prolog.data))
    return prolog


class RecordBatches:
    """Iterate the batches of a stream positioned after `prolog`; afterwards `rest` is None when the
    whole file was parsed, or a stream the caller's streaming parser must read to finish it."""

    def __init__(self, stream: BinaryIO, prolog: Prolog, end_tags: Sequence[str], parser: etree.XMLParser):
        self._stream = stream
        self._prolog = prolog
        self._end_tags = [b"</" + tag.encode() + b">" for tag in end_tags]
        self._parser = parser
        self.rest: BinaryIO | None = None

    def __iter__(self) -> Iterator[Batch]:
        prolog = self._prolog
        carry = bytearray()
        line_offset = 0  # file line of the next batch's first byte, minus that line in a batch document
        searched = 0  # carry[:searched] holds no usable cut
        while True:
            try:
                chunk = self._stream.read(READ_BYTES)
            except DECOMPRESSION_ERRORS:  # a damaged compressed stream: hand out what is whole, then fail
                cut = self._find_cut(carry, 0)
                root = self._parse(b"".join((prolog.data, carry[:cut], _MARKER, prolog.closing))) if cut else None
                if root is not None:
                    yield Batch(root, line_offset)
                raise
            if not chunk:  # end of file: the tail must close the root by itself
                root = self._parse(prolog.data + bytes(carry))
                if root is None:
                    self.rest = self._replay(carry, line_offset)
                else:
                    yield Batch(root, line_offset)
                return
            carry += chunk
            cut = self._find_cut(carry, searched)
            if cut == 0:
                if len(carry) > MAX_BATCH_BYTES:
                    self.rest = self._replay(carry, line_offset)
                    return
                searched = max(0, len(carry) - 64)  # an end tag may straddle the next read
                continue
            searched = 0
            batch = memoryview(carry)[:cut]
            root = self._parse(b"".join((prolog.data, batch, _MARKER, prolog.closing)))
            if root is None:
                batch.release()
                self.rest = self._replay(carry, line_offset)
                return
            line_offset_of_batch = line_offset
            line_offset += self._newlines(root, batch)
            batch.release()
            del carry[:cut]
            yield Batch(root, line_offset_of_batch)

    def _find_cut(self, carry: bytearray, start: int) -> int:
        """Offset just past the last line break that follows a record end tag (only spaces, tabs or
        a carriage return between them), or 0 when there is none after `start`."""
        best = 0
        for tag in self._end_tags:
            end = len(carry)
            # An end tag that starts before best - len(tag) cannot give a later cut than best.
            low = max(start, best - len(tag))
            for _ in range(8):  # a few end tags not followed by a line break are tried, no more
                position = carry.rfind(tag, low, end)
                if position < 0:
                    break
                after = position + len(tag)
                while after < len(carry) and carry[after] in b" \t\r":
                    after += 1
                if after < len(carry) and carry[after] == 0x0A:  # "\n"
                    best = max(best, after + 1)
                    break
                end = position
        return best

    def _parse(self, document: bytes) -> etree._Element | None:
        try:
            return etree.fromstring(document, self._parser)
        except etree.XMLSyntaxError:
            return None

    def _newlines(self, root: etree._Element, data: memoryview) -> int:
        """Line breaks in a cut batch: read off the marker's line (exact below libxml2's big-line
        limit), counted otherwise."""
        marker_line = root[-1].sourceline or _BIG_LINE
        if marker_line < _BIG_LINE:
            return marker_line - 1 - self._prolog.newlines
        return bytes(data).count(b"\n")

    def _replay(self, carry: bytearray, line_offset: int) -> BinaryIO:
        """The file from the current batch on, behind the prolog and line breaks that put its first
        byte at the line (and column 1, or right after the prolog) where it is in the file."""
        replayed = io.BytesIO(b"".join((self._prolog.data, b"\n" * line_offset, carry)))
        return io.BufferedReader(ChainedReader([replayed, self._stream]), buffer_size=1 << 16)
