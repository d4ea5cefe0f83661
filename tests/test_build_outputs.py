"""What a build does to its output folder when things go wrong around it: a full disk (a real small
tmpfs), a published shard edited by hand, an --out that cannot be used. An earlier complete build must
come out exactly as it was, and no later stage may trust a shard that differs from its record."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import REPO, SAMPLES, run_indexer
from helpers import children
from medsnip.buildrecord import read_build_record
from medsnip.corpus import Corpus, LineageError

PUBMED = SAMPLES / "pubmed"


def folder_digest(folder: Path) -> dict[str, str]:
    """sha256 of every file of a build folder, its cache (.work) left out."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and ".work" not in path.relative_to(folder).parts
    }


@pytest.fixture
def small_disk(tmp_path):
    """A real tmpfs of a given size, mounted for the test (needs root: CI runs as root)."""
    mount_point = tmp_path / f"disk-{uuid.uuid4().hex[:8]}"
    mount_point.mkdir()
    mounted = []

    def mount(size: str) -> Path:
        options = f"size={size}" if not mounted else f"remount,size={size}"
        result = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount_point)], capture_output=True, text=True
        )
        if result.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
        mounted.append(size)
        return mount_point

    yield mount
    if mounted:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


@pytest.mark.parametrize("size", ["150k", "500k"])  # out of space while parsing / while merging (parts are compressed)
def test_a_full_disk_is_reported_as_such_and_the_earlier_build_survives(small_disk, run_corpusbuild, size):
    disk = small_disk(size)
    out = disk / "pubmed"
    first = run_corpusbuild(
        "pubmed", PUBMED / "pubmed4.xml", PUBMED / "pubmed5.xml", "--out", out, "--shards", 2, "--workers", 1, "--quiet"
    )
    assert first.exit_code == 0, first.output
    before = folder_digest(out)
    bigger = [PUBMED / "pubmed4.xml", PUBMED / "pubmed5.xml", PUBMED / "medsamp2014.xml"]
    second = run_corpusbuild("pubmed", *bigger, "--out", out, "--shards", 2, "--workers", 1, "--quiet")
    assert second.exit_code == 1
    assert "No space left on device" in second.output and "cannot write" in second.output
    assert "cannot read" not in second.output  # the input is not to blame
    assert "published nothing" in second.output
    assert folder_digest(out) == before  # shards and build.json exactly as they were
    assert read_build_record(out)["complete"] is True
    small_disk("8m")  # space freed: the same command finishes, reusing what was done
    third = run_corpusbuild("pubmed", *bigger, "--out", out, "--shards", 2, "--workers", 1, "--quiet")
    assert third.exit_code == 0, third.output
    assert read_build_record(out)["counts"]["input_files"] == 3


def test_an_edited_published_shard_is_never_republished_or_trusted(tmp_path, run_corpusbuild):
    """Published shards are moved out of the work cache, not linked to it: editing one edits nothing
    else, a re-run merges it again from the parsed parts, and the indexer and searchd refuse a shard
    whose bytes differ from build.json even when its length is unchanged."""
    out = tmp_path / "corpus"
    command = [
        "jsonl",
        SAMPLES / "ir" / "pubmedqa-beir" / "corpus.jsonl",
        "--source",
        "pubmedqa",
        "--no-chunk",
        "--out",
        out,
        "--shards",
        2,
        "--workers",
        1,
        "--quiet",
    ]
    assert run_corpusbuild(*command).exit_code == 0
    record = read_build_record(out)
    shard = out / record["outputs"][0]["path"]
    assert shard.stat().st_nlink == 1
    original = shard.read_bytes()
    edited = original.replace(b"patients", b"PATIENTS", 1)
    assert len(edited) == len(original) and edited != original
    shard.write_bytes(edited)

    with pytest.raises(LineageError, match="changed since its build"):
        Corpus.open(out)  # size unchanged, mtime moved: hashed and refused
    os.utime(shard, ns=(record["run"]["shard_mtime_ns"][shard.name],) * 2)  # an edit that hides its mtime
    Corpus.open(out)  # the quick check cannot see it ...
    with pytest.raises(LineageError, match="changed since its build"):
        Corpus.open(out, verify="full")  # ... the full one, which every index build runs, does
    result = subprocess.run(
        [sys.executable, "-m", "indexer.cli", "store", str(out)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 1 and "changed since its build" in result.stderr

    assert run_corpusbuild(*command).exit_code == 0  # the same build again: the shard is merged anew
    assert shard.read_bytes() == original
    assert read_build_record(out)["outputs"] == record["outputs"]
    run_indexer("store", out)


def test_searchd_refuses_a_corpus_whose_shard_changed(tmp_path, run_corpusbuild):
    out = tmp_path / "root" / "textbooks"
    assert (
        run_corpusbuild(
            "textbooks", SAMPLES / "textbooks" / "books", "--out", out, "--shards", 1, "--workers", 1, "--quiet"
        ).exit_code
        == 0
    )
    run_indexer("store", out)
    run_indexer("bm25", out)
    shard = next(out.glob("shard-*.jsonl"))
    data = shard.read_bytes()
    shard.write_bytes(data.replace(b"heart", b"HEART", 1))
    result = subprocess.run(
        [sys.executable, "-m", "searchd.cli", "serve", "--root", str(tmp_path / "root"), "--port", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1
    assert "refusing to start" in result.stderr and "changed since its build" in result.stderr


def test_unusable_out_folders_get_a_message_and_status_2(tmp_path, run_corpusbuild):
    books = SAMPLES / "textbooks" / "books"
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    cases = {
        a_file: "exists and is not a folder",
        Path("/proc/medsnip-cannot-create"): "cannot write to",
        a_file / "below-a-file": "cannot write to",
    }
    for out, message in cases.items():
        result = run_corpusbuild("textbooks", books, "--out", out, "--quiet")
        assert result.exit_code == 2, (out, result.output)
        assert message in result.output and "Traceback" not in result.output


def test_an_index_never_replaces_what_is_not_an_index_of_its_kind(tmp_path, run_corpusbuild):
    """An index is built in a temp folder and swapped in for --out, deleting what was there: --out may
    only be new, empty, or an earlier index of the same kind: `--out corpus` must not delete the corpus,
    `--out a-file` must not replace the file, and an unwritable --out is an error, not a traceback."""
    from click.testing import CliRunner

    from indexer.cli import main as indexer_main

    corpus = tmp_path / "corpus"
    assert (
        run_corpusbuild(
            "textbooks", SAMPLES / "textbooks" / "books", "--out", corpus, "--shards", 1, "--quiet"
        ).exit_code
        == 0
    )
    run_indexer("bm25", corpus)
    a_file = tmp_path / "a-file"
    a_file.write_text("keep me")
    before = folder_digest(corpus)
    cases = {
        a_file: "exists and is not a folder",
        corpus: "holds other files (the output of corpusbuild.textbooks)",
        corpus / "bm25": "holds other files (the output of indexer.bm25)",
        Path("/proc/medsnip-store"): "cannot write to /proc",
    }
    for out, message in cases.items():
        result = CliRunner().invoke(indexer_main, ["store", str(corpus), "--out", str(out)])
        assert result.exit_code == 2 and message in result.output, (out, result.output)
    assert a_file.read_text() == "keep me" and folder_digest(corpus) == before
    run_indexer("store", corpus)
    run_indexer("store", corpus)  # an earlier store is replaced by the new one


def test_indexer_commands_refuse_a_strangers_folder_unless_forced(tmp_path, run_corpusbuild):
    """store, bm25, dense and distill-static given an --out holding someone's files (no build of theirs wrote
    it) refuse it, saying so and what --force would do, and leave the files alone; with --force the store
    replaces the folder and dense builds beside the files; a killed dense build's own folder is resumed
    without --force."""
    from click.testing import CliRunner

    from helpers import tiny_static_model
    from indexer.cli import main as indexer_main

    corpus = tmp_path / "corpus"
    books = SAMPLES / "textbooks" / "books"
    assert run_corpusbuild("textbooks", books, "--out", corpus, "--shards", 1, "--quiet").exit_code == 0
    model = tiny_static_model(tmp_path / "static")
    static = ["--model", str(model), "--pooling", "static", "--normalize"]
    commands = {
        "store": (["store", str(corpus)], "no `indexer store` build wrote", "to replace it"),
        "bm25": (["bm25", str(corpus)], "no `indexer bm25` build wrote", "to replace it"),
        "dense": (["dense", str(corpus), *static], "no `indexer dense` build wrote", "to build into it beside"),
        "distill-static": (["distill-static", str(corpus)], "no `indexer distill-static` wrote", "to replace it"),
    }
    for name, (arguments, writer, forced) in commands.items():
        notes = tmp_path / f"notes-{name}"
        notes.mkdir()
        (notes / "notes.txt").write_text("mine\n")
        result = CliRunner().invoke(indexer_main, [*arguments, "--out", str(notes)])
        assert result.exit_code == 2, (name, result.output)
        assert f"is a folder {writer} (it holds notes.txt)" in " ".join(result.output.split()), result.output
        assert f"--force {forced}" in " ".join(result.output.split()), result.output
        assert sorted(p.name for p in notes.iterdir()) == ["notes.txt"]
    run_indexer("store", corpus, "--out", tmp_path / "notes-store", "--force")
    assert not (tmp_path / "notes-store" / "notes.txt").exists() and (tmp_path / "notes-store" / "build.json").is_file()
    dense_out = tmp_path / "notes-dense"
    run_indexer("dense", corpus, *static, "--out", dense_out, "--force")
    assert (dense_out / "notes.txt").read_text() == "mine\n" and (dense_out / "build.json").is_file()
    killed = tmp_path / "killed-dense"
    run_indexer("dense", corpus, *static, "--out", killed)
    (killed / "build.json").unlink()  # as a build killed before its record leaves it: its own files only
    run_indexer("dense", corpus, *static, "--out", killed)
    assert (killed / "build.json").is_file()


def test_an_out_folder_inside_an_input_folder_is_refused(tmp_path, run_corpusbuild):
    """A build whose --out lies in a folder it reads would read its own shards back next time."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "corpus.jsonl").write_bytes((SAMPLES / "ir" / "pubmedqa-beir" / "corpus.jsonl").read_bytes())
    for out in (data, data / "built"):
        result = run_corpusbuild("jsonl", data, "--source", "x", "--out", out, "--quiet")
        assert result.exit_code == 2 and "would read its own output back" in result.output
    built = tmp_path / "built"
    assert run_corpusbuild("jsonl", data, "--source", "x", "--out", built, "--shards", 1, "--quiet").exit_code == 0
    shard = next(built.glob("shard-*.jsonl"))
    result = run_corpusbuild("jsonl", shard, "--source", "x", "--out", built, "--shards", 1, "--quiet")
    assert result.exit_code == 2 and "one of the files the build writes" in result.output


def test_a_killed_indexer_leaves_no_jvm_and_its_debris_is_cleaned(tmp_path, run_corpusbuild):
    """kill -9 of `indexer bm25` while Anserini's JVM indexes: the JVM dies with it (rather than running on
    to the end), and the next run deletes the dead run's `.bm25.tmp-PID` folder before building."""
    out = tmp_path / "corpus"
    corpus = SAMPLES / "ir" / "pubmedqa-beir" / "corpus.jsonl"
    assert (
        run_corpusbuild(
            "jsonl",
            corpus,
            "--source",
            "pubmedqa",
            "--no-chunk",
            "--out",
            out,
            "--shards",
            2,
            "--workers",
            1,
            "--quiet",
        ).exit_code
        == 0
    )
    indexer = subprocess.Popen(
        [sys.executable, "-m", "indexer.cli", "bm25", str(out)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not (java := sorted(children(indexer.pid))):
        assert indexer.poll() is None and time.monotonic() < deadline, "the indexer ended before starting Java"
        time.sleep(0.01)
    indexer.kill()
    indexer.wait()
    deadline = time.monotonic() + 0.5  # Java's own start-up alone takes longer: it must be killed, not end
    while Path(f"/proc/{java[0]}").exists() and "Z" not in _state(java[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{java[0]}").exists() or "Z" in _state(java[0]), "the JVM outlived its indexer"
    debris = list(out.glob(".bm25.tmp-*"))
    assert debris == [out / f".bm25.tmp-{indexer.pid}"]
    run_indexer("bm25", out)
    assert not list(out.glob(".bm25.tmp-*")) and (out / "bm25" / "build.json").is_file()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
