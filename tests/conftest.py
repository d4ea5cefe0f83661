"""Shared fixtures: the bundled real samples, and real-format files derived from them."""

from __future__ import annotations

import os

# Two pytest-xdist workers share two cores, and FAISS and torch each start an OpenMP team per process: with
# OpenMP's default of spinning between operations, the teams of the two workers (and of the commands they
# run) burn each other's cores, and a FAISS training that takes seconds alone took minutes. Set before any
# of them loads its OpenMP runtime; the commands the tests start inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from filelock import FileLock
from pubmed_scaleup import load_template_articles, renumbered, without_abstract, write_pubmed_file

from corpusbuild.cli import main as corpusbuild_main

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples"
PUBMED_SAMPLES = SAMPLES / "pubmed"

# fixtures defined beside the helpers they go with: the command-error tests' inputs and stand-in
# searchd, refkit's server and lexicons
pytest_plugins = ["command_errors_kit", "refkit_kit"]


@pytest.fixture(scope="session")
def pubmed_samples() -> Path:
    return PUBMED_SAMPLES


@pytest.fixture(scope="session")
def run_corpusbuild():
    """Invoke the corpusbuild CLI in-process; returns click's Result."""

    def run(*args: str):
        return CliRunner().invoke(corpusbuild_main, [str(a) for a in args], catch_exceptions=False)

    return run


def _template(pmid: str):
    templates = {
        a.findtext("MedlineCitation/PMID"): a for a in load_template_articles(sorted(PUBMED_SAMPLES.iterdir()))
    }
    return templates[pmid]


@pytest.fixture
def update_chain(tmp_path: Path) -> dict:
    """A baseline file, the real update file pubmed20n1016, a later update and medsamp2014.

    The real samples share no PMIDs, so two real-format files are made here by editing copies of real
    records (only their PMIDs change, or an abstract is removed):
      pubmed20n0999.xml.gz ("baseline"): older versions of PMIDs that pubmed20n1016 updates or deletes,
        one that medsamp2014's DeleteCitation removes, and two that no real file touches;
      pubmed20n1017.xml.gz ("later update"): re-adds a PMID n1016 deleted, drops the abstract of one,
        and deletes a baseline-only PMID.
    """
    folder = tmp_path / "chain"
    folder.mkdir()
    baseline = folder / "pubmed20n0999.xml.gz"
    write_pubmed_file(
        baseline,
        [
            renumbered(_template("10540283"), 30137523),  # n1016 has the real 30137523: replaced
            renumbered(_template("27797938"), 30170222),  # n1016 replaces, n1017 drops its abstract
            renumbered(_template("28775130"), 31844204),  # n1016's DeleteCitation removes it
            renumbered(_template("29963580"), 23203860),  # medsamp2014's DeleteCitation removes it
            renumbered(_template("11748933"), 40000001),  # n1017 deletes it
            renumbered(_template("9997"), 40000002),  # nobody touches it
        ],
    )
    update_1016 = folder / "pubmed20n1016.xml.gz"
    shutil.copyfile(PUBMED_SAMPLES / "pubmed20n1016.xml.gz", update_1016)
    real_30170222 = [
        a for a in load_template_articles([update_1016]) if a.findtext("MedlineCitation/PMID") == "30170222"
    ][0]
    later = folder / "pubmed20n1017.xml.gz"
    write_pubmed_file(
        later,
        [renumbered(_template("30108519"), 31844204), without_abstract(real_30170222)],
        deletions=[40000001],
    )
    medsamp = folder / "medsamp2014.xml"
    shutil.copyfile(PUBMED_SAMPLES / "medsamp2014.xml", medsamp)
    return {"baseline": baseline, "n1016": update_1016, "n1017": later, "medsamp": medsamp, "folder": folder}


def run_indexer(*args):
    """Invoke the indexer CLI in-process; fails the test on a non-zero exit."""
    from indexer.cli import main as indexer_main

    result = CliRunner().invoke(indexer_main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="session")
def search_root(tmp_path_factory, run_corpusbuild, worker_id) -> Path:
    """A corpus root as docs/design.md lays it out, from real data: `pubmedqa` (the 500 PubMedQA abstracts
    of samples/ir/pubmedqa-beir, one snippet each, with store, BM25 and dense minilm) and `textbooks`
    (the sample books, store and BM25 only). Built once per run: the pytest-xdist workers share it,
    read-only (a test that builds an index from one of its corpora works on a copy: copy_corpus)."""
    if worker_id == "master":
        return _build_search_root(tmp_path_factory.mktemp("root"), run_corpusbuild)
    root = tmp_path_factory.getbasetemp().parent / "search-root"
    with FileLock(f"{root}.lock"):
        if not (root / "complete").is_file():
            shutil.rmtree(root, ignore_errors=True)
            _build_search_root(root, run_corpusbuild)
            (root / "complete").touch()
    return root


@pytest.fixture(scope="session")
def search_root_server(search_root, tmp_path_factory):
    """(process, gRPC address, HTTP base URL) of one searchd on `search_root` at its default options, HTTP on too,
    for the whole run of this pytest worker: the modules that only query it share it (each searchd on this root
    imports torch and transformers, loads MiniLM and starts a JVM: ~5 CPU seconds). A test that changes a server's
    options, state or life starts its own. It must stop on SIGTERM with exit 0 and no traceback in its log."""
    from helpers import start_http, stop_server

    process, address, url = start_http(search_root, tmp_path_factory.mktemp("search-root-server"))
    yield process, address, url
    log = stop_server(process)
    assert "Traceback" not in log, log[-3000:]


@pytest.fixture(scope="session")
def bm25_root(search_root, tmp_path_factory, worker_id) -> Path:
    """`search_root` without its dense index: the PubMedQA abstracts and the textbooks with store and BM25, for
    a server test about connections, protocols or signals rather than search (a searchd serving it starts
    without torch and MiniLM, and answers without encoding). Made once per run, shared read-only."""

    def make(root: Path) -> None:
        copy_corpus(search_root / "pubmedqa", root, "dense-*")
        copy_corpus(search_root / "textbooks", root)

    return made_once(tmp_path_factory, worker_id, "bm25-root", make)


def made_once(tmp_path_factory, worker_id: str, name: str, make) -> Path:
    """The folder `name`, filled by `make(folder)` once per run and shared read-only by the pytest-xdist workers
    (the first to ask makes it while the others wait; a folder left half made by a killed run is made again)."""
    base = tmp_path_factory.getbasetemp()
    folder = (base if worker_id == "master" else base.parent) / name
    with FileLock(f"{folder}.lock"):
        if not (folder / "complete").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            (folder / "complete").touch()
    return folder


def _build_search_root(root: Path, run_corpusbuild) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    beir = SAMPLES / "ir" / "pubmedqa-beir"
    result = run_corpusbuild(
        "jsonl",
        beir / "corpus.jsonl",
        "--source",
        "pubmedqa",
        "--no-chunk",
        "--out",
        root / "pubmedqa",
        "--shards",
        4,
        "--workers",
        1,
        "--quiet",
    )
    assert result.exit_code == 0, result.output
    result = run_corpusbuild(
        "textbooks",
        SAMPLES / "textbooks" / "books",
        "--out",
        root / "textbooks",
        "--shards",
        2,
        "--workers",
        1,
        "--quiet",
    )
    assert result.exit_code == 0, result.output
    for name in ("pubmedqa", "textbooks"):
        run_indexer("store", root / name)
        run_indexer("bm25", root / name)
    run_indexer("dense", root / "pubmedqa", "--preset", "minilm", "--batch-size", 64)
    return root


def build_pubmedqa(run_corpusbuild, lines: list[bytes], source: Path, out: Path, shards: int) -> Path:
    """`out`: these lines of the PubMedQA collection (samples/ir/pubmedqa-beir, written to `source`), one
    snippet per abstract in `shards` shards."""
    source.write_bytes(b"".join(lines))
    options = ("--source", "pubmedqa", "--no-chunk", "--shards", shards, "--workers", 1, "--quiet")
    result = run_corpusbuild("jsonl", source, "--out", out, *options)
    assert result.exit_code == 0, result.output
    return out


def copy_corpus(corpus: Path, folder: Path, *leave_out: str) -> Path:
    """A private copy of a shared corpus folder (with its indexes but those named in `leave_out`), for a
    test that builds indexes from it: a build takes the corpus folder's job lock, which another
    worker's build would meet."""
    target = folder / corpus.name
    shutil.copytree(corpus, target, ignore=shutil.ignore_patterns(".generations", *leave_out))
    return target


# Every file that takes more than about 5 s (servers, Ray clusters, CPU embedding), longest first, as
# measured with --durations=0: `make test` hands whole files to its two workers in this order
# (--no-loadscope-reorder), so the long ones start first and the short ones fill in at the end, and both
# workers finish together instead of one running a long file alone. The second file is one that does not
# need `search_root`, so its worker works while the first builds that root.
LONGEST_FILES = (
    "test_refkit_runs.py",
    "test_dense_devices.py",
    "test_readers.py",
    "test_executor.py",
    "test_feeding.py",
    "test_indexer.py",
    "test_http_api.py",
    "test_medcorp_recipe.py",
    "test_searchd_limits.py",
    "test_bm25_sharded.py",
    "test_hot_swap.py",
    "test_searchd.py",
    "test_reload_memory.py",
    "test_multilingual.py",
    "test_readme_examples.py",
    "test_wikipedia.py",
    "test_refkit_cache.py",
    "test_dump_split.py",
    "test_refkit_clinical_names.py",
    "test_recipe_build.py",
    "test_client_distribution.py",
    "test_ivf_nprobe.py",
    "test_refkit.py",
    "test_searchd_retrievers.py",
    "test_sample_goldens.py",
    "test_changes.py",
    "test_pubmed_failures.py",
    "test_incremental_indexes.py",
    "test_watch_records.py",
    "test_json_output.py",
    "test_daily_update.py",
    "test_fetch.py",
    "test_refkit_lexicon.py",
    "test_runners.py",
    "test_pubmed_build.py",
    "test_jvm_aot.py",
    "test_recipe.py",
    "test_refkit_review.py",
    "test_build_outputs.py",
    "test_ctrl_c_processes.py",
    "test_refkit_mesh.py",
    "test_xml_batches.py",
    "test_encoders.py",
    "test_textbooks_jsonl.py",
    "test_batching.py",
    # last of the long ones, though it takes a minute: its bounds are latencies under its own load (a one-question
    # call answered within 10 s while bulk calls fill the slots), and beside SmolLM2 generating on the other
    # worker, where the longest-first order put it, it had half the cores and missed one (11.5 s)
    "test_http_hostile.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: number for number, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
