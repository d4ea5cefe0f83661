"""searchd over HTTP (searchd.http_api), against a real `searchd serve --http-port`: Search-R1's /retrieve as its
rollout code calls it (equal to gRPC's hits), /search, /health, the OpenAPI document, refusals that name
the field, cross-site requests, and the reliability gRPC is held to: floods, garbage, slow clients, SIGTERM
drain, token and TLS."""

from __future__ import annotations

import json
import random
import signal
import socket
import subprocess
import sys
import threading
import time

import grpc
import pytest
import requests
from google.protobuf import json_format

from conftest import REPO, SAMPLES
from helpers import free_port, rss_mb, self_signed, start_http, stop_server
from medsnip.queries import query_texts
from searchd.client import SearchClient

QUESTIONS = list(query_texts(SAMPLES / "ir" / "pubmedqa-beir" / "queries.tsv").values())


@pytest.fixture
def served(search_root_server):
    return search_root_server


def passages(result: list[dict]) -> str:
    """Search-R1's rollout (`_passages2string`): the first line of `contents` is the title, the rest the text."""
    lines = []
    for at, item in enumerate(result):
        contents = item["document"]["contents"]
        title, text = contents.split("\n")[0], "\n".join(contents.split("\n")[1:])
        lines.append(f"Doc {at + 1}(Title: {title}) {text}")
    return "\n".join(lines)


def test_retrieve_answers_search_r1s_rollout_with_grpcs_hits(served):
    """A batch of questions, topk 3, with scores (the rollout's call) and without; the hits are gRPC
    BatchSearch's for the same questions and k, each document's contents `"Title"\\ntext`."""
    _, address, url = served
    questions = QUESTIONS[:8]
    payload = {"queries": questions, "topk": 3, "return_scores": True}
    answer = requests.post(f"{url}/retrieve", json=payload, timeout=60)
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    result = answer.json()["result"]
    with SearchClient(address) as client:
        expected = client.batch_search(questions, k=3)
    assert len(result) == len(questions) and all(len(hits) == 3 for hits in result)
    for hits, response in zip(result, expected, strict=True):
        assert [h["document"]["id"] for h in hits] == [hit.id for hit in response.hits]
        assert [h["score"] for h in hits] == pytest.approx([hit.score for hit in response.hits])
        for h, hit in zip(hits, response.hits, strict=True):
            assert set(h) == {"document", "score"} and set(h["document"]) == {"id", "contents"}
            assert h["document"]["contents"] == f'"{hit.title}"\n{hit.content}'
    assert passages(result[0]).startswith(f'Doc 1(Title: "{expected[0].hits[0].title}") ')

    plain = requests.post(f"{url}/retrieve", json={"queries": questions[:2], "topk": 3}, timeout=60).json()["result"]
    assert [[d["id"] for d in hits] for hits in plain] == [[h["document"]["id"] for h in hits] for hits in result[:2]]
    assert all(set(d) == {"id", "contents"} for hits in plain for d in hits)
    default = requests.post(f"{url}/retrieve", json={"queries": questions[:1]}, timeout=60).json()["result"]
    assert len(default[0]) == 3  # --retrieve-topk's default, Search-R1's


def test_search_health_and_the_openapi_document(served):
    _, address, url = served
    body = {"query": "hepatorenal syndrome", "k": 5, "corpora": ["pubmedqa"], "returnText": True}
    answer = requests.post(f"{url}/search", json=body, timeout=60)
    assert answer.status_code == 200
    with SearchClient(address) as client:
        expected = client.search("hepatorenal syndrome", k=5, corpora=["pubmedqa"])
    got, want = answer.json(), json_format.MessageToDict(expected, preserving_proto_field_name=True)
    assert [h["id"] for h in got["hits"]] == [h["id"] for h in want["hits"]]
    assert [h["retrievers"] for h in got["hits"]] == [h["retrievers"] for h in want["hits"]]
    assert got["hits"][0]["content"] == want["hits"][0]["content"]
    health = requests.get(f"{url}/health", timeout=10)
    assert health.status_code == 200 and health.json()["status"] == "SERVING"
    assert health.json()["generation_complete"] is True
    document = requests.get(f"{url}/openapi.json", timeout=10).json()
    assert {"/retrieve", "/search", "/health"} <= set(document["paths"])
    schema = document["components"]["schemas"]["RetrieveRequest"]
    assert set(schema["properties"]) == {"queries", "topk", "return_scores"} and schema["required"] == ["queries"]
    missing = requests.get(f"{url}/docs", timeout=10)  # no page whose scripts come from a CDN
    assert missing.status_code == 404 and missing.json()["error"]["field"] == "path"
    assert "server" not in {h.lower() for h in missing.headers}


BAD_REQUESTS = [  # (path, body, status, field)
    ("/retrieve", {"queries": [], "topk": 3}, 400, "queries"),
    ("/retrieve", {"queries": ["a question", "  "], "topk": 3}, 400, "queries[1]"),
    ("/retrieve", {"queries": ["a question"], "topk": 100_000}, 400, "topk"),
    ("/retrieve", {"queries": ["a question"], "topk": 0}, 400, "topk"),
    ("/retrieve", {"queries": "a question", "topk": 3}, 400, "queries"),
    ("/retrieve", {"queries": [7], "topk": 3}, 400, "queries.0"),
    ("/retrieve", {"queries": ["a question"], "topk": "3"}, 400, "topk"),
    ("/retrieve", {"queries": ["a question"], "return_scores": "yes"}, 400, "return_scores"),
    ("/retrieve", {"queries": ["a question"], "top_k": 3}, 400, "top_k"),
    ("/retrieve", {"queries": ["q"] * 4097}, 400, "queries"),
    ("/retrieve", {"queries": ["x" * 5000]}, 400, "queries[0]"),
    ("/retrieve", [1, 2], 400, "body"),
    ("/search", {"query": "", "k": 3}, 400, "query"),
    ("/search", {"query": "asthma", "k": 5000}, 400, "k"),
    ("/search", {"query": "asthma", "corpora": ["nope"]}, 400, "corpora"),
    ("/search", {"query": "asthma", "retrievers": ["dense-nope"]}, 400, "retrievers"),
    ("/search", {"query": "asthma", "k": "many"}, 400, "k"),
    ("/search", {"query": "asthma", "colour": "red"}, 400, "colour"),
]


def test_bad_requests_get_4xx_json_naming_the_field_and_never_fail_another_client(served):
    """Each bad request is refused with its field named, while a good client's calls, running at the same
    time, all succeed with the right answers; then the server is healthy."""
    _, address, url = served
    with SearchClient(address) as client:
        expected = [hit.id for hit in client.search(QUESTIONS[20], k=3).hits]
    good: list = []

    def good_client() -> None:
        for _ in range(20):
            answer = requests.post(f"{url}/retrieve", json={"queries": [QUESTIONS[20]], "topk": 3}, timeout=60)
            good.append((answer.status_code, [d["id"] for d in answer.json()["result"][0]]))

    caller = threading.Thread(target=good_client)
    caller.start()
    for path, body, status, field in BAD_REQUESTS * 3:
        answer = requests.post(f"{url}{path}", json=body, timeout=60)
        assert answer.status_code == status, (body, answer.text)
        error = answer.json()["error"]
        assert error["field"] == field and error["code"] == "INVALID_ARGUMENT" and error["message"], (body, error)
    for raw, field in ((b"{not json", "body"), (b"", "body"), (b'{"queries": ["a"]', "body")):
        answer = requests.post(f"{url}/retrieve", data=raw, headers={"Content-Type": "application/json"}, timeout=60)
        assert answer.status_code == 400 and answer.json()["error"]["field"] == field, answer.text
    over = b'{"queries": ["' + b"a" * (16 << 20) + b'"]}'
    answer = requests.post(f"{url}/retrieve", data=over, headers={"Content-Type": "application/json"}, timeout=60)
    assert answer.status_code == 413 and answer.json()["error"]["field"] == "body"

    def chunks():  # no Content-Length: counted as it arrives
        yield b'{"queries": ["'
        for _ in range(17):
            yield b"a" * (1 << 20)
        yield b'"]}'

    answer = requests.post(f"{url}/retrieve", data=chunks(), headers={"Content-Type": "application/json"}, timeout=60)
    assert answer.status_code == 413 and answer.json()["error"]["field"] == "body"
    caller.join(timeout=120)
    assert good == [(200, expected)] * 20
    assert requests.get(f"{url}/health", timeout=10).json()["status"] == "SERVING"


def test_a_cross_site_request_is_refused(served):
    """What a page on another site can send: a form or no-preflight fetch (text/plain, form encodings), a
    request under a foreign Host (DNS rebinding), and a CORS preflight, which gets no CORS header."""
    _, _, url = served
    question = json.dumps({"queries": ["statins"], "topk": 3})
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        answer = requests.post(f"{url}/retrieve", data=question, headers={"Content-Type": kind}, timeout=10)
        assert answer.status_code == 415 and answer.json()["error"]["field"] == "Content-Type"
    port = url.rsplit(":", 1)[1]
    rebound = requests.post(
        f"{url}/retrieve", data=question, headers={"Content-Type": "application/json", "Host": f"evil.test:{port}"}
    )
    assert rebound.status_code == 421 and rebound.json()["error"]["field"] == "Host"
    for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
        named = requests.post(
            f"{url}/retrieve", data=question, headers={"Content-Type": "application/json", "Host": host}, timeout=60
        )
        assert named.status_code == 200
    preflight = requests.options(
        f"{url}/retrieve",
        headers={"Origin": "https://evil.test", "Access-Control-Request-Method": "POST"},
        timeout=10,
    )
    assert preflight.status_code >= 400 and not any(h.lower().startswith("access-control") for h in preflight.headers)
    answer = requests.post(
        f"{url}/retrieve", json={"queries": ["statins"]}, headers={"Origin": "https://evil.test"}, timeout=60
    )
    assert not any(h.lower().startswith("access-control") for h in answer.headers)


def test_health_says_serving_only_once_the_http_port_answers(search_root, tmp_path):
    """A launcher that waits for gRPC's health (as the README's examples and `searchd.launch` do) and then
    calls `/retrieve` at once: the first SERVING it reads finds the HTTP port open (health that said SERVING
    while the HTTP side was still importing and binding would have the call refused)."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    grpc_port, http_port = free_port(), free_port()
    command = [sys.executable, "-m", "searchd.cli", "serve", "--root", search_root, "--corpora", "textbooks"]
    command += ["--port", grpc_port, "--http-port", http_port]
    with open(tmp_path / "searchd.log", "w") as log:  # its request log: a file, never a pipe nobody reads
        process = subprocess.Popen(list(map(str, command)), cwd=REPO, stdout=subprocess.DEVNULL, stderr=log)
    process.log_path = tmp_path / "searchd.log"
    try:
        deadline = time.monotonic() + 120
        # reconnect every 5 ms, not after gRPC's default backoff (1 s and growing): the window is that short
        backoff = [(f"grpc.{name}_reconnect_backoff_ms", 5) for name in ("initial", "min", "max")]
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}", options=backoff) as channel:
            check = health_pb2_grpc.HealthStub(channel).Check
            while True:
                assert process.poll() is None and time.monotonic() < deadline, process.log_path.read_text()[-2000:]
                try:
                    if (
                        check(health_pb2.HealthCheckRequest(), timeout=1).status
                        == health_pb2.HealthCheckResponse.SERVING
                    ):
                        break
                except grpc.RpcError:  # not listening yet
                    pass
                time.sleep(0.005)
        body = {"queries": ["anatomy of the heart"], "topk": 3}
        answer = requests.post(f"http://127.0.0.1:{http_port}/retrieve", json=body, timeout=30)
        assert answer.status_code == 200 and len(answer.json()["result"][0]) == 3
    finally:
        stop_server(process)


def test_floods_garbage_and_slow_clients_leave_the_server_serving(search_root, tmp_path):
    """With 2 calls in flight at most: 32 concurrent batches get 200 or 429 only; 300 connections of random
    bytes and broken HTTP, and 20 clients that send half a request and stall, neither stop a good client
    nor grow memory (RSS within 40 MB)."""
    process, _, url = start_http(search_root, tmp_path, "--corpora", "textbooks", "--max-in-flight", 2)
    try:
        codes: list = []

        def heavy() -> None:
            answer = requests.post(f"{url}/retrieve", json={"queries": QUESTIONS[:64], "topk": 50}, timeout=120)
            codes.append(answer.status_code)
            if answer.status_code == 429:
                assert answer.json()["error"]["code"] == "RESOURCE_EXHAUSTED" and answer.headers["Retry-After"]

        callers = [threading.Thread(target=heavy) for _ in range(32)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join()
        assert 200 in codes and 429 in codes and set(codes) <= {200, 429}, codes

        host, port = url.removeprefix("http://").split(":")
        stalled = []
        for _ in range(20):  # slowloris: a request line and half a header, then nothing
            connection = socket.create_connection((host, int(port)))
            connection.sendall(b"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
            stalled.append(connection)
        before = rss_mb(process.pid)
        rng = random.Random(7)
        for at in range(300):
            with socket.create_connection((host, int(port)), timeout=10) as connection:
                if at % 3 == 0:
                    connection.sendall(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4096))))
                elif at % 3 == 1:
                    connection.sendall(b"POST /retrieve HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n{")
                else:
                    body = b'{"queries": [' + b"[" * 5000 + b"]}"
                    head = b"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    connection.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
                connection.shutdown(socket.SHUT_WR)
                try:
                    reply = connection.recv(65536)
                except OSError:
                    reply = b""
                assert not reply.startswith(b"HTTP/1.1 5"), reply[:300]
        answer = requests.post(f"{url}/retrieve", json={"queries": ["anatomy of the heart"], "topk": 3}, timeout=30)
        assert answer.status_code == 200 and len(answer.json()["result"][0]) == 3
        assert rss_mb(process.pid) - before < 40
        for connection in stalled:
            connection.close()
    finally:
        log = stop_server(process)
    assert "Traceback" not in log, log[-3000:]


def test_sigterm_drains_an_http_call_in_flight(search_root, tmp_path):
    """A /retrieve running when SIGTERM arrives is answered in full; /health says NOT_SERVING meanwhile, new
    connections are refused, and the process exits 0."""
    process, address, url = start_http(search_root, tmp_path, "--grace", 120)
    outcome: dict = {}

    def long_call() -> None:
        payload = {"queries": QUESTIONS[:200], "topk": 100, "return_scores": True}
        answer = requests.post(f"{url}/retrieve", json=payload, timeout=300)
        outcome["status"], outcome["result"] = answer.status_code, answer.json().get("result")

    caller = threading.Thread(target=long_call)
    caller.start()
    with SearchClient(address) as watcher:  # SIGTERM once the batch is being served
        deadline = time.monotonic() + 60
        while json.loads(watcher.info().stats_json)["queries"] == 0:
            assert not outcome and time.monotonic() < deadline, outcome
            time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    caller.join(timeout=300)
    assert process.wait(timeout=120) == 0
    assert outcome["status"] == 200 and len(outcome["result"]) == 200 and all(len(r) == 100 for r in outcome["result"])
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{url}/health", timeout=5)
    log = process.log_path.read_text()
    assert '"method": "BatchSearch", "queries": 200, "via": "http"' in log and '"status": "OK"' in log, log[-2000:]
    assert '"shutdown": "stopped"' in log


def test_token_and_tls_over_http(search_root, tmp_path):
    """The gRPC options hold for HTTP: no or a wrong bearer token is 401 (health stays open), and with
    --tls-cert/--tls-key it is HTTPS only."""
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    cert, key = self_signed(tmp_path)
    port_file = tmp_path / "http-port"
    command = [sys.executable, "-m", "searchd.cli", "serve", "--root", search_root, "--corpora", "textbooks"]
    command += ["--port", 0, "--http-port", 0, "--http-port-file", port_file, "--token-file", token_file]
    command += ["--tls-cert", cert, "--tls-key", key]
    process = subprocess.Popen(list(map(str, command)), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not port_file.exists():
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        url = f"http://127.0.0.1:{port_file.read_text()}"
        https = url.replace("http://", "https://")
        body = {"queries": ["anatomy of the heart"], "topk": 3}
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"}):
            answer = requests.post(f"{https}/retrieve", json=body, headers=headers, verify=str(cert), timeout=30)
            assert answer.status_code == 401 and answer.json()["error"]["code"] == "UNAUTHENTICATED"
        answer = requests.post(
            f"{https}/retrieve",
            json=body,
            headers={"Authorization": "Bearer s3cret-token"},
            verify=str(cert),
            timeout=30,
        )
        assert answer.status_code == 200 and len(answer.json()["result"][0]) == 3
        assert requests.get(f"{https}/health", verify=str(cert), timeout=10).status_code == 200
        with pytest.raises(requests.ConnectionError):
            requests.post(f"{url}/retrieve", json=body, timeout=10)  # plain HTTP to a TLS port
    finally:
        stopping = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    # the idle TLS connections the calls above left are cut, not waited for until the grace period (10 s) ends
    assert time.monotonic() - stopping < 8


def test_a_search_r1_step_of_4096_questions_is_answered_in_one_call_at_the_defaults(search_root, tmp_path):
    """Search-R1's exact request (`queries`, `topk`, `return_scores`) at 4,096 questions, the server at its defaults:
    one reply, a list of topk hits per question in order, each question's hits those it gets alone. The root
    serves BM25 alone (its serve.json): the size of the call is what is tested, not the encoder's speed."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "pubmedqa").symlink_to(search_root / "pubmedqa")
    (root / "serve.json").write_text(json.dumps({"retrievers": ["bm25"]}))
    process, address, url = start_http(root, tmp_path)
    try:
        batch = (QUESTIONS * -(-4096 // len(QUESTIONS)))[:4096]
        payload = {"queries": batch, "topk": 3, "return_scores": True}
        answer = requests.post(f"{url}/retrieve", json=payload, timeout=600)
        assert answer.status_code == 200, answer.text[:500]
        result = answer.json()["result"]
        assert len(result) == 4096 and all(len(hits) <= 3 for hits in result)
        assert sum(len(hits) == 3 for hits in result) > 4000  # (a question may match fewer texts by BM25)
        assert all(
            set(hit) == {"document", "score"} and set(hit["document"]) == {"id", "contents"} for hit in result[0]
        )
        with SearchClient(address) as client:
            for at in (0, 1, 777, 4095):
                alone = client.search(batch[at], k=3)
                assert [hit["document"]["id"] for hit in result[at]] == [hit.id for hit in alone.hits]
                assert [hit["score"] for hit in result[at]] == pytest.approx(
                    [hit.score for hit in alone.hits], abs=1e-6
                )
    finally:
        stop_server(process)


def test_a_list_that_is_the_answer_by_itself_is_asked_for_k_and_gives_what_depth_100_gives(served):
    """One list (one corpus, one retriever) or MedRAG's merge of one retriever's lists: the default depth is k, and
    the hits, ranks and scores are those of depth 100; fusing several lists by rank keeps max(2k, 100)."""
    _, address, _ = served
    with SearchClient(address) as client:
        retrievers = list(client.info().retrievers)
        corpora = [corpus.name for corpus in client.info().corpora]
        for question in QUESTIONS[:5]:
            for asked in (
                {"corpora": corpora[:1], "retrievers": retrievers[:1]},
                {"corpora": corpora[:1], "retrievers": retrievers[-1:]},
                {"retrievers": retrievers[-1:], "fusion": "medrag"},
            ):
                shallow = client.search(question, k=4, **asked)
                deep = client.search(question, k=4, depth=100, **asked)
                assert [(h.id, h.rank, h.score) for h in shallow.hits] == [(h.id, h.rank, h.score) for h in deep.hits]
