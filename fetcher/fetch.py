"""`medsnip fetch`: the files of every source whose recipe names its publisher, into the recipe's input folders.

For each source: its publisher's index is read (fetcher.publishers), the files missing from the input folder are
fetched (fetcher.download: resumed, retried, verified), and every file's size, publisher checksum and sha256 go
into the lock (fetcher.lockfile). A file already in its folder is trusted only as the lock records it (same size)
or once it matches its publisher's checksum. A file the lock knows whose publisher checksum or sha256 changed
upstream is refused, naming both, unless `update_lock`. Nothing is ever left unverified under its final name.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import re
import shutil
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from fetcher.download import Downloader, Fetched, FetchError, file_digest
from fetcher.lockfile import Lock
from fetcher.publishers import (
    Publisher,
    PublisherError,
    RemoteFile,
    dump_files,
    listed_files,
    parse_md5_sidecar,
)


@dataclass
class Planned:
    """One file of the plan: what it is, where it goes, and whether it is there already."""

    publisher: Publisher
    remote: RemoteFile
    dest: Path
    present: bool
    size: int | None = None  # known from the publisher or a HEAD request (None: the server did not say)


@dataclass
class Outcome:
    source: str
    name: str
    status: str  # fetched | present | verified | extracted
    bytes: int


def remote_files(
    publisher: Publisher, downloader: Downloader, where: str, listing: str | None = None
) -> list[RemoteFile]:
    """What the publisher offers now for this source (`listing`: another listing of the same kind, NLM's
    updatefiles)."""
    table = publisher.table
    if publisher.kind == "listing":
        url = listing or table["listing"]
        base = url if url.endswith("/") else url + "/"
        page = downloader.get_bytes(base).decode("utf-8", "replace")
        files = listed_files(page, base, table.get("pattern", "*"))
        if not files and listing is None:
            raise PublisherError(f"{where}: {base} lists no file matching {table.get('pattern', '*')!r}")
        return files
    if publisher.kind == "wikimedia":
        base = table["wikimedia"].rstrip("/")
        status_url = f"{base}/{table['wiki']}/{table['date']}/dumpstatus.json"
        status = downloader.get_bytes(status_url)
        job = table.get("job", "articlesmultistreamdump")
        return dump_files(status, base, table["wiki"], table["date"], job, table.get("pattern", "*"), status_url)
    url = table["url"] if publisher.kind == "url" else table["archive"]
    name = publisher.file_name or PurePosixPath(urlsplit(url).path).name
    sha256 = table.get("sha256")
    return [RemoteFile(name, url, checksum=f"sha256:{sha256.removeprefix('sha256:').lower()}" if sha256 else None)]


def _dest(publisher: Publisher, remote: RemoteFile) -> Path:
    if publisher.kind == "archive":  # the archive itself is kept apart from the files the source reads
        return publisher.folder / ".archives" / remote.name
    return publisher.folder / remote.name


def plan_fetch(publishers: list[Publisher], downloader: Downloader, sizes: bool = False) -> list[Planned]:
    """Every file of every publisher, present or not; `sizes`: ask the server the size of each missing file."""
    planned = []
    for publisher in publishers:
        for remote in remote_files(publisher, downloader, f"source {publisher.source}"):
            dest = _dest(publisher, remote)
            size = remote.size
            if sizes and size is None and not dest.is_file():
                size = downloader.size_of(remote.url)
            planned.append(Planned(publisher, remote, dest, dest.is_file(), size))
    return planned


def _publisher_checksum(remote: RemoteFile, downloader: Downloader) -> str | None:
    if remote.checksum or not remote.checksum_url:
        return remote.checksum
    sidecar = downloader.get_bytes(remote.checksum_url).decode("utf-8", "replace")
    return parse_md5_sidecar(sidecar, remote.name, remote.checksum_url)


def _refuse_changed(where: str, what: str, locked: str | None, now: str | None, update_lock: bool) -> None:
    if locked and now and locked != now and not update_lock:
        raise FetchError(
            f"{where}: changed upstream since the lock: the lock has {what} {locked}, the publisher now {now}; "
            "check why, then run again with --update-lock to take the new file"
        )


def fetch_one(
    item: Planned, lock: Lock, downloader: Downloader, update_lock: bool, progress: Callable[[int], None]
) -> Outcome:
    """One planned file: verified present, or fetched; its lock entry written into `lock` (not yet to disk)."""
    publisher, remote, dest = item.publisher, item.remote, item.dest
    where = f"{publisher.source}/{remote.name}"
    locked = lock.entry(publisher.source, remote.name)
    checksum = _publisher_checksum(remote, downloader)
    if locked:
        _refuse_changed(where, "checksum", locked.get("checksum"), checksum, update_lock)
    if dest.is_file():
        if (
            locked
            and dest.stat().st_size == locked["bytes"]
            and not (update_lock and checksum != locked.get("checksum"))
        ):
            return Outcome(publisher.source, remote.name, "present", locked["bytes"])
        if checksum:  # a file placed by hand, or one the lock does not know: the publisher's checksum decides
            algorithm, _, expected = checksum.partition(":")
            actual = file_digest(dest, algorithm)
            if actual != expected.lower():
                raise FetchError(
                    f"{dest}: {algorithm} {actual}, the publisher gives {expected} for {remote.url}: "
                    "move the file away (a cut or older download?) and fetch again"
                )
        sha256 = file_digest(dest, "sha256")
        if locked:
            _refuse_changed(where, "sha256", locked["sha256"], sha256, update_lock)
        lock.put(publisher.source, remote.name, remote.url, dest.stat().st_size, sha256, checksum)
        return Outcome(publisher.source, remote.name, "verified", dest.stat().st_size)
    fetched: Fetched = downloader.fetch(remote.url, dest, checksum, remote.size, progress)
    if locked and locked["sha256"] != fetched.sha256 and not update_lock:
        dest.unlink()  # never a file the lock does not vouch for under its final name
        raise FetchError(
            f"{where}: changed upstream since the lock: the lock has sha256 {locked['sha256']}, the publisher now "
            f"serves {fetched.sha256}; nothing was kept; run again with --update-lock to take the new file"
        )
    lock.put(publisher.source, remote.name, remote.url, fetched.bytes, fetched.sha256, checksum)
    return Outcome(publisher.source, remote.name, "fetched", fetched.bytes)


@contextlib.contextmanager
def _opened_members(archive: Path, pattern: str) -> Iterator[list[tuple[str, Callable[[], bytes]]]]:
    """(name, read) of an archive's files matching `pattern` (a zip or a tar), while the archive is open."""
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as handle:
            names = [n for n in handle.namelist() if not n.endswith("/") and fnmatch.fnmatchcase(n, pattern)]
            yield [(n, functools.partial(handle.read, n)) for n in names]
        return
    with tarfile.open(archive) as tar:
        chosen = [m for m in tar.getmembers() if m.isfile() and fnmatch.fnmatchcase(m.name, pattern)]
        yield [(m.name, lambda m=m: tar.extractfile(m).read()) for m in chosen]


def unpack(publisher: Publisher, archive: Path) -> int:
    """An archive's `members` (default: every file) into the source's folder, flattened by name; returns how many
    were written. Each lands whole (a temp file renamed), and a name seen twice is an error."""
    pattern = publisher.table.get("members", "*")
    with _opened_members(archive, pattern) as members:
        if not members:
            raise FetchError(f"{archive}: no member matches {pattern!r}")
        names = [PurePosixPath(name).name for name, _ in members]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise FetchError(f"{archive}: members {pattern!r} repeat file names {twice[:5]} once flattened")
        for (_, read), name in zip(members, names, strict=True):
            target = publisher.folder / name
            temporary = target.with_name(f".{name}.unpacking")
            temporary.write_bytes(read())
            temporary.replace(target)
        return len(members)


def fetch_recipe(
    publishers: list[Publisher],
    lock: Lock,
    downloader: Downloader,
    update_lock: bool = False,
    on_start: Callable[[Planned], Callable[[int], None]] | None = None,
) -> list[Outcome]:
    """Plan and fetch every publisher's files (`downloader.settings.connections` at once per host); the lock is
    written after every file, so a killed fetch keeps what it verified. Returns what happened to each file."""
    planned = plan_fetch(publishers, downloader)
    outcomes: list[Outcome] = []
    errors: list[str] = []

    def run(item: Planned) -> Outcome:
        progress = on_start(item) if on_start else (lambda n: None)
        outcome = fetch_one(item, lock, downloader, update_lock, progress)
        lock.write()
        return outcome

    with ThreadPoolExecutor(max(1, downloader.settings.connections)) as pool:
        futures = [pool.submit(run, item) for item in planned]
        for future in futures:
            try:
                outcomes.append(future.result())
            except (FetchError, PublisherError) as error:
                errors.append(str(error))
    for publisher in (p for p in publishers if p.kind == "archive"):
        archives = [o for o in outcomes if o.source == publisher.source]
        if archives and not errors:
            archive = publisher.folder / ".archives" / archives[0].name
            fresh = any(o.status == "fetched" for o in archives)
            if fresh or not any(p.is_file() and not p.name.startswith(".") for p in publisher.folder.iterdir()):
                count = unpack(publisher, archive)
                outcomes.append(Outcome(publisher.source, f"{archive.name}: {count} files", "extracted", 0))
    if errors:
        raise FetchError("; ".join(errors))
    return outcomes


NUMBERED = re.compile(r"n(\d{4})\.xml(\.gz)?$")


def last_applied_number(recorded_inputs: list[str]) -> int:
    """The highest NLM file number (pubmed26n1334.xml.gz -> 1334) among the inputs a corpus has read."""
    numbers = [int(m.group(1)) for name in recorded_inputs if (m := NUMBERED.search(Path(name).name))]
    return max(numbers, default=0)


def fetch_update_files(
    listing: str, pattern: str, folder: Path, after: int, downloader: Downloader, lock: Lock
) -> list[Path]:
    """NLM's update files numbered after `after` into `folder`, each verified against its `.md5`; the lock
    (`lock`) records them. Returns the files, in NLM's order (a file already there and verified is returned
    too)."""
    publisher = Publisher("pubmed-updates", "listing", {"listing": listing, "pattern": pattern}, Path(folder))
    offered = remote_files(publisher, downloader, listing)
    wanted = [r for r in offered if (m := NUMBERED.search(r.name)) and int(m.group(1)) > after]
    paths = []
    for remote in wanted:
        dest = Path(folder) / remote.name
        fetch_one(Planned(publisher, remote, dest, dest.is_file()), lock, downloader, False, lambda n: None)
        lock.write()
        paths.append(dest)
    return paths


def disk_free(folder: Path) -> int:
    """Bytes free where `folder` is, or would be made (a dry run creates nothing)."""
    existing = next(path for path in (folder, *folder.parents) if path.exists())
    return shutil.disk_usage(existing).free
