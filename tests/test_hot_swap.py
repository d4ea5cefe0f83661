"""searchd swaps generations under load (searchd.generations): a real server over a PubMed corpus built
from the real update chain serves 8 concurrent clients while the corpus is rebuilt with a later update
(a DeleteCitation among its changes) and its store, BM25 and dense indexes are rebuilt in place; SIGHUP
loads the new generation beside the old and switches. No call fails, the deleted PMID is never
returned once the switch is seen, and a broken generation leaves the current one serving and says why."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

from conftest import run_indexer
from searchd.client import SearchClient
from searchd.launch import start_background_server

DELETED = "pubmed:40000001:"  # in the baseline; pubmed20n1017's DeleteCitation removes it


def build(run_corpusbuild, out, *inputs):
    result = run_corpusbuild("pubmed", *inputs, "--out", out, "--shards", 2, "--workers", 1, "--quiet")
    assert result.exit_code == 0, result.output
    for stage in (("store",), ("bm25",), ("dense", "--preset", "minilm", "--batch-size", 64)):
        run_indexer(stage[0], out, *stage[1:])


def generation(client: SearchClient) -> dict:
    return json.loads(client.info().stats_json)["generation"]


def wait_for(predicate, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_generations_swap_under_load_with_no_failed_call(tmp_path, update_chain, run_corpusbuild):
    chain = update_chain
    root = tmp_path / "root"
    build(run_corpusbuild, root / "pubmed", chain["baseline"], chain["n1016"])
    process, address = start_background_server(root)
    failures, seen_after = [], []
    switched, done = threading.Event(), threading.Event()
    try:
        with SearchClient(address) as client:
            deleted_title = client.get_snippets([f"{DELETED}0"]).snippets[0].title
            assert generation(client)["generation"] == 1
            questions = [deleted_title, "cell", "patients treated", "mutation analysis"]

            def load(worker: int) -> None:
                with SearchClient(address) as own:
                    count = 0
                    while not done.is_set():
                        was_switched = switched.is_set()
                        try:
                            response = own.search(questions[(worker + count) % len(questions)], k=10)
                        except Exception as error:  # noqa: BLE001 - every failure is what this test counts
                            failures.append(repr(error))
                            continue
                        if was_switched:
                            seen_after.extend(hit.id for hit in response.hits)
                        count += 1

            threads = [threading.Thread(target=load, args=(n,)) for n in range(8)]
            for thread in threads:
                thread.start()
            time.sleep(1.0)
            # the daily job: the corpus with the later update, its indexes rebuilt in place, then SIGHUP
            build(run_corpusbuild, root / "pubmed", chain["baseline"], chain["n1016"], chain["n1017"])
            os.kill(process.pid, signal.SIGHUP)
            wait_for(lambda: generation(client)["generation"] == 2)
            switched.set()
            time.sleep(2.0)
            done.set()
            for thread in threads:
                thread.join(60)
            assert failures == []
            assert seen_after and not any(hit.startswith(DELETED) for hit in seen_after)
            assert client.get_snippets([f"{DELETED}0"]).missing == [f"{DELETED}0"]
            assert all(not hit.id.startswith(DELETED) for hit in client.search(deleted_title, k=50).hits)

            # a broken generation: the current one keeps serving, Info says why
            (root / "pubmed" / "bm25" / "build.json").write_text("{not json", encoding="utf-8")
            os.kill(process.pid, signal.SIGHUP)
            wait_for(lambda: generation(client)["last_error"] is not None)
            status = generation(client)
            assert status["generation"] == 2 and "bm25" in status["last_error"]["error"]
            assert client.search("cell", k=5).hits
    finally:
        done.set()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
