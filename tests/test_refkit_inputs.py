"""refkit's inputs and scoring without a server: real question sets through their field mapping, bad query
files named by line and field, citations parsed and scored against F1 by hand, deduplication, the phrase
matcher."""

from __future__ import annotations

import json
import time

import pytest
from refkit_kit import BEIR, IR, RISPERIDONE

from conftest import SAMPLES
from medsnip.jsonl import InputFileError
from medsnip.queries import QueryFileError, read_query_file
from refkit.curation.dedup import Deduplicator, jaccard, shingles
from refkit.curation.score import Citations, parse_citations, read_responses, score
from refkit.vocabulary.matcher import PhraseMatcher

# -- query files --


def test_reads_the_real_question_sets_through_their_field_mapping():
    pubmedqa = read_query_file(IR / "pubmedqa_test_set.json")
    assert len(pubmedqa) == 500 and pubmedqa[0].id == "12377809"
    assert pubmedqa[0].query == "Is anorectal endosonography valuable in dyschesia?"
    bioasq = read_query_file(IR / "bioasq_10B1_golden.json")
    assert bioasq[0].id == "61f80d5d882a024a1000003c"
    assert bioasq[0].query == "Do only changes in coding regions of MEF2C cause developmental disorders?"
    medqa = read_query_file(IR / "medqa_us_4options_test.jsonl")
    assert len(medqa) == 1273 and medqa[56].id == RISPERIDONE[0] and medqa[56].query == RISPERIDONE[1]
    assert [q.id for q in read_query_file(BEIR / "queries.tsv", limit=2)] == ["12377809", "26163474"]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("q.jsonl", '{"id": "1", "query": "ok"}\n{"query": "no id"}\n', "q.jsonl:2: missing id"),
        ("q.jsonl", '{"id": "1", "query": "ok"}\n{"id": "2", "query": "  "}\n', "q.jsonl:2: empty query (id 2)"),
        ("q.jsonl", '{"id": "1", "query": "ok"}\n{"id": "1", "query": "again"}\n', "q.jsonl:2: duplicate id 1"),
        ("q.jsonl", '{"id": "1", "query": "ok"}\n{"id": "2", "query": \n', "q.jsonl:2: not JSON"),
        ("q.jsonl", '{"id": "1", "title": "no query field"}\n', "q.jsonl:1: no 'query' field"),
        ("q.tsv", "1\tfine\n2\n", "q.tsv:2: expected 'id<TAB>query'"),
        ("q.tsv", "1\tfine\n2\taspirin\tand heart attack\n", "q.tsv:2: expected 'id<TAB>query', found 3 columns"),
        ("q.tsv", "1\tfine\nq 2\taspirin\n", "q.tsv:2: id 'q 2' has whitespace in it"),
        ("q.tsv", "1\tfine\n2\t\u200b\n", "q.tsv:2: query 2 has no letter or digit in it"),
        ("q.tsv", b"".join(b"%d\tfine\n" % i for i in range(3000)) + b"x\tcaf\xe9\n", "q.tsv:3001: not UTF-8 text"),
    ],
)
def test_bad_query_files_name_the_line_and_field(tmp_path, name, text, message):
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(QueryFileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_query_file(path)


# -- scoring --


def test_citation_parsing():
    cited = parse_citations("As shown [1], and [2, 3]; also [5-7][4] and [9\u201310].").cited
    assert cited == [1, 2, 3, 5, 6, 7, 4, 9, 10]
    assert parse_citations("No citations [a], [see 2] or [] here.") == Citations([], [])
    assert parse_citations("[3] again [3] and [2-3], [1,]").cited == [3, 2, 1]


def test_invalid_citations_are_reported_not_collapsed():
    """Before: [1-999999] and [3-1] became one citation each, [-1] vanished, [1-1000] repeated through a
    long response took minutes."""
    refs = {1, 2, 3, 4, 5}
    assert parse_citations("see [3-1] and [-1] and [2]", refs) == Citations([2], ["3-1", "-1"])
    assert parse_citations("all of them [1-999999]", refs) == Citations([1, 2, 3, 4, 5], ["1-999999"])
    assert parse_citations("[0], [9], [4-7], [1 - 2]", refs) == Citations([4, 5, 1, 2], ["0", "9", "4-7"])
    assert parse_citations("[1-999999]") == Citations([], ["1-999999"])  # unknown references: capped
    long_response = "Evidence [1-1000] shows [2-999999] that. " * 20_000  # ~800 KB
    started = time.perf_counter()
    assert parse_citations(long_response, refs) == Citations([1, 2, 3, 4, 5], ["1-1000", "2-999999"])
    assert time.perf_counter() - started < 5  # linear: well under a second here


def test_full_width_citations_precision_recall_and_categories():
    """Chinese answers cite with 【1】 or ［１，２］; each class gets precision and recall beside its F1;
    items with a `category` are also scored per category."""
    assert parse_citations("参见【1】和［２，3］，以及〖4-5〗。", {1, 2, 3, 4, 5}).cited == [1, 2, 3, 4, 5]
    key = {"1": {"label": "relevant"}, "2": {"label": "relevant"}, "3": {"label": "irrelevant"}}
    items = [
        {"id": "a", "category": "drug", "references": [{"number": n} for n in (1, 2, 3)], "answer_key": key},
        {"id": "b", "category": "disease", "references": [{"number": n} for n in (1, 2, 3)], "answer_key": key},
    ]
    result = score(items, {"a": "【1】【3】", "b": "[1][2]"})
    relevant = result["overall"]["relevant_class"]  # cited 1,3 and 1,2: 3 of 4 citations relevant, 3 of 4 found
    assert relevant == {"precision": 0.75, "recall": 0.75, "f1": 0.75}
    irrelevant = result["overall"]["irrelevant_class"]  # not cited: 2 (relevant) and 3 (irrelevant)
    assert irrelevant == {"precision": 0.5, "recall": 0.5, "f1": 0.5}
    assert result["per_category"]["drug"]["relevant_class"]["precision"] == 0.5
    assert result["per_category"]["disease"]["curation_efficiency"] == 1.0


def test_duplicate_and_unknown_response_ids_are_reported(tmp_path):
    items = [{"id": "a", "references": [{"number": 1}], "answer_key": {"1": {"label": "relevant"}}}]
    responses = tmp_path / "responses.jsonl"
    responses.write_text('{"id": "a", "response": "[1]"}\n{"id": "zz", "response": "[1]"}\n')
    result = score(items, read_responses(responses))
    assert result["unknown_responses"] == ["zz"] and result["per_query"][0]["cited"] == [1]
    responses.write_text('{"id": "a", "response": "[1]"}\n{"id": "a", "response": "none"}\n')
    with pytest.raises(InputFileError, match="responses.jsonl:2: duplicate response id a \\(first at line 1\\)"):
        read_responses(responses)


def test_scores_match_f1_computed_by_hand():
    """Two items. Item a: refs 1,2 relevant, 3,4,5 irrelevant; cites [1][3]. Item b: 1 relevant, 2 irrelevant;
    cites nothing.
    Pooled: relevant cited 1 (a1), relevant uncited 2 (a2, b1), irrelevant cited 1 (a3), irrelevant uncited 3.
      Relevance F1 = 2*1 / (2*1 + 1 + 2) = 0.4; Irrelevance F1 = 2*3 / (2*3 + 2 + 1) = 6/9; macro = (0.4+6/9)/2.
    Item a alone: relevance 2/(2+1+1) = 0.5, irrelevance 2*2/(4+1+1) = 2/3.
    Item b alone: relevance 0/(0+0+1) = 0, irrelevance 2*1/(2+1+0) = 2/3."""
    items = [
        {
            "id": "a",
            "references": [{"number": n} for n in range(1, 6)],
            "answer_key": {
                "1": {"label": "relevant"},
                "2": {"label": "relevant"},
                "3": {"label": "irrelevant"},
                "4": {"label": "irrelevant"},
                "5": {"label": "irrelevant"},
            },
        },
        {
            "id": "b",
            "references": [{"number": 1}, {"number": 2}],
            "answer_key": {"1": {"label": "relevant"}, "2": {"label": "irrelevant"}},
        },
    ]
    result = score(items, {"a": "Answer [1][3], see also [9].", "b": "I cannot tell."})
    overall = result["overall"]
    assert overall["relevance_precision"] == pytest.approx(0.4)
    assert overall["irrelevance_suppression"] == pytest.approx(6 / 9)
    assert overall["curation_efficiency"] == pytest.approx((0.4 + 6 / 9) / 2)
    a, b = result["per_query"]
    assert (a["relevance_precision"], a["irrelevance_suppression"]) == (pytest.approx(0.5), pytest.approx(2 / 3))
    assert a["cited"] == [1, 3] and a["invalid_citations"] == ["9"]
    assert (b["relevance_precision"], b["irrelevance_suppression"]) == (0.0, pytest.approx(2 / 3))
    assert result["mean_per_query"]["relevance_precision"] == pytest.approx(0.25)


# -- dedup and matching --


def test_dedup_exact_near_and_overlapping_chunks():
    corpus = [json.loads(line) for line in (BEIR / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:40]]
    first, second = corpus[0]["text"], corpus[1]["text"]
    words = first.split()
    edited = " ".join(words[:-3] + ["entirely", "different", "ending."])  # a few words changed: near duplicate
    assert jaccard(shingles(first, 3), shingles(edited, 3)) >= 0.8
    dedup = Deduplicator(threshold=0.8)
    assert dedup.offer("a", first) is None
    assert dedup.offer("b", second) is None
    exact = dedup.offer("c", "  " + first.upper() + " ")  # case and spacing only
    assert (exact.of, exact.kind) == ("a", "exact")
    near = dedup.offer("d", edited)
    assert (near.of, near.kind) == ("a", "near") and 0.8 <= near.jaccard < 1.0
    for record in corpus[2:]:  # 38 different real abstracts: none is a duplicate of another
        assert dedup.offer(record["_id"], record["text"]) is None
    # consecutive 1000-character chunks of one real textbook overlap by 200 characters: not duplicates
    book = (SAMPLES / "textbooks" / "books" / "InternalMed_Harrison.txt").read_text(encoding="utf-8")
    chunks = [book[i : i + 1000] for i in range(0, len(book) - 1000, 800)]
    assert len(chunks) >= 10
    chunk_dedup = Deduplicator()
    assert all(chunk_dedup.offer(str(n), chunk) is None for n, chunk in enumerate(chunks))


def test_phrase_matcher_is_whole_word_case_insensitive_and_longest():
    matcher = PhraseMatcher([("carcinoma", "short"), ("non-small cell lung carcinoma", "long"), ("dose", "dose")])
    found = matcher.find("Chemotherapy in advanced Non-Small Cell Lung Carcinoma: dosed or dose-dense?")
    assert [(m.text, m.payload) for m in found] == [("Non-Small Cell Lung Carcinoma", "long"), ("dose", "dose")]
