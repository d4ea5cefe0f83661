"""What refkit rebuilds from the same inputs on every run, kept on disk by what it was built from.

Parsing the 54 MB MeSH names table and the clinical dictionaries (`refkit lexicon`), and reading a ~200,000-name
lexicon and building its names matcher (`refkit noise`), take seconds each and give the same result for the same
inputs: a second run, a resumed run and every noise run on one lexicon would redo them. Entries are pickles in
the machine-wide cache folder (medsnip.cache: `$MEDSNIP_CACHE`, default `~/.cache/medsnip`), under `refkit/`,
named by a sha256 of what they were built from: the inputs' bytes (`file_digest`) and refkit's own code (every
file of the refkit package, its shipped tables among them, and the Python and pyahocorasick versions), so a
changed input or a changed rule never reads an old entry. `MEDSNIP_REFKIT_CACHE=off` turns it off.

A write goes to a temporary file renamed into place, so a killed run leaves no half entry; an entry that cannot
be read is rebuilt and replaced; past `LIMIT_BYTES` the oldest entries go. The folder is the user's own: its
pickles are trusted as the user's files are.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from refkit.resume import file_sha256

T = TypeVar("T")
LIMIT_BYTES = 2 << 30  # a ~200,000-name lexicon's names matcher weighs ~60 MB


def cache_folder() -> Path | None:
    """The folder of refkit's entries, or None when `MEDSNIP_REFKIT_CACHE=off`."""
    from medsnip.cache import cache_folder as machine_cache

    if os.environ.get("MEDSNIP_REFKIT_CACHE", "").strip().lower() == "off":
        return None
    return machine_cache() / "refkit"


@functools.cache
def code_version() -> str:
    """A digest of refkit's code and of what pickles its objects: an entry built by other code is never read."""
    from importlib import metadata

    # an automaton pickles in pyahocorasick's own format
    digest = hashlib.sha256(f"{sys.version}|{metadata.version('pyahocorasick')}".encode())
    package = Path(__file__).resolve().parent
    for path in sorted(package.rglob("*")):  # its modules and the tables it ships (trees, actions, stems)
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(package)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


@functools.lru_cache(maxsize=64)
def _digest_of(path: str, size: int, modified: int) -> str:
    return file_sha256(Path(path))


def file_digest(path: Path) -> str:
    """The sha256 of a file's bytes (remembered in the process while its size and modification time stay)."""
    status = Path(path).stat()
    return _digest_of(str(Path(path).resolve()), status.st_size, status.st_mtime_ns)


def cached(kind: str, key: dict, build: Callable[[], T]) -> T:
    """`build()`'s result, from the entry of (`kind`, `key`, refkit's code) when there is one; else built,
    stored and returned. `key` is JSON (what the result was built from)."""
    folder = cache_folder()
    if folder is None:
        return build()
    name = hashlib.sha256(json.dumps([kind, key, code_version()], sort_keys=True).encode()).hexdigest()
    entry = folder / f"{kind}-{name}.pickle"
    try:
        with open(entry, "rb") as handle:
            return pickle.load(handle)
    except FileNotFoundError:
        pass
    except Exception:  # a damaged or unreadable entry: rebuilt below and replaced
        entry.unlink(missing_ok=True)
    value = build()
    _store(folder, entry, value)
    return value


def _store(folder: Path, entry: Path, value) -> None:
    partial = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{entry.stem}-", suffix=".partial", delete=False) as out:
            partial = Path(out.name)
            pickle.dump(value, out, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(partial, entry)
        _evict(folder)
    except OSError:  # a read-only or full cache folder costs time, never the result
        if partial is not None:
            partial.unlink(missing_ok=True)


def _evict(folder: Path) -> None:
    entries = sorted(folder.glob("*.pickle"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    total = 0
    for entry in entries:
        total += entry.stat().st_size
        if total > LIMIT_BYTES:
            entry.unlink(missing_ok=True)
