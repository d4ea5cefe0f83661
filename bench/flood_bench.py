"""Memory under a flood of undecodable requests (run by run_benchmarks.py --only flood): a bare grpcio
server as generated code registers it (the upstream leak), the same server with searchd's
DecodingInterceptor, and searchd itself over the demo root, each flooded for the same time with the
same garbage by two client threads. Returns markdown lines."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc

from searchd.launch import start_background_server

REPO = Path(__file__).resolve().parents[1]
GARBAGE = bytes(range(256)) * 2  # field number 0: no protobuf message decodes it
SEARCH = "/medsnip.v1.SearchService/Search"
CLIENT_THREADS = 2
IN_FLIGHT = 50  # calls each client thread keeps going at once


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def flood(address: str, pid: int, seconds: float, sample_every: float = 10.0) -> dict:
    """Send garbage for `seconds`; RSS sampled every `sample_every` s. Returns sent, codes and samples."""
    sent = [0]
    codes: dict[str, int] = {}
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def client() -> None:
        with grpc.insecure_channel(address) as channel:
            call = channel.unary_unary(SEARCH)
            while time.monotonic() < stop_at:
                pending = [call.future(GARBAGE, timeout=10) for _ in range(IN_FLIGHT)]
                for future in pending:
                    try:
                        future.result()
                        code = "OK"
                    except grpc.RpcError as error:
                        code = error.code().name
                    with lock:
                        sent[0] += 1
                        codes[code] = codes.get(code, 0) + 1

    threads = [threading.Thread(target=client) for _ in range(CLIENT_THREADS)]
    started = time.monotonic()
    samples = [(0.0, _rss_mib(pid))]
    for thread in threads:
        thread.start()
    for number in range(1, int(seconds // sample_every) + 1):  # the same sample times for every server
        time.sleep(max(0.0, started + number * sample_every - time.monotonic()))
        samples.append((number * sample_every, _rss_mib(pid)))
    for thread in threads:
        thread.join()
    time.sleep(3)
    return {"sent": sent[0], "codes": codes, "samples": samples, "after_idle": _rss_mib(pid)}


def _bare_server(mode: str) -> tuple[subprocess.Popen, str]:
    port_file = Path(tempfile.mkdtemp(prefix="bare-grpc-")) / "port"
    process = subprocess.Popen(
        [sys.executable, str(REPO / "bench" / "bare_grpc_server.py"), mode, str(port_file)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not port_file.exists() or not port_file.read_text():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the bare grpcio server did not start")
        time.sleep(0.1)
    return process, f"127.0.0.1:{port_file.read_text()}"


def flood_section(root: Path, seconds: float = 120.0) -> list[str]:
    runs = {}
    for label, mode in (
        ("bare grpcio server, generated handler (the leak)", "proto"),
        ("bare grpcio server + searchd's DecodingInterceptor", "decoding"),
    ):
        process, address = _bare_server(mode)
        try:
            print(f"flood: {label}", flush=True)
            runs[label] = flood(address, process.pid, seconds)
        finally:
            process.kill()
            process.wait()
    process, address = start_background_server(root)
    try:
        print("flood: searchd", flush=True)
        runs["searchd (demo root, no token)"] = flood(address, process.pid, seconds)
    finally:
        process.terminate()
        process.wait(timeout=60)
    lines = [
        "## searchd under a flood of undecodable requests",
        "",
        f"{CLIENT_THREADS} client threads, {IN_FLIGHT} calls in flight each, send {len(GARBAGE)} bytes of garbage to "
        f"`{SEARCH}` for {seconds:.0f} s; server RSS (MiB) sampled every 10 s. grpcio "
        f"{grpc.__version__} leaks about 19 KB per request its deserializer rejects (docs: operations/known-issues); "
        "searchd decodes requests itself (searchd/decoding.py), so the same flood leaves it flat. The first row is "
        "the way searchd registered its methods before (as generated code does): the leak it had.",
        "",
        "| server | requests | answered | RSS at start | RSS at end | 3 s later | growth per 1,000 requests |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for label, run in runs.items():
        start, end = run["samples"][0][1], run["samples"][-1][1]
        per_thousand = (end - start) * 1024 / max(run["sent"], 1) * 1000
        answered = ", ".join(f"{code} {count:,}" for code, count in sorted(run["codes"].items()))
        lines.append(
            f"| {label} | {run['sent']:,} | {answered} | {start:.0f} | {end:.0f} | {run['after_idle']:.0f} "
            f"| {per_thousand:,.0f} KB |"
        )
    lines += [
        "",
        "RSS over time (MiB):",
        "",
        "| server | " + " | ".join(f"{t:.0f} s" for t, _ in next(iter(runs.values()))["samples"]) + " |",
    ]
    lines.append("|---|" + "---:|" * len(next(iter(runs.values()))["samples"]))
    for label, run in runs.items():
        lines.append(f"| {label} | " + " | ".join(f"{rss:.0f}" for _, rss in run["samples"]) + " |")
    return lines + [""]
