"""Start searchd as a background process on a free loopback port and wait until it is SERVING
(what `make demo`, the tests and the benchmark do)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def wait_serving(address: str, timeout: float = 60.0) -> None:
    """Block until the server's health service says SERVING (a starting searchd says NOT_SERVING until its
    HTTP listener is up too); raises if it does not within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            left = max(deadline - time.monotonic(), 0.1)
            response = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=left, wait_for_ready=True)
            if response.status == health_pb2.HealthCheckResponse.SERVING:
                return
            if time.monotonic() >= deadline:
                raise RuntimeError(
                    f"searchd at {address} is {health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)}"
                )
            time.sleep(0.05)


def start_background_server(
    root: Path,
    *extra: str,
    timeout: float = 300.0,
    program: tuple[str, ...] = ("-m", "searchd.cli"),
    environment: dict[str, str] | None = None,
) -> tuple[subprocess.Popen, str]:
    """(process, "127.0.0.1:PORT") of a searchd serving `root`; raises with its log if it exits.
    `program`: what Python runs (searchd's CLI, or a script wrapping it); `environment`: variables added to
    this process's for it.

    Its log (one JSON line per request) goes to a file, `process.log_path`, not to a pipe nobody
    reads (a full pipe would block the server). The temporary folder holding it (and the port file) is
    removed once `process` is garbage-collected or this interpreter exits, whichever comes first."""
    folder = Path(tempfile.mkdtemp(prefix="searchd-"))
    port_file, log_path = folder / "port", folder / "searchd.log"
    command = [
        sys.executable,
        *program,
        "serve",
        "--root",
        str(root),
        "--port",
        "0",
        "--port-file",
        str(port_file),
        *map(str, extra),
    ]
    repo = Path(__file__).resolve().parents[1]
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            command, cwd=repo, stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, **(environment or {})}
        )
    process.log_path = log_path  # type: ignore[attr-defined]
    weakref.finalize(process, shutil.rmtree, folder, True)
    deadline = time.monotonic() + timeout
    while not port_file.exists():
        if process.poll() is not None:
            raise RuntimeError(f"searchd exited with status {process.returncode}: {log_path.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("searchd did not start in time")
        time.sleep(0.1)
    address = f"127.0.0.1:{port_file.read_text()}"
    wait_serving(address)
    return process, address
