"""A recipe's lock file: every file `medsnip fetch` got, with its size, its publisher's checksum and its sha256.

`RECIPE.lock` (beside the recipe: `manifests/medcorp-2026.lock`, or a path given) is JSON, one entry per source
and file name, written whole or not at all. `medsnip build --require-checksums` takes its sha256s as the pins
the recipe does not write itself, so a rebuild on another machine checks the very bytes the first one used.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from medsnip.buildrecord import atomic_write_bytes

LOCK_SCHEMA = 1


class LockError(ValueError):
    """A lock file that cannot be read, or that disagrees with the recipe (the message names both)."""


def lock_path(recipe_path: Path, given: Path | None = None) -> Path:
    """Where a recipe's lock is: the path given, else RECIPE.lock beside the recipe."""
    return Path(given) if given else Path(recipe_path).with_suffix(".lock")


@dataclass
class Lock:
    path: Path
    recipe: str = ""
    files: dict[str, dict[str, dict]] = field(default_factory=dict)  # source -> file name -> entry
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False)  # files fetched side by side

    @classmethod
    def read(cls, path: Path, recipe: str = "") -> Lock:
        """The lock at `path` (an empty one when there is none yet)."""
        path = Path(path)
        if not path.is_file():
            return cls(path, recipe)
        try:
            data = orjson.loads(path.read_bytes())
            files = data["files"]
            if data.get("schema") != LOCK_SCHEMA or not isinstance(files, dict):
                raise ValueError(f"schema {data.get('schema')!r}, this medsnip reads {LOCK_SCHEMA}")
            for source, entries in files.items():
                for name, entry in entries.items():
                    if not {"bytes", "sha256"} <= set(entry):
                        raise ValueError(f"files.{source}.{name} lacks bytes or sha256")
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError) as error:
            raise LockError(f"{path}: not a medsnip lock file ({error})") from error
        return cls(path, data.get("recipe", recipe), files)

    def entry(self, source: str, name: str) -> dict | None:
        return self.files.get(source, {}).get(name)

    def put(self, source: str, name: str, url: str, size: int, sha256: str, checksum: str | None) -> None:
        with self._guard:
            entry = {"url": url, "bytes": size, "checksum": checksum, "sha256": sha256}
            self.files.setdefault(source, {})[name] = entry

    def write(self) -> None:
        with self._guard:
            data = {"schema": LOCK_SCHEMA, "recipe": self.recipe, "files": self.files}
            text = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
            atomic_write_bytes(self.path, text)

    def pins(self, source: str) -> dict[str, str]:
        """{file name: "sha256:<hex>"} for one source: what `medsnip build` checks its inputs against."""
        return {name: f"sha256:{entry['sha256']}" for name, entry in self.files.get(source, {}).items()}


def pin_recipe(recipe, lock: Lock) -> None:
    """Add the lock's sha256s to the recipe's sources as pins (the recipe's own pins win: one that differs from the
    lock's is an error naming both)."""
    for source in recipe.sources:
        for name, pinned in lock.pins(source.name).items():
            own = source.checksums.get(name)
            if own is not None and own.removeprefix("sha256:").lower() != pinned.removeprefix("sha256:"):
                raise LockError(
                    f"{recipe.path}: source {source.name} pins {name} to {own}, the lock {lock.path} to {pinned}"
                )
            source.checksums.setdefault(name, pinned)
