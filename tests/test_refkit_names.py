"""The names refkit finds a question's entities by, beyond MeSH's descriptor names: abbreviations the served
texts define (Schwartz & Hearst), drug names by INN stem, gene symbols and their families, named diseases,
MeSH's own naming conventions, and how many served records name each entity. On real texts: BioASQ 10b
batch 1's gold snippets and the real MeSH slices."""

from __future__ import annotations

import re

import orjson
import pytest

from conftest import SAMPLES
from refkit.noise import QueryRewriter
from refkit.vocabulary.abbreviations import best_long_form, definitions
from refkit.vocabulary.corpus_names import (
    CorpusNames,
    count_mentions,
    name_diseases_as_written,
    name_type,
    type_drugs_by_stem,
    usable_short_form,
)
from refkit.vocabulary.drug_stems import drug_words, stem_of, stems
from refkit.vocabulary.gene_symbols import family_root, symbol_of_name, symbols
from refkit.vocabulary.lexicon import Entity, Lexicon, read_lexicon
from refkit.vocabulary.matcher import NameMatcher, read_aspects
from refkit.vocabulary.mesh import read_mesh

MESH = SAMPLES / "mesh"


@pytest.fixture(scope="module")
def bioasq_texts() -> list[str]:
    rows = map(orjson.loads, (SAMPLES / "ir" / "bioasq-beir" / "corpus.jsonl").read_bytes().splitlines())
    return [f"{r['title']} {r['text']}".strip() for r in rows]


def test_abbreviations_are_found_as_schwartz_and_hearst_describe(bioasq_texts):
    assert definitions("Patients with ornithine transcarbamylase deficiency (OTCD) were studied.") == [
        ("OTCD", "ornithine transcarbamylase deficiency")
    ]
    assert definitions("HCC (hepatocellular carcinoma) is common.") == [("HCC", "hepatocellular carcinoma")]
    assert definitions("with a median of 5 (range 2-7) and 12 patients (34%)") == []  # not abbreviations
    assert best_long_form("MTI", "the NLM medical text indexer") == "medical text indexer"
    assert best_long_form("XYZ", "a phrase without them") is None
    found = {pair for text in bioasq_texts for pair in definitions(text)}
    assert ("YY1", "Yin Yang 1") in found and ("KPNA2", "karyopherin alpha2") in found
    assert all(short.lower() not in long_form.lower().split() for short, long_form in found)


def test_inn_stems_name_classes_and_leave_english_words_alone():
    kept = {stem.stem for stem in stems()}
    assert {"sartan", "tinib", "mab", "rsen", "siran", "lutamide"} <= kept
    assert not {"ine", "one", "ol", "ast", "tide", "terone"} & kept  # chemistry, or English words end with them
    assert stem_of("tucatinib").stem == "tinib" and stem_of("Losartan Potassium").stem == "sartan"
    assert stem_of("sorafenib").stem == "rafenib"  # the most specific stem wins
    assert stem_of("aspirin") is None
    text = "Is cabozantinib effective compared with sorafenib, or do cholesterol, dopamine and penicillin matter?"
    assert drug_words(text) == ["cabozantinib", "sorafenib"]


def test_a_names_stem_is_the_longest_stem_its_last_word_ends_with():
    """stem_of looks a word's endings up; the definition tries every stem, longest first, against every
    word from the last: both agree on the MeSH sample's names, common English and edge lengths."""
    from wordfreq import top_n_list

    def by_definition(name: str):
        for word in reversed(re.findall(r"[A-Za-z][a-z]+", name)):
            for stem in stems():
                if word.lower().endswith(stem.stem) and len(word) > len(stem.stem) + 1:
                    return stem
        return None

    vocabulary = read_mesh(MESH / "meshrdf-desc-samples.xml", MESH / "meshrdf-supp-samples.xml")
    names = [entity.name for entity in vocabulary.entities.values()] + top_n_list("en", 3000)
    drugs = ["cabozantinib", "Sorafenib", "valsartan", "nusinersen", "Adalimumab Injection", "Losartan Potassium"]
    names += drugs + ["xxsartan", "xsartan", "sartan", "Mab", "xmab", "tinib"]
    assert [stem_of(name) for name in names] == [by_definition(name) for name in names]
    assert all(stem_of(name) for name in drugs) and stem_of("xxsartan") and not stem_of("xsartan")


def test_gene_symbols_and_their_families(bioasq_texts):
    assert symbols("De novo VPS4A mutations; HMGB1-mediated loss; R132H; IL-6; H1N1; CD4+ cells") == [
        "VPS4A",
        "HMGB1",
        "CD4",
    ]
    assert [family_root(s) for s in ("VPS4A", "HMGB2", "BCL11B", "TP53")] == ["VPS4", "HMGB", "BCL11", "TP"]
    assert symbol_of_name("HMGB1 Protein") == "HMGB1" and symbol_of_name("Tumor Suppressor Protein p53") is None
    assert "YY1" in {s for text in bioasq_texts for s in symbols(text)}


def test_the_served_texts_add_names_mesh_lacks(bioasq_texts):
    """Over BioASQ's real gold snippets: a short form becomes a name of the MeSH entity its long form names;
    drug names by stem and gene symbols become entities; an everyday short form does not; every entity is
    counted in the records that name it."""
    vocabulary = read_mesh(MESH / "meshrdf-desc-samples.xml", MESH / "meshrdf-supp-samples.xml")
    names = CorpusNames()
    for text in bioasq_texts:
        names.add(text)
    names.add("Acetaminophen (APAP) is given. Acetaminophen (APAP) again.")  # a MeSH descriptor's short form
    built, added = names.add_to(vocabulary)
    assert "APAP" in built.get("Acetaminophen").entry_terms
    assert built.get("YY1").type == "gene" and built.get("YY1").origin == "symbol"
    assert built.get("tirabrutinib").type == "drug" and built.get("tirabrutinib").origin == "inn-stem"
    assert added["symbol"] > 10 and added["inn-stem"] > 10
    assert not usable_short_form("ALL") and not usable_short_form("ANDs") and usable_short_form("DMD")
    count_mentions(built, bioasq_texts)
    assert built.get("YY1").corpus_frequency >= 20 and built.get("Acetaminophen").corpus_frequency == 0
    assert name_type("ornithine transcarbamylase deficiency") == "disease" and name_type("karyopherin") == "other"


def test_mesh_conventions_and_stems_type_and_name_entities():
    lexicon = Lexicon(
        [
            Entity("Urinary Bladder Neoplasms", "disease"),
            Entity("Migraine Disorders", "disease"),
            Entity("Panitumumab", "gene"),
            Entity("Antibodies, Monoclonal", "gene"),
        ]
    )
    assert name_diseases_as_written(lexicon) == 2 and type_drugs_by_stem(lexicon) == 1
    assert {"urinary bladder cancer", "urinary bladder tumor"} <= set(
        lexicon.get("Urinary Bladder Neoplasms").entry_terms
    )
    assert lexicon.get("Migraine Disorders").entry_terms == ["migraine"]
    assert lexicon.get("Panitumumab").type == "drug" and lexicon.get("Antibodies, Monoclonal").type == "gene"


def test_acronyms_match_only_as_written():
    """ "ANDs" (autoimmune neurological diseases) once made every "and" a disease: a name in capitals
    matches only in capitals; other names ignore case."""
    entity = Entity("autoimmune neurological diseases", "disease", entry_terms=["AND"])
    matcher = NameMatcher([(form, entity) for form in entity.surface_forms()])
    assert matcher.find("useful and relevant") == []
    assert [m.text for m in matcher.find("In AND and ANDs, Autoimmune neurological diseases")] == [
        "AND",
        "ANDs",
        "Autoimmune neurological diseases",
    ]


def test_longest_mention_wins_with_the_names_the_corpus_gives(tmp_path):
    """ "ornithine transcarbamylase deficiency" matched "Ornithine" while the vocabulary lacked the longer
    name; the corpus's definition gives it, and the mention is the whole name, its short form included."""
    lexicon = Lexicon([Entity("Ornithine", "drug", trees=["D12.125.067"], corpus_frequency=4)])
    names = CorpusNames()
    for _ in range(2):
        names.add("Patients with ornithine transcarbamylase deficiency (OTCD) were treated.")
    built, _ = names.add_to(lexicon)
    path = tmp_path / "lexicon.tsv"
    built.write(path)
    rewriter = QueryRewriter(read_lexicon(path), read_aspects())
    analysis = rewriter.analyse("What is the treatment of ornithine transcarbamylase deficiency (OTCD)?")
    assert [(m.text, m.payload.name) for m in analysis.entities] == [
        ("ornithine transcarbamylase deficiency (OTCD)", "ornithine transcarbamylase deficiency")
    ]


def test_bad_action_and_entry_term_tables_are_named_by_file_and_line(tmp_path):
    from refkit.vocabulary.mesh_names import read_drug_entry_terms, read_pharmacological_actions

    actions = tmp_path / "actions.tsv"
    actions.write_text(
        "name\tui\tpharmacological_action_name\tpharmacological_action_ui\n"
        "Losartan\tD019808\tAntihypertensive Agents\tD000959\nValsartan\tX1\tAnything\tD0\n"
    )
    with pytest.raises(ValueError, match=r"actions.tsv:3: expected a descriptor UI and an action name"):
        read_pharmacological_actions(actions)
    terms = tmp_path / "terms.tsv"
    terms.write_text("name\tui\tentry_term_name\n")
    with pytest.raises(ValueError, match=r"terms.tsv:1: expected the columns"):
        read_drug_entry_terms(terms)
    shipped = read_drug_entry_terms()
    assert {"Cozaar", "MK-954"} <= set(shipped["D019808"]) and "Potassium, Losartan" not in shipped["D019808"]
