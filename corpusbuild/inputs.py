"""Finding input files (files, folders, globs), ordering them, and opening them (gzip/bz2 aware)."""

from __future__ import annotations

import bz2
import fnmatch
import glob
import io
import os
import re
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from isal import igzip  # ISA-L gzip: same format as the gzip module, 2-3x faster to decompress
from isal.igzip_lib import IsalError

from corpusbuild.errors import InputError, InputProblem
from medsnip.buildrecord import foreign_folder_problem
from medsnip.corpus import cannot_write
from medsnip.snippet import SHARD_GLOB

# pubmed26n0001.xml.gz, medline14n0123.xml: two-digit year + "n" + four-digit sequence number.
SEQUENCE_RE = re.compile(r"(\d{2})n(\d{4})\.xml(?:\.gz)?$")
_GLOB_CHARS = set("*?[")
# What reading a damaged .gz/.bz2 raises: EOFError when it is cut short, OSError (BadGzipFile) on a bad
# header or CRC, zlib.error, or ISA-L's own IsalError (not an OSError) on an invalid deflate block.
DECOMPRESSION_ERRORS = (EOFError, OSError, zlib.error, IsalError)


def expand_inputs(specs: Sequence[str], suffixes: Sequence[str]) -> tuple[list[Path], list[InputProblem]]:
    """Expand each spec (a file, a folder searched recursively for `suffixes`, or a glob) into files.

    Returns the files in the order given (duplicates dropped) and a problem for every spec that names
    nothing, so one bad path is reported without hiding the others. Symbolic links are followed, into
    folders too (each real folder once, so a link loop ends); a link whose target is missing is
    reported, never skipped in silence.
    """
    found: list[Path] = []
    problems: list[InputProblem] = []
    for spec in specs:
        if _GLOB_CHARS & set(spec):
            matches = sorted(Path(p) for p in glob.glob(spec, recursive=True))
            problems.extend(_dangling(m) for m in matches if m.is_symlink() and not m.exists())
            files = [m for m in matches if m.is_file()]
            if not files:
                problems.append(InputProblem(spec, "glob matches no file"))
            found.extend(files)
            continue
        path = Path(spec)
        if path.is_dir():
            files, dangling = _files_below(path, tuple(suffixes))
            problems.extend(_dangling(link) for link in dangling)
            if not files and not dangling:
                problems.append(InputProblem(spec, f"folder holds no {'/'.join(suffixes)} file"))
            found.extend(files)
        elif path.exists():
            found.append(path)
        elif path.is_symlink():
            problems.append(_dangling(path))
        else:
            problems.append(InputProblem(spec, "no such file or directory"))
    unique: dict[Path, Path] = {}
    for path in found:
        unique.setdefault(path.resolve(), path)
    return list(unique.values()), problems


def _files_below(folder: Path, suffixes: tuple[str, ...]) -> tuple[list[Path], list[Path]]:
    """(files with one of `suffixes`, dangling links with one) anywhere below `folder`, sorted."""
    files, dangling, seen = [], [], set()
    for root, dirs, names in os.walk(folder, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:  # a link back to a folder already searched
            dirs.clear()
            continue
        seen.add(real)
        for name in names:
            if name.endswith(suffixes):
                candidate = Path(root) / name
                if candidate.is_file():
                    files.append(candidate)
                elif candidate.is_symlink() and not candidate.exists():
                    dangling.append(candidate)
    return sorted(files), sorted(dangling)


def _dangling(link: Path) -> InputProblem:
    return InputProblem(str(link), f"dangling symbolic link (its target {os.readlink(link)} does not exist)")


def output_folder_problem(
    out_dir: Path, specs: Sequence[str], files: Sequence[Path], force: bool = False
) -> str | None:
    """Why `out_dir` cannot receive this build, or None. Checked before anything is read: an output
    that is a file or cannot be written, an output inside an input folder (the next build would
    read its own shards back as input) or holding an input the build would overwrite, and a folder that
    holds files corpusbuild did not write (unless `force`)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        return f"{out} exists and is not a folder"
    resolved = out.resolve()
    for spec in specs:
        folder = Path(spec)
        if not (_GLOB_CHARS & set(spec)) and folder.is_dir() and resolved.is_relative_to(folder.resolve()):
            return f"{out} is inside the input folder {spec}: the build would read its own output back"
    for path in files:  # an input the build would overwrite, delete or read back as its own work
        inside = path.resolve().relative_to(resolved) if path.resolve().is_relative_to(resolved) else None
        if inside is not None and (
            inside.parts[0] == ".work" or inside.name == "build.json" or fnmatch.fnmatch(inside.name, SHARD_GLOB)
        ):
            return f"the input {path} is one of the files the build writes in {out}; choose another --out"
    foreign = None if force else foreign_folder_problem(out, "corpusbuild.", "corpusbuild did not write")
    return foreign or cannot_write(out)  # the folder itself is made by the build: a refused build leaves none


def sequence_of(path: Path) -> tuple[int, int] | None:
    """(year, sequence) from an NLM file name such as pubmed26n1335.xml.gz, else None."""
    match = SEQUENCE_RE.search(path.name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def order_inputs(paths: Sequence[Path]) -> list[Path]:
    """The order updates are applied in: numbered NLM files by (year, sequence number), then files
    without a sequence number (efetch results, medsamp2014.xml) in the order they were given."""
    numbered = [(sequence_of(p), i, p) for i, p in enumerate(paths) if sequence_of(p) is not None]
    unnumbered = [p for p in paths if sequence_of(p) is None]
    return [p for _, _, p in sorted(numbered)] + unnumbered


def decompressed(raw: BinaryIO, magic: bytes) -> BinaryIO:
    """Wrap a raw byte stream in the decompressor its first bytes call for (gzip, bzip2, or none)."""
    if magic.startswith(b"\x1f\x8b"):
        return igzip.IGzipFile(fileobj=raw, mode="rb")
    if magic.startswith(b"BZh"):
        return io.BufferedReader(StrictBZ2Reader(raw), buffer_size=1 << 16)
    return raw


def read_decompressed(raw: BinaryIO, magic: bytes, label: str) -> bytes:
    """The whole decompressed content of a (small) input; a damaged archive is an InputError."""
    try:
        return decompressed(raw, magic).read()
    except DECOMPRESSION_ERRORS as error:
        raise InputError(InputProblem(label, f"truncated or corrupt compressed stream ({error})")) from error


class StrictBZ2Reader(io.RawIOBase):
    """A multi-stream bzip2 file decompressed, refusing what Python's BZ2File skips in silence: bytes
    after the last complete stream that are not a stream (a damaged or padded dump). Reading it whole
    or in byte ranges (dump_ranges) must give the same result, and a range that starts there fails."""

    def __init__(self, raw: BinaryIO):
        super().__init__()
        self._raw = raw
        self._decompressor = bz2.BZ2Decompressor()
        self._consumed = 0  # compressed bytes handed to decompressors, for the error's position
        self._stream_start = 0
        self._fed = False  # the current decompressor has been given bytes
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while True:
            if self._decompressor.eof:
                leftover = self._decompressor.unused_data
                self._consumed -= len(leftover)
                self._pending = leftover + self._pending
                self._stream_start, self._fed = self._consumed, False
                self._decompressor = bz2.BZ2Decompressor()
            chunk = b""
            if self._decompressor.needs_input:
                if not self._pending:
                    self._pending = self._raw.read(1 << 16)
                    if not self._pending:
                        if self._fed:
                            raise EOFError(f"the bzip2 stream at byte {self._stream_start} ends before its end marker")
                        return 0
                chunk, self._pending = self._pending, b""
                self._consumed += len(chunk)
                self._fed = True
            try:
                data = self._decompressor.decompress(chunk, max_length=len(buffer))
            except OSError as error:
                raise OSError(f"{error}: the bytes from {self._stream_start} are not a bzip2 stream") from error
            if data:
                buffer[: len(data)] = data
                return len(data)


class ChainedReader(io.RawIOBase):
    """Several binary streams read one after the other as one (a dump range between its header and
    closing tag)."""

    def __init__(self, streams: list[BinaryIO]):
        super().__init__()
        self._streams = list(streams)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while self._streams:
            data = self._streams[0].read(len(buffer))
            if data:
                buffer[: len(data)] = data
                return len(data)
            self._streams.pop(0)
        return 0
