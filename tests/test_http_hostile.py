"""searchd's HTTP side under what a hostile hour sends, against a real `searchd serve --http-port` on a built root
(loopback, bounded loops): more searches than slots (refused at once, 429 with Retry-After, /health and gRPC still
answering), clients that hang up (their calls cancelled, logged CANCELLED), SIGTERM under load (every admitted call
answered 200 or 503 JSON, the process gone within the grace period), inputs that used to give 500 (a lone surrogate,
a question of more Han characters than Lucene's clauses), and what a reply says of the server (no banner, no
paths without the token, the error shape for 404 and 405)."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from conftest import SAMPLES
from helpers import start_http, stop_server
from medsnip.queries import query_texts
from searchd.client import SearchClient

QUESTIONS = list(query_texts(SAMPLES / "ir" / "pubmedqa-beir" / "queries.tsv").values())


def _retrieve(url: str, queries: list[str], timeout: float = 120, **extra) -> requests.Response:
    return requests.post(f"{url}/retrieve", json={"queries": queries, "topk": 3, **extra}, timeout=timeout)


def _log_lines(process) -> list[dict]:
    lines = []
    for line in process.log_path.read_text().splitlines():
        if line.startswith("{"):
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return lines


@pytest.fixture(scope="module")
def busy(search_root, tmp_path_factory):
    """A searchd with three in-flight slots, two of them open to bulk calls, and 520 questions of bulk calls in flight
    at most (two calls of 256): a few clients are already more than it serves at once."""
    process, address, url = start_http(
        search_root, tmp_path_factory.mktemp("busy"), "--max-in-flight", 3, "--max-bulk-questions", 520
    )
    yield process, address, url
    stop_server(process)


def test_more_searches_than_slots_are_refused_at_once_and_health_never_waits(busy):
    process, address, url = busy
    batch = (QUESTIONS * 2)[:200]
    with ThreadPoolExecutor(8) as pool:
        started = time.monotonic()
        answers = list(pool.map(lambda _: _retrieve(url, batch), range(8)))
    statuses = sorted(a.status_code for a in answers)
    assert set(statuses) <= {200, 429} and 429 in statuses and 200 in statuses, statuses
    for refused in (a for a in answers if a.status_code == 429):
        assert refused.headers["Retry-After"] == "1" and refused.json()["error"]["code"] == "RESOURCE_EXHAUSTED"
    assert time.monotonic() - started < 120
    assert _retrieve(url, (QUESTIONS * 3)[:530]).status_code == 200  # past the question budget, but alone

    stop_load = threading.Event()

    def load() -> None:
        while not stop_load.is_set():
            _retrieve(url, batch)

    loaders = [threading.Thread(target=load) for _ in range(4)]
    for thread in loaders:
        thread.start()
    try:
        time.sleep(0.5)
        waits = []
        for _ in range(10):
            begun = time.monotonic()
            assert requests.get(f"{url}/health", timeout=10).status_code == 200
            waits.append(time.monotonic() - begun)
        with SearchClient(address) as client:  # bulk calls leave a slot to small ones, on either protocol
            begun = time.monotonic()
            assert client.search(QUESTIONS[0], k=3)
            assert _retrieve(url, QUESTIONS[:1]).status_code == 200
            assert time.monotonic() - begun < 10
    finally:
        stop_load.set()
        for thread in loaders:
            thread.join(120)
    assert max(waits) < 1.0, waits


def test_a_client_that_hangs_up_cancels_its_call(busy):
    process, _, url = busy
    port = int(url.rsplit(":", 1)[1])
    body = json.dumps({"queries": (QUESTIONS * 2)[:256], "topk": 3}).encode()
    before = len(_log_lines(process))
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            head = (
                f"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            sock.sendall(head.encode() + body)
            time.sleep(0.3)  # admitted and searching
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        calls = [line for line in _log_lines(process)[before:] if line.get("method") == "BatchSearch"]
        if len(calls) >= 3:
            break
        time.sleep(0.2)
    assert [line["status"] for line in calls][:3] == ["CANCELLED"] * 3, calls
    begun = time.monotonic()
    assert _retrieve(url, QUESTIONS[:1]).status_code == 200
    assert time.monotonic() - begun < 5


def test_inputs_that_gave_500_are_refused_naming_the_field(busy):
    _, address, url = busy
    surrogate = '{"queries": ["asthma", "asthma \\ud800"], "topk": 3}'
    answer = requests.post(f"{url}/retrieve", data=surrogate, headers={"Content-Type": "application/json"}, timeout=30)
    assert answer.status_code == 400 and answer.json()["error"]["field"] == "queries[1]", answer.text
    searched = requests.post(
        f"{url}/search", data='{"query": "x \\udfff", "k": 3}', headers={"Content-Type": "application/json"}, timeout=30
    )
    assert searched.status_code == 400 and searched.json()["error"]["field"] == "query", searched.text
    han = "".join(chr(0x4E00 + n) for n in range(1100))  # one \w+ run of 1,100 distinct characters
    answer = _retrieve(url, ["asthma", han, "copd"])  # refused alone: the batch's other questions are served
    assert answer.status_code == 200, answer.text
    reply = answer.json()
    assert reply["result"][0] and reply["result"][1] == [] and reply["result"][2]
    [error] = reply["errors"]
    assert error["index"] == 1 and error["field"] == "queries[1]" and "distinct" in error["message"]
    assert "at org." not in answer.text and "java" not in answer.text.lower()
    with SearchClient(address) as client:  # gRPC's BatchSearch alike: the refused request says why
        responses = client.batch_search(["asthma", han], k=3)
    assert responses[0].hits and not responses[0].error and "distinct" in responses[1].error


def test_replies_say_nothing_of_the_server_without_its_token(bm25_root, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    process, _, url = start_http(bm25_root, tmp_path, "--token-file", token_file)
    try:
        bare = requests.get(f"{url}/health", timeout=10)
        assert bare.status_code == 200 and bare.json() == {"status": "SERVING"}
        full = requests.get(f"{url}/health", headers={"Authorization": "Bearer s3cret-token"}, timeout=10).json()
        assert full["status"] == "SERVING" and len(full) > 1
        for answer in (bare, requests.get(f"{url}/nowhere", timeout=10)):
            assert "server" not in {h.lower() for h in answer.headers}
        wrong_method = requests.get(f"{url}/retrieve", headers={"Authorization": "Bearer s3cret-token"}, timeout=10)
        assert wrong_method.status_code == 405 and wrong_method.json()["error"]["field"] == "method"
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:  # a body it will not read
            sock.sendall(
                f"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer s3cret-token\r\n"
                f"Content-Type: application/json\r\nContent-Length: {17 << 20}\r\n\r\n".encode()
                + b"{" * 64
            )
            reply = b""
            while chunk := sock.recv(65536):  # ends when the server closes the connection
                reply += chunk
        head = reply.split(b"\r\n\r\n", 1)[0].decode().lower()
        assert head.startswith("http/1.1 413") and "connection: close" in head, head
    finally:
        stop_server(process)


def test_sigterm_under_load_answers_every_admitted_call_and_exits_within_grace(search_root, tmp_path):
    process, _, url = start_http(search_root, tmp_path, "--max-in-flight", 4, "--grace", 3)
    batch = (QUESTIONS * 2)[:256]
    answers: list = []

    def client() -> None:
        try:
            answers.append(_retrieve(url, batch, timeout=60))
        except requests.RequestException as error:  # refused connections once it stopped listening
            answers.append(error)

    clients = [threading.Thread(target=client) for _ in range(12)]
    for thread in clients:
        thread.start()
    time.sleep(1.0)
    process.send_signal(signal.SIGTERM)
    begun = time.monotonic()
    assert process.wait(timeout=30) == 0
    assert time.monotonic() - begun < 3 + 5
    for thread in clients:
        thread.join(60)
    replies = [a for a in answers if isinstance(a, requests.Response)]
    assert replies and all(a.status_code in (200, 429, 503) for a in replies), [a.status_code for a in replies]
    for reply in replies:
        body = reply.json()  # whole JSON, never a truncated or text/plain reply
        if reply.status_code != 200:
            assert body["error"]["code"] in ("UNAVAILABLE", "RESOURCE_EXHAUSTED") and reply.headers["Retry-After"]
    log = process.log_path.read_text()
    assert "exiting without closing the indexes" not in log and "Traceback" not in log


def test_idle_and_half_sent_connections_are_closed_and_never_shut_searches_off(bm25_root, tmp_path):
    """Silent sockets and headers sent a byte at a time are ended (408 in the error shape) once the request
    deadline passes; past --max-connections a new connection closes the one idle longest (silent sockets cannot
    lock searches out); only when every connection has a request in progress is a search refused (503 JSON, only
    /health answered) and, past the room kept for /health, a new connection gets 503 JSON with Retry-After at once;
    gRPC is untouched."""
    process, address, url = start_http(bm25_root, tmp_path, "--max-connections", 40, "--idle-timeout", 5)
    port = int(url.rsplit(":", 1)[1])
    sockets = []

    def connect() -> socket.socket:
        sockets.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        return sockets[-1]

    def busy() -> None:  # a request whose body is still coming: in progress, never closed to make room
        connect().sendall(
            f"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            "Content-Length: 100\r\n\r\n{".encode()
        )

    try:
        silent, partial = connect(), connect()
        partial.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1")  # never finished
        time.sleep(6)  # the request deadline (--idle-timeout 5) passes
        closed = partial.recv(4096).decode()
        assert closed.startswith("HTTP/1.1 408") and "DEADLINE_EXCEEDED" in closed, closed
        assert silent.recv(4096).startswith(b"HTTP/1.1 408")

        flood = [connect() for _ in range(40)]
        time.sleep(1.5)  # idle for longer than a new connection's time to send its request
        for _ in range(20):  # past the cap: the ones idle longest are closed to make room
            connect()
        assert flood[0].recv(4096) == b"" and flood[19].recv(4096) == b""
        assert requests.get(f"{url}/health", timeout=5).status_code == 200
        assert _retrieve(url, ["asthma"], timeout=10).status_code == 200

        for _ in range(41):
            busy()
        time.sleep(0.3)
        health = requests.get(f"{url}/health", timeout=5)
        assert health.status_code == 200, health.text
        refused = _retrieve(url, ["asthma"], timeout=5)
        assert refused.status_code == 503 and refused.headers["Retry-After"] == "1", refused.text
        assert refused.json()["error"]["code"] == "UNAVAILABLE"
        for _ in range(64):  # past the room kept for /health too: refused at once, in the documented shape
            busy()
        answer = connect().recv(4096).decode()
        assert answer.startswith("HTTP/1.1 503") and "retry-after: 1" in answer.lower() and '"error"' in answer
        with SearchClient(address) as client:
            assert client.search(QUESTIONS[0], k=3).hits
    finally:
        for sock in sockets:
            sock.close()
        stop_server(process)


def test_clients_that_never_read_their_replies_are_closed_and_free_what_they_held(bm25_root, tmp_path):
    """Replies go out in chunks as the client takes them: clients asking big replies and never reading hold at
    most their own replies, for --idle-timeout, and are then closed; a refused request is in the request log.
    (BM25 alone: the replies' size is what is tested, not the encoder.)"""
    from helpers import rss_mb

    process, _, url = start_http(bm25_root, tmp_path, "--idle-timeout", 2)
    port = int(url.rsplit(":", 1)[1])
    body = json.dumps({"queries": QUESTIONS[:48], "topk": 200}).encode()  # ~10 MB of JSON each
    sockets = []
    try:
        after = []
        # the first rounds warm the indexes and stores (mapped pages count in RSS) and the allocator's per-thread
        # arenas (the reply threads differ from round to round); calls kept past their close (each ~10 MB of reply
        # bytes, as much again in protobuf and in dicts while built) would add more than the tolerance a round
        for round_ in (1, 2, 3):
            for _ in range(8):
                sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.sendall(
                    f"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                sockets.append(sock)
            deadline = time.monotonic() + 90  # answered, then stuck; the send deadline (2 s) passes
            while time.monotonic() < deadline and process.log_path.read_text().count("took no part") < 8 * round_:
                time.sleep(0.5)
            assert process.log_path.read_text().count("took no part of its reply") == 8 * round_
            assert _retrieve(url, ["asthma"], timeout=10).status_code == 200
            after.append(rss_mb(process.pid))
        assert after[2] < after[1] * 1.15 + 50, after  # what the closed clients held was freed
        refused = requests.get(f"{url}/retrieve", timeout=10)
        assert refused.status_code == 405
        time.sleep(0.5)
        lines = [json.loads(line) for line in process.log_path.read_text().splitlines() if line.startswith("{")]
        assert any(line.get("method") == "GET /retrieve" and line.get("http_status") == 405 for line in lines)
    finally:
        for sock in sockets:
            sock.close()
        stop_server(process)
