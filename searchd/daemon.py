"""Starting and stopping searchd's gRPC server: the port, connection limits, and a shutdown that ends.

Start: the port must be free. gRPC turns SO_REUSEPORT on by default, which lets a second server bind
a busy port and the kernel then splits new connections between two servers that may serve different
roots; it is turned off, so a taken port is an error. Connections are limited in number, idle ones are
closed, and dead peers are found by keepalive pings, so idle or abandoned connections cannot use up
the process's file descriptors.

Stop (SIGTERM/SIGINT): health says NOT_SERVING, new calls are refused, running calls get `grace`
seconds to finish; then gRPC cancels them, and every wait of their work returns at once
(searchd.calls). The engine (stores, batchers) is closed only when no call or job is left running,
so nothing reads an unmapped store; if work is still stuck `bound` seconds after the grace period
(a search inside the JVM cannot be interrupted), the process exits anyway. It always exits 0.

Reload (SIGHUP, or `watch` seconds after a new complete generation appears on disk): the root is loaded
again beside the serving engine and swapped in when complete (searchd.hot_swap); calls are never
refused for it. The health service `searchd.generation` says NOT_SERVING while the last load failed
(the generation before it still serving).
"""

from __future__ import annotations

import logging
import os
import resource
import signal
import sys
import threading
import time
from concurrent import futures
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from medsnip.v1 import search_pb2, search_pb2_grpc
from searchd.auth import TokenInterceptor
from searchd.decoding import DecodingInterceptor
from searchd.engine import SearchEngine
from searchd.hot_swap import EngineHolder
from searchd.listening import BindError
from searchd.server import Limits, SearchServicer, log_request

if TYPE_CHECKING:
    from searchd.http_api import HttpServer

SERVICE_NAME = search_pb2.DESCRIPTOR.services_by_name["SearchService"].full_name
GENERATION_HEALTH = "searchd.generation"  # NOT_SERVING while the newest generation failed to load or lacks an index
_RESERVED_DESCRIPTORS = 1024  # index files, stores, the JVM, logs: kept free of connections
log = logging.getLogger("searchd")


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = 1000
    idle_seconds: float = 300.0  # a connection without calls for this long is closed
    keepalive_seconds: float = 60.0  # ping a connection this often; no answer in 20 s closes it

    def options(self) -> list[tuple[str, int]]:
        return [
            ("grpc.max_allowed_incoming_connections", self.max_connections),
            ("grpc.max_connection_idle_ms", int(self.idle_seconds * 1000)),
            ("grpc.keepalive_time_ms", int(self.keepalive_seconds * 1000)),
            ("grpc.keepalive_timeout_ms", 20_000),
            ("grpc.server_handshake_timeout_ms", 10_000),  # a socket that never speaks HTTP/2 holds no slot long
        ]


@dataclass
class RunningServer:
    server: grpc.Server
    port: int
    health: health.HealthServicer
    servicer: SearchServicer
    stopping: threading.Event = field(default_factory=threading.Event)
    http: HttpServer | None = None  # searchd.http_api, when serving HTTP too

    def health_status(self) -> dict:
        """What `GET /health` answers: SERVING until shutdown begins, and whether the newest generation loaded."""
        engines = self.servicer.engines
        return {
            "status": "NOT_SERVING" if self.stopping.is_set() else "SERVING",
            "generation_complete": engines.complete(),
            "generation": engines.status()["generation"],
            "last_error": engines.last_error,
        }


def raise_descriptor_limit(connections: int) -> int:
    """Raise the soft open-files limit to the hard one; returns how many connections fit under it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return connections
    return max(1, min(connections, soft - _RESERVED_DESCRIPTORS))


def build_server(
    engine: EngineHolder | SearchEngine | None,
    host: str,
    port: int,
    limits: Limits,
    token: str | None = None,
    tls: tuple[bytes, bytes] | None = None,
    threads: int = 32,
    connections: ConnectionLimits | None = None,
) -> RunningServer:
    """A started server on exactly `host:port` (port 0: a free one); BindError when that cannot be."""
    if not 0 <= port <= 65535:  # gRPC would quietly bind port % 65536
        raise BindError(f"port {port} is out of range (0-65535)")
    connections = connections or ConnectionLimits()
    allowed = raise_descriptor_limit(connections.max_connections)
    if allowed < connections.max_connections:
        log.warning('{"warning": "max_connections lowered to %d to fit the open-files limit"}', allowed)
        connections = ConnectionLimits(allowed, connections.idle_seconds, connections.keepalive_seconds)
    interceptors = [TokenInterceptor(token)] if token else []

    def log_undecodable(method: str, size: int) -> None:
        log_request(method.rsplit("/", 1)[-1], {"undecodable_bytes": size}, time.perf_counter(), "INVALID_ARGUMENT")

    interceptors.append(DecodingInterceptor(log_undecodable))  # last: it wraps the handler that finally runs
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="grpc"),
        interceptors=interceptors,
        maximum_concurrent_rpcs=limits.max_in_flight * 4,  # beyond this gRPC itself answers RESOURCE_EXHAUSTED
        options=[
            ("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", 16 << 20),
            ("grpc.max_send_message_length", limits.max_reply_bytes + (1 << 20)),
            *connections.options(),
        ],
    )
    servicer = SearchServicer(engine, limits)
    search_pb2_grpc.add_SearchServiceServicer_to_server(servicer, server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection((SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    address = f"{host}:{port}"
    try:
        if tls:
            key, certificate = tls
            bound = server.add_secure_port(address, grpc.ssl_server_credentials([(key, certificate)]))
        else:
            bound = server.add_insecure_port(address)
    except RuntimeError as error:
        raise BindError(
            f"cannot listen on {address}: the port is taken (another searchd?) or the address is not local"
        ) from error
    if bound == 0 or (port and bound != port):
        raise BindError(f"cannot listen on {address}")
    server.start()
    for service in ("", SERVICE_NAME, GENERATION_HEALTH):  # until announce_serving: every listener is up then
        health_servicer.set(service, health_pb2.HealthCheckResponse.NOT_SERVING)
    return RunningServer(server, bound, health_servicer, servicer)


def announce_serving(running: RunningServer) -> None:
    """Health says SERVING once every listener is up (gRPC, and HTTP when asked for): a launcher that waits
    for gRPC's health and then calls `/retrieve` never finds the HTTP port still closed."""
    for service in ("", SERVICE_NAME):
        running.health.set(service, health_pb2.HealthCheckResponse.SERVING)
    _say_generation(running, running.servicer.engines.complete())


def _say_generation(running: RunningServer, loaded: bool) -> None:
    """Health's `searchd.generation`: SERVING while the newest generation loaded whole, else NOT_SERVING."""
    status = health_pb2.HealthCheckResponse.SERVING if loaded else health_pb2.HealthCheckResponse.NOT_SERVING
    running.health.set(GENERATION_HEALTH, status)


def _reload(running: RunningServer) -> None:
    """Load the root again and swap (searchd.hot_swap); health's `searchd.generation` follows. Runs in a
    thread of its own, which detaches from the JVM (the load opened Lucene's searchers) before it ends."""
    from indexer.jvm import detach_thread

    try:
        _say_generation(running, running.servicer.engines.reload() and running.servicer.engines.complete())
    finally:
        detach_thread()


def serve_forever(running: RunningServer, grace: float = 10.0, bound: float = 10.0, watch: float | None = None) -> None:
    """Block until SIGTERM/SIGINT, then stop as the module docstring says; returns only after a clean
    stop (engines closed), else ends the process with status 0 itself. SIGHUP (or, every `watch`
    seconds, a new complete generation on disk) reloads the root in a background thread and swaps
    generations (searchd.hot_swap) while calls go on; the server's leases are refreshed meanwhile."""
    from medsnip.generations import LEASE_REFRESH_SECONDS

    reload_asked = threading.Event()
    reloading: threading.Thread | None = None
    next_watch = next_lease = time.monotonic()

    received = []  # the stop signals: the loop ends at the first
    wake = threading.Event()

    def on_signal(signum, frame):
        received.append(signal.Signals(signum).name)
        wake.set()

    def on_hangup(signum, frame):
        reload_asked.set()
        wake.set()  # the reload starts now, not at the next half-second tick

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_hangup)
    engines = running.servicer.engines
    # Wake at least every half second: a signal delivered to another thread (gRPC's, the JVM's) only
    # runs Python's handler once the main thread runs bytecode again.
    while True:
        wake.wait(0.5)
        wake.clear()
        if received:
            break
        now = time.monotonic()
        if watch and now >= next_watch and not reload_asked.is_set():
            next_watch = now + watch
            if (reloading is None or not reloading.is_alive()) and engines.new_generation_on_disk():
                log.info('{"reload": "a new generation is on disk"}')
                reload_asked.set()
        if reload_asked.is_set():
            reload_asked.clear()
            reloading = threading.Thread(target=_reload, args=(running,), name="searchd-reload", daemon=True)
            reloading.start()
        if now >= next_lease:
            next_lease = now + LEASE_REFRESH_SECONDS
            engines.refresh_leases()
    log.info('{"shutdown": "%s: finishing the calls in flight (grace %.0f s), then stopping"}', received[0], grace)
    running.stopping.set()
    running.health.enter_graceful_shutdown()
    if running.http:  # stops accepting; its requests in flight are counted by the servicer below
        running.http.begin_stop()
    # New calls are refused from here on. The grace period is timed here rather than by gRPC, so that
    # the calls it cuts off are counted in the log before they are cancelled, not after.
    stop_deadline = time.monotonic() + grace + bound  # when gRPC itself cancels what is left
    stopped = running.server.stop(grace + bound)
    if not running.servicer.wait_idle(grace):
        log.warning(
            '{"shutdown": "%d calls or jobs still running after the grace period (%.0f s): cancelled, their clients '
            'get UNAVAILABLE"}',
            running.servicer.running,
            grace,
        )
        running.server.stop(0)
        if running.http:
            running.http.cancel_calls()
    if running.servicer.wait_idle(bound):
        # a handler that returned has not sent its reply yet (gRPC serialises and sends it afterwards: 28 MB for
        # 200 x 100 hits with text); gRPC gives it until its stop deadline, and so does this (uvicorn likewise,
        # for grace + its margin: searchd.http_api.SHUTDOWN_MARGIN)
        stopped.wait(max(stop_deadline - time.monotonic(), 0.0) + 1.0)
        if running.http:
            running.http.join(max(stop_deadline - time.monotonic(), 0.0) + 1.0)
        engines.close()
        log.info('{"shutdown": "stopped"}')
        return
    log.error(
        '{"shutdown": "%d calls or jobs still running %.0f s after the grace period; exiting without closing '
        'the indexes"}',
        running.servicer.running,
        bound,
    )
    sys.stderr.flush()
    os._exit(0)
