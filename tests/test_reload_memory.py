"""searchd reloaded many times stays flat: a retired generation's memory goes back at once (its references
dropped at close, a collection in Python and in the JVM, malloc_trim), its query encoders are taken over
by the next generation rather than loaded again, and only the serving generation's index files stay
mapped. Real roots, a real server, reloads each followed by a query (the 500-reload measurement on every
kind of root is in make bench: bench/reload_bench.py)."""

from __future__ import annotations

import json
import signal

import pytest

from conftest import SAMPLES, build_pubmedqa, run_indexer
from helpers import tiny_static_model
from searchd.client import SearchClient
from searchd.launch import start_background_server

RELOADS, WARM_UP = 12, 3
# Were a retired generation kept until some later collection (and the query encoder loaded again each
# time), this root would grow by ~55 MiB a reload (measured: 810 -> 1,420 MiB over these 12 reloads).
ALLOWED_GROWTH_MB = 40
# A static-dense root over 100 reloads after 10 of warm-up. Were the JVM's heap not collected after a swap,
# each retired Lucene searcher's garbage would fill the young generation's untouched pages until its next
# collection, about 1 MB a reload on a 1,000-citation root (+140 MB over these 100 reloads, measured).
STATIC_RELOADS, STATIC_WARM_UP, STATIC_ALLOWED_GROWTH_MB = 110, 10, 20


def memory_and_generation(client: SearchClient) -> tuple[dict, dict]:
    stats = json.loads(client.info().stats_json)
    return stats["memory"], stats["generation"]


def mapped_index_files(pid: int, root) -> int:
    with open(f"/proc/{pid}/maps", encoding="utf-8") as maps:
        return len({line.split()[-1] for line in maps if str(root) in line})


def test_rss_and_mapped_files_stay_flat_over_reloads(search_root):
    process, address = start_background_server(search_root)
    try:
        with SearchClient(address) as client:
            client.search("Is mitral valve prolapse hereditary?", k=5, retrievers=["bm25", "dense-minilm"])
            first_maps = mapped_index_files(process.pid, search_root)
            rss_after, maps_after = [], []
            for reload in range(1, RELOADS + 1):
                process.send_signal(signal.SIGHUP)
                _wait_for_generation(client, reload + 1)
                hits = client.search("Is mitral valve prolapse hereditary?", k=5, retrievers=["bm25", "dense-minilm"])
                assert hits.hits
                memory, generation = memory_and_generation(client)
                assert generation["retired_still_finishing"] == 0
                rss_after.append(memory["vmrss_mb"])
                maps_after.append(mapped_index_files(process.pid, search_root))
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    growth = rss_after[-1] - rss_after[WARM_UP - 1]
    assert growth < ALLOWED_GROWTH_MB, f"RSS after each reload (MiB): {rss_after}"
    assert max(maps_after) <= first_maps, f"mapped index files: {first_maps} at start, then {maps_after}"


def _wait_for_generation(client: SearchClient, wanted: int, seconds: float = 120.0) -> None:
    import time

    deadline = time.monotonic() + seconds
    while memory_and_generation(client)[1]["generation"] < wanted:
        assert time.monotonic() < deadline, f"generation {wanted} did not come in {seconds} s"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def static_dense_root(tmp_path_factory, run_corpusbuild):
    """The 500 real PubMedQA abstracts in 2 shards with a store, BM25 and a static dense index."""
    folder = tmp_path_factory.mktemp("static-reloads")
    lines = (SAMPLES / "ir" / "pubmedqa-beir" / "corpus.jsonl").read_bytes().splitlines(keepends=True)
    corpus = build_pubmedqa(run_corpusbuild, lines, folder / "pubmedqa.jsonl", folder / "root" / "pubmed", 2)
    run_indexer("store", corpus)
    run_indexer("bm25", corpus)
    model = tiny_static_model(folder / "static-model")
    run_indexer(
        "dense", corpus, "--model", model, "--pooling", "static", "--normalize", "--out", corpus / "dense-static"
    )
    return folder / "root"


def test_a_static_dense_root_stays_flat_over_100_reloads(static_dense_root):
    process, address = start_background_server(static_dense_root)
    question = "Is mitral valve prolapse hereditary?"
    try:
        with SearchClient(address) as client:
            first = [hit.id for hit in client.search(question, k=10).hits]
            rss = []
            for reload in range(1, STATIC_RELOADS + 1):
                process.send_signal(signal.SIGHUP)
                _wait_for_generation(client, reload + 1)
                assert [hit.id for hit in client.search(question, k=10).hits] == first
                rss.append(memory_and_generation(client)[0]["vmrss_mb"])
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    growth = rss[-1] - rss[STATIC_WARM_UP - 1]
    every_ten = [round(value) for value in rss[9::10]]
    assert growth <= STATIC_ALLOWED_GROWTH_MB, f"RSS after every 10th reload (MiB): {every_ten}"
