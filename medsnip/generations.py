"""Generations on disk: what a corpus and its indexes were before an update, kept until no server uses it.

A corpus folder always holds its current generation (its shards, build.json and index folders, where
every stage reads them). When a build replaces one of them with the output of another corpus version
(corpusbuild over an earlier build, an index rebuilt or updated for a new corpus), the earlier one is
first kept as hard links under

    FOLDER/.generations/<lineage hash, 16 hex>/corpus/     shards, build.json, changes.jsonl
    FOLDER/.generations/<lineage hash, 16 hex>/<index>/    an index folder as it was (store, bm25, dense-*)

keyed by the corpus lineage it belongs to. Stages replace files by renaming new ones in and never write
into an existing file, so a kept link keeps the old bytes, and keeping costs no copy (a filesystem
without hard links gets a copy). A server that has the old generation open keeps reading the same
files, also on a filesystem where deleting an open file breaks its readers (NFS).

searchd records what it serves in a lease, `FOLDER/.generations/leases/<host>-<pid>.json` (the corpus
lineage hashes it serves, refreshed every minute, removed when it stops or swaps). `medsnip prune FOLDER`
deletes every kept generation no live lease names: a lease is live while its process runs (same host)
or while it was refreshed within `lease_timeout` (another host sharing the folder).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from medsnip.buildrecord import BUILD_RECORD, lineage_hash, read_complete_record
from medsnip.processes import is_alive

GENERATIONS = ".generations"
LEASES = "leases"
LEASE_REFRESH_SECONDS = 60.0
DEFAULT_LEASE_TIMEOUT = 15 * 60.0
_NOT_KEPT = ("write.lock",)  # Lucene's lock file: a kept index is never written again


def generation_dir(folder: Path, lineage: str) -> Path:
    return Path(folder) / GENERATIONS / lineage[:16]


def _kept(entry: Path) -> bool:
    """Temp files of a running or killed build, and Lucene's lock, are not part of a generation."""
    return entry.name not in _NOT_KEPT and not entry.name.startswith(".")


def _link(source: Path, target: Path) -> None:
    """A file or a whole folder rebuilt at `target` from hard links (copies where links are refused)."""
    if source.is_dir() and not source.is_symlink():
        target.mkdir(parents=True)
        for entry in sorted(filter(_kept, source.iterdir())):
            _link(entry, target / entry.name)
    elif source.is_symlink():
        os.symlink(os.readlink(source), target)
    else:
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)


def link_tree(source: Path, target: Path) -> None:
    """`source` (a folder) rebuilt at `target` from hard links, leaving out temp files and locks."""
    _link(Path(source), Path(target))


def _keep(entries: list[Path], target: Path) -> Path:
    """Link `entries` (files or folders) into `target`, atomically: a temp folder renamed into place.
    A generation kept before (the same lineage) stays as it is."""
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir()
    try:
        for entry in entries:
            if entry.exists():
                _link(entry, temp / entry.name)
        os.replace(temp, target)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return target


def keep_corpus(corpus_dir: Path, old_record: dict, shard_names: list[str]) -> Path:
    """Keep the corpus build `old_record` (about to be replaced in `corpus_dir`): its shards, build.json
    and change set, under its lineage hash."""
    corpus_dir = Path(corpus_dir)
    entries = [corpus_dir / BUILD_RECORD, *(corpus_dir / name for name in shard_names)]
    changes = old_record.get("changes") or {}
    if changes.get("file"):
        entries.append(corpus_dir / changes["file"])
    return _keep(entries, generation_dir(corpus_dir, lineage_hash(old_record)) / "corpus")


def keep_index(out: Path, new_lineage: str) -> Path | None:
    """Keep the index folder `out` before a build replaces it, when it belongs to another corpus version
    than `new_lineage` (a rebuild for the same corpus replaces an equal generation: nothing to keep).
    Returns where it was kept, or None."""
    out = Path(out)
    record = read_complete_record(out)
    old_lineage = record.get("upstream", {}).get("lineage_sha256") if record else None
    if not old_lineage or old_lineage == new_lineage:
        return None
    return _keep(sorted(filter(_kept, out.iterdir())), generation_dir(out.parent, old_lineage) / out.name)


# ---- leases: which generations running servers use ----------------------------------------------


def _lease_name() -> str:
    """This server's lease file name: host and process id."""
    return f"{socket.gethostname()}-{os.getpid()}.json"


def write_lease(folders: set[Path], lineages: set[str]) -> list[Path]:
    """Record in each folder's .generations/leases that this process serves `lineages`; returns the
    lease files written (a folder that cannot be written is skipped: nothing can be pruned there that
    a lease would have protected, except by a prune that ignores this server)."""
    written = []
    body = json.dumps(
        {"pid": os.getpid(), "host": socket.gethostname(), "lineages": sorted(lineages), "written": time.time()},
        sort_keys=True,
    )
    for folder in sorted(set(folders)):
        leases = Path(folder) / GENERATIONS / LEASES
        try:
            leases.mkdir(parents=True, exist_ok=True)
            path = leases / _lease_name()
            temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
            temp.write_text(body)
            os.replace(temp, path)
            written.append(path)
        except OSError:
            continue
    return written


def remove_lease(folders: set[Path]) -> None:
    for folder in folders:
        (Path(folder) / GENERATIONS / LEASES / _lease_name()).unlink(missing_ok=True)


def live_leases(folder: Path, lease_timeout: float = DEFAULT_LEASE_TIMEOUT) -> list[dict]:
    """The leases in `folder` whose server still runs (see the module docstring); a dead server's lease
    on this host is deleted."""
    live = []
    leases = Path(folder) / GENERATIONS / LEASES
    if not leases.is_dir():
        return live
    host = socket.gethostname()
    for path in sorted(leases.glob("*.json")):
        try:
            lease = json.loads(path.read_text())
            age = time.time() - path.stat().st_mtime
        except (OSError, ValueError):
            continue
        if lease.get("host") == host:
            if is_alive(int(lease.get("pid", 0))):
                live.append(lease)
            else:
                path.unlink(missing_ok=True)
        elif age <= lease_timeout:
            live.append(lease)
    return live


@dataclass(frozen=True)
class Kept:
    """One kept generation folder and whether prune removes it."""

    path: Path
    bytes_only_here: int  # what deleting it frees (files not linked from elsewhere)
    leased_by: tuple[str, ...]  # "host-pid" of the servers using it


def kept_generations(folder: Path, lease_timeout: float = DEFAULT_LEASE_TIMEOUT) -> list[Kept]:
    root = Path(folder) / GENERATIONS
    if not root.is_dir():
        return []
    leases = live_leases(folder, lease_timeout)
    kept = []
    for entry in sorted(root.iterdir()):
        if entry.name == LEASES or entry.name.startswith(".") or not entry.is_dir():
            continue
        users = tuple(
            f"{lease['host']}-{lease['pid']}"
            for lease in leases
            if any(lineage.startswith(entry.name) for lineage in lease.get("lineages", []))
        )
        freed = sum(
            path.stat().st_size
            for path in entry.rglob("*")
            if path.is_file() and not path.is_symlink() and path.stat().st_nlink == 1
        )
        kept.append(Kept(entry, freed, users))
    return kept


def prune(folder: Path, *, dry_run: bool = False, lease_timeout: float = DEFAULT_LEASE_TIMEOUT) -> list[Kept]:
    """Delete every kept generation of `folder` that no live lease names; returns those deleted (or,
    with `dry_run`, those that would be). Temp folders of killed keeps go too."""
    from medsnip.processes import remove_stale_temps

    removed = [kept for kept in kept_generations(folder, lease_timeout) if not kept.leased_by]
    if not dry_run:
        remove_stale_temps(Path(folder) / GENERATIONS)
        for kept in removed:
            shutil.rmtree(kept.path)
    return removed
