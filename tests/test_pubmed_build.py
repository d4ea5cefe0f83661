"""`corpusbuild pubmed` end to end on the real sample files: output contract, update/delete
semantics, determinism across worker counts, verify and export."""

from __future__ import annotations

import json

import orjson
import pyarrow.parquet as pq

from helpers import all_snippets, by_pmid, record_without_run, shard_bytes
from medsnip.buildrecord import read_build_record
from medsnip.snippet import SNIPPET_FIELDS, shard_of


def test_sample_build_honours_the_snippet_contract(tmp_path, pubmed_samples, run_corpusbuild):
    out = tmp_path / "pubmed"
    result = run_corpusbuild("pubmed", pubmed_samples, "--out", out, "--shards", 4, "--workers", 1, "--quiet")
    assert result.exit_code == 0, result.output
    assert "corpusbuild pubmed: complete" in result.output
    record = read_build_record(out)
    snippets = all_snippets(out)
    assert record["complete"] is True
    assert record["counts"]["snippets"] == len(snippets) == 273
    assert record["counts"]["documents"] == 130
    assert record["counts"]["skipped"] == {"no_abstract": 66}
    assert len({s["id"] for s in snippets}) == len(snippets)
    assert sum(s["title"].endswith(".") for s in snippets) > 200  # so the rule above is exercised
    for snippet in snippets:
        assert tuple(snippet) == SNIPPET_FIELDS
        assert snippet["id"] == f"pubmed:{snippet['doc_id']}:{snippet['chunk']}"
        # MedRAG's concat: a title ending in ".", "?" or "!" is followed by a space only
        joint = " " if snippet["title"].endswith((".", "?", "!")) else ". "
        assert snippet["contents"] == snippet["title"] + joint + snippet["content"]
        assert 0 < len(snippet["content"]) <= 1000
        assert snippet["source"] == "pubmed"
    # every input is listed with its real sha256, every output with its own
    assert len(record["inputs"]) == 9 and all(len(i["sha256"]) == 64 for i in record["inputs"])
    assert [o["path"] for o in record["outputs"]] == [f"shard-0000{i}-of-00004.jsonl" for i in range(4)]


def test_shard_assignment_and_order_are_the_documented_ones(tmp_path, pubmed_samples, run_corpusbuild):
    out = tmp_path / "pubmed"
    run_corpusbuild("pubmed", pubmed_samples, "--out", out, "--shards", 3, "--quiet")
    for index in range(3):
        shard = out / f"shard-0000{index}-of-00003.jsonl"
        rows = [orjson.loads(line) for line in shard.read_bytes().splitlines()]
        assert all(shard_of(row["doc_id"], 3) == index for row in rows)
        keys = [(int(row["doc_id"]), row["chunk"]) for row in rows]
        assert keys == sorted(keys)


def test_structured_abstract_becomes_labelled_chunks_that_keep_the_title(tmp_path, pubmed_samples, run_corpusbuild):
    out = tmp_path / "pubmed"
    run_corpusbuild("pubmed", pubmed_samples / "pubmed4.xml", "--out", out, "--shards", 2, "--quiet")
    chunks = by_pmid(out)[27797938]
    assert len(chunks) == 2  # four sections; the split falls on a section boundary
    assert chunks[1]["content"].startswith("RESULTS: ")
    title = "Leucocyte telomere length, genetic variants at the TERT gene region and risk of pancreatic cancer."
    assert {c["title"] for c in chunks} == {title}
    assert chunks[0]["content"].startswith("OBJECTIVE: Telomere shortening occurs as an early event")
    assert "\nDESIGN: We measured prediagnostic leucocyte telomere length" in chunks[0]["content"]
    assert "\nCONCLUSIONS: Prediagnostic leucocyte telomere length" in chunks[1]["content"]
    meta = chunks[0]["meta"]
    assert meta["pmid"] == 27797938 and meta["year"] == 2017 and meta["journal"] == "Gut"
    assert {"ui": "D019098", "name": "Telomerase", "registry_number": "EC 2.7.7.49"} in meta["chemicals"]
    assert meta["mesh"][0]["ui"] == "D000230"


def test_no_chunk_gives_one_snippet_per_abstract_and_keep_no_abstract_keeps_titles(
    tmp_path, pubmed_samples, run_corpusbuild
):
    out = tmp_path / "nochunk"
    run_corpusbuild("pubmed", pubmed_samples, "--out", out, "--shards", 2, "--no-chunk", "--quiet")
    snippets = all_snippets(out)
    assert len(snippets) == 130 and all(s["chunk"] == 0 for s in snippets)
    assert max(len(s["content"]) for s in snippets) > 1000

    out = tmp_path / "titles"
    run_corpusbuild("pubmed", pubmed_samples, "--out", out, "--shards", 2, "--keep-no-abstract", "--quiet")
    record = read_build_record(out)
    assert record["counts"]["documents"] == 196 and record["counts"]["skipped"] == {}
    title_only = [s for s in all_snippets(out) if s["content"] == ""]
    assert len(title_only) == 66 and all(s["contents"] == s["title"] for s in title_only)


def test_updates_and_deletions_follow_sequence_numbers(tmp_path, update_chain, run_corpusbuild):
    """Given in scrambled order, the files are applied n0999 -> n1016 -> n1017 -> medsamp2014."""
    out = tmp_path / "built"  # not the inputs' folder: corpusbuild refuses to write beside files it did not write
    result = run_corpusbuild(
        "pubmed",
        update_chain["medsamp"],
        update_chain["n1017"],
        update_chain["n1016"],
        update_chain["baseline"],
        "--out",
        out,
        "--shards",
        4,
        "--workers",
        2,
        "--quiet",
    )
    assert result.exit_code == 0, result.output
    record = read_build_record(out)
    assert [i["path"].rsplit("/", 1)[1] for i in record["inputs"]] == [
        "pubmed20n0999.xml.gz",
        "pubmed20n1016.xml.gz",
        "pubmed20n1017.xml.gz",
        "medsamp2014.xml",
    ]
    docs = by_pmid(out)
    # replaced by the real record of pubmed20n1016
    assert docs[30137523][0]["title"].startswith("Ethnicity-Specific Skeletal Muscle Transcriptional Signatures")
    # the latest version (n1017) has no abstract, so the citation is gone and counted as skipped
    assert 30170222 not in docs
    # deleted by n1016, then re-added by n1017 with pubmed6's record
    assert docs[31844204][0]["meta"]["mesh"] == by_pmid_of_sample(tmp_path, run_corpusbuild, "pubmed6.xml")
    assert 23203860 not in docs  # medsamp2014's DeleteCitation
    assert 40000001 not in docs  # n1017's DeleteCitation
    assert docs[40000002][0]["content"].startswith("Electron paramagnetic resonance")  # untouched
    counts = record["counts"]
    assert counts["replaced"] == 3  # 30137523 (n1016), 30170222 twice (n1016, then n1017)
    assert counts["deleted"] == 3  # 31844204 by n1016, 40000001 by n1017, 23203860 by medsamp2014
    assert counts["skipped"]["no_abstract"] >= 1


def by_pmid_of_sample(tmp_path, run_corpusbuild, name):
    out = tmp_path / f"single-{name}"
    from conftest import PUBMED_SAMPLES

    run_corpusbuild("pubmed", PUBMED_SAMPLES / name, "--out", out, "--shards", 1, "--quiet")
    (only,) = by_pmid(out).values()
    return only[0]["meta"]["mesh"]


def test_one_and_two_workers_give_byte_identical_shards(tmp_path, update_chain, pubmed_samples, run_corpusbuild):
    inputs = [update_chain["folder"], pubmed_samples / "pubmed4.xml", pubmed_samples / "pubmed5.xml"]
    one, two = tmp_path / "one", tmp_path / "two"
    run_corpusbuild("pubmed", *inputs, "--out", one, "--shards", 5, "--workers", 1, "--quiet")
    run_corpusbuild("pubmed", *inputs, "--out", two, "--shards", 5, "--workers", 2, "--quiet")
    assert shard_bytes(one) == shard_bytes(two)
    assert record_without_run(one) == record_without_run(two)


def test_rerun_reuses_finished_work_and_changes_nothing(tmp_path, pubmed_samples, run_corpusbuild):
    out = tmp_path / "pubmed"
    run_corpusbuild("pubmed", pubmed_samples, "--out", out, "--shards", 4, "--quiet")
    before = shard_bytes(out)
    run_corpusbuild("pubmed", pubmed_samples, "--out", out, "--shards", 4, "--quiet")
    assert shard_bytes(out) == before
    run = read_build_record(out)["run"]
    assert run["reused_file_tasks"] == 9 and run["reused_shard_tasks"] == 4


def test_changing_the_shard_count_replaces_the_old_shards(tmp_path, pubmed_samples, run_corpusbuild):
    out = tmp_path / "pubmed"
    run_corpusbuild("pubmed", pubmed_samples, "--out", out, "--shards", 4, "--quiet")
    run_corpusbuild("pubmed", pubmed_samples, "--out", out, "--shards", 2, "--quiet")
    assert sorted(shard_bytes(out)) == ["shard-00000-of-00002.jsonl", "shard-00001-of-00002.jsonl"]
    assert run_corpusbuild("verify", out).exit_code == 0


def test_verify_detects_a_changed_byte(tmp_path, pubmed_samples, run_corpusbuild):
    out = tmp_path / "pubmed"
    run_corpusbuild("pubmed", pubmed_samples, "--out", out, "--shards", 2, "--quiet")
    ok = run_corpusbuild("verify", out, "--inputs")
    assert ok.exit_code == 0 and "OK (2 shards, 273 snippets match build.json)" in ok.output
    shard = out / "shard-00001-of-00002.jsonl"
    data = bytearray(shard.read_bytes())
    data[100] = ord("X") if data[100] != ord("X") else ord("Y")
    shard.write_bytes(bytes(data))
    bad = run_corpusbuild("verify", out)
    assert bad.exit_code == 1
    assert "DIFFERS shard-00001-of-00002.jsonl: sha256 expected" in bad.output
    assert "shard-00000" not in bad.output


def test_export_formats(tmp_path, pubmed_samples, run_corpusbuild):
    out = tmp_path / "pubmed"
    run_corpusbuild("pubmed", pubmed_samples, "--out", out, "--shards", 2, "--quiet")
    snippets = all_snippets(out)

    medrag = tmp_path / "medrag.jsonl"
    assert run_corpusbuild("export", out, "--format", "medrag", "--out", medrag).exit_code == 0
    rows = [json.loads(line) for line in medrag.read_text().splitlines()]
    assert len(rows) == 273 and all(list(row) == ["id", "title", "content", "contents"] for row in rows)
    assert rows[0]["id"] == f"{snippets[0]['doc_id']}_{snippets[0]['chunk']}"

    plain = tmp_path / "all.jsonl"
    run_corpusbuild("export", out, "--format", "jsonl", "--out", plain)
    assert [json.loads(line) for line in plain.read_text().splitlines()] == snippets

    parquet = tmp_path / "all.parquet"
    run_corpusbuild("export", out, "--format", "parquet", "--out", parquet)
    table = pq.read_table(parquet)
    assert table.num_rows == 273 and table.column_names[:4] == ["id", "title", "content", "contents"]
    assert json.loads(table.column("meta")[0].as_py()) == snippets[0]["meta"]


def test_export_refuses_a_corrupted_shard(tmp_path, pubmed_samples, run_corpusbuild):
    out = tmp_path / "pubmed"
    run_corpusbuild("pubmed", pubmed_samples, "--out", out, "--shards", 2, "--quiet")
    with open(out / "shard-00000-of-00002.jsonl", "ab") as handle:
        handle.write(b'{"id":"injected"}\n')
    target = tmp_path / "x.jsonl"
    result = run_corpusbuild("export", out, "--format", "jsonl", "--out", target)
    assert result.exit_code == 1 and not target.exists()


def test_a_second_build_into_the_same_folder_is_refused(tmp_path, pubmed_samples, run_corpusbuild):
    import fcntl

    out = tmp_path / "pubmed"
    (out / ".work").mkdir(parents=True)
    with open(out / ".work" / "lock", "a+b") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        result = run_corpusbuild("pubmed", pubmed_samples, "--out", out, "--quiet")
    assert result.exit_code == 1 and "another corpusbuild is writing to this folder" in result.output
    assert not (out / "build.json").exists()


def test_no_keep_work_leaves_only_the_output(tmp_path, pubmed_samples, run_corpusbuild):
    out = tmp_path / "pubmed"
    run_corpusbuild("pubmed", pubmed_samples, "--out", out, "--shards", 2, "--no-keep-work", "--quiet")
    assert not (out / ".work" / "parts").exists() and not (out / ".work" / "reduce").exists()
    assert run_corpusbuild("verify", out).exit_code == 0


def test_verify_says_what_a_folder_is(tmp_path, pubmed_samples, run_corpusbuild):
    """A root of corpora is verified corpus by corpus (exit 1 naming the one that differs); a folder that is not
    a corpus, or an index folder, is said to be what it is (exit 1), never reported as 'differences'."""
    root = tmp_path / "root"
    for name, shards in (("pubmed", 2), ("other", 1)):
        run_corpusbuild("pubmed", pubmed_samples, "--out", root / name, "--shards", shards, "--quiet")
    ok = run_corpusbuild("verify", root)
    assert ok.exit_code == 0, ok.output
    assert f"{root / 'other'}: OK (1 shards" in ok.output and f"{root / 'pubmed'}: OK (2 shards" in ok.output
    shard = root / "pubmed" / "shard-00001-of-00002.jsonl"
    shard.write_bytes(shard.read_bytes().replace(b"a", b"b", 1))
    bad = run_corpusbuild("verify", root)
    assert bad.exit_code == 1 and "DIFFERS shard-00001-of-00002.jsonl: sha256 expected" in bad.output
    assert f"error: {root}: a root of 2 corpora; pubmed differ from their build.json" in bad.output
    stranger = tmp_path / "notes"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine\n")
    refused = run_corpusbuild("verify", stranger)
    assert refused.exit_code == 1 and "not a corpusbuild output" in refused.output and "DIFFERS" not in refused.output
    (root / "pubmed" / "bm25").mkdir()
    (root / "pubmed" / "bm25" / "build.json").write_text('{"schema": "medsnip.build/1", "stage": "indexer.bm25"}')
    index = run_corpusbuild("verify", root / "pubmed" / "bm25")
    assert index.exit_code == 1 and "build.json is from 'indexer.bm25', not a corpusbuild output" in index.output


def test_a_folder_corpusbuild_did_not_write_is_refused_as_out(tmp_path, pubmed_samples, run_corpusbuild):
    """--out naming someone's non-empty folder is refused before anything is read (exit 2, the files named,
    nothing written beside them); --force builds there; corpusbuild's own folder is rebuilt without it."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "notes.txt").write_text("mine\n")
    refused = run_corpusbuild("pubmed", pubmed_samples, "--out", notes, "--shards", 2, "--quiet")
    assert refused.exit_code == 2
    assert (
        "is a folder corpusbuild did not write (it holds notes.txt)" in refused.output and "--force" in refused.output
    )
    assert sorted(p.name for p in notes.iterdir()) == ["notes.txt"]
    forced = run_corpusbuild("pubmed", pubmed_samples, "--out", notes, "--shards", 2, "--quiet", "--force")
    assert forced.exit_code == 0 and (notes / "build.json").is_file() and (notes / "notes.txt").read_text() == "mine\n"
    again = run_corpusbuild("pubmed", pubmed_samples, "--out", notes, "--shards", 2, "--quiet")
    assert again.exit_code == 0, again.output  # its own folder now (its build record says so)
