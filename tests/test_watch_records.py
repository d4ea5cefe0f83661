"""A generation is never lost or silently degraded by what lies on disk, against one real server (a
copy of the PubMedQA corpus: store, BM25, dense minilm) watching its root:
- a corpus record under the root that is empty or not JSON (a copy in progress, a full disk) is no
  complete generation, not a reason for --watch to exit;
- a reload whose generation would serve fewer retrievers (the dense index away: being rebuilt, moved)
  is refused: dense queries go on being answered, and Info and the generation health service say why,
  instead of a silent downgrade with health SERVING."""

from __future__ import annotations

import json
import shutil
import signal
import time

import grpc
import pytest
from click.testing import CliRunner
from grpc_health.v1 import health_pb2, health_pb2_grpc

from conftest import copy_corpus
from searchd.cli import main as searchd_main
from searchd.client import SearchClient
from searchd.launch import start_background_server


@pytest.fixture(scope="module")
def watched(search_root, tmp_path_factory):
    folder = tmp_path_factory.mktemp("watched")
    root = folder / "root"
    copy_corpus(search_root / "pubmedqa", root)
    pid_file = folder / "searchd.pid"
    process, address = start_background_server(root, "--watch", "0.5", "--pid-file", pid_file)
    yield root, process, address, pid_file
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0


def test_watch_survives_an_empty_or_broken_record(watched):
    root, process, address, _ = watched
    with SearchClient(address, retries=0) as client:
        before = [hit.id for hit in client.search("heart failure", k=5, timeout=30).hits]
        (root / "arriving").mkdir()
        (root / "arriving" / "build.json").write_text("")  # empty
        time.sleep(1.5)
        (root / "arriving" / "build.json").write_text('{"schema": ')  # cut short
        time.sleep(1.5)
        assert process.poll() is None, process.log_path.read_text()[-2000:]
        assert [hit.id for hit in client.search("heart failure", k=5, timeout=30).hits] == before
    shutil.rmtree(root / "arriving")


def test_a_reload_that_would_lose_a_retriever_keeps_the_current_generation(watched, tmp_path):
    root, process, address, pid_file = watched
    with SearchClient(address, retries=0) as client:
        dense_before = [hit.id for hit in client.search("statins", k=5, retrievers=["dense"], timeout=60).hits]
        (root / "pubmedqa" / "dense-minilm").rename(tmp_path / "dense-away")
        result = CliRunner().invoke(searchd_main, ["reload", "--pid-file", str(pid_file), "--server", address])
        assert result.exit_code == 1 and "fewer retrievers" in result.output and "dense-minilm" in result.output
        assert [hit.id for hit in client.search("statins", k=5, retrievers=["dense"], timeout=60).hits] == (
            dense_before
        )
        status = json.loads(client.info().stats_json)["generation"]
        assert status["generation"] == 1 and "fewer retrievers" in status["last_error"]["error"]
    with grpc.insecure_channel(address) as channel:
        check = health_pb2_grpc.HealthStub(channel).Check
        answer = check(health_pb2.HealthCheckRequest(service="searchd.generation"), timeout=10)
        assert answer.status == health_pb2.HealthCheckResponse.NOT_SERVING
    assert process.poll() is None


def test_a_server_started_over_an_unfinished_index_says_so(search_root, tmp_path):
    """A dense index killed before its record: a (re)started searchd serves BM25, and says that it lacks
    the index (Info's unfinished_indexes, the generation health service NOT_SERVING) instead of nothing."""
    root = tmp_path / "root"
    copy_corpus(search_root / "pubmedqa", root)
    (root / "pubmedqa" / "dense-minilm" / "build.json").unlink()
    process, address = start_background_server(root)
    try:
        with SearchClient(address, retries=0) as client:
            assert client.search("heart failure", k=3, timeout=60).hits
            status = json.loads(client.info().stats_json)["generation"]
            assert status["unfinished_indexes"] == ["pubmedqa/dense-minilm"]
        with grpc.insecure_channel(address) as channel:
            check = health_pb2_grpc.HealthStub(channel).Check
            answer = check(health_pb2.HealthCheckRequest(service="searchd.generation"), timeout=10)
            assert answer.status == health_pb2.HealthCheckResponse.NOT_SERVING
            assert check(health_pb2.HealthCheckRequest(service=""), timeout=10).status == (
                health_pb2.HealthCheckResponse.SERVING
            )
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0


def test_reloads_leave_no_maps_behind(search_root, tmp_path):
    """Ten reloads of a BM25 root: a retired generation closes its Lucene searcher (each Lucene file was
    mapped twice per load and never unmapped, so memory maps and RSS grew with every reload); the files
    mapped from the root after the reloads are those of one generation, and RSS stays within 150 MB of
    the first load's."""
    root = tmp_path / "root"
    copy_corpus(search_root / "textbooks", root)
    pid_file = tmp_path / "searchd.pid"
    process, address = start_background_server(root, "--pid-file", pid_file)

    def mapped_from_root() -> int:
        with open(f"/proc/{process.pid}/maps") as maps:
            return sum(1 for line in maps if str(root) in line)

    def rss_mb() -> float:
        with open(f"/proc/{process.pid}/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024

    try:
        with SearchClient(address, retries=0) as client:
            client.search("heart failure", k=5, timeout=30)
            first_maps, first_rss = mapped_from_root(), rss_mb()
            for _ in range(10):
                result = CliRunner().invoke(searchd_main, ["reload", "--pid-file", str(pid_file), "--server", address])
                assert result.exit_code == 0, result.output
                client.search("heart failure", k=5, timeout=30)
            assert json.loads(client.info().stats_json)["generation"]["generation"] == 11
        assert 0 < mapped_from_root() <= first_maps, (first_maps, mapped_from_root())
        assert rss_mb() - first_rss < 150, (first_rss, rss_mb())
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
