"""Bad input gets a clear error naming file and position, other files still build, nothing built is
damaged; a killed run resumes to the byte-identical result."""

from __future__ import annotations

import gzip
import os
import signal
from pathlib import Path

import pytest
from pubmed_scaleup import write_scaled_pubmed

from conftest import REPO
from helpers import by_pmid, kill_when, record_without_run, shard_bytes, start_corpusbuild
from medsnip.buildrecord import read_build_record

SAMPLE_FILES = ("pubmed1.xml", "pubmed4.xml", "pubmed5.xml")


def good_inputs(pubmed_samples: Path) -> list[Path]:
    return [pubmed_samples / name for name in SAMPLE_FILES]


def make_bad_files(folder: Path, pubmed_samples: Path) -> dict[str, Path]:
    """Each bad file is a damaged copy of a real one (or the real non-PubMed efetch_pmc.xml)."""
    folder.mkdir()
    real_gz = (pubmed_samples / "pubmed20n1016.xml.gz").read_bytes()
    truncated = folder / "pubmed20n1016.xml.gz"
    truncated.write_bytes(real_gz[: len(real_gz) // 2])

    lines = (pubmed_samples / "medsamp2014.xml").read_text(encoding="utf-8").splitlines(keepends=True)
    broken_at = next(i for i, line in enumerate(lines) if i > 600 and "</ArticleTitle>" in line)
    lines[broken_at] = lines[broken_at].replace("</ArticleTitle>", "</ArticleTitel>")
    malformed = folder / "medsamp2014-malformed.xml"
    malformed.write_text("".join(lines), encoding="utf-8")

    empty = folder / "pubmed20n0002.xml"
    empty.write_bytes(b"")

    not_pubmed = folder / "efetch_pmc.xml"
    not_pubmed.write_bytes((REPO / "samples" / "nxml" / "efetch_pmc.xml").read_bytes())

    text = (pubmed_samples / "medsamp2014.xml").read_text(encoding="utf-8")
    bad_pmid = folder / "medsamp2014-badpmid.xml"
    bad_pmid.write_text(text.replace('<PMID Version="1">10540283</PMID>', '<PMID Version="1">1054O283</PMID>', 1))
    return {
        "truncated": truncated,
        "malformed": malformed,
        "malformed_line": broken_at + 1,
        "empty": empty,
        "not_pubmed": not_pubmed,
        "bad_pmid": bad_pmid,
        "bad_pmid_line": text[: text.index("10540283")].count("\n") + 1,
    }


def errors_for(record: dict, path: Path) -> list[dict]:
    return [e for e in record["errors"] if e["file"] == str(path)]


def test_every_bad_input_is_reported_and_the_rest_still_builds(tmp_path, pubmed_samples, run_corpusbuild):
    bad = make_bad_files(tmp_path / "bad", pubmed_samples)
    missing = tmp_path / "nowhere" / "pubmed26n0001.xml.gz"
    out = tmp_path / "out"
    result = run_corpusbuild(
        "pubmed",
        *good_inputs(pubmed_samples),
        bad["truncated"],
        bad["malformed"],
        bad["empty"],
        bad["not_pubmed"],
        bad["bad_pmid"],
        missing,
        "--out",
        out,
        "--shards",
        2,
        "--workers",
        2,
        "--quiet",
    )
    assert result.exit_code == 1
    record = read_build_record(out)
    assert record["complete"] is False
    assert record["counts"]["input_files_failed"] == 4

    (truncated,) = errors_for(record, bad["truncated"])
    assert "truncated or corrupt compressed stream" in truncated["message"]
    (malformed,) = errors_for(record, bad["malformed"])
    assert malformed["message"].startswith("malformed XML") and "ArticleTitel" in malformed["message"]
    assert malformed["line"] == bad["malformed_line"]
    (empty,) = errors_for(record, bad["empty"])
    assert empty["message"].startswith("empty file")
    (not_pubmed,) = errors_for(record, bad["not_pubmed"])
    assert "not PubMed XML: root element <pmc-articleset>" in not_pubmed["message"]
    (bad_pmid,) = errors_for(record, bad["bad_pmid"])
    assert bad_pmid["message"] == "PMID '1054O283' is not a number (ASCII digits 0-9)"
    assert (bad_pmid["line"], bad_pmid["element"]) == (bad["bad_pmid_line"], "MedlineCitation #1")
    (gone,) = errors_for(record, missing)
    assert gone["message"] == "no such file or directory"

    docs = by_pmid(out)
    assert {27797938, 28775130, 9997} <= set(docs)  # the good files
    assert 10658653 not in docs  # the truncated file contributes nothing, not half a file
    assert 11034741 in docs and 10540283 not in docs  # the bad-PMID file minus its bad record
    assert "error" in result.output and "1054O283" in result.output


def test_strict_stops_at_the_first_error_and_keeps_the_earlier_build(tmp_path, pubmed_samples, run_corpusbuild):
    out = tmp_path / "out"
    assert (
        run_corpusbuild("pubmed", *good_inputs(pubmed_samples), "--out", out, "--shards", 2, "--quiet").exit_code == 0
    )
    before = shard_bytes(out)
    record_before = (out / "build.json").read_bytes()
    bad = make_bad_files(tmp_path / "bad", pubmed_samples)
    result = run_corpusbuild(
        "pubmed", *good_inputs(pubmed_samples), bad["truncated"], "--out", out, "--shards", 2, "--strict", "--quiet"
    )
    assert result.exit_code == 1
    assert "stopped (--strict)" in result.output and "pubmed20n1016.xml.gz" in result.output
    assert shard_bytes(out) == before and (out / "build.json").read_bytes() == record_before
    assert run_corpusbuild("verify", out).exit_code == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_is_reported(tmp_path, pubmed_samples, run_corpusbuild):
    locked = tmp_path / "pubmed26n0001.xml"
    locked.write_bytes((pubmed_samples / "pubmed4.xml").read_bytes())
    locked.chmod(0)
    out = tmp_path / "out"
    result = run_corpusbuild("pubmed", locked, pubmed_samples / "pubmed5.xml", "--out", out, "--quiet")
    assert result.exit_code == 1
    assert "cannot read: Permission denied" in read_build_record(out)["errors"][0]["message"]


def test_verify_reports_an_incomplete_build(tmp_path, pubmed_samples, run_corpusbuild):
    out = tmp_path / "out"
    run_corpusbuild("pubmed", pubmed_samples / "pubmed4.xml", tmp_path / "missing.xml", "--out", out, "--quiet")
    result = run_corpusbuild("verify", out)
    assert result.exit_code == 1 and "build is marked incomplete (1 errors recorded)" in result.output


def _scaled_inputs(folder: Path, pubmed_samples: Path) -> list[Path]:
    """Four files of 2,000 real citations each (real records with new PMIDs), enough to kill mid-run."""
    folder.mkdir()
    sources = sorted(pubmed_samples.iterdir())
    paths = []
    for number in range(4):
        path = folder / f"pubmed26n{number + 1:04d}.xml.gz"
        write_scaled_pubmed(sources, path, 2_000, 40_000_000 + number * 2_000)
        paths.append(path)
    return paths


def _start(inputs: list[Path], out: Path, shards: int):
    return start_corpusbuild("pubmed", inputs, out, "--shards", shards, "--workers", 1)


@pytest.mark.parametrize("phase", ["parse", "merge"])
def test_killed_run_resumes_to_the_identical_result(tmp_path, pubmed_samples, phase):
    inputs = _scaled_inputs(tmp_path / "in", pubmed_samples)
    shards = 64
    reference = tmp_path / "reference"
    assert _start(inputs, reference, shards).wait() == 0

    out = tmp_path / "killed"
    process = _start(inputs, out, shards)
    work = out / ".work"
    if phase == "parse":
        kill_when(process, lambda: len(list(work.glob("parts/*/task.json"))) >= 1)
    else:
        kill_when(process, lambda: len(list(work.glob("reduce/*/*.done.json"))) >= 1)
    assert process.returncode == -signal.SIGKILL
    assert not (out / "build.json").exists()
    assert list(out.glob("shard-*")) == []  # nothing partial under a final name

    assert _start(inputs, out, shards).wait() == 0
    assert shard_bytes(out) == shard_bytes(reference)
    assert record_without_run(out) == record_without_run(reference)
    run = read_build_record(out)["run"]
    if phase == "parse":
        assert run["reused_file_tasks"] >= 1
    else:
        assert run["reused_file_tasks"] == 4 and run["reused_shard_tasks"] >= 1


def test_truncated_gzip_made_from_a_real_file_is_really_truncated(pubmed_samples, tmp_path):
    """Guards the fixture above: the truncated copy must fail to decompress."""
    bad = make_bad_files(tmp_path / "bad", pubmed_samples)
    with pytest.raises(EOFError), gzip.open(bad["truncated"]) as handle:
        handle.read()
