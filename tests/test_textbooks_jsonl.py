"""`corpusbuild textbooks` and `corpusbuild jsonl` on real text: contract, chunking, ids, bad input."""

from __future__ import annotations

import gzip
import json
import shutil

from langchain_text_splitters import RecursiveCharacterTextSplitter

from conftest import SAMPLES
from corpusbuild.cleaning import clean_text
from helpers import all_snippets, record_without_run, shard_bytes
from medsnip.buildrecord import read_build_record

BOOKS = SAMPLES / "textbooks" / "books"  # real MedRAG textbook chunks, concatenated per book (make_books.py)


def test_textbooks_chunk_each_book_like_medrag(tmp_path, run_corpusbuild):
    out = tmp_path / "textbooks"
    result = run_corpusbuild("textbooks", BOOKS, "--out", out, "--shards", 3, "--quiet")
    assert result.exit_code == 0, result.output
    snippets = all_snippets(out)
    by_book: dict[str, list[dict]] = {}
    for snippet in snippets:
        by_book.setdefault(snippet["doc_id"], []).append(snippet)
    assert len(by_book) == 10
    splitter = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)
    for book, chunks in by_book.items():
        chunks.sort(key=lambda s: s["chunk"])
        text = clean_text((BOOKS / f"{book}.txt").read_text(encoding="utf-8"))
        assert [c["content"] for c in chunks] == splitter.split_text(text)
        assert {c["title"] for c in chunks} == {book}
        assert [c["id"] for c in chunks] == [f"textbooks:{book}:{j}" for j in range(len(chunks))]
    assert max(len(s["content"]) for s in snippets) <= 1000
    harrison = sorted(by_book["InternalMed_Harrison"], key=lambda s: s["chunk"])
    assert len(harrison) > 150
    # the 200-character overlap: each chunk starts with text the previous one ended with
    assert sum(b["content"][:50] in a["content"] for a, b in zip(harrison, harrison[1:], strict=False)) > 140

    medrag = tmp_path / "medrag.jsonl"
    run_corpusbuild("export", out, "--format", "medrag", "--out", medrag)
    ids = {json.loads(line)["id"] for line in medrag.read_text().splitlines()}
    assert "InternalMed_Harrison_0" in ids and "Anatomy_Gray_3" in ids


def test_textbooks_identical_across_worker_counts(tmp_path, run_corpusbuild):
    one, two = tmp_path / "one", tmp_path / "two"
    run_corpusbuild("textbooks", BOOKS, "--out", one, "--shards", 4, "--workers", 1, "--quiet")
    run_corpusbuild("textbooks", BOOKS, "--out", two, "--shards", 4, "--workers", 2, "--quiet")
    assert shard_bytes(one) == shard_bytes(two) and record_without_run(one) == record_without_run(two)


def test_textbooks_bad_input(tmp_path, run_corpusbuild):
    folder = tmp_path / "books"
    folder.mkdir()
    shutil.copy(BOOKS / "Anatomy_Gray.txt", folder)
    again = tmp_path / "again"
    again.mkdir()
    shutil.copy(BOOKS / "Anatomy_Gray.txt", again)  # the same book name twice
    latin1 = folder / "Pharmacology_Katzung.txt"  # a real book saved in the wrong encoding
    cp1252 = (BOOKS / "Pharmacology_Katzung.txt").read_text(encoding="utf-8").encode("cp1252", "replace")
    latin1.write_bytes(cp1252)
    first_bad = next(i for i, byte in enumerate(cp1252) if byte >= 0x80)
    (folder / "Empty_Book.txt").write_text("  \n\n", encoding="utf-8")
    real_gz = gzip.compress((BOOKS / "Neurology_Adams.txt").read_bytes())
    (folder / "Neurology_Adams.txt.gz").write_bytes(real_gz[: len(real_gz) // 2])
    out = tmp_path / "out"
    result = run_corpusbuild("textbooks", folder, again, "--out", out, "--shards", 2, "--quiet")
    assert result.exit_code == 1
    messages = {e["file"].rsplit("/", 2)[-1]: e for e in read_build_record(out)["errors"]}
    expected = f"not UTF-8 text: byte 0x{cp1252[first_bad]:02x} at offset {first_bad}"
    assert messages["Pharmacology_Katzung.txt"]["message"] == expected
    assert messages["Pharmacology_Katzung.txt"]["line"] == cp1252[:first_bad].count(b"\n") + 1
    assert messages["Empty_Book.txt"]["message"] == "empty file: no visible text"
    assert "truncated or corrupt compressed stream" in messages["Neurology_Adams.txt.gz"]["message"]
    duplicate = [e for e in read_build_record(out)["errors"] if "duplicate id" in e["message"]]
    assert len(duplicate) == 1 and "'Anatomy_Gray'" in duplicate[0]["message"]
    kept = all_snippets(out)
    assert {s["doc_id"] for s in kept} == {"Anatomy_Gray"}  # one copy kept, its chunks once each
    assert len(kept) == len({s["id"] for s in kept}) == 5


def write_pubmedqa_corpus(path, gz: bool = False):
    """A BEIR-style corpus.jsonl of PubMedQA's 500 real abstracts (id = PMID, MeSH kept as metadata)."""
    data = json.loads((SAMPLES / "ir" / "pubmedqa_test_set.json").read_text(encoding="utf-8"))
    lines = [
        json.dumps({"_id": pmid, "title": "", "text": " ".join(item["CONTEXTS"]), "metadata": {"mesh": item["MESHES"]}})
        for pmid, item in data.items()
    ]
    payload = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(payload) if gz else payload)
    return data


def test_jsonl_beir_corpus_no_chunk_keeps_one_snippet_per_document(tmp_path, run_corpusbuild):
    corpus = tmp_path / "corpus.jsonl.gz"
    data = write_pubmedqa_corpus(corpus, gz=True)
    out = tmp_path / "pqa"
    result = run_corpusbuild(
        "jsonl", corpus, "--source", "pubmedqa", "--no-chunk", "--out", out, "--shards", 2, "--quiet"
    )
    assert result.exit_code == 0, result.output
    snippets = all_snippets(out)
    assert len(snippets) == 500 and {s["doc_id"] for s in snippets} == set(data)
    first = next(s for s in snippets if s["doc_id"] == "21645374")
    assert first["id"] == "pubmedqa:21645374:0" and first["source"] == "pubmedqa"
    assert first["content"] == clean_text(" ".join(data["21645374"]["CONTEXTS"]))
    assert first["meta"] == {"metadata": {"mesh": data["21645374"]["MESHES"]}}
    assert first["contents"] == first["content"]  # no title


def test_jsonl_chunked_and_deterministic(tmp_path, run_corpusbuild):
    corpus = tmp_path / "corpus.jsonl"
    write_pubmedqa_corpus(corpus)
    one, two = tmp_path / "one", tmp_path / "two"
    run_corpusbuild("jsonl", corpus, "--source", "pqa", "--out", one, "--shards", 3, "--workers", 1, "--quiet")
    run_corpusbuild("jsonl", corpus, "--source", "pqa", "--out", two, "--shards", 3, "--workers", 2, "--quiet")
    assert shard_bytes(one) == shard_bytes(two)
    snippets = all_snippets(one)
    assert len(snippets) > 500 and max(len(s["content"]) for s in snippets) <= 1000


def test_jsonl_bad_lines_are_reported_with_file_and_line(tmp_path, run_corpusbuild):
    corpus = tmp_path / "corpus.jsonl"
    write_pubmedqa_corpus(corpus)
    lines = corpus.read_bytes().splitlines(keepends=True)
    lines[9] = b'{"_id": "x", "text": "cut off\n'  # line 10: not JSON
    lines[19] = b'{"title": "no id", "text": "abc"}\n'  # line 20: no id
    lines[29] = lines[0]  # line 30: the id of line 1 again
    lines[39] = '{"_id": "latin1", "text": "Caf\xe9"}\n'.encode("latin-1")  # line 40: not UTF-8
    corpus.write_bytes(b"".join(lines))
    second = tmp_path / "more.jsonl"
    second.write_bytes(lines[1])  # the id of line 2, in another file
    (tmp_path / "empty.jsonl").write_bytes(b"\n")
    out = tmp_path / "out"
    result = run_corpusbuild(
        "jsonl", corpus, second, tmp_path / "empty.jsonl", "--source", "pqa", "--out", out, "--quiet"
    )
    assert result.exit_code == 1
    errors = read_build_record(out)["errors"]
    by_line = {(e["file"].rsplit("/", 1)[-1], e["line"]): e["message"] for e in errors}
    assert by_line[("corpus.jsonl", 10)].startswith("not JSON")
    assert by_line[("corpus.jsonl", 20)] == "missing or empty id field '_id'"
    assert by_line[("corpus.jsonl", 30)].startswith("duplicate id '")
    assert by_line[("corpus.jsonl", 40)].startswith("not JSON")
    assert (
        by_line[("more.jsonl", 1)].startswith("duplicate id '") and "corpus.jsonl line 2" in by_line[("more.jsonl", 1)]
    )
    assert any(e["message"] == "empty file: no JSON lines" for e in errors)
    snippets = all_snippets(out)
    assert len(snippets) == len({s["id"] for s in snippets})
    # 500 lines, four of them replaced by bad ones (lines 10, 20, 30, 40); more.jsonl's copy dropped
    assert len({s["doc_id"] for s in snippets}) == 496
