"""What the refkit tests share (tests/test_refkit*.py): a real searchd over real data, the PubMedQA abstracts
(`pubmedqa`, BM25 and dense MiniLM) beside the bundled PubMed samples with their MeSH and chemicals (`pubmed`,
BM25), the lexicons mined from it (with and without every MeSH name of the real slices) and real questions.
The root and the lexicons are made once per run and shared by the pytest workers (read-only); each worker starts
its own server on the root once, for every refkit test file it runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import PUBMED_SAMPLES, SAMPLES, copy_corpus, made_once, run_indexer
from helpers import refkit, serving
from medsnip.queries import read_query_file

IR = SAMPLES / "ir"
BEIR = IR / "pubmedqa-beir"
# Real questions: PubMedQA test set (disease + aspect, disease without aspect) and MedQA test set
# question 57 (a drug + an aspect).
ASTHMA = ("16266387", "Fast foods - are they a risk factor for asthma?")
VARICES = ("26163474", "Is there a connection between sublingual varices and hypertension?")
RISPERIDONE = (
    "medqa-57",
    "An otherwise healthy 26-year-old man comes to the physician for medication counseling after recently being "
    "diagnosed with schizophrenia. Risperidone therapy is initiated. This patient is at increased risk for which of "
    "the following adverse effects?",
)
MESH = SAMPLES / "mesh"


@pytest.fixture(scope="session")
def refkit_root(search_root, tmp_path_factory, run_corpusbuild, worker_id) -> Path:
    """The shared root's PubMedQA corpus (BM25 and dense MiniLM) beside the PubMed samples (2,100 snippets,
    BM25 only: refkit is what these tests are about, and MiniLM over them took 70 CPU seconds)."""

    def make(root: Path) -> None:
        copy_corpus(search_root / "pubmedqa", root)
        result = run_corpusbuild(
            "pubmed", PUBMED_SAMPLES, "--out", root / "pubmed", "--shards", 2, "--workers", 1, "--quiet"
        )
        assert result.exit_code == 0, result.output
        for command in ("store", "bm25"):
            run_indexer(command, root / "pubmed")

    return made_once(tmp_path_factory, worker_id, "refkit-root", make)


@pytest.fixture(scope="session")
def server(refkit_root):
    yield from serving(refkit_root)


@pytest.fixture(scope="session")
def lexicon_path(server, tmp_path_factory, worker_id) -> Path:
    """The lexicon mined from the served root (the same whichever worker's server it was mined from)."""

    def make(folder: Path) -> None:
        refkit("lexicon", "--server", server, "--out", folder / "lexicon.tsv")

    return made_once(tmp_path_factory, worker_id, "refkit-lexicon", make) / "lexicon.tsv"


@pytest.fixture(scope="session")
def questions(tmp_path_factory) -> Path:
    """Real questions: the first 12 PubMedQA questions (the varices one among them), the asthma one and
    MedQA 57."""
    path = tmp_path_factory.mktemp("questions") / "questions.tsv"
    pubmedqa = read_query_file(BEIR / "queries.tsv")
    chosen = pubmedqa[:12] + [q for q in pubmedqa if q.id == ASTHMA[0]]
    assert VARICES[0] in {q.id for q in chosen} and chosen[-1].query == ASTHMA[1]
    lines = ["id\tquery"] + [f"{q.id}\t{q.query}" for q in chosen] + ["\t".join(RISPERIDONE)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def names_lexicon_path(server, tmp_path_factory, worker_id) -> Path:
    """All of MeSH's names under the real slices, merged with the served records and the names their texts give."""

    def make(folder: Path) -> None:
        refkit(
            "lexicon",
            "--mesh-names",
            "--mesh",
            MESH / "meshrdf-desc-samples.xml",
            "--supplementary",
            MESH / "meshrdf-supp-samples.xml",
            "--server",
            server,
            "--out",
            folder / "lexicon.tsv",
        )

    return made_once(tmp_path_factory, worker_id, "refkit-names-lexicon", make) / "lexicon.tsv"
