"""`corpusbuild verify`: recompute every output's checksum and counts and compare with build.json."""

from __future__ import annotations

import hashlib
from pathlib import Path

from medsnip.buildrecord import NotACorpus, read_build_record, read_corpus_record, sha256_file
from medsnip.snippet import SHARD_GLOB


def count_and_hash(path: Path) -> tuple[int, int, str]:
    """(lines, bytes, sha256) of a shard in one pass."""
    digest = hashlib.sha256()
    lines = 0
    size = 0
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
            lines += block.count(b"\n")
            size += len(block)
    return lines, size, digest.hexdigest()


def corpora_of_root(directory: Path) -> list[Path]:
    """The corpus folders a root holds (ROOT/<source>/ with a corpusbuild build.json), when `directory` is a
    root: no build record of its own, or a recipe's (`medsnip build`); [] for anything else."""
    directory = Path(directory)
    own = directory / "build.json"
    if own.is_file():
        try:
            if read_build_record(directory).get("stage") != "corpusbuild.build":
                return []
        except ValueError:
            return []
    found = []
    for child in sorted(p for p in directory.iterdir() if p.is_dir() and (p / "build.json").is_file()):
        try:
            stage = str(read_build_record(child).get("stage", ""))
        except ValueError:
            continue
        if stage.startswith("corpusbuild.") and stage != "corpusbuild.build":
            found.append(child)
    return found


def verify_build(directory: Path, check_inputs: bool = False) -> tuple[list[str], str]:
    """Return (differences, summary); no differences means every output matches its record."""
    try:
        record = read_corpus_record(directory)
    except NotACorpus as error:
        return [str(error)], ""
    differences: list[str] = []
    if not record.get("complete", False):
        differences.append(
            f"build.json: build is marked incomplete ({record['counts'].get('errors', '?')} errors recorded)"
        )
    expected_names = set()
    total_records = 0
    for output in record["outputs"]:
        name = output["path"]
        expected_names.add(name)
        path = directory / name
        if not path.is_file():
            differences.append(f"{name}: missing")
            continue
        lines, size, sha = count_and_hash(path)
        total_records += lines
        if lines != output["records"]:
            differences.append(f"{name}: records expected {output['records']}, found {lines}")
        if size != output["bytes"]:
            differences.append(f"{name}: bytes expected {output['bytes']}, found {size}")
        if sha != output["sha256"]:
            differences.append(f"{name}: sha256 expected {output['sha256']}, found {sha}")
    changes = record.get("changes")
    if changes:
        path = directory / changes["file"]
        if not path.is_file():
            differences.append(f"{changes['file']}: missing (build.json lists a change set)")
        elif sha256_file(path)[0] != changes["sha256"]:
            differences.append(f"{changes['file']}: sha256 expected {changes['sha256']}, found {sha256_file(path)[0]}")
    for extra in sorted(directory.glob(SHARD_GLOB)):
        if extra.name not in expected_names:
            differences.append(f"{extra.name}: shard not listed in build.json")
    if total_records != record["counts"]["snippets"] and not differences:
        differences.append(f"build.json: counts.snippets {record['counts']['snippets']} != sum of outputs")
    if check_inputs:
        for entry in record["inputs"]:
            if entry["status"] != "ok":
                continue
            path = Path(entry["path"])
            if not path.is_file():
                differences.append(f"input {path}: missing")
                continue
            sha, size = sha256_file(path)
            if size != entry["bytes"] or sha != entry["sha256"]:
                differences.append(f"input {path}: sha256 expected {entry['sha256']}, found {sha}")
    summary = f"{len(record['outputs'])} shards, {total_records:,} snippets match build.json"
    return differences, summary
