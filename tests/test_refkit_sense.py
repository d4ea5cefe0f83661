"""refkit's sense rules on real questions and every real MeSH name: concepts matched whole (possessive
eponyms), generic descriptors never swapped, aspects swapped only where the question asks them and only
for aspects its predicate accepts, entity swaps never to a near-synonym or a class of the substance,
and `refkit audit` flagging each nonsense rewrite the issue reported. No server: the rewriter alone."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from conftest import SAMPLES
from medsnip.queries import QueryItem, read_query_file
from refkit.curation.audit import audit_noise
from refkit.noise import NoiseOptions, QueryRewriter
from refkit.noise.sense import (
    entity_swap_problem,
    generic_keys,
    modifier_problem,
    question_part,
    rewrite_sense_problems,
)
from refkit.vocabulary.lexicon import Entity, Lexicon
from refkit.vocabulary.matcher import read_aspects
from refkit.vocabulary.mesh_names import read_mesh_names, read_tree_numbers

IR = SAMPLES / "ir"


@pytest.fixture(scope="module")
def mesh_names() -> Lexicon:
    return read_mesh_names()


@pytest.fixture(scope="module")
def rewriter(mesh_names) -> QueryRewriter:
    return QueryRewriter(mesh_names, read_aspects())


def real_question(path, query_id) -> str:
    [query] = [q.query for q in read_query_file(path) if q.id == query_id]
    return query


def test_generic_descriptors_come_from_the_vocabulary(mesh_names):
    """Names that many other MeSH names contain word for word are categories; specific diseases are not."""
    generic = generic_keys(mesh_names)
    assert {"disease", "cells", "neoplasms", "syndrome", "infections", "proteins"} <= generic
    assert not generic & {"hypertension", "asthma", "leukemia", "alzheimer disease", "crohn disease", "risperidone"}
    with_trees = Lexicon(
        [
            Entity("Neoplasms", "disease", trees=["C04"]),
            Entity("Nervous System Diseases", "disease", trees=["C10"]),
            Entity("Central Nervous System Diseases", "disease", trees=["C10.228"]),
            Entity("Diabetes Mellitus", "disease", trees=["C19.246", "C18.452.394.750"]),
            Entity("Alzheimer Disease", "disease", trees=["C10.228.140.380.100"]),
        ]
    )
    assert generic_keys(with_trees) == {"neoplasms", "nervous system diseases", "central nervous system diseases"}


@pytest.mark.parametrize(
    "path, query_id, written, name",
    [
        (IR / "bioasq_10B1_golden.json", "61f593f8882a024a1000000f", "Crohn's disease", "Crohn Disease"),
        (IR / "pubmedqa_test_set.json", "18274917", "Meniere's disease", "Meniere Disease"),
        (IR / "pubmedqa_test_set.json", "22382608", "Parkinson's disease", "Parkinson Disease"),
        (IR / "pubmedqa_test_set.json", "22534881", "Hirschsprung's disease", "Hirschsprung Disease"),
    ],
)
def test_possessive_eponyms_are_matched_whole_and_never_split(rewriter, path, query_id, written, name):
    """Real questions write eponyms with a possessive; the concept is matched as MeSH names it, and no
    rewrite replaces "disease" alone ("Crohn's deficiency diseases")."""
    question = real_question(path, query_id)
    analysis = rewriter.analyse(question)
    assert (written, name) in {(m.text, m.payload.name) for m in analysis.entities}
    for rewrite in rewriter.rewrites(QueryItem(query_id, question), analysis, NoiseOptions(seed=13)):
        assert written.split("'")[0] not in rewrite.query or written in rewrite.query, rewrite.query
        assert all(edit["from"].casefold() != "disease" for edit in rewrite.replaced)


def test_the_patients_disease_is_never_a_target(rewriter):
    """MedQA 1100 ends "... the patient's disease?": "Disease" is generic and follows a possessive."""
    question = real_question(IR / "medqa_us_4options_test.jsonl", "medqa-1100")
    analysis = rewriter.analyse(question)
    assert analysis.entity is None or analysis.entity.payload.key != "disease"
    assert "disease" in analysis.generic


def test_aspects_are_swapped_only_where_asked_and_as_the_predicate_allows(rewriter):
    """MedQA 57 asks for adverse effects after "at increased risk for": no aspect but a harm fits there,
    so no attribute swap writes "indications"; Risperidone is never swapped for a drug class."""
    question = real_question(IR / "medqa_us_4options_test.jsonl", "medqa-57")
    analysis = rewriter.analyse(question)
    assert analysis.entity.payload.name == "Risperidone" and analysis.aspect.payload.name == "adverse effects"
    rewrites = rewriter.rewrites(QueryItem("medqa-57", question), analysis, NoiseOptions(seed=13))
    for rewrite in rewrites:
        [edit] = rewrite.replaced
        assert not edit["to"].endswith(("Agents", "Drugs")), edit
        if rewrite.kind == "attribute":  # the drug kept as written, asked anything but its adverse effects
            assert edit["rule"] == "aspect-question" and "Risperidone" in rewrite.query
            assert edit["from"] == "adverse effects" and edit["to"] != "adverse effects"
    eteplirsen = "Is eteplirsen effective for the treatment of Duchenne muscular dystrophy?"
    analysis = rewriter.analyse(eteplirsen)
    assert analysis.aspect.payload.name == "treatment"
    for rewrite in rewriter.rewrites(QueryItem("e", eteplirsen), analysis, NoiseOptions(seed=1)):
        if rewrite.kind == "attribute":  # neither the drug's efficacy nor the disease's treatment is asked again
            assert (rewrite.replaced[0]["from"], rewrite.replaced[0]["to"]) not in {
                ("efficacy", "indications"),
                ("treatment", "treatment"),
            }
            assert rewrite.replaced[0]["from"] in ("efficacy", "treatment")
    compound = rewriter.analyse("Which gene therapies are under investigation for Duchenne muscular dystrophy?")
    assert compound.aspect is None and compound.out_of_position[0]["text"] == "therapies"
    asked = rewriter.analyse("What are the risk factors for asthma?")
    assert asked.aspect.payload.name == "risk factors"
    kinds = Counter(
        r.kind
        for r in rewriter.rewrites(
            QueryItem("a", "What are the risk factors for asthma?"), asked, NoiseOptions(seed=1, attribute_swaps=2)
        )
    )
    assert kinds["attribute"] == 2
    # the aspect is part of a claim: asthma is asked another aspect in a question of its own, never its causes
    claim_text = "Does smoking increase the risk factors for asthma?"
    claim = rewriter.analyse(claim_text)
    aspect_questions = [r for r in rewriter.swap_candidates(QueryItem("c", claim_text), claim) if r.kind == "attribute"]
    of_asthma = {r.replaced[0]["to"] for r in aspect_questions if r.query.endswith("asthma?")}
    assert of_asthma and not of_asthma & {"risk factors", "etiology"}
    assert all(r.replaced[0]["text"] in claim_text for r in aspect_questions)


def test_entity_swap_rules_refuse_classes_nested_names_and_generic_names():
    risperidone = Entity("Risperidone", "drug")
    generic = frozenset({"disease"})
    assert "a group" in entity_swap_problem(risperidone, Entity("Antipsychotic Agents", "drug"), generic)
    assert "a group" in entity_swap_problem(
        Entity("Alzheimer Disease", "disease"), Entity("Brain Diseases", "disease"), generic
    )
    assert entity_swap_problem(risperidone, Entity("Olanzapine", "drug"), generic) is None
    asthma = Entity("Asthma", "disease")
    assert "holds the other's words" in entity_swap_problem(
        asthma, Entity("Asthma, Exercise-Induced", "disease"), generic
    )
    assert "generic" in entity_swap_problem(Entity("Disease", "disease"), asthma, generic)


def test_audit_flags_the_nonsense_rewrites(mesh_names, tmp_path):
    """The rewrites the issue reported, written as refkit noise records them: each breaks a rule."""

    def record(query, rewrite, edits, entities=()):
        return {
            "id": query[:12],
            "query": query,
            "entities": [{"span": list(span)} for span in entities],
            "rewrites": [{"number": 1, "kind": "x", "query": rewrite, "replaced": edits}],
            "noise": [],
        }

    def edit(what, text, written, query, from_, to):
        start = query.index(text)
        return {
            "what": what,
            "text": text,
            "written": written,
            "from": from_,
            "to": to,
            "span": [start, start + len(text)],
        }

    alzheimer = "Can losartan reduce brain atrophy in Alzheimer's disease?"
    dmd = "Is eteplirsen effective for the treatment of DMD?"
    gene = "Which gene therapies are under investigation for DMD?"
    medqa = real_question(IR / "medqa_us_4options_test.jsonl", "medqa-57")
    eligard = "What is the active ingredient of Eligard?"
    statins = "What class of drugs has muscle toxicities such as mysositis and rhabdomyolysis as a side effect?"
    records = [
        record(
            alzheimer,
            alzheimer.replace("disease", "deficiency diseases"),
            [edit("entity", "disease", "deficiency diseases", alzheimer, "Disease", "Deficiency Diseases")],
        ),
        record(
            dmd,
            dmd.replace("treatment", "risk factors"),
            [edit("aspect", "treatment", "risk factors", dmd, "treatment", "risk factors")],
            [(dmd.index("DMD"), len(dmd) - 1)],
        ),
        record(
            gene,
            gene.replace("therapies", "complications"),
            [edit("aspect", "therapies", "complications", gene, "treatment", "complications")],
            [(gene.index("DMD"), len(gene) - 1)],
        ),
        record(
            medqa,
            medqa.replace("adverse effects", "indications"),
            [edit("aspect", "adverse effects", "indications", medqa, "adverse effects", "indications")],
            [(medqa.index("Risperidone"), medqa.index("Risperidone") + 11)],
        ),
        record(
            medqa,
            medqa.replace("Risperidone", "Antipsychotic Agents"),
            [edit("entity", "Risperidone", "Antipsychotic Agents", medqa, "Risperidone", "Antipsychotic Agents")],
        ),
        record(
            eligard,
            eligard.replace("Eligard", "Tamoxifen"),
            [{**edit("entity", "Eligard", "Tamoxifen", eligard, "Leuprolide", "Tamoxifen"), "type": "drug"}],
        ),
        record(
            statins,
            statins.replace("rhabdomyolysis", "myositis"),
            [
                {
                    **edit("entity", "rhabdomyolysis", "myositis", statins, "Rhabdomyolysis", "Myositis"),
                    "type": "disease",
                }
            ],
        ),
    ]
    for one in records:
        assert rewrite_sense_problems(one, one["rewrites"][0], mesh_names), one["rewrites"][0]["query"]
    noise = tmp_path / "noise.jsonl"
    noise.write_text("".join(json.dumps(r) + "\n" for r in records))
    audited = audit_noise(noise, lexicon=mesh_names)
    assert audited["rewrites_without_sense"] == len(records) and audited["sense_checked_with_lexicon"]
    assert audit_noise(noise)["rewrites_without_sense"] == len(records) - 1  # the class swap needs the lexicon


@pytest.mark.parametrize(
    "path, query_id, phrase",
    [
        (IR / "medqa_us_4options_test.jsonl", "medqa-48", "pedal pulses"),
        (IR / "medqa_us_4options_test.jsonl", "medqa-3", "Urea nitrogen"),
        (IR / "medqa_us_4options_test.jsonl", "medqa-63", "physical examination"),
        (IR / "bioasq-beir" / "queries.tsv", "62057b35c9dfcb9c0900002d", "CYP1A2 enzyme"),
        (IR / "bioasq-beir" / "queries.tsv", "6024a6871cb411341a0000a4", "Brodifacoum poisoning"),
    ],
)
def test_findings_and_words_of_longer_phrases_are_never_replaced(rewriter, path, query_id, phrase):
    """The nonsense rewrites of the first hand review (docs/noise-review.md: "pedal heart rate", "serum
    urobilin nitrogen", "breast self-examination is unremarkable", "the CYP1A2 aminohydrolase",
    "Brodifacoum vomiting"): a finding before the sentence that asks, or one word of a noun phrase the
    vocabulary matched only in part, is never the target, and no rewrite changes the phrase."""
    question = real_question(path, query_id)
    analysis = rewriter.analyse(question)
    start = question.index(phrase)
    if analysis.entity is not None:
        assert not (analysis.entity.start < start + len(phrase) and start < analysis.entity.end), analysis.entity
    for rewrite in rewriter.rewrites(QueryItem(query_id, question), analysis, NoiseOptions(seed=13)):
        assert phrase in rewrite.query, rewrite.query


def test_the_asking_sentence_of_a_vignette():
    """MedQA 63's lab list runs into its question without a full stop; MedQA 57 names its drug in the
    sentence before the question, which has no number and so is part of what is asked."""
    lab = real_question(IR / "medqa_us_4options_test.jsonl", "medqa-63")
    assert lab[question_part(lab) :].startswith("Which of the following tests is required")
    drug = real_question(IR / "medqa_us_4options_test.jsonl", "medqa-57")
    assert drug[question_part(drug) :].startswith("Risperidone therapy is initiated.")
    assert question_part("Is AGO2 related to cytokinesis?") == 0


def test_modifier_rule_tells_phrases_from_words_that_stand_alone():
    def problem(text, word, others=()):
        start = text.index(word)
        return modifier_problem(
            text, (start, start + len(word)), [(text.index(o), text.index(o) + len(o)) for o in others]
        )

    assert "adjective" not in (problem("Which drug lowers serum urea nitrogen?", "urea", ["serum", "nitrogen"]) or "")
    assert problem("Which drug lowers serum urea nitrogen?", "urea", ["serum", "nitrogen"]).startswith("compound")
    assert problem("What is the therapeutic index of lithium?", "therapeutic").startswith("compound")
    assert problem("Is a man treated for anal carcinoma?", "carcinoma").startswith("compound")
    for text, word in [
        ("Can losartan reduce brain atrophy in Alzheimer's disease?", "losartan"),
        ("Are complex coronary lesions more frequent in patients with diabetes mellitus?", "diabetes mellitus"),
        ("Is AGO2 related to cytokinesis?", "cytokinesis"),
        ("Fast foods - are they a risk factor for asthma?", "asthma"),
    ]:
        assert problem(text, word) is None, (text, word)


def test_mesh_names_carry_2015_trees_and_swap_to_tree_siblings(mesh_names, rewriter):
    """The shipped tree table (dhimmel/mesh, MeSH 2015) joins trees to the names by UI: siblings decide
    the swaps, and a parent is generic or refused ("Androgens" never becomes "Hormones"). Androgens are a
    drug class placed in MeSH's functional branch (Hormones, Hormone Substitutes, and Hormone Antagonists),
    so their siblings are the other classes there."""
    epilepsy = mesh_names.get("Epilepsy")
    assert any(tree.startswith("C10.228.140.490") for tree in epilepsy.trees)
    assert sum(bool(e.trees) for e in mesh_names.entities.values()) > 26_000
    question = real_question(IR / "pubmedqa_test_set.json", "25475395")  # androgens and sexual desire
    analysis = rewriter.analyse(question)
    pool = rewriter.entity_candidates(analysis.entity.payload, set())
    assert pool and {rule for _, rule in pool} == {"tree-sibling"}  # D27: a class of hormones by what they do
    assert "Hormones" not in {e.name for e, _ in pool}
    assert "Estrogens" in {e.name for e, _ in pool}


def test_a_bad_tree_table_is_named_by_file_line_and_column(tmp_path):
    table = tmp_path / "trees.tsv"
    table.write_text("mesh_id\tmesh_name\tmesh_tree_number\nD000001\tCalcimycin\tD03.438\nD000002\tTemefos\tD02/705\n")
    with pytest.raises(ValueError, match=r"trees.tsv:3: column 'mesh_tree_number'"):
        read_tree_numbers(table)
    table.write_text("ui\tname\ttree\n")
    with pytest.raises(ValueError, match=r"trees.tsv:1: expected the columns"):
        read_tree_numbers(table)
