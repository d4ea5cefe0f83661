"""searchd swaps generations under load (searchd.hot_swap): a real server over a PubMed corpus built
from the real update chain serves 8 concurrent clients while the corpus is rebuilt with a later update
(a DeleteCitation among its changes) and its store, BM25 and dense indexes are updated; --watch sees
the new complete generation (not the half-updated root before it) and switches. No call fails, the
deleted PMID is never returned once the switch is seen, the server's lease keeps the old generation
from `medsnip prune` until its engine is retired, and a broken generation, asked for by `searchd
reload`, leaves the current one serving and says why in Info and health."""

from __future__ import annotations

import json
import signal
import threading
import time

import grpc
from click.testing import CliRunner
from grpc_health.v1 import health_pb2, health_pb2_grpc

from conftest import run_indexer
from medsnip.buildrecord import lineage_hash, read_build_record
from medsnip.generations import GENERATIONS, kept_generations
from pipeline.cli import main as medsnip_main
from searchd.cli import main as searchd_main
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


def generation_health(address: str) -> int:
    with grpc.insecure_channel(address) as channel:
        request = health_pb2.HealthCheckRequest(service="searchd.generation")
        return health_pb2_grpc.HealthStub(channel).Check(request, timeout=10).status


def test_generations_swap_under_load_with_no_failed_call(tmp_path, update_chain, run_corpusbuild):
    chain = update_chain
    root = tmp_path / "root"
    build(run_corpusbuild, root / "pubmed", chain["baseline"], chain["n1016"])
    old_lineage = lineage_hash(read_build_record(root / "pubmed"))
    pid_file = tmp_path / "searchd.pid"
    process, address = start_background_server(root, "--watch", 1, "--pid-file", pid_file)
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
            # the daily job: the corpus with the later update, then its indexes; no signal: --watch sees it
            build(run_corpusbuild, root / "pubmed", chain["baseline"], chain["n1016"], chain["n1017"])
            wait_for(lambda: generation(client)["generation"] == 2)
            switched.set()
            new_lineage = lineage_hash(read_build_record(root / "pubmed"))
            assert generation(client)["corpora"]["pubmed"]["lineage_sha256"] == new_lineage
            assert generation(client)["corpora"]["pubmed"]["newest_inputs"][-1] == chain["n1017"].name
            assert generation(client)["corpora"]["pubmed"]["changes"]["parent"] == old_lineage
            time.sleep(2.0)
            done.set()
            for thread in threads:
                thread.join(60)
            assert failures == []
            assert seen_after and not any(hit.startswith(DELETED) for hit in seen_after)
            assert client.get_snippets([f"{DELETED}0"]).missing == [f"{DELETED}0"]
            assert all(not hit.id.startswith(DELETED) for hit in client.search(deleted_title, k=50).hits)

            # the replaced version is kept, leased while the retired engine finished its calls, then free
            wait_for(lambda: generation(client)["retired_still_finishing"] == 0)
            kept = kept_generations(root / "pubmed")
            assert [found.path.name for found in kept] == [old_lineage[:16]] and not kept[0].leased_by
            assert sorted(path.name for path in kept[0].path.iterdir()) == ["bm25", "corpus", "dense-minilm", "store"]
            pruned = CliRunner().invoke(medsnip_main, ["prune", str(root / "pubmed")], catch_exceptions=False)
            assert pruned.exit_code == 0 and f"deleted {kept[0].path}" in pruned.output
            assert not (root / "pubmed" / GENERATIONS / old_lineage[:16]).exists()
            leases = list((root / "pubmed" / GENERATIONS / "leases").glob("*.json"))
            assert [json.loads(path.read_text())["lineages"] for path in leases] == [[new_lineage]]

            # a broken generation: the current one keeps serving, Info and health say why
            (root / "pubmed" / "bm25" / "build.json").write_text("{not json", encoding="utf-8")
            assert generation_health(address) == health_pb2.HealthCheckResponse.SERVING
            result = CliRunner().invoke(
                searchd_main, ["reload", "--pid-file", str(pid_file), "--server", address], catch_exceptions=False
            )
            assert result.exit_code == 1 and "still serving" in result.output
            status = generation(client)
            assert status["generation"] == 2 and "bm25" in status["last_error"]["error"]
            assert generation_health(address) == health_pb2.HealthCheckResponse.NOT_SERVING
            assert client.search("cell", k=5).hits
    finally:
        done.set()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    assert not list((root / "pubmed" / GENERATIONS / "leases").glob("*.json")) and not pid_file.exists()


def test_refkit_collect_never_mixes_two_generations(tmp_path, update_chain, run_corpusbuild):
    """refkit collect labels every reference with the lineage it started on: when the server switches
    generations part way (the daily update lands between two of its batches), the run stops with the
    corpora named and writes nothing, instead of labelling the new generation's references with the
    old lineage. A run that stays on one generation writes its references as before."""
    from refkit.cli import main as refkit_main
    from refkit.connection import ServerError, ServerOptions, connect
    from refkit.curation.collect import DedupOptions, RetrievalOptions, collect

    chain = update_chain
    root = tmp_path / "root"
    build(run_corpusbuild, root / "pubmed", chain["baseline"], chain["n1016"])
    queries_file = tmp_path / "queries.tsv"
    texts = ["mutation analysis", "cell proliferation", "treatment outcome", "influenza vaccine", "patients"]
    queries_file.write_text("".join(f"q{i}\t{text}\n" for i, text in enumerate(texts)))
    process, address = start_background_server(root, "--watch", 1)
    try:
        result = CliRunner().invoke(
            refkit_main, ["collect", str(queries_file), "--server", address, "--out", str(tmp_path / "same.jsonl")]
        )
        assert result.exit_code == 0, result.output

        from medsnip.queries import read_query_file

        queries = read_query_file(queries_file)
        client, lineage = connect(ServerOptions(address), queries)
        swapped = []

        def swap_once(_answered: int) -> None:  # after the first batch: the update lands, --watch switches
            if not swapped:
                swapped.append(True)
                build(run_corpusbuild, root / "pubmed", chain["baseline"], chain["n1016"], chain["n1017"])
                wait_for(lambda: generation(client)["generation"] == 2)

        with client:
            try:
                list(
                    collect(
                        client,
                        address,
                        lineage,
                        queries,
                        RetrievalOptions(5),
                        DedupOptions(),
                        batch=2,
                        progress=swap_once,
                    )
                )
            except ServerError as error:
                message = str(error)
            else:
                raise AssertionError("a run across two generations went through")
        assert "switched generations during the run (pubmed changed)" in message and "nothing was written" in message
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0


def test_a_retired_generation_frozen_out_of_the_collector_is_still_collected():
    """searchd exempts what a generation loaded from the collector's full passes (settle_loaded_objects); retiring
    it brings those objects back into view first, or a generation's reference cycles would outlive it."""
    import gc
    import weakref

    from searchd import hot_swap

    class Generation:
        def close(self) -> None:
            pass

    engine = Generation()
    engine.itself = engine  # a reference cycle, as a loaded engine's objects have
    gone = weakref.ref(engine)
    try:
        hot_swap.settle_loaded_objects()
        assert gc.get_freeze_count() > 0
        retired = [engine]
        del engine
        hot_swap._close_and_free(retired)
        assert gone() is None and not retired
        assert gc.get_freeze_count() > 0  # what is alive after is settled again
    finally:
        gc.unfreeze()
