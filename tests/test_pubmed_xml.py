"""Field extraction from real PubMed/MEDLINE files (the bundled samples)."""

from __future__ import annotations

from corpusbuild.inputs import decompressed
from corpusbuild.sources.pubmed.xml import Deletion, RawArticle, SkippedRecord, iter_pubmed_records


def read_records(path, **options):
    with open(path, "rb") as raw:
        magic = raw.read(4)
        raw.seek(0)
        return list(iter_pubmed_records(decompressed(raw, magic), str(path), **options))


def articles_by_pmid(path) -> dict[int, RawArticle]:
    return {r.pmid: r for r in read_records(path) if isinstance(r, RawArticle)}


def test_title_keeps_inline_markup_as_text(pubmed_samples):
    article = articles_by_pmid(pubmed_samples / "pubmed4.xml")[27797938]
    # The XML reads "... variants at the <i>TERT</i> gene region ...".
    assert article.title == (
        "Leucocyte telomere length, genetic variants at the TERT gene region and risk of pancreatic cancer."
    )


def test_structured_abstract_sections_keep_their_labels(pubmed_samples):
    article = articles_by_pmid(pubmed_samples / "pubmed4.xml")[27797938]
    assert [label for label, _ in article.sections] == ["OBJECTIVE", "DESIGN", "RESULTS", "CONCLUSIONS"]
    results = dict(article.sections)["RESULTS"]
    # <sub>trend</sub> and <sup>2</sup> inside the section become plain text.
    assert "p trend" not in results and "ptrend=0.048" in results and "r2<0.25" in results


def test_mesh_chemicals_keywords_and_types(pubmed_samples):
    article = articles_by_pmid(pubmed_samples / "pubmed4.xml")[27797938]
    adenocarcinoma = article.mesh[0]
    assert adenocarcinoma == {
        "ui": "D000230",
        "name": "Adenocarcinoma",
        "major": False,
        "qualifiers": [
            {"ui": "Q000453", "name": "epidemiology", "major": True},
            {"ui": "Q000235", "name": "genetics", "major": True},
        ],
    }
    assert article.chemicals == [
        {"ui": "C509186", "name": "TERT protein, human", "registry_number": "EC 2.7.7.49"},
        {"ui": "D019098", "name": "Telomerase", "registry_number": "EC 2.7.7.49"},
    ]
    assert article.keywords == ["PANCREATIC CANCER"]
    assert {"ui": "D016428", "name": "Journal Article"} in article.publication_types
    assert (article.journal, article.year, article.languages) == ("Gut", 2017, ["eng"])


def test_chemicals_with_registry_numbers(pubmed_samples):
    article = articles_by_pmid(pubmed_samples / "pubmed1.xml")[9997]
    assert [c["name"] for c in article.chemicals] == ["Cytochrome c Group", "Flavins", "Heme", "Iron"]
    assert article.chemicals[2] == {"ui": "D006418", "name": "Heme", "registry_number": "42VZT0U6YR"}
    iron = [m for m in article.mesh if m["name"] == "Iron"][0]
    assert iron["qualifiers"] == [{"ui": "Q000032", "name": "analysis", "major": False}]


def test_legacy_medline_citation_set(pubmed_samples):
    records = read_records(pubmed_samples / "medsamp2014.xml")
    articles = [r for r in records if isinstance(r, RawArticle)]
    deletions = [r for r in records if isinstance(r, Deletion)]
    assert len(articles) == 161
    assert [d.pmids for d in deletions] == [[23203860, 23203861, 23203892, 23203893, 23203894, 23203895, 23203896]]
    by_pmid = {a.pmid: a for a in articles}
    assert by_pmid[11243089].year == 1999  # PubDate/MedlineDate "1999 Jan-Mar"
    labels = [label for label, _ in by_pmid[11034741].sections]
    assert labels[:3] == ["BACKGROUND", "OBJECTIVES", "SEARCH STRATEGY"]
    # The 2014 DTD has no UI attributes: names are kept, UIs are None.
    assert by_pmid[10540283].mesh[1] == {"ui": None, "name": "Bacterial Proteins", "major": True, "qualifiers": []}


def test_update_file_deletions_and_skipping(pubmed_samples):
    records = read_records(pubmed_samples / "pubmed20n1016.xml.gz", skip_without_abstract=True)
    deletions = [r for r in records if isinstance(r, Deletion)]
    assert len(deletions) == 1 and len(deletions[0].pmids) == 262
    assert deletions[0].pmids[-1] == 31845705
    kept = [r for r in records if isinstance(r, RawArticle)]
    skipped = [r for r in records if isinstance(r, SkippedRecord)]
    assert len(kept) + len(skipped) == 26
    assert all(r.sections for r in kept)
    assert all(r.reason == "no_abstract" for r in skipped)
