"""searchd under hostile use, each against a real server: calls without deadlines, deadlines shared by
a batch's jobs, SIGTERM during a long batch, a taken port, undecodable requests, idle and excess
connections, reply and page size limits."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from conftest import REPO, SAMPLES
from helpers import rss_mb, stop_server
from medsnip.queries import query_texts
from medsnip.v1 import search_pb2
from searchd.client import SearchClient
from searchd.daemon import build_server
from searchd.launch import start_background_server
from searchd.listening import BindError
from searchd.server import Limits

QUESTIONS = list(query_texts(SAMPLES / "ir" / "pubmedqa-beir" / "queries.tsv").values())


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.fixture
def hybrid_server(search_root_server):
    return search_root_server[:2]


@pytest.fixture(scope="module")
def small_limits_server(search_root):
    """Textbooks only (no encoder to load), with small reply, connection and idle limits."""
    process, address = start_background_server(
        search_root, "--corpora", "textbooks", "--max-reply-mb", "1", "--max-connections", "30", "--idle-timeout", "1"
    )
    yield process, address
    stop_server(process)


def test_calls_without_a_deadline_get_answers(hybrid_server):
    """grpcurl and most clients send no deadline: the server's own limit applies, never an error."""
    _, address = hybrid_server
    with SearchClient(address, timeout=None, retries=0) as client:
        assert len(client.search("aspirin and heart attack", k=5).hits) == 5
        assert len(client.batch_search(QUESTIONS[:3], k=5)) == 3
        assert client.info().max_call_seconds == 300
    with grpc.insecure_channel(address) as channel:  # a bare stub, no timeout argument at all
        search = channel.unary_unary(
            "/medsnip.v1.SearchService/Search",
            request_serializer=search_pb2.SearchRequest.SerializeToString,
            response_deserializer=search_pb2.SearchResponse.FromString,
        )
        assert search(search_pb2.SearchRequest(query="statins", k=3)).hits


def test_a_batch_past_its_deadline_leaves_no_work_running(hybrid_server):
    """The jobs of a BatchSearch share the call's deadline: once it passes, queued queries are dropped
    instead of each running on with a fresh allowance and keeping the server busy for seconds."""
    process, address = hybrid_server
    with SearchClient(address, retries=0) as client:
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as caught:
            client.batch_search(QUESTIONS[:256], k=1000, timeout=2)
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert time.monotonic() - started < 4
        time.sleep(2.5)  # the batch being served when the deadline passed may finish
        before = cpu_seconds(process.pid)
        time.sleep(1.5)
        assert cpu_seconds(process.pid) - before < 0.3
        assert client.search("aspirin", k=3, timeout=10).hits


def test_sigterm_during_a_long_batch_exits_within_the_grace_period(search_root):
    """SIGTERM while 256 queries x k=1000 with text are being served: the call is cancelled after the
    grace period, the engine is closed only once nothing runs (no `ValueError: mmap closed` from a store
    closed under a running search), and the process exits 0 rather than hanging."""
    process, address = start_background_server(search_root, "--grace", "1", "--max-reply-mb", "1000")
    outcome: dict = {}

    def long_call() -> None:
        with SearchClient(address, retries=0) as client:
            try:
                client.batch_search(QUESTIONS[:256], k=1000, timeout=120)
                outcome["code"] = grpc.StatusCode.OK
            except grpc.RpcError as error:
                outcome["code"], outcome["details"] = error.code(), error.details()

    caller = threading.Thread(target=long_call)
    caller.start()
    time.sleep(1.5)
    signalled = time.monotonic()
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    assert time.monotonic() - signalled < 1 + 10 + 3  # grace + the shutdown bound + start-up noise
    caller.join(timeout=30)
    assert outcome["code"] in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
    log = process.log_path.read_text()
    assert "Traceback" not in log and "mmap closed" not in log, log[-2000:]
    if outcome.get("details") == "Cancelling all calls":  # the call was running when the grace period ended
        assert "still running after the grace period (1 s): cancelled" in log, log[-2000:]


def test_a_taken_port_is_refused(small_limits_server, search_root):
    """gRPC's SO_REUSEPORT would let a second server share the port, splitting connections between two
    roots; the second one must refuse to start."""
    _, address = small_limits_server
    port = address.rsplit(":", 1)[1]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "searchd.cli",
            "serve",
            "--root",
            str(search_root),
            "--corpora",
            "textbooks",
            "--port",
            port,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "refusing to start" in result.stderr and "port is taken" in result.stderr
    assert "add_port.cc" not in result.stderr  # gRPC core's own line stays out of the user's terminal
    assert result.stderr.count("error: ") == 1


def test_ports_out_of_range_are_refused():
    """gRPC binds port % 65536 without a word; build_server refuses before binding anything."""
    for port in (99999, 65536, -1):
        with pytest.raises(BindError, match="out of range"):
            build_server(None, "127.0.0.1", port, Limits())


def _garbage_flood(address: str, method: str, count: int, streaming: bool = False) -> set:
    garbage = bytes(range(256)) * 2  # field 0 is invalid in every protobuf message
    codes = set()
    with grpc.insecure_channel(address) as channel:
        if streaming:
            call = channel.stream_stream(method)
            for _ in range(count):
                try:
                    list(call(iter([garbage]), timeout=10))
                except grpc.RpcError as error:
                    codes.add(error.code())
            return codes
        call = channel.unary_unary(method)
        for start in range(0, count, 100):
            pending = [call.future(garbage, timeout=10) for _ in range(min(100, count - start))]
            for future in pending:
                try:
                    future.result()
                except grpc.RpcError as error:
                    codes.add(error.code())
    return codes


def test_undecodable_requests_leave_memory_flat(small_limits_server):
    """grpcio leaks ~19 KB per request its deserializer rejects (README, known issues); searchd decodes
    requests itself, so 9,000 garbage calls on three services, without a token, cost no memory."""
    process, address = small_limits_server
    methods = [
        "/medsnip.v1.SearchService/Search",
        "/medsnip.v1.SearchService/BatchSearch",
        "/grpc.health.v1.Health/Check",
    ]
    for method in methods:  # warm up: thread pools, allocator arenas
        _garbage_flood(address, method, 300)
    before = rss_mb(process.pid)
    for method in methods:
        assert _garbage_flood(address, method, 3000) == {grpc.StatusCode.INVALID_ARGUMENT}
    reflection = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
    assert _garbage_flood(address, reflection, 200, streaming=True) == {grpc.StatusCode.INVALID_ARGUMENT}
    grown = rss_mb(process.pid) - before
    assert grown < 20, f"RSS grew {grown:.0f} MB over 9,200 undecodable requests"  # the leak: ~170 MB
    with SearchClient(address) as client:
        assert client.search("anatomy of the heart", k=3).hits
    assert '"undecodable_bytes": 512' in process.log_path.read_text()


def test_idle_connections_are_closed_and_their_number_is_bounded(small_limits_server):
    """--max-connections 30 --idle-timeout 1: of 60 clients at once 30 are served and the rest refused
    (no file descriptors beyond the limit), and idle connections are closed a second later."""
    process, address = small_limits_server
    baseline = open_descriptors(process.pid)
    channels, served = [], 0
    try:
        for _ in range(60):
            channel = grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
            channels.append(channel)
            try:
                health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
                served += 1
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.UNAVAILABLE
        assert 20 <= served <= 30
        assert open_descriptors(process.pid) <= baseline + 30 + 3
    finally:
        for channel in channels:
            channel.close()
    host, port = address.rsplit(":", 1)
    raw = [socket.create_connection((host, int(port))) for _ in range(100)]  # never speak HTTP/2
    time.sleep(0.5)
    assert open_descriptors(process.pid) <= baseline + 30 + 3
    deadline = time.monotonic() + 10
    while open_descriptors(process.pid) > baseline + 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert open_descriptors(process.pid) <= baseline + 2
    for connection in raw:
        connection.close()
    with SearchClient(address) as client:
        assert client.search("anatomy of the heart", k=3).hits


def test_replies_and_pages_are_bounded(small_limits_server):
    """--max-reply-mb 1: a batch whose reply would be ~10 MB is refused with RESOURCE_EXHAUSTED and a
    way out; the same batch without text fits. A scan page above the limit is INVALID_ARGUMENT."""
    _, address = small_limits_server
    with SearchClient(address, retries=0) as client:
        info = client.info()
        assert info.max_reply_bytes == 1 << 20 and info.max_page_size == 10_000
        with pytest.raises(grpc.RpcError) as caught:
            client.batch_search(QUESTIONS[:100], k=100)
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "max_reply_bytes" in caught.value.details() and "return_text" in caught.value.details()
        responses = client.batch_search(QUESTIONS[:100], k=20, return_text=False)
        assert len(responses) == 100 and all(0 < len(r.hits) <= 20 for r in responses)
        with pytest.raises(grpc.RpcError) as caught:
            list(client.scan_snippets(page_size=10_001))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert sum(1 for _ in client.scan_snippets(page_size=10_000)) == 315


def test_a_query_lucene_refuses_fails_alone_and_cleanly(hybrid_server):
    """A 3,887-character query of 1,296 distinct words (under the 4,096 length limit) is more than
    Lucene's 1,024 clauses: its caller gets INVALID_ARGUMENT saying so, and the 40 BM25 queries sent at
    the same time (micro-batched with it) all get their hits."""
    _, address = hybrid_server
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    long_query = " ".join(a + b for a in alphabet for b in alphabet)
    assert len(long_query) == 3887 and len(set(long_query.split())) == 1296
    outcomes: dict = {}

    def ask(key, text):
        with SearchClient(address, retries=0) as client:
            try:
                outcomes[key] = len(client.search(text, k=5, retrievers=["bm25"], timeout=60).hits)
            except grpc.RpcError as error:
                outcomes[key] = (error.code(), error.details())

    threads = [threading.Thread(target=ask, args=("long", long_query))]
    threads += [threading.Thread(target=ask, args=(i, q)) for i, q in enumerate(QUESTIONS[:40])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    code, details = outcomes.pop("long")
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "more distinct terms than BM25 can search" in details
    assert "java" not in details.lower()
    assert outcomes == {i: 5 for i in range(40)}
