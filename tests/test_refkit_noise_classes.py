"""What makes refkit noise hard to a strict reader, rule by rule and without a server: swaps within one class (an
antibody by its target syllable, a drug by its most specific action, a disease within its kind and organ system),
premises an entity swap may not carry, the answer-type word that is never a target, the stop that names a subject
no served text names, the may-answer test of a drug's efficacy in any situation, and the audit's checks of the
same."""

from __future__ import annotations

from medsnip.queries import QueryItem
from refkit.noise import QueryRewriter
from refkit.noise.answers import decide_lexical
from refkit.noise.checks import answer_type_targets, frame_problems, hidden_absence, swap_class_problem
from refkit.noise.premises import carried_premises, premise_problem
from refkit.noise.records import stop_reason
from refkit.vocabulary.drug_stems import antibody_class, drug_class
from refkit.vocabulary.lexicon import Entity, Lexicon
from refkit.vocabulary.matcher import read_aspects


def test_an_antibody_s_class_is_its_target_syllable_never_the_bare_mab():
    """WHO's target syllables: toci-li-zumab and pembro-li-zumab are immunomodulating, ri-tu-ximab and the
    bispecific glofi-ta-mab are tumour antibodies, ere-n-umab a neural one; "-mab" alone says only "antibody"."""
    assert antibody_class("tocilizumab") == antibody_class("pembrolizumab") == "immunomodulating"
    assert antibody_class("rituximab") == antibody_class("glofitamab") == "tumour"
    assert antibody_class("erenumab") == "neural" and antibody_class("denosumab") == "bone"
    assert antibody_class("aspirin") is None and antibody_class("treatment") is None
    assert drug_class("rituximab") != drug_class("erenumab")
    assert drug_class("losartan").startswith("INN stem -sartan:")
    assert drug_class("imatinib").startswith("INN stem -tinib:")


def test_a_disease_is_swapped_only_within_its_kind_and_organ_system():
    """Two urea-cycle disorders are siblings (one MeSH parent, both metabolic diseases); a muscular dystrophy filed
    under the same congenital branch is not (no organ system in common); a parent with 60 or more children is a
    branch, not a kind. Each swap records the class that justified it."""
    urea_cycle = "C16.320.565.100"
    entities = [
        Entity("Citrullinemia", "disease", trees=[f"{urea_cycle}.300", "C18.452.648.100.300"], corpus_frequency=4),
        Entity("Argininosuccinic Aciduria", "disease", trees=[f"{urea_cycle}.200", "C18.452.648.100.200"]),
        Entity("Muscular Dystrophy, Tibial", "disease", trees=[f"{urea_cycle}.700", "C05.651.534.500.700"]),
    ]
    for entity in entities[1:]:
        entity.corpus_frequency = 3
    crowd = [Entity(f"Syndrome {n}", "disease", trees=[f"C10.228.{n:03d}"], corpus_frequency=2) for n in range(61)]
    rewriter = QueryRewriter(Lexicon([*entities, *crowd]), read_aspects())
    found = rewriter.entity_candidates(entities[1], set())
    assert [(e.name, rule) for e, rule in found] == [("Citrullinemia", "tree-sibling")]
    assert rewriter.siblings.class_of(entities[1], entities[0], "tree-sibling") == (
        f"MeSH parent: {urea_cycle}, C18.452.648.100"
    )
    refused = []
    assert rewriter.entity_candidates(crowd[0], set(), refused) == []
    assert [r["rule"] for r in refused] == ["no-sibling"]


def test_a_drug_shares_its_most_specific_action_not_a_broad_one():
    """losartan -> valsartan by the angiotensin receptor blockers it shares; never -> atenolol by the
    antihypertensive agents that are the blockers' ancestor in MeSH."""
    from refkit.vocabulary.mesh_names import read_mesh_names

    mesh = read_mesh_names()
    rewriter = QueryRewriter(mesh, read_aspects())
    losartan = mesh.get("Losartan")
    specific = rewriter.siblings.specific_actions(losartan)
    assert "angiotensin ii type 1 receptor blockers" in specific and "antihypertensive agents" not in specific
    names = {e.name for e, rule in rewriter.entity_candidates(losartan, set()) if rule == "pharmacological-action"}
    assert "Atenolol" not in names


def test_a_swap_may_not_carry_a_premise_no_text_states_of_the_new_entity():
    """ "the 4 types of holoprosencephaly" -> "the 4 types of microcephaly" presumes a count the new entity may not
    have; the swap is kept only if a retrieved text naming it states the count (or the triad, or the feature word
    right before its name)."""
    question = "What are the 4 types of holoprosencephaly?"
    start = question.index("holoprosencephaly")
    premises = carried_premises(question, (start, start + len("holoprosencephaly")))
    assert [(p.kind, p.words) for p in premises] == [("count", "4 types")]
    microcephaly = Entity("Microcephaly", "disease")
    silent = ["Microcephaly is a small head circumference at birth.", "There are 4 types of holoprosencephaly."]
    assert premise_problem(premises, microcephaly, silent).startswith("premise:")
    assert premise_problem(premises, microcephaly, ["Four forms exist; 4 types of microcephaly are known."]) is None
    triad = "What is the classic triad of Kearns-Sayre syndrome?"
    start = triad.index("Kearns")
    premises = carried_premises(triad, (start, len(triad) - 1))
    assert [(p.kind, p.words) for p in premises] == [("set", "triad")]
    adult = "Which genes are mutated in adult diffuse glioma?"
    start = adult.index("glioma")
    [feature] = carried_premises(adult, (start, start + len("glioma")))
    assert feature.words == "adult diffuse"
    astrocytoma = Entity("Astrocytoma", "disease")
    assert premise_problem([feature], astrocytoma, ["Pediatric astrocytoma and adult glioma differ."])
    assert premise_problem([feature], astrocytoma, ["IDH-mutant adult diffuse astrocytoma progresses."]) is None


def test_what_a_question_asks_for_is_no_target_and_a_stop_names_a_subject_the_corpus_lacks():
    lexicon = Lexicon(
        [
            Entity("Genes", "gene", trees=["G05.360.340"], corpus_frequency=800),
            Entity("Cystic Fibrosis", "disease", trees=["C16.320.190"], corpus_frequency=0),
        ]
    )
    rewriter = QueryRewriter(lexicon, read_aspects())
    query = QueryItem("cf", "Which gene is mutated in cystic fibrosis?")
    analysis = rewriter.analyse(query.query)
    assert analysis.targets == []
    assert {r["entity"]: r["rule"] for r in analysis.refused_targets} == {
        "Genes": "answer-type",
        "Cystic Fibrosis": "not-in-corpus",
    }
    record = {"query": query.query, **analysis.as_dict(), "subjects": [], "noise": [], "rewrites": []}
    stop = stop_reason(record, 5, 0)
    assert (stop["stage"], stop["rule"]) == ("targets", "not-in-corpus") and "cystic fibrosis" in stop["why"]
    assert hidden_absence({**record, "stopped": stop}) is None
    hiding = {**record, "stopped": {"stage": "targets", "rule": "answer-type", "why": "..."}}
    assert "in no served text" in hidden_absence(hiding)
    targeted = {"query": query.query, "targets": [{"text": "gene", "span": [6, 10]}]}
    assert answer_type_targets(targeted) == ["gene"]


def test_a_drug_s_efficacy_is_answered_in_any_situation():
    """A text found for another aspect of cabozantinib that reports its efficacy answers "Is cabozantinib effective
    for hepatocellular carcinoma?" even where it does not name the cancer; a text on its adverse effects alone
    does not (another situation, no efficacy)."""
    reports = {
        "names_target": "cabozantinib",
        "names_aspect": "second-line",
        "situation_missing": ["Carcinoma, Hepatocellular"],
        "near_aspect": "mechanism of action",
    }
    assert decide_lexical(reports).test == "names-aspect"
    elsewhere = {**reports, "near_aspect": None}
    assert decide_lexical(elsewhere) is None


def test_the_audit_flags_cross_class_swaps_and_asked_aspects():
    lexicon = Lexicon([Entity("tocilizumab", "drug"), Entity("pembrolizumab", "drug"), Entity("rituximab", "drug")])
    bare = {"what": "entity", "type": "drug", "from": "tocilizumab", "to": "rituximab", "rule": "inn-stem"}
    assert "no class recorded" in swap_class_problem(bare, lexicon)
    kind_only = {**bare, "class": "INN stem -mab: monoclonal antibodies"}
    assert "kind of molecule" in swap_class_problem(kind_only, lexicon)
    claimed = {**bare, "class": "antibody target: immunomodulating"}
    assert "differ" in swap_class_problem(claimed, lexicon)
    same = {**claimed, "to": "pembrolizumab"}
    assert swap_class_problem(same, lexicon) is None
    record = {"query": "Do statins cause myopathy?", "targets": []}
    asked_again = {
        "query": "What are the adverse effects of statins?",
        "replaced": [{"what": "aspect", "rule": "aspect-question", "to": "adverse effects"}],
    }
    assert frame_problems(record, asked_again)[0].startswith("asked-aspect")
    carried = {"query": "What are the 4 types of microcephaly?", "targets": [{"entity": "HPE", "span": [21, 38]}]}
    swap = {
        "query": carried["query"],
        "replaced": [{"what": "entity", "from": "HPE", "to": "Microcephaly"}],
        "support": {"supported": True},
    }
    record = {**carried, "query": "What are the 4 types of holoprosencephaly?"}
    assert frame_problems(record, swap)[0].startswith("premise")
    assert frame_problems(record, {**swap, "support": {"supported": True, "premises": ["4 types"]}}) == []
