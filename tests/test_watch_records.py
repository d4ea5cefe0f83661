"""searchd --watch keeps serving its generation when a corpus record under the root is empty or not
JSON (a copy in progress, a full disk): such a root holds no complete generation, it is not a reason to
exit. A real server over a copy of the textbooks corpus (store and BM25)."""

from __future__ import annotations

import shutil
import signal
import time

from searchd.client import SearchClient
from searchd.launch import start_background_server


def test_watch_survives_an_empty_or_broken_record(search_root, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(search_root / "textbooks", root / "textbooks")
    process, address = start_background_server(root, "--watch", "0.5")
    try:
        with SearchClient(address, retries=0) as client:
            before = [hit.id for hit in client.search("heart failure", k=5, timeout=30).hits]
            (root / "arriving").mkdir()
            (root / "arriving" / "build.json").write_text("")  # empty
            time.sleep(2)
            (root / "arriving" / "build.json").write_text('{"schema": ')  # cut short
            time.sleep(2)
            assert process.poll() is None, process.log_path.read_text()[-2000:]
            assert [hit.id for hit in client.search("heart failure", k=5, timeout=30).hits] == before
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0


def test_a_reload_that_would_lose_a_retriever_keeps_the_current_generation(search_root, tmp_path):
    """SIGHUP while the root's dense index is away (being rebuilt, moved): the new generation would serve
    BM25 only, so the reload is refused; dense queries go on being answered, and Info and the generation
    health service say why, instead of a silent downgrade with health SERVING."""
    import json

    import grpc
    from click.testing import CliRunner
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from searchd.cli import main as searchd_main

    root = tmp_path / "root"
    shutil.copytree(search_root / "pubmedqa", root / "pubmedqa")
    pid_file = tmp_path / "searchd.pid"
    process, address = start_background_server(root, "--pid-file", pid_file)
    try:
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
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
