"""One Wikipedia dump parsed by several workers at once: a multistream dump split by its index or by
its stream headers, a plain .xml split before <page> tags. The output must be byte-identical to the
dump parsed whole, errors must still name the file and line, and a killed split build resumes.

The dumps are the real enwiki slice in samples/wikipedia re-issued under new page ids
(wiki_scaleup), written as Wikimedia lays out multistream dumps: header stream, streams of
pages, closing stream, and the `offset:page_id:title` index."""

from __future__ import annotations

import bz2
import hashlib
import shutil
import signal

import pytest
from wiki_scaleup import multistream_index_path, write_multistream_dump

from conftest import SAMPLES
from corpusbuild.sources.wikipedia.dump_ranges import plan_dump_split
from helpers import kill_when, record_without_run, shard_bytes, start_corpusbuild
from medsnip.buildrecord import read_build_record

SLICE = SAMPLES / "wikipedia" / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
SMALL_RANGES = ("--range-mb", 0.1)  # ~100 KB ranges: a dozen or more per test dump


@pytest.fixture(scope="module")
def multistream(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dumps")
    dump = folder / "enwiki-20261101-pages-articles-multistream.xml.bz2"
    write_multistream_dump(SLICE, dump, copies=1, id_offset=0, pages_per_stream=10)
    return dump


@pytest.fixture(scope="module")
def whole(multistream, tmp_path_factory):
    """The dump parsed as one task (one worker never splits)."""
    out = tmp_path_factory.mktemp("whole") / "out"
    assert start_corpusbuild("wikipedia", [multistream], out, "--shards", 3, "--workers", 1).wait() == 0
    return out


def _build(run_corpusbuild, dump, out, *extra):
    result = run_corpusbuild("wikipedia", dump, "--out", out, "--shards", 3, "--workers", 2, "--quiet", *extra)
    assert result.exit_code == 0, result.output
    return read_build_record(out)


def test_multistream_split_by_index_equals_the_whole_dump(tmp_path, run_corpusbuild, multistream, whole):
    record = _build(run_corpusbuild, multistream, tmp_path / "split", *SMALL_RANGES)
    entry = record["inputs"][0]
    assert entry["ranges"] >= 10
    assert entry["sha256"] == hashlib.sha256(multistream.read_bytes()).hexdigest()
    assert entry["bytes"] == multistream.stat().st_size
    assert shard_bytes(tmp_path / "split") == shard_bytes(whole)
    assert record["counts"] == read_build_record(whole)["counts"]


def test_split_uses_the_index_offsets_or_finds_the_streams_itself(tmp_path, multistream):
    """With the index the boundaries are index offsets; without it, the scan finds the same streams."""
    offsets = {
        int(line.split(b":", 1)[0])
        for line in bz2.decompress(multistream_index_path(multistream).read_bytes()).splitlines()
    }
    with_index = plan_dump_split(multistream, workers=2, range_bytes=100_000)
    assert {part["start"] for part in with_index.parts[1:]} <= offsets
    copy = tmp_path / multistream.name
    shutil.copy(multistream, copy)  # no index beside this one
    scanned = plan_dump_split(copy, workers=2, range_bytes=100_000)
    by_index = [part["start"] for part in with_index.parts]
    by_scan = [part["start"] for part in scanned.parts]
    # The scan also sees the closing stream (just "</mediawiki>"), which the index does not list.
    assert by_scan[: len(by_index)] == by_index and len(by_scan) - len(by_index) <= 1
    assert scanned.sha256 == with_index.sha256


def test_multistream_without_index_and_plain_xml_split_too(tmp_path, run_corpusbuild, multistream, whole):
    no_index = tmp_path / "noindex" / multistream.name
    no_index.parent.mkdir()
    shutil.copy(multistream, no_index)
    assert _build(run_corpusbuild, no_index, tmp_path / "a", *SMALL_RANGES)["inputs"][0]["ranges"] >= 10
    plain = tmp_path / "enwiki-20261101-pages-articles.xml"
    plain.write_bytes(bz2.decompress(multistream.read_bytes()))  # all streams, concatenated
    assert _build(run_corpusbuild, plain, tmp_path / "b", "--range-mb", 1)["inputs"][0]["ranges"] >= 5
    assert shard_bytes(tmp_path / "a") == shard_bytes(whole)
    assert shard_bytes(tmp_path / "b") == shard_bytes(whole)


def test_errors_in_a_split_dump_name_the_file_and_its_line(tmp_path, run_corpusbuild, multistream):
    xml = bz2.decompress(multistream.read_bytes())
    late_title = xml.index(b"</title>", len(xml) * 3 // 4)
    broken = tmp_path / "enwiki-broken-pages-articles.xml"
    broken.write_bytes(xml[:late_title] + b"</titel>" + xml[late_title + len(b"</title>") :])
    out = tmp_path / "out"
    result = run_corpusbuild("wikipedia", broken, "--out", out, "--workers", 2, "--quiet", "--range-mb", 1)
    assert result.exit_code == 1
    # the only input failed: nothing is published, and the one error line names the file, its line and the range
    [error] = [line for line in result.output.splitlines() if line.startswith("error: ")]
    line = xml[:late_title].count(b"\n") + 1  # the file's own line, not the range's
    assert error.startswith(f"error: {broken}:{line} (") and "part " in error, error
    assert "): malformed XML: Opening and ending tag mismatch" in error
    assert "nothing was built" in result.output and not out.exists()


def test_killed_split_build_resumes_to_the_identical_result(tmp_path, multistream, whole):
    out = tmp_path / "killed"
    process = start_corpusbuild("wikipedia", [multistream], out, "--shards", 3, "--workers", 2, *SMALL_RANGES)
    kill_when(process, lambda: len(list((out / ".work").glob("parts/*/task.json"))) >= 2)
    assert process.returncode == -signal.SIGKILL
    assert not (out / "build.json").exists()
    resumed = start_corpusbuild("wikipedia", [multistream], out, "--shards", 3, "--workers", 2, *SMALL_RANGES)
    assert resumed.wait() == 0
    assert shard_bytes(out) == shard_bytes(whole)
    run = read_build_record(out)["run"]
    assert run["reused_file_tasks"] >= 2
    expected = record_without_run(whole)
    actual = record_without_run(out)
    for record in (expected, actual):
        for entry in record["inputs"]:
            entry.pop("ranges", None)
            entry["stats"].pop("seconds", None)
    assert actual == expected


def test_garbage_after_a_fake_stream_header_fails_the_same_way_on_any_number_of_workers(tmp_path, run_corpusbuild):
    """Bytes appended after the last stream that begin like a stream header: the planner does not start
    a range there (they do not decompress), and the whole-file reader does not skip them in silence, as
    Python's BZ2File would: 1 and 2 workers both fail the file with the same error naming the byte."""
    import random

    dump = tmp_path / "enwiki-multistream.xml.bz2"
    tail = b"BZh91AY&SY" + random.Random(20261125).randbytes(3000)
    dump.write_bytes((SAMPLES / "wikipedia" / "enwiki-table-markup.xml.bz2").read_bytes() + tail)
    size = dump.stat().st_size
    assert plan_dump_split(dump, 2, range_bytes=10_000) is None  # the only header found is the fake one
    outputs = []
    for workers in (1, 2):
        result = run_corpusbuild(
            "wikipedia", dump, "--out", tmp_path / f"out-{workers}", "--workers", workers, "--range-mb", 0.01, "--quiet"
        )
        assert result.exit_code == 1
        outputs.append([line for line in result.output.splitlines() if line.startswith("error")])
    assert outputs[0] == outputs[1] and outputs[0]  # (the error is printed as it happens and in the summary)
    assert f"the bytes from {size - len(tail)} are not a bzip2 stream" in outputs[0][0]
