"""refkit noise's named rules one by one, without a server: targets and why a question has none, the
aspect frame, several targets tried in turn, swaps over an abbreviation, the one may-answer decision,
the unrelated filter, and the stage and rule a short question's record names."""

from __future__ import annotations

import pytest

from medsnip.queries import QueryItem
from refkit.noise import NoiseOptions, QueryRewriter
from refkit.noise.answers import AnswerTest, decide_lexical, decide_semantic
from refkit.noise.filters import Unrelated, first_refusal
from refkit.noise.records import stop_reason
from refkit.noise.targets import question_phrases
from refkit.text_similarity import TextSimilarity
from refkit.vocabulary.lexicon import Entity, Lexicon
from refkit.vocabulary.matcher import read_aspects

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
    about a drug in a disease ("Is cabozantinib effective ...") is about the drug, asked its efficacy: the disease
    is its situation, written into the aspects that take one, never a subject of its own ("How is hepatocellular
    carcinoma diagnosed?" shares only the disease)."""
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
    assert [(s.text, s.kind, s.asked.name, s.situation) for s in subjects] == [
        ("cabozantinib", "drug", "efficacy", "hepatocellular carcinoma")
    ]
    rewrites = [r for r in rewriter.swap_candidates(claim, analysis) if r.kind == "attribute"]
    asked = {(r.replaced[0]["entity"], r.replaced[0]["to"]) for r in rewrites}
    assert ("cabozantinib", "adverse effects") in asked
    assert not asked & {("cabozantinib", "efficacy"), ("cabozantinib", "indications")}
    assert all(r.replaced[0]["entity"] == "cabozantinib" for r in rewrites)
    assert "What are the adverse effects of cabozantinib in patients with hepatocellular carcinoma?" in [
        r.query for r in rewrites
    ]
    assert "What is the mechanism of action of cabozantinib?" in [r.query for r in rewrites]  # takes no situation
    assert all(r.replaced[0]["text"] in r.query and r.replaced[0]["rule"] == "aspect-question" for r in rewrites)
    causes = QueryItem("s", "Does cabozantinib cause hepatocellular carcinoma?")  # asks an adverse effect
    analysis = rewriter.analyse(causes.query)
    [subject] = rewriter.subjects(causes.query, analysis)
    assert (subject.text, subject.asked.name, subject.situation) == ("cabozantinib", "adverse effects", "")
    rewrites = [r.query for r in rewriter.swap_candidates(causes, analysis) if r.kind == "attribute"]
    assert rewrites and not any("adverse effects" in r or "hepatocellular" in r for r in rewrites)


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
        return {"order": order, "tier": tier_, "document": document, "measured": {"to_original": 0.4}}

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


def test_weak_tiers_only_fill_a_question_up():
    """Texts related by one name, bare definitions and fragments fill a question up to `fill_to` kept, no
    further; texts on the question's subject or situation fill it to `per_query`; a question with too few
    close ones still gets an item's worth of weak ones."""
    from refkit.noise.ranking import choose

    def candidate(order, tier_):
        return {"order": order, "tier": tier_, "document": str(order), "measured": {"to_original": 0.4}}

    close = [candidate(n, n % 2) for n in range(4)]  # tiers 0 and 1
    weak = [candidate(10 + n, 2 + n % 2) for n in range(4)]  # tiers 2 and 3
    kept, aside = choose(close + weak, 5, fill_to=3)
    assert [c["order"] for c in kept] == [0, 2, 1]  # an entity swap's situation text only fills up too
    assert {c["order"]: c["why"] for c in aside} == {
        3: "weak-tier",
        10: "weak-tier",
        12: "weak-tier",
        11: "weak-tier",
        13: "weak-tier",
    }
    same_subject = [candidate(n, 0) for n in range(20, 25)]
    kept, _ = choose(same_subject + close + weak, 5, fill_to=3)  # aspect rewrites' texts fill to per_query
    assert [c["order"] for c in kept] == [0, 2, 20, 21, 22]
    kept, aside = choose(close[:1] + weak, 5, fill_to=3)
    assert [c["order"] for c in kept] == [0, 10, 12]
    kept, aside = choose(close[:1] + weak, 5, fill_to=3, related=False)  # related texts only when asked for
    assert [c["order"] for c in kept] == [0, 11, 13] and {aside[0]["why"], aside[1]["why"]} == {"related"}
    sibling_bare = {**candidate(30, 3), "rewrite_kind": "entity"}
    kept, aside = choose([*close[:1], sibling_bare], 5, fill_to=3)
    assert [c["order"] for c in kept] == [0] and aside[0]["why"] == "bare-sibling"
    kept, _ = choose(close + weak, 5)  # no fill limit: the best five
    assert [c["order"] for c in kept] == [0, 2, 1, 3, 10]
    kept, _ = choose(close + weak, 5, fill_to=0)
    assert [c["order"] for c in kept] == [0, 2]


def test_a_weak_text_far_from_the_question_is_never_kept():
    """A text related to a rewrite by one name and reading far from the original question distracts no one: under
    `weak_floor` it is set aside as `far`; among the weak texts above it the closest to the question come first.
    The close tiers keep their retrieval order whatever their closeness."""
    from refkit.noise.ranking import choose

    def candidate(order, tier_, closeness):
        return {"order": order, "tier": tier_, "document": str(order), "measured": {"to_original": closeness}}

    passed = [
        candidate(0, 0, 0.2),
        candidate(1, 2, 0.30),
        candidate(2, 2, 0.35),
        candidate(3, 2, 0.50),
        candidate(4, 3, 0.60),
    ]
    kept, aside = choose(passed, 5, fill_to=3, weak_floor=0.33)
    assert [c["order"] for c in kept] == [0, 3, 2]
    assert {c["order"]: c["why"] for c in aside} == {1: "far", 4: "weak-tier"}
    kept, _ = choose(passed, 5, fill_to=5)
    assert [c["order"] for c in kept] == [0, 3, 2, 1, 4]


def test_a_same_subject_text_naming_what_the_question_asks_for_may_answer():
    """ "Which disease can be treated using tezepelumab?": a text on tezepelumab's dose that names a disease the
    question does not (severe asthma) may be stating the answer; one naming no disease may not; a question that
    asks for no kind of thing has no such test."""
    from refkit.noise.answers import answer_types
    from refkit.vocabulary.matcher import NameMatcher

    assert answer_types("Which disease can be treated using Tezepelumab?") == {"disease"}
    assert answer_types("What class of drugs frequently causes myopathy?") == {"drug"}
    assert answer_types("Which is the primary enzyme metabolizing esomeprazole?") == {"gene"}
    assert answer_types("What is the mechanism of action of Etesevimab?") == frozenset()
    assert answer_types("What is the incidence of Leigh syndrome?") == frozenset()
    tezepelumab, asthma = Entity("Tezepelumab", "drug"), Entity("Asthma", "disease")
    names = NameMatcher([(e.name, e) for e in (tezepelumab, asthma)])
    dose, effects = ASPECTS["drug", "dosage"], ASPECTS["drug", "adverse effects"]
    swap = {"replaced": None, "target": tezepelumab, "aspect": None, "new_aspect": dose, "subject": tezepelumab}
    question = "Which disease can be treated using Tezepelumab?"
    test = AnswerTest(question, None, entities=names, question_keys=frozenset({tezepelumab.key}))
    measured: dict = {}
    text = "Pharmacokinetic modelling of the tezepelumab dose for patients with severe asthma."
    test.measure_lexical(text, {}, swap, measured)
    assert measured["names_answer_type"] == "asthma"
    assert decide_lexical(measured).test == "names-answer-type"
    measured = {}
    test.measure_lexical("The tezepelumab dose was chosen by pharmacokinetic modelling.", {}, swap, measured)
    assert decide_lexical(measured) is None
    other = AnswerTest("What are the adverse effects of tezepelumab?", None, entities=names)
    measured = {}
    other.measure_lexical(text, {}, {**swap, "new_aspect": effects}, measured)
    assert "names_answer_type" not in measured


def test_what_is_said_of_the_subject_is_not_a_subject_of_its_own():
    """ "Is Satb1 a transcription factor?" asks about Satb1; "a transcription factor" is what is said of it, as
    "a neuroprotective agent" is in "Has hesperidin any role as a neuroprotective agent?"; the agency that
    approves a drug, a kind of variant and a dimension name no subject either."""
    from refkit.noise.subjects import _may_be_subject, _predicate

    satb1 = "Is Satb1 a transcription factor?"
    assert _predicate(satb1, satb1.index("transcription"))
    assert not _predicate(satb1, satb1.index("Satb1"))
    zelda = "Is the zelda transcription factor a chromatin remodeller?"
    assert _predicate(zelda, zelda.index("chromatin"))
    hesperidin = "Has Hesperidin any role as a Neuroprotective Agent?"
    assert _predicate(hesperidin, hesperidin.index("Neuroprotective"))
    claim = "Is cabozantinib effective for hepatocellular carcinoma?"
    assert not _predicate(claim, claim.index("hepatocellular"))
    for question, name in (
        ("Which IDH inhibitors have been approved by the FDA?", "FDA"),
        ("Which database contains regulatory SNPs?", "SNPs"),
        ("What is particular about the 3D structure of the inactive X chromosome?", "3D"),
    ):
        start = question.index(name)
        assert not _may_be_subject(question, start, start + len(name)), name


def test_titles_and_pieces_cut_out_of_running_text_are_bare():
    """A headline (its words capitalised, or a short subtitle after a colon) and a short piece cut out of running
    text say too little about a situation: the ranking keeps them only to fill a question up; a whole sentence,
    an abstract's labelled sentence and a long cut chunk are not bare."""
    from refkit.noise.ranking import text_kind, tier

    headline = "Management of Non-small Cell Lung Cancer Patients with MET Exon 14 Skipping Mutations."
    assert text_kind(headline) == "title"
    subtitled = (
        "Over-expression of the special AT rich sequence binding protein 1 (SATB1) promotes the progression of "
        "nasopharyngeal carcinoma: association with EBV LMP-1 expression."
    )
    assert text_kind(subtitled) == "title"
    cut = (
        "age of 25. Rare variants have been described, such as late-onset Friedreich's ataxia and very-late-onset "
        "Friedreich's ataxia, occurring after 25 and 40 years, r"
    )
    assert text_kind(cut) == "fragment"
    assert tier(text_kind(cut), "attribute", {"names_subject": "Friedreich's ataxia"}) == 3
    labelled = (
        "AIMS: CADISS is a prospective multicentre randomised-controlled trial in acute (within 7 days of onset) "
        "carotid and vertebral artery dissection."
    )
    assert text_kind(labelled) == "sentence"
    colon_in_a_sentence = (
        "Four monoclonal antibodies have been developed: one targeting the calcitonin gene-related peptide "
        "receptor (erenumab) and three targeting the calcitonin gene-related peptide (eptinezumab, fremanezumab, "
        "and galcanezumab)."
    )
    assert text_kind(colon_in_a_sentence) == "description"  # not a title; a description with no finding: bare
    finding = (
        "In the phase 3 trials, erenumab reduced monthly migraine days by 1.4 more than placebo in patients with "
        "episodic migraine."
    )
    assert text_kind(finding) == "sentence" and text_kind(finding + " " + finding) == "passage"
    described = (
        "Dupilumab blocks the alpha subunit of the receptor shared by interleukin-4 and interleukin-13 and so "
        "their signalling."
    )
    assert text_kind(described) == "description"
    assert tier(text_kind(described), "attribute", {"names_subject": "dupilumab"}) == 3
    long_definition = (
        "Tocilizumab is a humanized monoclonal antibody against the interleukin-6 receptor that is approved for "
        "rheumatoid arthritis, giant cell arteritis and the cytokine release syndrome in several countries."
    )
    assert text_kind(long_definition) == "definition"
    chunk = " ".join(["of myocardial infarction, patients with hypertension or chronic IHD including angina"] * 6)
    assert text_kind(chunk) == "description"  # running text with no sentence end is no title; it reports nothing
    approved = (
        "Darolutamide is a novel, nonsteroidal androgen receptor (AR)-signaling inhibitor. It serves as a "
        "second-generation antiandrogen and is currently indicated for the treatment of patients with nonmetastatic "
        "castration-resistant prostate cancer."
    )
    assert text_kind(approved) == "description"  # two sentences saying what it is and is for: no finding


def test_a_frame_that_holds_for_one_member_takes_no_other(lexicon):
    """What a drug is made of, who makes it, that it is approved and which kind of molecule it acts on hold for
    that drug only: "What is the active ingredient of tamoxifen?" has a false premise, so such a question gets
    no entity swap of that entity (its aspect rewrites stay). A yes/no question keeps its approval frame, and
    a swap never writes a word the question already has spelt nearly alike."""
    from refkit.noise.sense import member_frame_problem, repeated_word

    rewriter = QueryRewriter(lexicon, read_aspects())
    for question in (
        "What is the active ingredient of tucatinib?",
        "What clinical applications is tucatinib approved for in the United States?",
        "Which interleukins are affected by tucatinib?",
        "What is the mechanism of action of tucatinib by Array Therapeutics?",
    ):
        query = QueryItem("q", question)
        analysis = rewriter.analyse(question)
        swaps = rewriter.swap_candidates(query, analysis)
        assert not [r for r in swaps if r.kind == "entity"], question
        assert "member-frame" in {r["rule"] for r in analysis.refused_swaps}, question
        assert [r for r in swaps if r.kind == "attribute"], question
    claim = QueryItem("c", "Is tucatinib approved for hepatocellular carcinoma?")
    swaps = rewriter.swap_candidates(claim, rewriter.analyse(claim.query))
    assert "Is lapatinib approved for hepatocellular carcinoma?" in [r.query for r in swaps]
    assert member_frame_problem("Which drugs are approved for spinal muscular atrophy?", "disease") is None
    assert member_frame_problem("What is the target of dupilumab?", "drug") is None
    trial = "Was prehospital transdermal glyceryl trinitrate effective for stroke in the RIGHT-2 trial?"
    assert "RIGHT-2 trial" in member_frame_problem(trial, "disease", trial.index("stroke"))
    assert member_frame_problem("Is aspirin effective for stroke in randomised trials?", "disease") is None
    cholera = "Which was the first cholera vaccine approved in the US?"  # the kind of answer, not a presumption
    assert member_frame_problem(cholera, "drug", cholera.index("cholera")) is None
    radiation = "Can radiation induced meningiomas be treated with radiosurgery?"
    at = (radiation.index("radiosurgery"), len(radiation) - 1)
    assert repeated_word(radiation, at, "cranial irradiation") is None  # a word and its derivative
    assert member_frame_problem("Which is the main component of the Lewy body?", "anatomy").startswith("member-frame")
    statins = "Which drugs cause muscle toxicities such as mysositis and rhabdomyolysis?"
    span = (statins.index("rhabdomyolysis"), statins.index("rhabdomyolysis") + len("rhabdomyolysis"))
    assert repeated_word(statins, span, "myositis").startswith("repeated-word: 'myositis'")
    assert repeated_word(statins, span, "myoglobinuria") is None
    cancers = "Is breast cancer more common than lung cancer?"
    assert repeated_word(cancers, (cancers.index("lung"), len(cancers) - 1), "colon cancer") is None


def test_a_category_of_many_kinds_is_never_swapped_in_for_one():
    """MeSH's "Chromosome Disorders" (60 kinds below it here) beside "Angioedemas, Hereditary": a question about the
    one asked of the category has no answer; the swap is refused as `broad`, a sibling of one kind is kept."""
    kinds = [Entity(f"Chromosome Disorder {n}", "disease", trees=[f"C16.320.180.{n:03d}"]) for n in range(60)]
    lexicon = Lexicon(
        [
            Entity(
                "Angioedemas, Hereditary",
                "disease",
                entry_terms=["Hereditary Angioedema"],
                trees=["C16.320.382"],
                corpus_frequency=9,
            ),
            Entity("Chromosome Disorders", "disease", trees=["C16.320.180"], corpus_frequency=30),
            Entity("Albinisms", "disease", entry_terms=["Albinism"], trees=["C16.320.565"], corpus_frequency=5),
            *kinds,
        ]
    )
    rewriter = QueryRewriter(lexicon, read_aspects())
    query = QueryItem("q", "What is the inheritance pattern of hereditary angioedema?")
    analysis = rewriter.analyse(query.query)
    written = [r.query for r in rewriter.swap_candidates(query, analysis) if r.kind == "entity"]
    assert "What is the inheritance pattern of albinism?" in written
    assert not [w for w in written if "hromosome" in w]
    assert ("Chromosome Disorders", "broad") in {(r["to"], r["rule"]) for r in analysis.refused_swaps}


def test_a_company_is_no_subject_and_a_cell_is_not_asked_what_it_is_made_of():
    from refkit.noise.subjects import Subject, _may_be_subject, aspect_choices

    agios = "Which IDH inhibitors by Agios Pharmaceuticals have been approved by the FDA?"
    start = agios.index("Agios")
    assert not _may_be_subject(agios, start, start + len("Agios Pharmaceuticals"))
    aspects = read_aspects()
    granulocytes = Entity("Granulocytes", "anatomy", trees=["A11.118.637.555.567", "A15.145.229.637.555.567"])
    lewy = Entity("Lewy Bodies", "anatomy", trees=["A11.284.430.214.190.875.564"])
    asked = {
        entity.name: {a.name for a in aspect_choices(Subject(entity.name, 0, 5, entity, "anatomy", "target"), aspects)}
        for entity in (granulocytes, lewy)
    }
    assert "composition" in asked["Lewy Bodies"] and "composition" not in asked["Granulocytes"]
    assert asked["Granulocytes"] - {"composition"} == asked["Lewy Bodies"] - {"composition"}


def test_only_texts_the_name_filters_let_through_are_embedded_ahead():
    """When a candidate reaches the similarity test, its text and those of the next candidates that the text-alone
    filters let through are embedded in one batch; a text those filters refuse is never embedded, and candidates
    already scanned are not scanned again."""
    from types import SimpleNamespace

    from refkit.noise.pipeline import _LookAhead

    class RefusesOffSubject:
        def measure(self, candidate):
            candidate.measured["off"] = "off-subject" in candidate.text

        def decide(self, measured, options):
            return "refused" if measured["off"] else None

    def hit(number, text):
        return SimpleNamespace(id=f"d{number}", title="", content=text)

    texts = ["on subject 0", "off-subject 1", "on subject 2", "off-subject 3", "on subject 4"]
    order = [(1, hit(n, t)) for n, t in enumerate(texts)]
    candidate = lambda number, h: SimpleNamespace(text=h.content, measured={})  # noqa: E731
    ahead = _LookAhead(order, candidate, [RefusesOffSubject()])
    ahead.BATCH = 2
    assert ahead.texts_from(0, None) == ["on subject 0", "on subject 2"]
    assert ahead.texts_from(2, None) == []  # scanned already: its text is embedded
    assert ahead.texts_from(3, None) == ["off-subject 3", "on subject 4"]  # its own text whatever the filters say
