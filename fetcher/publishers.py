"""Where a recipe's source comes from: its `[sources.publisher]` table, and the files a publisher offers now.

Four kinds of publisher, one key naming each:

    [sources.publisher]                      # NLM: a directory listing, files by pattern, NAME.md5 beside each
    listing = "https://ftp.ncbi.nlm.nih.gov/pubmed/baseline/"
    pattern = "pubmed26n*.xml.gz"
    updates = "https://ftp.ncbi.nlm.nih.gov/pubmed/updatefiles/"   # what `medsnip update --fetch` lists

    [sources.publisher]                      # one file (StatPearls' tarball); sha256 optional
    url = "https://ftp.ncbi.nlm.nih.gov/pub/litarch/3d/12/statpearls_NBK430685.tar.gz"

    [sources.publisher]                      # a Wikimedia dump: its dumpstatus.json gives files, sizes and sha1
    wikimedia = "https://dumps.wikimedia.org"
    wiki = "enwiki"
    date = "20261101"
    job = "articlesmultistreamdump"          # the default
    pattern = "*-pages-articles-multistream.xml.bz2"   # the default: every file of the job

    [sources.publisher]                      # a release archive (MedQA's textbooks), unpacked into the inputs folder
    archive = "https://example.org/data_clean.zip"
    members = "textbooks/en/*.txt"           # which of its files the source reads (flattened into the folder)

A listing is NLM's HTML directory page (any page whose links name the files); its checksums are NLM's `.md5`
files (`MD5(pubmed26n0001.xml.gz)= <hex>`). The files are fetched into the source's first input, a folder, or the
folder of the file it names (a `url` source's file takes that name).
"""

from __future__ import annotations

import fnmatch
import html.parser
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

import orjson

KINDS = ("listing", "url", "wikimedia", "archive")
_KEYS = {
    "listing": {"listing", "pattern", "updates"},
    "url": {"url", "sha256"},
    "wikimedia": {"wikimedia", "wiki", "date", "job", "pattern"},
    "archive": {"archive", "sha256", "members"},
}
_MD5_LINE = re.compile(r"MD5\s*\((?P<name>[^)]+)\)\s*=\s*(?P<hex>[0-9a-fA-F]{32})\s*$")
_GLOB = re.compile(r"[*?\[]")


class PublisherError(ValueError):
    """A publisher table that cannot be used, or a publisher's index that cannot be read (the message says where)."""


@dataclass(frozen=True)
class RemoteFile:
    """A file a publisher offers: where it is, its name in the inputs folder, and how the publisher vouches for it:
    `checksum` ("md5:<hex>", "sha1:<hex>" or "sha256:<hex>") or `checksum_url` (a sidecar to read it from)."""

    name: str
    url: str
    size: int | None = None
    checksum: str | None = None
    checksum_url: str | None = None


@dataclass(frozen=True)
class Publisher:
    source: str  # the recipe source's name
    kind: str
    table: dict
    folder: Path  # where its files go: the source's first input (for a `url` naming a file: that file's folder)
    file_name: str | None = None  # a `url` source whose input names its file

    @property
    def updates(self) -> str | None:
        return self.table.get("updates")


def publisher_of(source, where: str) -> Publisher | None:
    """The source's publisher (None when its recipe names none); PublisherError for an unusable table."""
    table = getattr(source, "publisher", None) or {}
    if not table:
        return None
    if not isinstance(table, dict):
        raise PublisherError(f"{where}: [sources.publisher] must be a table")
    kinds = [kind for kind in KINDS if kind in table]
    if len(kinds) != 1:
        raise PublisherError(
            f"{where}: [sources.publisher] needs exactly one of {', '.join(KINDS)}, got {kinds or 'none'}"
        )
    kind = kinds[0]
    unknown = set(table) - _KEYS[kind]
    if unknown:
        raise PublisherError(f"{where}: [sources.publisher] of kind {kind} has unknown key(s) {sorted(unknown)}")
    for key, value in table.items():
        if not isinstance(value, str) or not value:
            raise PublisherError(f"{where}: [sources.publisher] {key} must be a non-empty string")
    if kind == "wikimedia" and not {"wiki", "date"} <= set(table):
        raise PublisherError(f"{where}: [sources.publisher] a Wikimedia dump needs wiki and date")
    if "sha256" in table and not re.fullmatch(r"(sha256:)?[0-9a-fA-F]{64}", table["sha256"]):
        raise PublisherError(f"{where}: [sources.publisher] sha256 must be 64 hex digits")
    target = Path(source.inputs[0])
    if _GLOB.search(str(target)):
        raise PublisherError(f"{where}: inputs[0] ({target}) is a pattern; fetched files need a folder to go into")
    if target.suffix and not target.is_dir():  # the input names a file: its folder receives the publisher's files
        return Publisher(source.name, kind, dict(table), target.parent, target.name if kind == "url" else None)
    return Publisher(source.name, kind, dict(table), target)


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        if tag == "a":
            self.hrefs.extend(value for name, value in attrs if name == "href" and value)


def listed_files(page: str, base: str, pattern: str) -> list[RemoteFile]:
    """The files a directory listing links to whose names match `pattern`, each with its `.md5` sidecar when the
    listing links one, in name order (NLM's order: pubmed26n0001 before pubmed26n0002)."""
    parser = _Links()
    parser.feed(page)
    names = {href.rstrip("/").rsplit("/", 1)[-1] for href in parser.hrefs if "?" not in href}
    files = []
    for name in sorted(n for n in names if fnmatch.fnmatchcase(n, pattern)):
        sidecar = f"{name}.md5"
        files.append(
            RemoteFile(name, urljoin(base, name), checksum_url=urljoin(base, sidecar) if sidecar in names else None)
        )
    return files


def parse_md5_sidecar(text: str, name: str, where: str) -> str:
    """NLM's `.md5` file (`MD5(name)= hex`, or `hex  name` as md5sum writes) -> "md5:<hex>" for `name`."""
    for line in text.splitlines():
        match = _MD5_LINE.match(line.strip())
        if match and match["name"].strip() == name:
            return f"md5:{match['hex'].lower()}"
        parts = line.split()
        if len(parts) == 2 and re.fullmatch(r"[0-9a-fA-F]{32}", parts[0]) and parts[1].lstrip("*") == name:
            return f"md5:{parts[0].lower()}"
    raise PublisherError(f"{where}: no MD5 of {name} in it (expected a line 'MD5({name})= <32 hex digits>')")


def dump_files(status: bytes, base: str, wiki: str, date: str, job: str, pattern: str, where: str) -> list[RemoteFile]:
    """The files of one job of a Wikimedia dump's dumpstatus.json, with sizes and sha1, once the job is done."""
    try:
        jobs = orjson.loads(status)["jobs"]
        entry = jobs[job]
    except (orjson.JSONDecodeError, KeyError, TypeError) as error:
        raise PublisherError(f"{where}: no job {job!r} in the dump's status ({error})") from error
    if entry.get("status") != "done":
        raise PublisherError(f"{where}: job {job} of {wiki} {date} is {entry.get('status')!r}, not done yet")
    files = []
    for name, file in sorted(entry.get("files", {}).items()):
        if not fnmatch.fnmatchcase(name, pattern):
            continue
        url = urljoin(base.rstrip("/") + "/", file.get("url", f"{wiki}/{date}/{name}").lstrip("/"))
        checksum = f"sha1:{file['sha1']}" if file.get("sha1") else (f"md5:{file['md5']}" if file.get("md5") else None)
        files.append(RemoteFile(name, url, file.get("size"), checksum))
    if not files:
        raise PublisherError(f"{where}: job {job} of {wiki} {date} has no file matching {pattern!r}")
    return files
