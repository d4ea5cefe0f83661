"""manifests/medcorp-2026.toml as shipped, on the bundled samples: its four sources' folders under --var data
hold three PubMed files instead of NLM's 1,334, the ten bundled textbooks, and StatPearls' and Wikipedia's
files laid out as `medsnip fetch` lays out the publishers' (tests/test_fetch.py fetches), its three
dense encoders as 1-layer random BERTs of their kind under --var models (MedCPT's article and query
encoders, Contriever, SPECTER; nothing is downloaded), built by `medsnip build` and served by searchd
with the recipe's MedRAG RRF-4 as the default."""

from __future__ import annotations

import gzip
import shutil
import signal
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import REPO, SAMPLES
from helpers import tiny_bert
from medsnip.buildrecord import read_build_record
from pipeline.cli import main as medsnip_main
from searchd.client import SearchClient
from searchd.launch import start_background_server

RECIPE = REPO / "manifests" / "medcorp-2026.toml"
RETRIEVERS = ["bm25", "dense-contriever", "dense-medcpt", "dense-specter"]


def medcorp_data(folder: Path) -> Path:
    """The samples where the recipe's folders look for the real files."""
    (folder / "pubmed" / "baseline").mkdir(parents=True)
    for number, sample in enumerate(("pubmed1.xml", "pubmed2.xml", "medsamp2014.xml"), 1):
        with gzip.open(folder / "pubmed" / "baseline" / f"pubmed26n{number:04d}.xml.gz", "wb") as out:
            out.write((SAMPLES / "pubmed" / sample).read_bytes())
    (folder / "statpearls").mkdir()
    with tarfile.open(folder / "statpearls" / "statpearls_NBK430685.tar.gz", "w:gz") as archive:
        for path in sorted((SAMPLES / "nxml").glob("*.nxml")):
            archive.add(path, arcname=f"statpearls_NBK430685/{path.name}")
    shutil.copytree(SAMPLES / "textbooks" / "books", folder / "textbooks" / "en")
    (folder / "wikipedia").mkdir()
    shutil.copy(
        SAMPLES / "wikipedia" / "enwiki-2016-first-80-pages.xml.bz2",  # a real dump's head: 829 snippets
        folder / "wikipedia" / "enwiki-20261101-pages-articles-multistream.xml.bz2",
    )
    return folder


@pytest.fixture(scope="module")
def medcorp_root(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("medcorp")
    data = medcorp_data(work / "data")
    recipe = RECIPE  # as shipped: its folders read what --var data holds
    models = work / "models"
    for seed, name in enumerate(("MedCPT-Article-Encoder", "MedCPT-Query-Encoder", "contriever", "specter")):
        tiny_bert(models / name, seed=seed)
    root = work / "root"
    result = CliRunner().invoke(
        medsnip_main,
        [
            "build",
            str(recipe),
            "--var",
            f"data={data}",
            "--var",
            f"models={models}",
            "--out",
            str(root),
            "--workers",
            "2",
            "--quiet",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    return root


def test_the_medcorp_recipe_builds_every_index_of_rrf4(medcorp_root):
    for source in ("pubmed", "statpearls", "textbooks", "wikipedia"):
        corpus = read_build_record(medcorp_root / source)
        assert corpus["complete"] and corpus["params"]["medrag"] is True and corpus["counts"]["snippets"] > 0
        for name in RETRIEVERS[1:]:
            record = read_build_record(medcorp_root / source / name)
            params = record["params"]
            assert params["index_factory"] == "IVF{lists},PQ96" and params["refine"] == 10
            # a corpus too small to train 256 PQ centroids gets an exact index; the others IVF-PQ
            expected = "Flat" if corpus["counts"]["snippets"] < 256 else "PQ96"
            assert params["index_factory_built"].endswith(expected), (source, params["index_factory_built"])
        specter = read_build_record(medcorp_root / source / "dense-specter")
        assert specter["params"]["metric"] == "l2" and specter["encoder"]["pair_input"] is True
        medcpt = read_build_record(medcorp_root / source / "dense-medcpt")
        assert Path(medcpt["encoder"]["query_model"]).name == "MedCPT-Query-Encoder"
    assert "PQ96" in read_build_record(medcorp_root / "wikipedia" / "dense-medcpt")["params"]["index_factory_built"]


def test_searchd_serves_the_recipes_medrag_rrf4_by_default(medcorp_root):
    process, address = start_background_server(medcorp_root)
    try:
        with SearchClient(address) as client:
            assert list(client.info().retrievers) == RETRIEVERS
            question = "What is the first-line treatment of Parkinson disease?"
            served = client.search(question, k=10)
            medrag = client.search(question, k=10, fusion="medrag", rrf_k=100, retrievers=RETRIEVERS)
            assert [hit.id for hit in served.hits] == [hit.id for hit in medrag.hits]
            assert [hit.score for hit in served.hits] == [hit.score for hit in medrag.hits]
            # all four lists are fused (the random 1-layer encoders agree with each other, so their shared
            # hits lead the top 10; BM25's show further down)
            deeper = client.search(question, k=100)
            used = {ranked.retriever for hit in deeper.hits for ranked in hit.retrievers}
            assert used == set(RETRIEVERS)
            assert {hit.source for hit in served.hits} > {"wikipedia"}  # the corpora merged per retriever
            exact = client.search(question, k=10, retrievers=["dense-medcpt"], refine=0)
            assert exact.hits  # a request may turn re-ranking off
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
