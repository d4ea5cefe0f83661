"""The gRPC servicer of medsnip.v1.SearchService: validation, limits, and the work of each call.

Limits: at most `max_in_flight` calls at once, beyond which calls get RESOURCE_EXHAUSTED immediately
(memory stays bounded under overload); every call runs under a deadline (the client's, capped by
`max_call_seconds`, which is also the deadline of a call that sent none); a reply larger than
`max_reply_bytes` is refused with RESOURCE_EXHAUSTED rather than built; ScanSnippets pages hold at
most `max_page_size` snippets. The servicer counts the calls it is running, so that shutdown can wait
for them before the engine is closed (searchd.daemon). One JSON log line per request.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import asdict, dataclass

import grpc

from medsnip import __version__
from medsnip.v1 import search_pb2, search_pb2_grpc
from searchd.admission import FEW_QUESTIONS, MAX_BULK_QUESTIONS, Slots
from searchd.batching import BatcherClosed
from searchd.calls import CallCancelled, CallScope, DeadlineExceeded, QueryRefused
from searchd.engine import ALL_DENSE, Query, SearchEngine
from searchd.hot_swap import EngineHolder

SERVICE_NAME = search_pb2.DESCRIPTOR.services_by_name["SearchService"].full_name
log = logging.getLogger("searchd")
FUSION_METHODS = {  # the proto's enum -> searchd.fusion's names (unspecified: the root's served fusion)
    search_pb2.Fusion.RRF: "rrf",
    search_pb2.Fusion.MEDRAG: "medrag",
}


def process_memory() -> dict:
    """What the server holds: resident MiB (anonymous, file-backed: mapped index files count there) and the
    JVM's heap in use and its bound (what an operator watches over weeks of reloads)."""
    memory: dict = {}
    try:
        for line in open(f"/proc/{os.getpid()}/status", encoding="ascii"):
            if line.startswith(("VmRSS:", "RssAnon:", "RssFile:")):
                memory[line.split(":")[0].lower() + "_mb"] = round(int(line.split()[1]) / 1024, 1)
    except OSError:  # not Linux
        pass
    from indexer.jvm import heap_mb

    memory.update(heap_mb())
    return memory


@dataclass(frozen=True)
class Limits:
    max_k: int = 1000
    max_query_chars: int = 4096
    max_batch: int = 4096
    max_in_flight: int = 64
    max_call_seconds: float = 300.0
    max_reply_bytes: int = 64 << 20
    max_page_size: int = 10_000
    max_bulk_questions: int = MAX_BULK_QUESTIONS


class InvalidRequest(Exception):
    pass


class ReplyTooLarge(Exception):
    pass


class SearchServicer(search_pb2_grpc.SearchServiceServicer):
    def __init__(self, engines: EngineHolder | SearchEngine | None, limits: Limits):
        """`engines`: the EngineHolder that hot-swaps generations (a bare engine is held without reload)."""
        self.engines = engines if isinstance(engines, EngineHolder) else EngineHolder(engines)
        self.limits = limits
        self._slots = Slots(limits.max_in_flight, limits.max_bulk_questions)
        self._running = 0
        self._idle = threading.Condition()

    # -- calls in flight, for shutdown --

    def _enter(self, bulk: bool = False, questions: int = 0) -> bool:
        """Take an in-flight slot (False when none is open to the call: searchd.admission)."""
        if not self._slots.enter(bulk, questions):
            return False
        self._count(+1)
        return True

    def _leave(self, bulk: bool = False, questions: int = 0) -> None:
        self._slots.leave(bulk, questions)
        self._count(-1)

    def _count(self, change: int) -> None:
        """Calls running: shutdown closes the engine only when none is left."""
        with self._idle:
            self._running += change
            if self._running == 0:
                self._idle.notify_all()

    @property
    def engine(self) -> SearchEngine:
        """The engine new calls get now."""
        return self.engines.current

    def wait_idle(self, timeout: float) -> bool:
        """Block until no call is running (True), or `timeout` seconds (False)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._running == 0, timeout)

    @property
    def running(self) -> int:
        return self._running

    # -- validation --

    @staticmethod
    def _corpora(asked, engine: SearchEngine) -> list[str]:
        """The asked corpora (all served ones when none are named); InvalidRequest for an unknown one."""
        corpora = list(asked) or list(engine.corpora)
        unknown = [c for c in corpora if c not in engine.corpora]
        if unknown:
            raise InvalidRequest(f"unknown corpus {', '.join(unknown)}; served: {', '.join(engine.corpora)}")
        return corpora

    def _query(self, request: search_pb2.SearchRequest, engine: SearchEngine) -> Query:
        text = request.query.strip()
        if not text:
            raise InvalidRequest("query is empty")
        if len(request.query) > self.limits.max_query_chars:
            raise InvalidRequest(
                f"query has {len(request.query)} characters, the limit is {self.limits.max_query_chars}"
            )
        if not 1 <= request.k <= self.limits.max_k:
            raise InvalidRequest(f"k must be in 1..{self.limits.max_k}, got {request.k}")
        corpora = self._corpora(request.corpora, engine)
        retrievers = list(request.retrievers) or engine.default_retrievers
        served = engine.retrievers
        bad = [r for r in retrievers if r not in served and not (r == ALL_DENSE and len(served) > ("bm25" in served))]
        if bad:
            raise InvalidRequest(
                f"unknown or unavailable retriever {', '.join(bad)}; available: {', '.join(served)}"
                f"{' (or dense: all of them)' if len(served) > ('bm25' in served) else ''}"
            )
        if request.fusion.method == search_pb2.Fusion.METHOD_UNSPECIFIED:
            fusion = engine.serve_plan.fusion
        else:
            fusion = FUSION_METHODS.get(request.fusion.method)
        if fusion is None:
            raise InvalidRequest(f"unknown fusion method {request.fusion.method} (RRF or MEDRAG)")
        k1 = request.bm25_k1 if request.HasField("bm25_k1") else None
        b = request.bm25_b if request.HasField("bm25_b") else None
        if (k1 is not None and not 0 <= k1 <= 10) or (b is not None and not 0 <= b <= 1):
            raise InvalidRequest("bm25_k1 must be in [0, 10] and bm25_b in [0, 1]")
        nprobe = request.nprobe if request.HasField("nprobe") else None
        if nprobe is not None and not 1 <= nprobe <= 1_000_000:
            raise InvalidRequest(f"nprobe must be in 1..1000000, got {nprobe}")
        refine = request.refine if request.HasField("refine") else None
        if refine is not None and refine * request.k > 2 * self.limits.max_k * 10:
            raise InvalidRequest(f"refine x k must be at most {20 * self.limits.max_k}, got {refine} x {request.k}")
        rrf_k = request.fusion.rrf_k or engine.serve_plan.rrf_k
        # fusing ranks needs the lists deeper than k (MedRAG's max(2k, 100)); a list that is the answer by itself
        # (the only one, or MedRAG's merge by score of one retriever's lists) needs only its top k
        depth = request.depth or (
            max(2 * request.k, 100) if engine.fuses_ranks(corpora, retrievers, fusion) else request.k
        )
        if depth > 2 * self.limits.max_k:  # the default always fits
            raise InvalidRequest(f"depth must be at most {2 * self.limits.max_k} (twice max_k), got {depth}")
        query = Query(text, request.k, corpora, retrievers, depth, rrf_k, k1, b, fusion, nprobe, refine)
        engine.check(query)
        return query

    def _response(
        self, request: search_pb2.SearchRequest, query: Query, scope: CallScope, engine: SearchEngine
    ) -> search_pb2.SearchResponse:
        started = time.perf_counter()
        return self._hits(request, engine.search(query, scope), engine, started)

    @staticmethod
    def _hits(
        request: search_pb2.SearchRequest, fused: list, engine: SearchEngine, started: float
    ) -> search_pb2.SearchResponse:
        """The response of fused hits, with each hit's text when asked."""
        # source and doc_id always come back; each hit's store is the corpus that retrieved it
        began = time.perf_counter()
        texts = engine.snippets([hit.id for hit in fused], [hit.contributions[0][0] for hit in fused])
        engine.stats.timed("store", began)
        began = time.perf_counter()
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
        response = search_pb2.SearchResponse(hits=hits, took_ms=(time.perf_counter() - started) * 1000)
        engine.stats.timed("messages", began)
        return response

    def _bounded(self, size: int) -> None:
        if size > self.limits.max_reply_bytes:
            raise ReplyTooLarge(
                f"the reply would exceed {self.limits.max_reply_bytes:,} bytes (max_reply_bytes): split the batch, "
                "lower k, or ask without text (return_text false)"
            )

    # -- calls --

    def _guarded(self, context, method: str, detail: dict, work, questions: int = 1):
        """Admission control (a call of `questions` questions, searchd.admission), the call's scope (deadline,
        cancellation), its engine (one generation from start to end), error mapping and the request's log line around
        `work(scope, engine)`."""
        started = time.perf_counter()
        status = "OK"
        if getattr(context, "via", None):  # a call that came over HTTP (searchd.http_api)
            detail = {**detail, "via": context.via}
        bulk = questions > FEW_QUESTIONS
        if not self._enter(bulk, questions):
            log_request(method, detail, started, "RESOURCE_EXHAUSTED")
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "server busy: too many calls in flight, retry later")
        scope = CallScope.for_context(context, self.limits.max_call_seconds)
        engine = self.engines.acquire()
        try:
            return work(scope, engine)
        except (InvalidRequest, QueryRefused) as error:
            status = "INVALID_ARGUMENT"
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        except ReplyTooLarge as error:
            status = "RESOURCE_EXHAUSTED"
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(error))
        except DeadlineExceeded:
            status = "DEADLINE_EXCEEDED"
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "deadline exceeded while searching")
        except (CallCancelled, BatcherClosed):  # the client left, or the server is stopping
            status = "CANCELLED" if not context.is_active() else "UNAVAILABLE"
            context.abort(grpc.StatusCode.UNAVAILABLE, "the server is stopping; retry on another server or later")
        except Exception as error:  # noqa: BLE001 - a bug or a failing index: INTERNAL, logged, server goes on
            status = "INTERNAL"
            log.exception("%s failed", method)
            # the first line only: a JVM error's text goes on with its stack frames, which the log keeps
            first = (str(error).strip().splitlines() or [""])[0]
            context.abort(grpc.StatusCode.INTERNAL, f"internal error: {type(error).__name__}: {first}"[:300])
        finally:
            scope.cancel()  # whatever this call queued and did not wait for is dropped
            self.engines.release(engine)
            self._leave(bulk, questions)
            if status == "OK" and not context.is_active():
                status = "CANCELLED"
            log_request(method, detail, started, status)

    def Search(self, request, context):
        detail = {"corpora": list(request.corpora), "k": request.k}

        def work(scope: CallScope, engine: SearchEngine):
            response = self._response(request, self._query(request, engine), scope, engine)
            self._bounded(response.ByteSize())
            return response

        return self._guarded(context, "Search", detail, work)

    def BatchSearch(self, request, context):
        detail = {"queries": len(request.requests)}

        def work(scope: CallScope, engine: SearchEngine):
            if not request.requests:
                raise InvalidRequest("no requests in the batch")
            if len(request.requests) > self.limits.max_batch:
                raise InvalidRequest(f"{len(request.requests)} requests, the batch limit is {self.limits.max_batch}")
            queries, refused = {}, {}
            for at, r in enumerate(request.requests):  # one request's fault is its own, not its batch's
                try:
                    queries[at] = self._query(r, engine)
                except (InvalidRequest, QueryRefused) as error:
                    refused[at] = f"requests[{at}]: {error}"
            if not queries:
                raise InvalidRequest(next(iter(refused.values())))
            started = time.perf_counter()
            # all at once: the micro-batchers serve the whole batch in full batches
            fused = dict(zip(queries, engine.search_many(list(queries.values()), scope), strict=True))
            responses, size = [], 0
            for at, r in enumerate(request.requests):  # the reply grows only up to max_reply_bytes
                if at in refused:
                    response = search_pb2.SearchResponse(error=refused[at])
                else:
                    response = self._hits(r, fused[at], engine, started)
                size += response.ByteSize() + 6  # + the field's tag and length in the batch message
                self._bounded(size)
                responses.append(response)
            if refused:
                detail["refused"] = len(refused)
            return search_pb2.BatchSearchResponse(responses=responses)

        return self._guarded(context, "BatchSearch", detail, work, len(request.requests))

    def GetSnippets(self, request, context):
        detail = {"ids": len(request.ids)}

        def work(scope: CallScope, engine: SearchEngine):
            if len(request.ids) > self.limits.max_k:
                raise InvalidRequest(f"{len(request.ids)} ids, the limit is {self.limits.max_k}")
            found = engine.snippets(list(request.ids))
            snippets = [_snippet_message(found[i]) for i in request.ids if i in found]
            missing = [i for i in request.ids if i not in found]
            response = search_pb2.GetSnippetsResponse(snippets=snippets, missing=missing)
            self._bounded(response.ByteSize())
            return response

        return self._guarded(context, "GetSnippets", detail, work)

    def Info(self, request, context):
        def work(scope: CallScope, engine: SearchEngine):
            corpora = []
            for name, loaded in engine.corpora.items():
                indexes = []
                for retriever, index in loaded.indexes():
                    encoder = index.record.get("encoder")  # dense indexes record their encoder
                    indexes.append(
                        search_pb2.IndexInfo(
                            retriever=retriever,
                            path=str(index.path),
                            lineage_sha256=index.record["upstream"]["lineage_sha256"],
                            build_json=json.dumps(index.record, sort_keys=True),
                            encoder_json=json.dumps(encoder, sort_keys=True) if encoder else "",
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
            identity = engine.encoder_identity()
            return search_pb2.InfoResponse(
                server_version=__version__,
                corpora=corpora,
                retrievers=engine.retrievers,
                encoder_json=json.dumps(identity, sort_keys=True) if identity else "",
                max_k=self.limits.max_k,
                max_query_chars=self.limits.max_query_chars,
                max_batch=self.limits.max_batch,
                max_call_seconds=self.limits.max_call_seconds,
                max_reply_bytes=self.limits.max_reply_bytes,
                max_page_size=self.limits.max_page_size,
                stats_json=json.dumps(
                    {
                        **engine.stats_dict(),
                        "generation": self.engines.status(),
                        "memory": process_memory(),
                        "serve": asdict(engine.serve_plan),
                    },
                    sort_keys=True,
                ),
            )

        return self._guarded(context, "Info", {}, work)

    def ScanSnippets(self, request, context):
        """Pages of snippets; holds one in-flight slot for the whole stream, and stops at the first page
        after its call ended (the client went away, or the server is stopping)."""
        started = time.perf_counter()
        detail = {"corpora": list(request.corpora), "first_chunk_only": request.first_chunk_only}
        engine = self.engines.acquire()  # one generation validates and streams the whole call
        try:
            try:
                corpora = self._corpora(request.corpora, engine)
                if request.page_size > self.limits.max_page_size:
                    raise InvalidRequest(
                        f"page_size must be at most {self.limits.max_page_size}, got {request.page_size}"
                    )
            except InvalidRequest as error:
                log_request("ScanSnippets", detail, started, "INVALID_ARGUMENT")
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
            if not self._enter(bulk=True):
                log_request("ScanSnippets", detail, started, "RESOURCE_EXHAUSTED")
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "server busy: too many calls in flight, retry later")
            status, sent = "CANCELLED", 0
            try:
                size = request.page_size or 1000
                for name in corpora:
                    page = []
                    for snippet in engine.corpora[name].store.scan():
                        if request.first_chunk_only and snippet["chunk"] != 0:
                            continue
                        page.append(_snippet_message(snippet, request.return_text))
                        if len(page) == size:
                            if not context.is_active():
                                return
                            yield search_pb2.SnippetPage(corpus=name, snippets=page)
                            sent += len(page)
                            page = []
                    if page:
                        yield search_pb2.SnippetPage(corpus=name, snippets=page)
                        sent += len(page)
                status = "OK"
            finally:
                self._leave(bulk=True)
                log_request("ScanSnippets", {**detail, "snippets": sent}, started, status)
        finally:
            self.engines.release(engine)


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


def log_request(method: str, detail: dict, started: float, status: str) -> None:
    record = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "method": method,
        **detail,
        "latency_ms": round((time.perf_counter() - started) * 1000, 2),
        "status": status,
    }
    log.info(json.dumps(record))
