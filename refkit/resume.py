"""Long refkit runs that resume: records written as they are made, a killed run picked up where it stopped.

`refkit collect` and `refkit noise` over thousands of questions on a big corpus take hours; a kill used
to lose all of it. Now each record is appended to `OUT.partial` as it is made, beside `OUT.partial.json`,
which says what run it belongs to (the command, its options, the sha256 of every input file) and which
generation of the served corpora it was made against. The same command started again:

- finds the partial run of the same identity, keeps its complete records (a line cut short by the kill
  is dropped), checks they are the first questions of the queries file, and asks only for the rest;
- refuses, with the corpora named, when searchd now serves another generation than the one the
  partial records came from (a daily update landed in between): mixing the two would label old
  references with the new lineage. `--restart` starts over; `--mix-generations` continues anyway and
  records that it did (`generations` in the run's sidecar, and the lineage of each record);
- a partial run of another identity (other options or inputs) is never continued: it is replaced.

Records do not depend on which questions were asked together, so a resumed run ends byte-identical to
an uninterrupted one. When the last record is written, `OUT.partial` is renamed to `OUT` (the output
appears whole or not at all, as before) and the sidecar removed.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from medsnip.jsonl import dumps_line


class ResumeError(ValueError):
    """A partial run that cannot be continued as asked (the message says why and what to do)."""


def file_sha256(path: Path | None) -> str | None:
    if path is None:
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def differing_fields(before: dict, now: dict, prefix: str = "") -> list[str]:
    """The dotted names of the fields two run identities differ in ("options.seed", "queries")."""
    fields = []
    for key in sorted(set(before) | set(now), key=str):
        old, new = before.get(key), now.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            fields += differing_fields(old, new, f"{prefix}{key}.")
        elif old != new:
            fields.append(f"{prefix}{key}")
    return fields


class ResumableJsonl:
    def __init__(self, out: Path, identity: dict):
        """`identity`: everything the records depend on besides the server (command, options, input files'
        sha256), JSON-serialisable."""
        self.out = Path(out)
        self.partial = self.out.with_name(self.out.name + ".partial")
        self.sidecar = self.out.with_name(self.out.name + ".partial.json")
        self.identity = identity
        self.done: list[str] = []  # ids of the complete records already in the partial file
        self.discarded: str | None = None  # what `start` said about a killed run it could not continue
        self._handle = None

    def start(self, lineage: dict, ids: list[str], restart: bool = False, mix_generations: bool = False) -> int:
        """Open the partial output; returns how many leading questions (of `ids`) are already done."""
        state = self._read_sidecar()
        if restart or state is None or state.get("identity") != self.identity:
            if state is not None and not restart:
                changed = ", ".join(differing_fields(state.get("identity") or {}, self.identity)) or "its identity"
                self.discarded = (
                    f"starting over: {self.partial} holds {len(self._complete_records()):,} records of a killed run "
                    f"with other {changed} than this one, which cannot be continued; they are replaced"
                )
            self._begin(lineage)
            return 0
        if state.get("lineage") != lineage["corpora"] and not mix_generations:
            changed = sorted(
                name
                for name in set(state.get("lineage", {})) | set(lineage["corpora"])
                if state.get("lineage", {}).get(name) != lineage["corpora"].get(name)
            )
            raise ResumeError(
                f"{self.partial} holds a run made against another generation of {', '.join(changed)} than searchd "
                "serves now (an update landed since it was killed): continuing would mix references of two "
                "versions of the corpus. Start over with --restart, or continue anyway with --mix-generations"
            )
        kept = self._complete_records()
        if kept != ids[: len(kept)]:
            raise ResumeError(
                f"{self.partial}: its records are not the first questions of the queries file; "
                "start over with --restart"
            )
        if state.get("lineage") != lineage["corpora"]:  # mixing, as asked: say so in the sidecar
            state.setdefault("generations", [state["lineage"]]).append(lineage["corpora"])
            self._write_sidecar(state)
        self.done = kept
        self._handle = open(self.partial, "ab")
        return len(kept)

    def append(self, record: dict) -> None:
        """One record, whole, on its own line, flushed to the file (fsync'd by the operating system in
        time; what a kill loses is at most the lines not yet flushed, which the next run makes again)."""
        self._handle.write(dumps_line(record))
        self._handle.flush()

    def finish(self) -> None:
        """Every record written: the partial file becomes the output, in one rename."""
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()
        self._handle = None
        os.replace(self.partial, self.out)
        self.sidecar.unlink(missing_ok=True)

    def close(self) -> None:
        """Stop writing (an error or an interruption): the partial run stays for the next start."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def _begin(self, lineage: dict) -> None:
        self.partial.parent.mkdir(parents=True, exist_ok=True)
        self._write_sidecar({"identity": self.identity, "lineage": lineage["corpora"]})
        self._handle = open(self.partial, "wb")

    def _read_sidecar(self) -> dict | None:
        if not (self.sidecar.is_file() and self.partial.is_file()):
            return None
        try:
            return json.loads(self.sidecar.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def _write_sidecar(self, state: dict) -> None:
        temporary = self.sidecar.with_name(self.sidecar.name + ".tmp")
        temporary.write_text(json.dumps(state, sort_keys=True), encoding="utf-8")
        os.replace(temporary, self.sidecar)

    def _complete_records(self) -> list[str]:
        """The ids of the partial file's whole lines; a line cut short by the kill is cut off the file."""
        data = self.partial.read_bytes()
        whole = data[: data.rfind(b"\n") + 1]
        ids = []
        for line in whole.splitlines():
            try:
                ids.append(str(json.loads(line)["id"]))
            except (ValueError, KeyError, TypeError):
                break
        keep = sum(len(line) + 1 for line in whole.splitlines()[: len(ids)])
        if keep != len(data):
            os.truncate(self.partial, keep)
        return ids
