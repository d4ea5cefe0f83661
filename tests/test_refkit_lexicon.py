"""refkit's lexicon mined from a real searchd (the same as from the corpus shards), bad lexicon files refused
with the place, and entity and aspect rewrites of real drug and disease questions."""

from __future__ import annotations

from pathlib import Path

import pytest
from refkit_kit import ASTHMA, RISPERIDONE, VARICES

from helpers import refkit
from refkit.noise import QueryRewriter
from refkit.vocabulary.lexicon import LexiconError, read_lexicon
from refkit.vocabulary.matcher import read_aspects

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
