"""The gRPC server: medsnip.v1.SearchService beside the standard health and reflection services.

Limits and security defaults: binds loopback unless told otherwise; optional TLS; an optional bearer
token checked on every call (UNAUTHENTICATED without it; health stays open for load balancers);
at most `max_in_flight` calls at once, beyond which calls get RESOURCE_EXHAUSTED immediately (memory
stays bounded under overload); client deadlines are honoured. SIGTERM stops accepting calls, lets
in-flight ones finish (grace period), and exits 0. One JSON log line per request.
"""

from __future__ import annotations

import hmac
import json
import logging
import signal
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from medsnip import __version__
from medsnip.v1 import search_pb2, search_pb2_grpc
from searchd.engine import RETRIEVERS, Query, SearchEngine
from searchd.fusion import DEFAULT_RRF_K

SERVICE_NAME = search_pb2.DESCRIPTOR.services_by_name["SearchService"].full_name
log = logging.getLogger("searchd")


class Limits:
    def __init__(self, max_k: int = 1000, max_query_chars: int = 4096, max_batch: int = 256, max_in_flight: int = 64):
        self.max_k, self.max_query_chars, self.max_batch, self.max_in_flight = (
            max_k,
            max_query_chars,
            max_batch,
            max_in_flight,
        )


class InvalidRequest(Exception):
    pass


class SearchServicer(search_pb2_grpc.SearchServiceServicer):
    def __init__(self, engine: SearchEngine, limits: Limits):
        self.engine = engine
        self.limits = limits
        self._slots = threading.BoundedSemaphore(limits.max_in_flight)

    # -- validation --

    def _corpora(self, asked) -> list[str]:
        """The asked corpora (all served ones when none are named); InvalidRequest for an unknown one."""
        corpora = list(asked) or list(self.engine.corpora)
        unknown = [c for c in corpora if c not in self.engine.corpora]
        if unknown:
            raise InvalidRequest(f"unknown corpus {', '.join(unknown)}; served: {', '.join(self.engine.corpora)}")
        return corpora

    def _query(self, request: search_pb2.SearchRequest) -> Query:
        text = request.query.strip()
        if not text:
            raise InvalidRequest("query is empty")
        if len(request.query) > self.limits.max_query_chars:
            raise InvalidRequest(
                f"query has {len(request.query)} characters, the limit is {self.limits.max_query_chars}"
            )
        if not 1 <= request.k <= self.limits.max_k:
            raise InvalidRequest(f"k must be in 1..{self.limits.max_k}, got {request.k}")
        corpora = self._corpora(request.corpora)
        retrievers = list(request.retrievers) or self.engine.retrievers
        bad = [r for r in retrievers if r not in RETRIEVERS or r not in self.engine.retrievers]
        if bad:
            raise InvalidRequest(
                f"unknown or unavailable retriever {', '.join(bad)}; available: {', '.join(self.engine.retrievers)}"
            )
        depth = request.depth or max(2 * request.k, 100)
        if depth > 2 * self.limits.max_k:  # the default, max(2k, 100), always fits
            raise InvalidRequest(f"depth must be at most {2 * self.limits.max_k} (twice max_k), got {depth}")
        if request.fusion.method not in (search_pb2.Fusion.METHOD_UNSPECIFIED, search_pb2.Fusion.RRF):
            raise InvalidRequest("fusion method must be RRF")
        k1 = request.bm25_k1 if request.HasField("bm25_k1") else None
        b = request.bm25_b if request.HasField("bm25_b") else None
        if (k1 is not None and not 0 <= k1 <= 10) or (b is not None and not 0 <= b <= 1):
            raise InvalidRequest("bm25_k1 must be in [0, 10] and bm25_b in [0, 1]")
        return Query(text, request.k, corpora, retrievers, depth, request.fusion.rrf_k or DEFAULT_RRF_K, k1, b)

    def _response(
        self, request: search_pb2.SearchRequest, query: Query, timeout: float | None
    ) -> search_pb2.SearchResponse:
        started = time.perf_counter()
        fused = self.engine.search(query, timeout)
        # source and doc_id always come back; each hit's store is the corpus that retrieved it
        texts = self.engine.snippets([hit.id for hit in fused], [hit.contributions[0][0] for hit in fused])
        hits = []
        for hit in fused:
            snippet = texts.get(hit.id, {})
            hits.append(
                search_pb2.Hit(
                    id=hit.id,
                    score=hit.score,
                    rank=hit.rank,
                    title=snippet.get("title", "") if request.return_text else "",
                    content=snippet.get("content", "") if request.return_text else "",
                    source=snippet.get("source", ""),
                    doc_id=snippet.get("doc_id", ""),
                    retrievers=[
                        search_pb2.RetrieverHit(corpus=c, retriever=r, rank=rank, score=score)
                        for c, r, rank, score in hit.contributions
                    ],
                )
            )
        return search_pb2.SearchResponse(hits=hits, took_ms=(time.perf_counter() - started) * 1000)

    # -- calls --

    def _guarded(self, context, method: str, detail: dict, work):
        """Admission control, error mapping and the request's log line around `work()`."""
        started = time.perf_counter()
        status = "OK"
        if not self._slots.acquire(blocking=False):
            status = "RESOURCE_EXHAUSTED"
            _log_request(method, detail, started, status)
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "server busy: too many calls in flight, retry later")
        try:
            return work()
        except InvalidRequest as error:
            status = "INVALID_ARGUMENT"
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        except futures.TimeoutError:
            status = "DEADLINE_EXCEEDED"
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "deadline exceeded while searching")
        except Exception as error:  # noqa: BLE001 - a bug or a failing index: INTERNAL, logged, server goes on
            status = "INTERNAL"
            log.exception("%s failed", method)
            context.abort(grpc.StatusCode.INTERNAL, f"internal error: {type(error).__name__}: {error}"[:500])
        finally:
            self._slots.release()
            if status == "OK" and not context.is_active():
                status = "CANCELLED"
            _log_request(method, detail, started, status)

    def Search(self, request, context):
        detail = {"corpora": list(request.corpora), "k": request.k}

        def work():
            query = self._query(request)
            return self._response(request, query, context.time_remaining())

        return self._guarded(context, "Search", detail, work)

    def BatchSearch(self, request, context):
        detail = {"queries": len(request.requests)}

        def work():
            if not request.requests:
                raise InvalidRequest("no requests in the batch")
            if len(request.requests) > self.limits.max_batch:
                raise InvalidRequest(f"{len(request.requests)} requests, the batch limit is {self.limits.max_batch}")
            queries = [self._query(r) for r in request.requests]
            pool = _batch_pool()
            jobs = [
                pool.submit(self._response, r, q, context.time_remaining())
                for r, q in zip(request.requests, queries, strict=True)
            ]
            return search_pb2.BatchSearchResponse(responses=[job.result(context.time_remaining()) for job in jobs])

        return self._guarded(context, "BatchSearch", detail, work)

    def GetSnippets(self, request, context):
        detail = {"ids": len(request.ids)}

        def work():
            if len(request.ids) > self.limits.max_k:
                raise InvalidRequest(f"{len(request.ids)} ids, the limit is {self.limits.max_k}")
            found = self.engine.snippets(list(request.ids))
            snippets = [_snippet_message(found[i]) for i in request.ids if i in found]
            missing = [i for i in request.ids if i not in found]
            return search_pb2.GetSnippetsResponse(snippets=snippets, missing=missing)

        return self._guarded(context, "GetSnippets", detail, work)

    def Info(self, request, context):
        def work():
            corpora = []
            for name, loaded in self.engine.corpora.items():
                indexes = []
                for retriever, index in (("bm25", loaded.bm25), ("dense", loaded.dense)):
                    if index is not None:
                        indexes.append(
                            search_pb2.IndexInfo(
                                retriever=retriever,
                                path=str(index.path),
                                lineage_sha256=index.record["upstream"]["lineage_sha256"],
                                build_json=json.dumps(index.record, sort_keys=True),
                            )
                        )
                corpora.append(
                    search_pb2.CorpusInfo(
                        name=name,
                        path=str(loaded.corpus.path),
                        snippets=loaded.corpus.snippets,
                        shards=len(loaded.corpus.shards),
                        lineage_sha256=loaded.corpus.record_hash,
                        indexes=indexes,
                    )
                )
            identity = self.engine.encoder_identity()
            return search_pb2.InfoResponse(
                server_version=__version__,
                corpora=corpora,
                retrievers=self.engine.retrievers,
                encoder_json=json.dumps(identity, sort_keys=True) if identity else "",
                max_k=self.limits.max_k,
                max_query_chars=self.limits.max_query_chars,
                max_batch=self.limits.max_batch,
            )

        return self._guarded(context, "Info", {}, work)

    def ScanSnippets(self, request, context):
        """Pages of snippets; holds one in-flight slot for the whole stream."""
        started = time.perf_counter()
        detail = {"corpora": list(request.corpora), "first_chunk_only": request.first_chunk_only}
        try:
            corpora = self._corpora(request.corpora)
        except InvalidRequest as error:
            _log_request("ScanSnippets", detail, started, "INVALID_ARGUMENT")
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        if not self._slots.acquire(blocking=False):
            _log_request("ScanSnippets", detail, started, "RESOURCE_EXHAUSTED")
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "server busy: too many calls in flight, retry later")
        status, sent = "CANCELLED", 0
        try:
            size = request.page_size or 1000
            for name in corpora:
                page = []
                for snippet in self.engine.corpora[name].store.scan():
                    if request.first_chunk_only and snippet["chunk"] != 0:
                        continue
                    page.append(_snippet_message(snippet, request.return_text))
                    if len(page) == size:
                        yield search_pb2.SnippetPage(corpus=name, snippets=page)
                        sent += len(page)
                        page = []
                if page:
                    yield search_pb2.SnippetPage(corpus=name, snippets=page)
                    sent += len(page)
            status = "OK"
        finally:
            self._slots.release()
            _log_request("ScanSnippets", {**detail, "snippets": sent}, started, status)


_pool_lock = threading.Lock()
_pool: futures.ThreadPoolExecutor | None = None


def _batch_pool() -> futures.ThreadPoolExecutor:
    """Threads that run a BatchSearch's queries at once (so they meet in the micro-batchers)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="batch-search")
        return _pool


def _snippet_message(snippet: dict, with_text: bool = True) -> search_pb2.Snippet:
    return search_pb2.Snippet(
        id=snippet["id"],
        title=snippet["title"] if with_text else "",
        content=snippet["content"] if with_text else "",
        contents=snippet["contents"] if with_text else "",
        source=snippet["source"],
        doc_id=snippet["doc_id"],
        chunk=snippet["chunk"],
        meta_json=json.dumps(snippet.get("meta", {}), ensure_ascii=False, sort_keys=True),
    )


def _log_request(method: str, detail: dict, started: float, status: str) -> None:
    record = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "method": method,
        **detail,
        "latency_ms": round((time.perf_counter() - started) * 1000, 2),
        "status": status,
    }
    log.info(json.dumps(record))


class TokenInterceptor(grpc.ServerInterceptor):
    """Every call but health checks must carry `authorization: Bearer <token>`."""

    def __init__(self, token: str):
        self._token = token.encode()

        def deny(request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")

        self._deny = grpc.unary_unary_rpc_method_handler(deny)
        self._deny_stream = grpc.unary_stream_rpc_method_handler(deny)  # the refusal must match the call's shape

    def intercept_service(self, continuation, handler_call_details):
        if handler_call_details.method.startswith("/grpc.health.v1.Health/"):
            return continuation(handler_call_details)
        metadata = dict(handler_call_details.invocation_metadata or ())
        given = metadata.get("authorization", "")
        if given.startswith("Bearer ") and hmac.compare_digest(given[7:].encode(), self._token):
            return continuation(handler_call_details)
        handler = continuation(handler_call_details)
        return self._deny_stream if handler is not None and handler.response_streaming else self._deny


def read_token(path: Path) -> str:
    token = Path(path).read_text(encoding="utf-8").strip()
    if not token:
        raise ValueError(f"{path}: empty token file")
    return token


def build_server(
    engine: SearchEngine,
    host: str,
    port: int,
    limits: Limits,
    token: str | None = None,
    tls: tuple[bytes, bytes] | None = None,
    threads: int = 32,
) -> tuple[grpc.Server, int, health.HealthServicer]:
    """A started server (returns it, the bound port and its health servicer)."""
    interceptors = [TokenInterceptor(token)] if token else []
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="grpc"),
        interceptors=interceptors,
        maximum_concurrent_rpcs=limits.max_in_flight * 4,  # beyond this gRPC itself answers RESOURCE_EXHAUSTED
        options=[("grpc.max_receive_message_length", 16 << 20)],
    )
    search_pb2_grpc.add_SearchServiceServicer_to_server(SearchServicer(engine, limits), server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection((SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    address = f"{host}:{port}"
    if tls:
        key, certificate = tls
        bound = server.add_secure_port(address, grpc.ssl_server_credentials([(key, certificate)]))
    else:
        bound = server.add_insecure_port(address)
    if bound == 0:
        raise OSError(f"cannot bind {address}")
    server.start()
    for service in ("", SERVICE_NAME):
        health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
    return server, bound, health_servicer


def serve_forever(server: grpc.Server, health_servicer, engine: SearchEngine, grace: float = 10.0) -> None:
    """Block until SIGTERM/SIGINT; then report NOT_SERVING, drain in-flight calls, stop."""
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # Wake every half second: a signal delivered to another thread (gRPC's, the JVM's) only runs
    # Python's handler once the main thread runs bytecode again.
    while not stop.wait(0.5):
        pass
    health_servicer.enter_graceful_shutdown()
    server.stop(grace).wait()
    engine.close()
