"""refkit's corpus-backed and calibrated noise rules on real texts: a swap is kept only where a retrieved
text names the swapped-in concept with what the question keeps (refkit.noise.support); the unrelated filter's floors
and the answer-likeness ceiling hold on labelled pairs (refkit.noise.options); an aspect in a headline is
never swapped, and in a vocabulary with trees an entity the trees do not place gets no swap
(refkit.noise.sense, refkit.noise). No server: real snippets as the hits a search returns."""

from __future__ import annotations

import random

import numpy as np
import orjson
import pytest

from conftest import SAMPLES
from medsnip.irformats import read_qrels
from medsnip.queries import QueryItem, query_texts
from medsnip.v1 import search_pb2
from refkit.noise import NoiseOptions, QueryRewriter
from refkit.noise.options import ENTITY_FLOOR, GOLD_CEILING, SIMILARITY_FLOOR
from refkit.noise.sense import aspect_position_problem
from refkit.noise.support import SupportTest, aspect_evidence, entity_evidence
from refkit.text_similarity import TextSimilarity
from refkit.vocabulary.lexicon import Entity
from refkit.vocabulary.matcher import read_aspects
from refkit.vocabulary.mesh_names import read_mesh_names

IR = SAMPLES / "ir"
ULCERATIVE_COLITIS = Entity("Colitis, Ulcerative", "disease", entry_terms=["Ulcerative Colitis"])
PYOSTOMATITIS = Entity("Pyostomatitis Vegetans", "disease")


def corpus(folder: str) -> dict[str, str]:
    rows = map(orjson.loads, (IR / folder / "corpus.jsonl").read_bytes().splitlines())
    return {r["_id"]: f"{r['title']} {r['text']}".strip() for r in rows}


def relevant_ids(folder: str) -> dict[str, list[str]]:
    """Each query's relevant ids, in qrels order."""
    judged = read_qrels(IR / folder / "qrels.tsv")
    return {query_id: docs for query_id, grades in judged.items() if (docs := [d for d, g in grades.items() if g > 0])}


def hits(texts: list[str]) -> list:
    return [search_pb2.Hit(id=f"hit-{rank}", rank=rank, content=text) for rank, text in enumerate(texts, 1)]


@pytest.fixture(scope="module")
def bioasq() -> dict[str, str]:
    return corpus("bioasq-beir")


def test_a_swap_is_supported_by_a_text_naming_the_sibling_with_what_the_question_keeps(bioasq):
    """BioASQ asks about pyostomatitis vegetans and Crohn's disease; ulcerative colitis is a sibling. A
    calprotectin study names ulcerative colitis but not the question's other disease: at most support
    `alone`; a gold snippet naming both is support `paired`, preferred wherever it ranks."""
    rewrite = "Is there an association between pyostomatitis vegetans and ulcerative colitis?"
    evidence = entity_evidence([ULCERATIVE_COLITIS], [PYOSTOMATITIS], "en")
    calprotectin = corpus("pubmedqa-beir")["18802997"]
    test = SupportTest(TextSimilarity())
    alone = test.check(rewrite, evidence, hits([calprotectin]))
    assert not alone["supported"] or alone["level"] == "alone"
    nothing = test.check(rewrite, evidence, hits([bioasq["2037493-a330"].replace("ulcerative colitis", "it")]))
    assert nothing == {"supported": False, "why": "no text retrieved for it names Colitis, Ulcerative"}
    found = test.check(rewrite, evidence, hits([calprotectin, bioasq["2037493-a330"]]))
    assert found["supported"] and found["level"] == "paired" and found["snippet_id"] == "hit-2" and found["rank"] == 2
    assert found["names"] == ["pyostomatitis vegetans", "ulcerative colitis"] and found["similarity"] >= ENTITY_FLOOR
    # naming both is not enough when the text reads far from the rewrite
    far = SupportTest(TextSimilarity(), floor=0.99).check(rewrite, evidence, hits([bioasq["2037493-a330"]]))
    assert not far["supported"] and far["why"].startswith("1 retrieved texts name Colitis, Ulcerative with")
    assert (
        SupportTest(TextSimilarity(), alone_floor=0.99).check(rewrite, evidence, hits([calprotectin]))["supported"]
        is False
    )


def test_an_aspect_swap_needs_a_text_naming_the_entity_with_the_new_aspect():
    aspects = {a.name: a for a in read_aspects()}
    evidence = aspect_evidence(aspects["risk factors"], ULCERATIVE_COLITIS, "en")
    texts = [
        "Smoking is a well-known protective factor, and appendectomy a risk factor for ulcerative colitis.",
        "Risk factors for colorectal cancer include age and family history.",
    ]
    found = SupportTest(TextSimilarity()).check(
        "What are the risk factors for ulcerative colitis?", evidence, hits(texts)
    )
    assert found["supported"] and found["rank"] == 1
    refused = SupportTest(TextSimilarity()).check(
        "What are the risk factors for ulcerative colitis?", evidence, hits(texts[1:])
    )
    assert not refused["supported"]


def test_the_floors_and_the_gold_ceiling_hold_on_labelled_pairs(bioasq):
    """A question and another question's relevant text fall below the entity floor in 99% of PubMedQA
    pairs and below the similarity floor in 99% of BioASQ pairs; two gold snippets of one BioASQ question
    reach the gold ceiling far more often than gold snippets of two questions (0.3% of pairs)."""
    similarity = TextSimilarity()
    for folder, floor in (("pubmedqa-beir", ENTITY_FLOOR), ("bioasq-beir", SIMILARITY_FLOOR)):
        questions, texts = query_texts(IR / folder / "queries.tsv"), corpus(folder)
        relevant = {query_id: docs[0] for query_id, docs in relevant_ids(folder).items() if query_id in questions}
        chosen = sorted(relevant)[:90]
        scores = (
            similarity.vectors([questions[q] for q in chosen])
            @ similarity.vectors([texts[relevant[q]] for q in chosen]).T
        )
        mismatched = scores[~np.eye(len(chosen), dtype=bool)]
        assert (mismatched < floor).mean() >= 0.99, folder
        assert np.median(np.diag(scores)) >= 0.6, folder  # answers score far above the floors
    gold = relevant_ids("bioasq-beir")
    chosen = sorted(gold)[:30]
    ids = sorted({d for q in chosen for d in gold[q]})
    vectors = dict(zip(ids, similarity.vectors([bioasq[d] for d in ids]), strict=True))
    same = [float(vectors[a] @ vectors[b]) for q in chosen for i, a in enumerate(gold[q]) for b in gold[q][i + 1 :]]
    rng = random.Random(26)
    other = [
        float(vectors[rng.choice(gold[a])] @ vectors[rng.choice(gold[b])])
        for a, b in (rng.sample(chosen, 2) for _ in range(5_000))
    ]
    assert np.mean(np.array(same) >= GOLD_CEILING) >= 0.5
    assert np.mean(np.array(other) >= GOLD_CEILING) <= 0.01


def test_an_aspect_in_a_headline_is_never_swapped():
    headline = "Longer term quality of life and outcome in stroke patients: is the Barthel index an adequate measure?"
    start = headline.index("outcome")
    problem = aspect_position_problem(
        headline, (start, start + len("outcome")), [(headline.index("stroke"), headline.index(" patients"))]
    )
    assert problem and problem.startswith("aspect-position: 'outcome' is in the headline")
    subject = "Spinal subdural hematoma: a sequela of a ruptured intracranial aneurysm?"  # no question after the colon
    start = subject.index("sequela")
    entity = subject.index("intracranial aneurysm")
    assert aspect_position_problem(subject, (start, start + 7), [(entity, entity + 21)]) is None


def test_with_trees_an_entity_the_trees_do_not_place_gets_no_swap():
    """Barium Enema has no tree number in the shipped MeSH 2015 trees: names alone once swapped it for
    Bariatric Surgery. Now it gets no entity swap, and the refusal says why."""
    rewriter = QueryRewriter(read_mesh_names(), read_aspects())
    query = QueryItem("12840442", "Double reading of barium enemas: is it necessary?")
    analysis = rewriter.analyse(query.query)
    assert analysis.entity.payload.name == "Barium Enema" and not analysis.entity.payload.trees
    assert not [r for r in rewriter.rewrites(query, analysis, NoiseOptions(seed=13)) if r.kind != "attribute"]
    assert any(
        r["rule"] == "no-tree-place" and r["why"].startswith("no-tree-place: Barium Enema has no MeSH tree")
        for r in analysis.refused_swaps
    )
