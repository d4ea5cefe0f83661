"""A built snippet corpus as later stages see it: its build record, its shards, and the checks that
make an index refuse a corpus it was not built from."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import orjson

from medsnip.buildrecord import (
    RECORD_SCHEMA,
    NotACorpus,
    lineage_hash,
    read_build_record,
    read_corpus_record,
    sha256_file,
    tool_identity,
)

CHANGES = "changes.jsonl"  # a build's change set against its parent (corpusbuild.engine.changes writes it)
KINDS = ("added", "changed", "removed")
# an index folder holds its record, or (a dense build under way) the parameters it wrote first
INDEX_MARKERS = ("build.json", "build-params.json")
# the folder names the indexer's own kinds take: such a folder is an index under way even before it holds
# a file (a new kind's folders are found by their record)
INDEX_FOLDER_NAMES = re.compile(r"^(store|bm25|dense-.+)$")


def served_index_folders(corpus_dir: Path) -> list[Path]:
    """The index folders of a corpus folder, finished or not: every visible subfolder holding a build
    record (or the parameters a dense build writes before its record) or named as the indexer names its
    indexes, the store first, then by name. Which kind each is, is its record's stage (indexer.kinds)."""
    folders = [
        folder
        for folder in sorted(Path(corpus_dir).iterdir())
        if folder.is_dir()
        and not folder.name.startswith(".")
        and (INDEX_FOLDER_NAMES.match(folder.name) or any((folder / m).is_file() for m in INDEX_MARKERS))
    ]
    return sorted(folders, key=lambda folder: folder.name != "store")


class LineageError(Exception):
    """An index, store or corpus does not match what it claims to be built from."""


@dataclass(frozen=True)
class Shard:
    index: int
    path: Path
    records: int
    bytes: int
    sha256: str


@dataclass(frozen=True)
class ChangeSet:
    """A corpus build's changes since its parent build (whose lineage hash is `parent`)."""

    parent: str
    summary: dict
    ids: dict[str, list[str]]  # "added" / "changed" / "removed" -> snippet ids

    @property
    def gone(self) -> list[str]:
        """Ids whose earlier line is no longer in the corpus (changed or removed)."""
        return self.ids["changed"] + self.ids["removed"]

    @property
    def new(self) -> list[str]:
        """Ids whose line in this build is new (added or changed)."""
        return self.ids["added"] + self.ids["changed"]


@dataclass(frozen=True)
class Corpus:
    """A corpusbuild output folder whose build record says it is complete."""

    path: Path
    record: dict
    record_hash: str  # lineage_hash of the build record: what the corpus is, not how a run went
    shards: tuple[Shard, ...]

    @property
    def source(self) -> str:
        return self.record["source"]

    @property
    def snippets(self) -> int:
        return sum(shard.records for shard in self.shards)

    @property
    def language(self) -> str | None:
        """The language its reader recorded for every input (Wikipedia's siteinfo or --language, parallel
        text's), or None when the inputs do not say or disagree (English sources record none)."""
        found = {entry.get("stats", {}).get("language") for entry in self.record.get("inputs", [])}
        return found.pop() if len(found) == 1 else None

    @classmethod
    def open(cls, path: Path, verify: str = "stat") -> Corpus:
        """Open a corpus folder: the record must be complete and every shard have the bytes it records.

        `verify="stat"` (serving, opening an index): a shard whose size and mtime are those recorded when
        it was published is trusted; any other shard (edited, or copied without its mtime) is hashed and
        compared with its sha256. `verify="full"` (building an index, which reads every byte anyway)
        hashes every shard. A same-length edit is caught either way, unless someone also restored the
        mtime by hand: `corpusbuild verify` (always a full check) catches that too.
        """
        path = Path(path)
        try:
            record = read_corpus_record(path)
        except NotACorpus as error:
            raise LineageError(str(error)) from error
        if not record.get("complete", False):
            raise LineageError(f"{path}: the corpus build is marked incomplete; fix its errors and rebuild first")
        published = record.get("run", {}).get("shard_mtime_ns", {})
        shards = []
        for index, output in enumerate(record["outputs"]):
            shard_path = path / output["path"]
            if not shard_path.is_file():
                raise LineageError(f"{shard_path}: listed in build.json but missing")
            stat = shard_path.stat()
            if stat.st_size != output["bytes"]:
                raise LineageError(f"{shard_path}: {stat.st_size} bytes, build.json says {output['bytes']}")
            if verify == "full" or stat.st_mtime_ns != published.get(output["path"]):
                found = sha256_file(shard_path)[0]
                if found != output["sha256"]:
                    raise LineageError(
                        f"{shard_path}: changed since its build (sha256 {found}, build.json says {output['sha256']}); "
                        f"rebuild the corpus (the same corpusbuild command again) or restore the shard; "
                        f"`corpusbuild verify {path}` lists every difference"
                    )
            shards.append(Shard(index, shard_path, output["records"], output["bytes"], output["sha256"]))
        return cls(path, record, lineage_hash(record), tuple(shards))

    def upstream(self) -> dict:
        """What an index built from this corpus records as its lineage."""
        return {
            "stage": self.record["stage"],
            "path": str(self.path.resolve()),
            "lineage_sha256": self.record_hash,
            "snippets": self.snippets,
            "shards": len(self.shards),
        }

    def change_set(self) -> ChangeSet | None:
        """What this build changed since the build it replaced (None for a first build): the ids in
        changes.jsonl by kind, checked against the sha256 build.json records for it."""
        summary = self.record.get("changes")
        if not summary:
            return None
        path = self.path / summary["file"]
        try:
            found = sha256_file(path)[0]
        except FileNotFoundError:
            raise LineageError(f"{path}: build.json records a change set but the file is missing") from None
        if found != summary["sha256"]:
            raise LineageError(f"{path}: sha256 {found}, build.json says {summary['sha256']}")
        ids: dict[str, list[str]] = {kind: [] for kind in KINDS}
        with open(path, "rb") as handle:
            for number, line in enumerate(handle, 1):
                try:
                    entry = orjson.loads(line)
                    ids[entry["change"]].append(entry["id"])
                except (orjson.JSONDecodeError, KeyError, TypeError) as error:
                    raise LineageError(f"{path}:{number}: not a change entry ({error})") from None
        return ChangeSet(summary["parent"], summary, ids)

    def check_lineage(self, upstream: dict, what: str) -> None:
        """Refuse an index/store whose recorded upstream is not this corpus."""
        if upstream.get("lineage_sha256") != self.record_hash:
            raise LineageError(
                f"{what} was built from a corpus whose lineage hash is {upstream.get('lineage_sha256')}, "
                f"but {self.path} has {self.record_hash} (its shards or parameters changed): rebuild it from "
                "this corpus"
            )
        if upstream.get("snippets") != self.snippets or upstream.get("shards") != len(self.shards):
            raise LineageError(
                f"{what} counts {upstream.get('snippets')} snippets in {upstream.get('shards')} shards, "
                f"{self.path} has {self.snippets} in {len(self.shards)}"
            )


def default_out(corpus_path: Path, name: str) -> Path:
    """Where the corpus-root layout (docs/design.md) puts an index of this corpus (`<corpus>/bm25`, ...)."""
    return Path(corpus_path) / name


def index_record(stage: str, corpus: Corpus, **fields) -> dict:
    """The build record of an index of `corpus`: the common header (schema, tool, stage, lineage)
    followed by the stage's own fields."""
    return {
        "schema": RECORD_SCHEMA,
        "tool": tool_identity(),
        "stage": stage,
        "complete": True,
        "upstream": corpus.upstream(),
        **fields,
    }


def open_index_record(path: Path, stage: str, what: str, corpus: Corpus) -> dict:
    """An index's build record, after checking it is of `stage` and was built from `corpus`."""
    record = read_build_record(path)
    if record.get("stage") != stage:
        raise LineageError(f"{path}: not a {what} (stage {record.get('stage')!r})")
    corpus.check_lineage(record["upstream"], f"{what} {path}")
    return record


def restore_interrupted_swaps(folder: Path) -> list[Path]:
    """Undo what a crash between replace_dir's two renames left in `folder`: an output gone, its previous
    version still there as `.NAME.old-PID` of a dead process. The swap never finished, so that version
    is the last good one: it is renamed back (before stale temps are removed, which would delete it).
    Returns the outputs restored."""
    from medsnip.processes import is_alive

    restored = []
    for entry in sorted(Path(folder).glob(".*.old-*"), key=lambda p: p.stat().st_mtime, reverse=True):
        name, _, pid = entry.name[1:].rpartition(".old-")
        out = Path(folder) / name
        if pid.isdigit() and not is_alive(int(pid)) and not out.exists() and entry.is_dir():
            os.replace(entry, out)
            restored.append(out)
    return restored


def replace_dir(temp: Path, out: Path) -> None:
    """Swap a finished temp folder in for `out` (the old one removed only after the swap; a crash between
    the two renames is undone by restore_interrupted_swaps)."""
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    if out.exists():
        os.replace(out, old)
    os.replace(temp, out)
    shutil.rmtree(old, ignore_errors=True)


def cannot_write(target: Path) -> str | None:
    """Why nothing can be written where the folder `target` is to be (its nearest existing parent is probed
    with a file made and removed, so a refused run creates no folder), or None when it can."""
    existing = Path(target)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        probe = existing / f".write-test-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as error:
        return f"cannot write to {existing}: {error.strerror or error}"
    return None
