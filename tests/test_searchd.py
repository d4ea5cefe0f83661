"""searchd as a real server on a free loopback port, over the real PubMedQA and textbook corpora of
the session's corpus root: fusion, Info, concurrency, bad requests, deadlines, auth, SIGTERM drain,
health, reflection, and the client CLI."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from conftest import REPO, SAMPLES, copy_corpus
from helpers import rrf_by_hand, self_signed
from medsnip.corpus import Corpus
from medsnip.queries import query_texts
from searchd.client import SearchClient
from searchd.fusion import fuse_rrf
from searchd.launch import start_background_server, wait_serving

QUERIES = SAMPLES / "ir" / "pubmedqa-beir" / "queries.tsv"


def start_server(root: Path, tmp_path: Path, *extra) -> tuple[subprocess.Popen, str]:
    return start_background_server(root, *map(str, extra))


@pytest.fixture
def server(search_root_server):
    return search_root_server[1]


@pytest.fixture(scope="module")
def questions():
    return list(query_texts(QUERIES).values())


def test_rrf_by_hand():
    lists = {("a", "bm25"): [("x", 9.0), ("y", 5.0), ("z", 1.0)], ("a", "dense"): [("y", 0.9), ("w", 0.8)]}
    fused = fuse_rrf(lists, k=4, rrf_k=60)
    assert [h.id for h in fused] == ["y", "x", "w", "z"]  # y: 1/62 + 1/61; x: 1/61; w: 1/62; z: 1/63
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert sorted(fused[0].contributions) == [("a", "bm25", 2, 5.0), ("a", "dense", 1, 0.9)]


def test_hybrid_hits_are_the_rrf_of_the_indexer_lists(server, search_root, questions):
    """The server's fused ranking equals RRF computed here from the indexer's own lists."""
    from indexer.bm25 import BM25Index
    from indexer.dense import DenseIndex
    from medsnip.encoders import DenseEncoder, preset

    pubmedqa, textbooks = search_root / "pubmedqa", search_root / "textbooks"
    encoder = DenseEncoder(preset("minilm"), queries_only=True)
    dense = DenseIndex.open(pubmedqa / "dense-minilm", encoder=encoder)
    bm25_pubmedqa, bm25_textbooks = BM25Index.open(pubmedqa / "bm25"), BM25Index.open(textbooks / "bm25")
    with SearchClient(server) as client:
        for question in questions[:5]:
            response = client.search(question, k=10, rrf_k=100)
            depth = 100  # max(2k, 100)
            lists = {
                ("pubmedqa", "bm25"): bm25_pubmedqa.search([question], depth)[0],
                ("pubmedqa", "dense-minilm"): dense.search([question], depth)[0],
                ("textbooks", "bm25"): bm25_textbooks.search([question], depth)[0],
            }
            expected = rrf_by_hand(lists.values(), 10, 100)
            assert [h.id for h in response.hits] == [i for i, _ in expected]
            assert [h.score for h in response.hits] == pytest.approx([score for _, score in expected], rel=1e-6)
            top = response.hits[0]
            assert top.title or top.content
            assert {(r.corpus, r.retriever) for r in top.retrievers} <= set(lists)


def test_info_reports_corpora_lineage_and_encoder(server, search_root):
    with SearchClient(server) as client:
        info = client.info()
    assert {c.name for c in info.corpora} == {"pubmedqa", "textbooks"}
    assert list(info.retrievers) == ["bm25", "dense-minilm"]
    for corpus_info in info.corpora:
        corpus = Corpus.open(search_root / corpus_info.name)
        assert corpus_info.snippets == corpus.snippets and corpus_info.lineage_sha256 == corpus.record_hash
        assert all(index.lineage_sha256 == corpus.record_hash for index in corpus_info.indexes)
    assert '"weights_sha256"' in info.encoder_json and info.server_version


def test_sixteen_concurrent_clients_get_the_sequential_answers(server, questions):
    with SearchClient(server) as client:
        expected = {q: [h.id for h in client.search(q, k=5).hits] for q in questions[:32]}
    failures: list[str] = []

    def worker(offset: int) -> None:
        with SearchClient(server) as client:
            for q in questions[offset : offset + 32 : 8] + questions[:2]:
                if [h.id for h in client.search(q, k=5).hits] != expected.get(
                    q, [h.id for h in client.search(q, k=5).hits]
                ):
                    failures.append(q)

    threads = [threading.Thread(target=worker, args=(i % 4,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_hundreds_of_bad_requests_leave_the_server_healthy(server):
    rng = random.Random(5)
    alphabet = "abc \x00\u00e9\u4e2d\ud7ff!?"
    bad = 0
    with SearchClient(server, retries=0) as client:
        for _ in range(300):
            query = "".join(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 5, 50, 5000])))
            k = rng.choice([0, 1, 10, 1001, 2**31])
            options = rng.choice(
                [
                    {},
                    {"corpora": ["nope"]},
                    {"retrievers": ["splade"]},
                    {"depth": 5000},
                    {"bm25_k1": -1.0},
                    {"corpora": ["textbooks"]},
                ]
            )
            try:
                client.search(query, k=k, **options)
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
                bad += 1
        assert bad > 150
        assert client.search("aspirin", k=3).hits
    wait_serving(server)


def test_deadline_is_honoured(server):
    with SearchClient(server, retries=0) as client, pytest.raises(grpc.RpcError) as caught:
        client.search("myocardial infarction " * 100, k=1000, timeout=0.001)
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


def test_health_and_reflection_answer(server):
    wait_serving(server)
    with grpc.insecure_channel(server) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        responses = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
        services = {s.name for r in responses for s in r.list_services_response.service}
    assert {"medsnip.v1.SearchService", "grpc.health.v1.Health"} <= services


def test_token_and_overload_limits(search_root, tmp_path, questions):
    """A server with a token and at most 2 calls in flight: no or a wrong token is UNAUTHENTICATED;
    16 concurrent batch calls get RESOURCE_EXHAUSTED beyond the limit, and the server stays healthy."""
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    process, address = start_server(
        search_root, tmp_path, "--token-file", token_file, "--corpora", "textbooks", "--max-in-flight", 2
    )
    try:
        codes: list = []

        def heavy() -> None:
            with SearchClient(address, token="s3cret-token", retries=0) as client:
                try:
                    client.batch_search(questions[:100], k=50)
                    codes.append(grpc.StatusCode.OK)
                except grpc.RpcError as error:
                    codes.append(error.code())

        callers = [threading.Thread(target=heavy) for _ in range(16)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join()
        assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes and grpc.StatusCode.OK in codes
        assert set(codes) <= {grpc.StatusCode.OK, grpc.StatusCode.RESOURCE_EXHAUSTED}
        with SearchClient(address, retries=0) as client, pytest.raises(grpc.RpcError) as caught:
            client.search("anatomy of the heart")
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with SearchClient(address, token="wrong", retries=0) as client, pytest.raises(grpc.RpcError) as caught:
            client.info()
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with SearchClient(address, token="s3cret-token") as client:
            assert client.search("anatomy of the heart", k=3).hits
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0


def test_sigterm_drains_in_flight_calls(search_root, tmp_path, questions):
    """A call running when SIGTERM arrives is finished and answered in full within the grace period. The
    call (200 queries, 100 hits with text: a 28 MB reply) takes about 5 s on 2 busy cores and can pass the
    default 10 s on a loaded machine, where gRPC cancels it (UNAVAILABLE, "Cancelling all calls"): the
    grace here is generous, since the test is about draining, not about the grace's length."""
    process, address = start_server(search_root, tmp_path, "--grace", 120)
    outcome: dict = {}

    def long_call() -> None:
        with SearchClient(address, retries=0) as client:
            try:
                outcome["responses"] = client.batch_search(questions[:200], k=100)
            except grpc.RpcError as error:
                outcome["error"] = (error.code(), error.details())

    caller = threading.Thread(target=long_call)
    caller.start()
    with SearchClient(address) as watcher:  # SIGTERM once the batch is served (its first query counted), not before
        deadline = time.monotonic() + 60
        while json.loads(watcher.info().stats_json)["queries"] == 0:
            assert "error" not in outcome and time.monotonic() < deadline, outcome
            time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    caller.join(timeout=120)
    assert process.wait(timeout=120) == 0
    assert "error" not in outcome and len(outcome["responses"]) == 200, (outcome, process.log_path.read_text()[-3000:])


def test_refuses_to_start_on_a_lineage_mismatch(search_root, tmp_path):
    import shutil

    root = tmp_path / "root"
    copy_corpus(search_root / "textbooks", root)
    shutil.rmtree(root / "textbooks" / "bm25")
    shutil.copytree(search_root / "pubmedqa" / "bm25", root / "textbooks" / "bm25")  # another corpus's index
    result = subprocess.run(
        [sys.executable, "-m", "searchd.cli", "serve", "--root", str(root), "--port", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "refusing to start" in result.stderr and "lineage hash" in result.stderr


def test_batch_cli_writes_a_trec_run(server, tmp_path):
    from click.testing import CliRunner

    from searchd.cli import main as searchd_main

    run = tmp_path / "run.trec"
    queries = tmp_path / "q.tsv"
    queries.write_text("".join(QUERIES.read_text().splitlines(keepends=True)[:20]))
    result = CliRunner().invoke(
        searchd_main,
        ["batch", str(queries), "--out", str(run), "--server", server, "--k", "20", "--corpora", "pubmedqa"],
    )
    assert result.exit_code == 0, result.output
    lines = run.read_text().splitlines()
    assert len(lines) == 20 * 20
    qid, q0, doc, rank, score, tag = lines[0].split()
    assert q0 == "Q0" and rank == "1" and tag == "searchd"
    hits_own_abstract = sum(1 for line in lines if line.split()[2] == f"pubmedqa:{line.split()[0]}:0")
    assert hits_own_abstract >= 18  # each question's own abstract is in its top 20


def test_every_method_is_callable_by_name_from_python_and_the_command_line(server):
    """SearchClient.call and `searchd call` are made from the service descriptor: a method added to the
    proto and the server needs no client code (docs/design.md, "A new gRPC method")."""
    from click.testing import CliRunner

    from searchd.cli import main as searchd_main

    with SearchClient(server) as client:
        assert list(client.call("Info").retrievers) == list(client.info().retrievers)
        some_id = client.search("mitral valve", k=1).hits[0].id
        assert [s.id for s in client.call("GetSnippets", {"ids": [some_id]}).snippets] == [some_id]
        pages = list(client.call("ScanSnippets", {"corpora": ["textbooks"], "pageSize": 100}))
        assert sum(len(page.snippets) for page in pages) == Corpus.open(search_root_of(client) / "textbooks").snippets
        with pytest.raises(ValueError, match="no method 'Nope'"):
            client.call("Nope")
    result = CliRunner().invoke(
        searchd_main, ["call", "GetSnippets", json.dumps({"ids": [some_id]}), "--server", server]
    )
    assert result.exit_code == 0 and json.loads(result.output)["snippets"][0]["id"] == some_id
    bad = CliRunner().invoke(searchd_main, ["call", "Search", '{"qury": "x"}', "--server", server])
    assert bad.exit_code == 2 and "qury" in bad.output
    asked = CliRunner().invoke(searchd_main, ["query", "mitral valve", "--k", "3", "--json", "--server", server])
    hits = json.loads(asked.output)["hits"]
    assert asked.exit_code == 0 and len(hits) == 3 and hits[0]["id"] == some_id and hits[0]["retrievers"]


def search_root_of(client: SearchClient) -> Path:
    """The root a server serves (from Info: its corpora's paths)."""
    return Path(json.loads(client.info().corpora[0].indexes[0].build_json)["upstream"]["path"]).parent


def test_generated_code_matches_the_proto(tmp_path):
    """`make proto` output is checked in; regenerating it must give the same files."""
    command = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        "-Iprotos",
        f"--python_out={tmp_path}",
        f"--grpc_python_out={tmp_path}",
        f"--pyi_out={tmp_path}",
        "protos/medsnip/v1/search.proto",
    ]
    subprocess.run(command, cwd=REPO, check=True)
    for name in ("search_pb2.py", "search_pb2_grpc.py", "search_pb2.pyi"):
        assert (tmp_path / "medsnip" / "v1" / name).read_text() == (REPO / "medsnip" / "v1" / name).read_text(), name


def test_tls(search_root, tmp_path):
    """With --tls-cert/--tls-key the server speaks TLS only: a TLS client that trusts the certificate
    gets answers, a plaintext client does not."""
    cert, key = self_signed(tmp_path)
    command = [
        sys.executable,
        "-m",
        "searchd.cli",
        "serve",
        "--root",
        str(search_root),
        "--corpora",
        "textbooks",
        "--port",
        "0",
        "--port-file",
        str(tmp_path / "port"),
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(key),
    ]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "port").exists():
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        address = f"127.0.0.1:{(tmp_path / 'port').read_text()}"
        with SearchClient(address, tls=True, ca_file=cert) as client:
            assert client.search("anatomy of the heart", k=3, timeout=60).hits
        with SearchClient(address, retries=0) as plaintext, pytest.raises(grpc.RpcError) as caught:
            plaintext.search("anatomy of the heart", k=3, timeout=10)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0


def test_the_client_raises_one_error_class_per_row_of_the_exit_code_table(server, questions):
    """SearchClient's failures are SearchdError subclasses whose message is the commands' sentence (no grpc
    internals, no chained grpc traceback), still grpc.RpcErrors with code(); the commands exit 2 for arguments
    the server rejects and 3 for no server."""
    from click.testing import CliRunner

    from searchd.cli import main as searchd_main
    from searchd.client import SearchdDeadline, SearchdError, SearchdRejected, SearchdUnreachable

    with SearchClient("127.0.0.1:9", retries=1, backoff=0.01) as dead, pytest.raises(SearchdUnreachable) as caught:
        dead.search("statins")
    message = str(caught.value)
    assert message.startswith("searchd at 127.0.0.1:9 is unreachable (") and "start it with `searchd serve" in message
    assert "_InactiveRpcError" not in message and "debug_error_string" not in message
    assert caught.value.__suppress_context__ and caught.value.code() == grpc.StatusCode.UNAVAILABLE
    with SearchClient(server, retries=0) as client:
        with pytest.raises(SearchdRejected, match=r"refused the request: k must be in 1\.\.1000, got 5000"):
            client.search("statins", k=5000)
        with pytest.raises(SearchdRejected, match="unknown or unavailable retriever nosuch") as rejected:
            client.search("statins", retrievers=["nosuch"])
        assert isinstance(rejected.value, grpc.RpcError) and rejected.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(SearchdDeadline):
            client.batch_search(questions[:200], k=100, timeout=0.001)
        assert issubclass(SearchdRejected, SearchdError) and issubclass(SearchdDeadline, SearchdError)
    for args, code in (
        (["query", "statins", "--retrievers", "nosuch", "--server", server], 2),
        (["query", "   ", "--server", server], 2),
        (["query", "statins", "--server", "127.0.0.1:9"], 3),
    ):
        result = CliRunner().invoke(searchd_main, args)
        assert result.exit_code == code, (args, result.output)
        assert result.output.startswith("error: ") and result.output.count("\n") == 1, result.output
