"""searchd's HTTP side under a hostile hour at once (run_benchmarks.py --only hostile): on the demo root, 64 clients
sending 256-question /retrieve calls back to back, 50 calls whose clients hang up, 8 clients asking big replies and
never reading them, and 999 idle TCP connections, while a probe asks one question every 0.2 s over HTTP and over
gRPC. Reported: the probe's latency (p50, p99, worst) and what it got (200, 429, 503), the server's RSS against its
idle value, and how long SIGTERM under that load takes to end the process. Loopback only; every loop is bounded
in count and time. Returns markdown lines.
"""

from __future__ import annotations

import json
import resource
import signal
import socket
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import requests

from medsnip.queries import query_texts
from searchd.client import SearchClient
from searchd.launch import start_background_server

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = list(query_texts(REPO / "samples" / "ir" / "pubmedqa-beir" / "queries.tsv").values())
BULK_CLIENTS, BULK_QUESTIONS = 64, 256
ABANDONED, NON_READING, IDLE_SOCKETS = 50, 8, 999
PROBE_SECONDS, PROBE_EVERY = 40.0, 0.2
GRACE = 5.0


def _rss_mb(pid: int, field: str = "VmRSS") -> float:
    """Resident MiB: all of it (VmRSS), or its anonymous part (RssAnon) or its mapped files' (RssFile)."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":")) / 1024


def _raw_post(port: int, body: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(
        f"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    return sock


def _percentiles(values: list[float]) -> str:
    if not values:
        return "none"
    array = np.array(values) * 1000
    return f"p50 {np.median(array):,.0f} ms, p99 {np.quantile(array, 0.99):,.0f} ms, worst {array.max():,.0f} ms"


def hostile_section(root: Path, work: Path) -> list[str]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))  # the idle sockets are this process's too
    work.mkdir(parents=True, exist_ok=True)
    port_file = work / "http-port"
    port_file.unlink(missing_ok=True)
    process, address = start_background_server(
        root, "--http-port", 0, "--http-port-file", port_file, "--grace", GRACE, "--max-batch", 256
    )
    while not port_file.exists():
        time.sleep(0.05)
    port = int(port_file.read_text())
    url = f"http://127.0.0.1:{port}"
    # idle = at rest after serving one bulk call: the JIT has compiled Lucene's search, the JVM and torch hold what
    # a search needs; what a server that has never searched holds is no baseline for one under load
    warm = (QUESTIONS * 2)[:BULK_QUESTIONS]
    requests.post(f"{url}/retrieve", json={"queries": warm, "topk": 3}, timeout=300)
    time.sleep(1)
    fields = ("VmRSS", "RssAnon", "RssFile")
    idle = {field: _rss_mb(process.pid, field) for field in fields}
    idle_rss = idle["VmRSS"]
    stop = threading.Event()
    bulk_statuses: Counter = Counter()
    batch = (QUESTIONS * 2)[:BULK_QUESTIONS]

    def bulk() -> None:
        session = requests.Session()
        while not stop.is_set():
            try:
                answer = session.post(f"{url}/retrieve", json={"queries": batch, "topk": 3}, timeout=120)
                bulk_statuses[answer.status_code] += 1
                if answer.status_code != 200:
                    time.sleep(0.5)
            except requests.RequestException:
                bulk_statuses["error"] += 1
                time.sleep(0.5)

    held: list[socket.socket] = []
    threads = [threading.Thread(target=bulk, daemon=True) for _ in range(BULK_CLIENTS)]
    for thread in threads:
        thread.start()
    body = json.dumps({"queries": batch, "topk": 3}).encode()
    for _ in range(ABANDONED):
        _raw_post(port, body).close()
    big = json.dumps({"queries": QUESTIONS[:48], "topk": 200}).encode()
    for _ in range(NON_READING):
        sock = _raw_post(port, big)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        held.append(sock)
    for _ in range(IDLE_SOCKETS):
        try:
            held.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        except OSError:
            break
    probes: dict[str, list] = {"HTTP": [], "gRPC": []}
    peak = dict(idle)
    client = SearchClient(address)
    started = time.monotonic()
    ended = started + PROBE_SECONDS

    def probe_http() -> None:
        while time.monotonic() < ended:
            begun = time.monotonic()
            try:
                status = requests.post(f"{url}/retrieve", json={"queries": [QUESTIONS[0]]}, timeout=30).status_code
            except requests.RequestException as error:
                status = type(error).__name__
            probes["HTTP"].append((time.monotonic() - begun, status, begun - started))
            time.sleep(PROBE_EVERY)

    def probe_grpc() -> None:
        while time.monotonic() < ended:
            begun = time.monotonic()
            try:
                client.search(QUESTIONS[1], k=3, timeout=30)
                status = "OK"
            except Exception as error:  # noqa: BLE001 - the probe records what it got
                code = error.code() if callable(getattr(error, "code", None)) else None
                status = getattr(code, "name", type(error).__name__)
            probes["gRPC"].append((time.monotonic() - begun, status, begun - started))
            time.sleep(PROBE_EVERY)

    probers = [threading.Thread(target=probe, daemon=True) for probe in (probe_http, probe_grpc)]
    for prober in probers:
        prober.start()
    while time.monotonic() < ended:  # each protocol probed on its own, at its own pace
        peak = {field: max(peak[field], _rss_mb(process.pid, field)) for field in fields}
        time.sleep(0.2)
    for prober in probers:
        prober.join(35)
    client.close()
    during_load = dict(bulk_statuses)  # what follows SIGTERM (503s, then refused connections) is counted apart
    process.send_signal(signal.SIGTERM)
    begun = time.monotonic()
    process.wait(timeout=120)
    exit_seconds = time.monotonic() - begun
    stop.set()
    for sock in held:
        sock.close()
    for thread in threads:
        thread.join(10)
    log = process.log_path.read_text()
    # each probe's latency, answer and start (seconds into the load): when the slow ones came
    (work / "probes.json").write_text(json.dumps(probes))
    after_sigterm = {status: count - during_load.get(status, 0) for status, count in bulk_statuses.items()}
    lines = [
        "## searchd over HTTP under a hostile hour",
        "",
        f"Demo root, defaults but `--grace {GRACE:g}` and `--max-batch 256`; idle: at rest after serving one "
        f"{BULK_QUESTIONS}-question call; then, at once: {BULK_CLIENTS} clients sending "
        f"{BULK_QUESTIONS}-question /retrieve calls back to back, {ABANDONED} calls whose clients hang up, "
        f"{NON_READING} clients asking ~10 MB replies and never reading, {len(held) - NON_READING} idle TCP "
        f"connections; a probe asks one question every {PROBE_EVERY:g} s for {PROBE_SECONDS:g} s over each protocol "
        "(bench/hostile_bench.py).",
        "",
        "| probe | answers | latency |",
        "|---|---|---|",
    ]
    for protocol, seen in probes.items():
        statuses = Counter(str(status) for _, status, _ in seen)
        lines.append(
            f"| {protocol} | {', '.join(f'{s} {n}' for s, n in statuses.most_common())} | "
            f"{_percentiles([seconds for seconds, _, _ in seen])} |"
        )
    lines += [
        "",
        f"Bulk calls answered during the load: {during_load}; after SIGTERM: "
        f"{ {status: count for status, count in after_sigterm.items() if count} } ('error': no connection). "
        f"RSS: idle {idle_rss:,.0f} MiB, peak under the load "
        f"{peak['VmRSS']:,.0f} MiB ({peak['VmRSS'] / idle_rss:.2f}x); anonymous memory {idle['RssAnon']:,.0f} -> "
        f"{peak['RssAnon']:,.0f} MiB ({peak['RssAnon'] / idle['RssAnon']:.2f}x), pages of mapped index files "
        f"{idle['RssFile']:,.0f} -> {peak['RssFile']:,.0f} MiB. "
        f"SIGTERM under the load: the process ended in {exit_seconds:.1f} s "
        f"(grace {GRACE:g} s), exit status {process.returncode}; "
        + (
            "the indexes were closed."
            if "exiting without closing the indexes" not in log
            else "it exited WITHOUT closing the indexes."
        ),
        "",
    ]
    return lines
