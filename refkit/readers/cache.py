"""Every question put to a reader and its answer, kept in a JSONL file so a run can be rebuilt without it.

The first line names the reader (`{"refkit_reader_cache": 1, "reader": {...}}`); each further line is one
answer: its key (sha256 of the reader's identity, the template's identity and the input), the task, the
template, the input and the raw answer. An answer is appended and fsynced the moment it arrives, so a killed
run loses at most the request in flight and the next run asks only what is missing. `--replay` reads
answers from here alone: a question the file does not hold is an error naming it, never a silent "no".
Failed requests are not kept (the next run asks again).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from medsnip.jsonl import InputFileError, cut_torn_last_line, read_jsonl

FORMAT = 1


class CacheError(InputFileError):
    """A cache file that cannot be used as asked (another reader's, unreadable, or missing an answer on replay)."""


def answer_key(reader: dict, template: str, fields: dict) -> str:
    payload = json.dumps({"reader": reader, "template": template, "input": fields}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ReaderCache:
    """Answers by key, read from `path` if it exists, new ones appended; `replay`: read only."""

    def __init__(self, path: Path, reader: dict | None, replay: bool = False):
        """`reader`: the identity answers are asked of (None on replay: taken from the file)."""
        self.path, self.replay = Path(path), replay
        self.answers: dict[str, dict] = {}
        self.reader = reader
        if self.path.exists():
            self._load()
        elif replay:
            raise CacheError(f"{self.path}: no such reader cache to replay")
        if self.reader is None:
            raise CacheError(f"{self.path}: holds no reader header; it is not a reader cache")
        if not replay and not self.path.exists():
            self._append({"refkit_reader_cache": FORMAT, "reader": self.reader})

    def _load(self) -> None:
        if not self.replay:  # a line cut short by a kill held an answer that was never used
            cut_torn_last_line(self.path)
        for number, record in read_jsonl(self.path, error=CacheError, complete_lines_only=True):
            if number == 1:
                if record.get("refkit_reader_cache") != FORMAT or not isinstance(record.get("reader"), dict):
                    raise CacheError(f"{self.path}:1: not a refkit reader cache (no header line)")
                if self.reader is not None and record["reader"] != self.reader:
                    raise CacheError(
                        f"{self.path}: holds the answers of reader {record['reader']}, not of {self.reader}: "
                        "give another --reader-cache"
                    )
                self.reader = record["reader"]
                continue
            if not isinstance(record.get("key"), str) or "raw" not in record:
                raise CacheError(f"{self.path}:{number}: an answer line needs key and raw")
            self.answers[record["key"]] = record

    def get(self, key: str, task: str, template: str, fields: dict) -> dict | None:
        found = self.answers.get(key)
        if found is None and self.replay:
            asked = json.dumps(fields, ensure_ascii=False)[:300]
            raise CacheError(f"{self.path}: replay has no answer for {task} ({template}) on {asked}")
        return found

    def put(self, key: str, task: str, template: str, fields: dict, raw) -> dict:
        record = {"key": key, "task": task, "template": template, "input": fields, "raw": raw}
        self._append(record)
        self.answers[key] = record
        return record

    def _append(self, record: dict) -> None:
        line = (json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
        with open(self.path, "ab") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
