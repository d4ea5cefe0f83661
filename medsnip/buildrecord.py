"""The build record (`build.json`) written beside every output, and the file helpers it relies on.

A record lists the tool version, the parameters, every input and output with bytes and sha256, counts,
errors and the upstream record's hash (lineage). Later stages trust files only after checking it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from medsnip import __version__

BUILD_RECORD = "build.json"
RECORD_SCHEMA = "medsnip.build/1"
_CHUNK = 1 << 20


def tool_identity() -> dict[str, str]:
    return {"name": "medsnip", "version": __version__}


def sha256_file(path: Path) -> tuple[str, int]:
    """(hex sha256, size in bytes) of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


class HashingReader(io.RawIOBase):
    """A read-only binary stream that hashes exactly the bytes handed out.

    Lets a parser compute an input's sha256 in the same pass that parses it; decompressors wrap it
    like any raw file (it implements readinto). With `limit`, it ends after that many bytes (one range
    of a split input).
    """

    def __init__(self, raw: BinaryIO, limit: int | None = None):
        super().__init__()
        self._raw = raw
        self._digest = hashlib.sha256()
        self._limit = limit
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._limit is not None:
            buffer = memoryview(buffer)[: max(0, self._limit - self.bytes_read)]
            if not len(buffer):
                return 0
        count = self._raw.readinto(buffer)
        if count:
            self._digest.update(memoryview(buffer)[:count])
            self.bytes_read += count
        return count

    def drain(self) -> None:
        """Hash whatever the parser did not read (trailing bytes), so the digest covers the file."""
        while self.read(_CHUNK):
            pass

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temp file in the same folder, fsync, then rename over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; outputs are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def dumps_record(record: dict[str, Any]) -> bytes:
    return orjson.dumps(record, option=orjson.OPT_INDENT_2) + b"\n"


def write_json(path: Path, record: dict[str, Any]) -> None:
    atomic_write_bytes(path, dumps_record(record))


def read_json(path: Path) -> dict[str, Any]:
    """A JSON file's object; a file that is not JSON is a ValueError naming it."""
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise ValueError(f"{path}: not JSON ({error})") from error


def write_build_record(directory: Path, record: dict[str, Any]) -> Path:
    path = directory / BUILD_RECORD
    write_json(path, record)
    return path


def read_build_record(directory: Path) -> dict[str, Any]:
    path = directory / BUILD_RECORD
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no build record (was the build completed?)")
    record = read_json(path)
    if record.get("schema") != RECORD_SCHEMA:
        raise ValueError(f"{path}: not a medsnip build record (schema {record.get('schema')!r})")
    return record


def read_complete_record(directory: Path) -> dict[str, Any] | None:
    """The build record in `directory` if there is a readable one marked complete, else None: what a
    build looks at to decide whether an earlier output can be reused, kept or updated (anything else
    is built again)."""
    path = Path(directory) / BUILD_RECORD
    if not path.is_file():
        return None
    try:
        record = read_json(path)
    except (OSError, ValueError):
        return None
    return record if record.get("complete") else None


def foreign_entries(folder: Path, stage_prefix: str, own: Iterable[str] = ()) -> list[str]:
    """What in `folder` no build of a `stage_prefix` stage wrote ("corpusbuild."): [] for a folder whose build
    record is of such a stage, for an empty or missing one, and for one a killed build left (its hidden work
    folders and shards, and the names matching `own`, names or glob patterns, no record yet); else the names
    of what is there (someone's notes, another tool's output), which a build must not write beside."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    try:
        if str(read_build_record(folder).get("stage", "")).startswith(stage_prefix):
            return []
        return [BUILD_RECORD]  # another stage's output
    except FileNotFoundError:
        pass
    except ValueError:
        return [BUILD_RECORD]
    own = list(own)
    return sorted(
        e.name
        for e in folder.iterdir()
        if not e.name.startswith((".", "shard-")) and not any(fnmatch.fnmatchcase(e.name, o) for o in own)
    )


def foreign_folder_problem(
    folder: Path,
    stage_prefix: str,
    writer: str,
    own: Iterable[str] = (),
    forced: str = "to build into it beside what is there",
) -> str | None:
    """Why a build must not write into `folder` (`foreign_entries`), said the same by every build command, or
    None. `writer` says who did not write it ("corpusbuild did not write"); `forced`, what --force does."""
    foreign = foreign_entries(folder, stage_prefix, own)
    if not foreign:
        return None
    shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
    return f"{folder} is a folder {writer} (it holds {shown}): give a new or empty folder, or --force {forced}"


class NotACorpus(ValueError):
    """A folder whose build record is not one source's corpusbuild output."""


def read_corpus_record(directory: Path) -> dict[str, Any]:
    """The build record of one source's corpusbuild output (shards + build.json); NotACorpus, saying
    what the folder is instead, for anything else (a corpus root, an index, a foreign file)."""
    try:
        record = read_build_record(directory)
    except (FileNotFoundError, ValueError) as error:
        raise NotACorpus(f"{error}: not a corpusbuild output (run corpusbuild first)") from error
    stage = str(record.get("stage", ""))
    if stage == "corpusbuild.build":
        sources = ", ".join(str(Path(directory) / s.get("name", "?")) for s in record.get("sources", []))
        raise NotACorpus(f"{directory} is a corpus root built from a recipe; give one of its sources: {sources}")
    if not stage.startswith("corpusbuild.") or not isinstance(record.get("outputs"), list):
        raise NotACorpus(f"{directory}: build.json is from {stage!r}, not a corpusbuild output")
    return record


LINEAGE_FIELDS = ("schema", "stage", "source", "params", "inputs", "outputs", "counts", "upstream", "encoder")
RUN_COUNTS = ("embedded_this_run", "snippets_embedded_this_run", "shards_reused", "parts_built_this_run")


def lineage_hash(record: dict) -> str:
    """sha256 of what a build *is* (stage, parameters, inputs, outputs with their checksums, counts),
    not of how one run went (timings, command line, reuse counts): rebuilding a corpus to the same
    bytes keeps its indexes valid, while any change to a shard or a parameter changes the hash."""
    identity = orjson.loads(orjson.dumps({name: record.get(name) for name in LINEAGE_FIELDS}))  # a copy
    for key in RUN_COUNTS:  # beside the counts for the reader; they say how a run went (a resumed one reused more)
        (identity.get("counts") or {}).pop(key, None)
    for entry in identity.get("inputs") or []:
        if isinstance(entry, dict):
            entry.pop("ranges", None)  # how many ranges a split input was parsed in depends on --workers
    return hashlib.sha256(orjson.dumps(identity, option=orjson.OPT_SORT_KEYS)).hexdigest()


def record_hash(directory: Path) -> str:
    """sha256 of a directory's build.json: what downstream records cite as lineage."""
    return sha256_file(directory / BUILD_RECORD)[0]
