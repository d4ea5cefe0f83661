"""refkit noise's named rules one by one, without a server: targets and why a question has none, the
aspect frame, several targets tried in turn, swaps over an abbreviation, the one may-answer decision,
the unrelated filter, and the stage and rule a short question's record names."""

from __future__ import annotations

import pytest

from medsnip.queries import QueryItem
from refkit.lexicon import Entity, Lexicon
from refkit.matcher import read_aspects
from refkit.noise import NoiseOptions, QueryRewriter
from refkit.noise.answers import AnswerTest, decide_lexical, decide_semantic
from refkit.noise.filters import Unrelated, first_refusal
from refkit.noise.records import stop_reason
from refkit.noise.targets import question_phrases
from refkit.text_similarity import TextSimilarity

ASPECTS = {(a.type, a.name): a for a in read_aspects()}


@pytest.fixture(scope="module")
def lexicon() -> Lexicon:
    """A counted lexicon of real MeSH names and trees (MeSH 2015: C04 neoplasms, C06 liver diseases) and
    INN names, as `refkit lexicon --server` writes one."""
    return Lexicon(
        [
            Entity("cabozantinib", "drug", corpus_frequency=6),
            Entity(
                "Carcinoma, Hepatocellular",
                "disease",
                entry_terms=["Hepatocellular Carcinoma"],
                trees=["C04.557.470.200.240", "C06.301.371.411", "C06.552.697.580"],
                corpus_frequency=40,
            ),
            Entity(
                "Cholangiocarcinoma",
                "disease",
                trees=["C04.557.470.200.220", "C06.130.564.263", "C06.301.371.250"],
                corpus_frequency=12,
            ),
            Entity(
                "Adenoma, Liver Cell",
                "disease",
                trees=["C04.557.470.035.215", "C06.301.371.106", "C06.552.697.160"],
                corpus_frequency=0,
            ),
            Entity("Disease", "disease", trees=["C23.550.288"], corpus_frequency=900),
            Entity("tucatinib", "drug", corpus_frequency=3),
            Entity("lapatinib", "drug", corpus_frequency=9),
        ]
    )


def test_the_targets_and_why_there_is_none(lexicon):
    rewriter = QueryRewriter(lexicon, read_aspects())
    analysis = rewriter.analyse("Is cabozantinib effective for hepatocellular carcinoma (HCC)?")
    assert [t.entity.name for t in analysis.targets] == ["cabozantinib", "Carcinoma, Hepatocellular"]
    assert analysis.targets[1].mention.text == "hepatocellular carcinoma (HCC)"  # its abbreviation goes with it
    generic = rewriter.analyse("Which disease is caused by de novo VPS4A mutations?")
    assert generic.targets == [] and [r["rule"] for r in generic.refused_targets] == ["generic"]
    record = {"targets": [], "refused_targets": generic.refused_targets, "noise": []}
    assert stop_reason(record, 5, 0) == {
        "stage": "targets",
        "rule": "generic",
        "kept": 0,
        "why": "no target: the question's only matches are generic words (Disease): it names no subject",
    }
    nothing = rewriter.analyse("Describe the 4D-CHAINS algorithm")
    assert [r["rule"] for r in nothing.refused_targets] == ["no-mention"]
    # no lexicon entity, but a name: the subject of aspect rewrites once the corpus shows it writes it
    [subject] = rewriter.subjects("Describe the 4D-CHAINS algorithm", nothing)
    assert (subject.text, subject.entity.name, subject.kind, subject.definitional) == (
        "the 4D-CHAINS algorithm",
        "4D-CHAINS",
        "method",
        True,
    )
    unwritten = {"targets": [], "subjects": [], "refused_subjects": [{"rule": "not-in-corpus", "why": "x"}]}
    assert stop_reason({**unwritten, "noise": []}, 5, 0)["stage"] == "subjects"
    absent = Lexicon(
        [
            Entity(
                "Adenoma, Liver Cell",
                "disease",
                entry_terms=["Liver Cell Adenoma"],
                trees=["C04.557.470.035.215"],
                corpus_frequency=0,
            )
        ]
    )
    unserved = QueryRewriter(absent, read_aspects()).analyse("Is liver cell adenoma hereditary?")
    assert [r["rule"] for r in unserved.refused_targets] == ["not-in-corpus"]


def test_a_target_without_a_swap_hands_over_to_the_next(lexicon):
    """cabozantinib has no INN sibling the corpus names: the rewrite swaps the question's disease instead,
    abbreviation and all; the sibling the corpus never names is refused and the record says so."""
    alone = Lexicon([e for e in lexicon.entities.values() if e.name not in ("tucatinib", "lapatinib")])
    rewriter = QueryRewriter(alone, read_aspects())
    query = QueryItem("q", "Is cabozantinib effective for hepatocellular carcinoma (HCC)?")
    analysis = rewriter.analyse(query.query)
    rewrites = [r for r in rewriter.rewrites(query, analysis, NoiseOptions(seed=1)) if r.kind == "entity"]
    assert [r.query for r in rewrites] == ["Is cabozantinib effective for cholangiocarcinoma?"]
    assert rewrites[0].target == 1 and rewrites[0].replaced[0]["rule"] == "tree-sibling"
    assert {(r["to"], r["rule"]) for r in analysis.refused_swaps} >= {("Adenoma, Liver Cell", "not-in-corpus")}


def test_an_aspect_rewrite_keeps_the_subject_and_asks_another_aspect(lexicon):
    """CRAB's aspect replacement: the subject as the question writes it, asked another aspect of its kind;
    never the aspect asked, nor one close to it (indications answer a question about efficacy). A claim
    about a drug in a disease ("Is cabozantinib effective ...") asks the drug's efficacy and the disease's
    treatment; neither is asked again."""
    rewriter = QueryRewriter(lexicon, read_aspects())
    query = QueryItem("q", "What is the mechanism of action of tucatinib?")
    analysis = rewriter.analyse(query.query)
    swaps = rewriter.swap_candidates(query, analysis)
    aspect_questions = [r.query for r in swaps if r.kind == "attribute"]
    assert "What are the adverse effects of tucatinib?" in aspect_questions
    assert "What is the mechanism of action of tucatinib?" not in aspect_questions
    assert "What is the mechanism of action of lapatinib?" in [r.query for r in swaps if r.kind == "entity"]
    claim = QueryItem("c", "Is cabozantinib effective for the treatment of hepatocellular carcinoma?")
    analysis = rewriter.analyse(claim.query)
    subjects = rewriter.subjects(claim.query, analysis)
    asked = {s.text: (s.kind, s.asked.name) for s in subjects}
    assert asked == {"hepatocellular carcinoma": ("disease", "treatment"), "cabozantinib": ("drug", "efficacy")}
    rewrites = [r for r in rewriter.swap_candidates(claim, analysis) if r.kind == "attribute"]
    asked = {(r.replaced[0]["entity"], r.replaced[0]["to"]) for r in rewrites}
    assert ("cabozantinib", "adverse effects") in asked and ("Carcinoma, Hepatocellular", "diagnosis") in asked
    assert not asked & {("cabozantinib", "efficacy"), ("cabozantinib", "indications")}
    assert ("Carcinoma, Hepatocellular", "treatment") not in asked
    assert all(r.replaced[0]["text"] in r.query and r.replaced[0]["rule"] == "aspect-question" for r in rewrites)


def test_may_answer_is_one_decision_on_what_was_measured(lexicon):
    """An entity swap's candidate naming the replaced drug may answer; an aspect swap's candidate about the
    drug but not the new aspect may answer; one reading as close to the original as an answer does may
    answer; the thresholds decide from the record alone."""
    similarity = TextSimilarity()
    tucatinib, lapatinib = lexicon.get("tucatinib"), lexicon.get("lapatinib")
    mechanism, effects = ASPECTS["drug", "mechanism of action"], ASPECTS["drug", "adverse effects"]
    test = AnswerTest("What is the mechanism of action of tucatinib?", similarity)
    entity_swap = {"replaced": tucatinib, "target": tucatinib, "aspect": mechanism, "new_aspect": None}
    measured: dict = {}
    test.measure_lexical("Tucatinib is a HER2 kinase inhibitor.", {}, entity_swap, measured)
    assert decide_lexical(measured).test == "names-target"
    aspect_swap = {"replaced": None, "target": tucatinib, "aspect": mechanism, "new_aspect": effects}
    measured = {}
    test.measure_lexical("Tucatinib was approved in 2020 for breast cancer.", {}, aspect_swap, measured)
    assert decide_lexical(measured).test == "not-the-new-aspect"
    measured = {}
    test.measure_lexical("Diarrhea was the most common adverse effect of tucatinib.", {}, aspect_swap, measured)
    assert decide_lexical(measured) is None
    measured = {}
    test.measure_semantic(
        "Lapatinib inhibits HER2 and EGFR tyrosine kinases.", "What is the mechanism of action of lapatinib?", measured
    )
    assert measured["to_rewrite"] > measured["to_original"]
    options = NoiseOptions()
    assert decide_semantic(measured, options) is None
    assert decide_semantic({**measured, "to_original": 0.7}, options).test == "ceiling"
    assert decide_semantic({"to_original": 0.40, "to_rewrite": 0.30}, options).test == "closer-to-original"
    assert lapatinib.name == "lapatinib"


def test_unrelated_keeps_texts_on_the_question_s_subject_or_situation():
    """A kept text names an entity of the question the rewrite kept or the one put in, and reads close enough
    to the rewrite; one that shares only a phrase of the question ("bladder cancer") or reads close without
    naming anything is easy noise, refused unless --similarity-floor is lowered."""
    assert question_phrases("Is avelumab effective for bladder cancer?", [(3, 11)]) == ["bladder cancer"]
    options = NoiseOptions()
    base = {"to_original": 0.30, "collected": False}
    named = {**base, "to_rewrite": 0.42, "names": {"kept": [], "put_in": ["durvalumab"], "phrases": []}}
    assert first_refusal(named, options) is None
    phrase = {**base, "to_rewrite": 0.42, "names": {"kept": [], "put_in": [], "phrases": ["bladder cancer"]}}
    assert first_refusal(phrase, options).test == "similarity-floor"
    far = {**base, "to_rewrite": 0.46, "names": {"kept": [], "put_in": [], "phrases": []}}
    assert first_refusal(far, options).rule == "unrelated" and first_refusal(far, options).test == "similarity-floor"
    assert Unrelated.decide(far, NoiseOptions(similarity_floor=0.45)) is None


def test_a_short_question_names_its_stage_and_rule():
    rejected = [{"rule": "unrelated", "test": "similarity-floor"}] * 5 + [{"rule": "may-answer", "test": "ceiling"}]
    record = {"targets": [{}], "rewrites": [{}], "noise": [{}], "rejected": rejected, "refused_swaps": []}
    stop = stop_reason(record, 5, 3)
    assert (stop["stage"], stop["rule"], stop["kept"]) == ("filters", "unrelated", 1)
    assert "5 by unrelated (similarity-floor 5)" in stop["why"]
    unsupported = {
        "targets": [{}],
        "rewrites": [],
        "noise": [],
        "rejected": [],
        "refused_swaps": [{"rule": "unsupported"}, {"rule": "not-in-corpus"}],
    }
    assert stop_reason(unsupported, 5, 2)["stage"] == "support"
    no_swap = {
        "targets": [{}],
        "rewrites": [],
        "noise": [],
        "rejected": [],
        "refused_swaps": [{"rule": "no-tree-place", "why": "no-tree-place: Leigh syndrome has none"}],
    }
    assert stop_reason(no_swap, 5, 0) == {
        "stage": "swaps",
        "rule": "no-tree-place",
        "kept": 0,
        "why": "no swap: no-tree-place: Leigh syndrome has none",
    }
    assert stop_reason({"noise": [{}] * 5}, 5, 3) is None


def test_ranking_keeps_the_closest_kinds_and_one_chunk_per_document():
    """Same-subject texts before the swapped-in entity in the question's situation, before texts related by a
    name only; a bare definition or a fragment last; never two chunks of one document."""
    from refkit.noise.ranking import choose, text_kind, tier

    assert text_kind("Kearns-Sayre syndrome is a mitochondrial disorder.") == "fragment"
    definition = (
        "Anlotinib is an oral small molecule inhibitor of multiple receptor tyrosine kinases with broad effects."
    )
    assert text_kind(definition) == "definition"
    sentence = "Grade 3 hypertension occurred in 12 of 40 patients treated with cabozantinib for renal cell carcinoma."
    assert text_kind(sentence) == "sentence" and text_kind(sentence + " " + sentence) == "passage"
    assert tier("sentence", "attribute", {"names_subject": "cabozantinib"}) == 0
    assert tier("sentence", "entity", {"names": {"put_in": ["Anlotinib"], "kept": ["HCC"]}}) == 1
    assert tier("sentence", "entity", {"names": {"put_in": ["Anlotinib"], "kept": []}}) == 2
    assert tier("definition", "attribute", {"names_subject": "cabozantinib"}) == 3

    def candidate(order, tier_, document):
        return {"order": order, "tier": tier_, "document": document}

    passed = [
        candidate(0, 3, "a"),
        candidate(1, 2, "b"),
        candidate(2, 0, "c"),
        candidate(3, 0, "c"),
        candidate(4, 1, "d"),
    ]
    kept, aside = choose(passed, 3)
    assert [(c["order"], c["tier"]) for c in kept] == [(2, 0), (4, 1), (1, 2)]
    assert {c["order"]: c["why"] for c in aside} == {3: "same-document", 0: "outranked"}
