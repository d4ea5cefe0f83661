"""searchd over HTTP/JSON, for the loops that do not speak gRPC: Search-R1's `POST /retrieve`, `POST /search`
(a SearchRequest as JSON), `GET /health`, and the OpenAPI document (`/openapi.json`; no `/docs` page, whose
scripts would come from a CDN).

Every request runs through the same `SearchServicer` as gRPC: the same engine generation, in-flight slots,
deadlines (the server's `max_call_seconds`), batching, limits and request log (its lines say `"via": "http"`).
A refused request gets a 4xx JSON body, `{"error": {"code", "message", "field"}}`, naming the field at fault;
so do unknown paths (404), methods (405) and bodies that do not parse.

Under load it holds to gRPC's rules (`Admission`): a search is admitted to one of the servicer's in-flight slots
at once or refused with 429 and Retry-After, never queued; it runs on a thread reserved for admitted calls, so
`/health` (answered on the event loop) never waits behind searches; a client that hangs up cancels its call (the
work stops at the next batch boundary; the log says CANCELLED); once the server is stopping, new requests get 503
with Retry-After and admitted ones finish within the grace period or are answered 503.

A browser page on another site must not be able to use it: a POST must say `Content-Type: application/json`
(a cross-site form or `fetch` without a CORS preflight cannot), the Host header must name the address searchd
listens on (DNS rebinding: a foreign name resolving to 127.0.0.1 is refused), and no CORS header is ever sent,
so a preflighted cross-site request fails in the browser.

Search-R1's rollout code posts `{"queries": [...], "topk": 3, "return_scores": true}` and reads
`result[i][j]["document"]["contents"]`, a `"Title"\\ntext` string whose first line it takes as the title.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass

import anyio
import orjson
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from google.protobuf import json_format
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr
from starlette.exceptions import HTTPException as StarletteHTTPException

from medsnip import __version__
from medsnip.v1 import search_pb2
from searchd.admission import FEW_QUESTIONS, MAX_BULK_QUESTIONS, Slots
from searchd.http_connections import guarded_protocol
from searchd.listening import bind_http_socket
from searchd.server import SearchServicer, log_request

log = logging.getLogger("searchd")
MAX_BODY_BYTES = 16 << 20  # as gRPC's largest accepted request
REQUEST_SECONDS = 10.0  # a request must arrive whole this soon (searchd.http_connections), or --idle-timeout
HEALTH_ROOM = 64  # connections past --max-connections that may still ask /health
SHUTDOWN_MARGIN = 3.0  # seconds uvicorn waits past the grace period for the calls searchd cancelled then
REPLY_CHUNK_BYTES = 64 << 10
SEND_SECONDS = 30.0  # a client must take each chunk of its reply this soon (or --idle-timeout), or is closed
DEFAULT_TOPK = 3  # Search-R1's retriever default (its training scripts pass topk 3 too)
_STATUS = {  # gRPC status -> HTTP status
    "INVALID_ARGUMENT": 400,
    "UNAUTHENTICATED": 401,
    "RESOURCE_EXHAUSTED": 429,
    "DEADLINE_EXCEEDED": 504,
    "UNAVAILABLE": 503,
    "CANCELLED": 499,
    "INTERNAL": 500,
}
# the servicer's refusals start with the field they are about ("k must be in 1..1000", "unknown corpus x")
_FIELD_OF_MESSAGE = (
    ("query", "query"),
    ("k must", "k"),
    ("depth", "depth"),
    ("unknown corpus", "corpora"),
    ("unknown or unavailable retriever", "retrievers"),
    ("unknown fusion", "fusion"),
    ("bm25_k1", "bm25_k1"),
    ("nprobe", "nprobe"),
    ("refine", "refine"),
)


class HttpError(HTTPException):
    """A refused HTTP request: its status, gRPC-style code, message, and the field at fault. (An HTTPException,
    so that FastAPI passes it on as it is even from inside its reading of the body.)"""

    def __init__(self, status: int, code: str, message: str, field: str = "", logged: bool = False):
        """`logged`: the servicer has logged the call it refuses (its request log line)."""
        super().__init__(status, message)
        self.status, self.code, self.message, self.field = status, code, message, field
        self.logged = logged

    def response(self) -> JSONResponse:
        headers = {"Retry-After": "1"} if self.status in (429, 503) else {}
        if self.status == 413:  # the rest of the body is not read: the connection cannot carry another request
            headers["Connection"] = "close"
        body = {"error": {"code": self.code, "message": self.message, "field": self.field}}
        return JSONResponse(body, status_code=self.status, headers=headers or None)


class HttpCallContext:
    """What the servicer asks of a gRPC call's context, for one HTTP request: no client deadline (the
    server's max_call_seconds applies), callbacks run when the request ends or is cancelled (at the end of
    a shutdown's grace period), and abort raises HttpError."""

    via = "http"

    def __init__(self) -> None:
        self._callbacks: list = []
        self._cancelled = False

    def time_remaining(self) -> None:
        return None

    def is_active(self) -> bool:
        return not self._cancelled

    def cancel(self) -> None:
        self._cancelled = True
        for callback in list(self._callbacks):
            callback()

    def add_callback(self, callback) -> bool:
        self._callbacks.append(callback)
        return True

    def abort(self, code, details: str):
        status = _STATUS.get(code.name, 500)
        if code.name == "RESOURCE_EXHAUSTED" and not details.startswith("server busy"):
            status = 413  # the reply would be too large: the request must ask for less, not retry
        field = next((name for prefix, name in _FIELD_OF_MESSAGE if details.startswith(prefix)), "")
        raise HttpError(status, code.name, details, field, logged=True)

    def finish(self) -> None:
        for callback in self._callbacks:
            callback()


class LiveCalls:
    """The HTTP requests being served, so that a shutdown can cancel them when its grace period ends (as
    gRPC cancels its own calls then)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: set[HttpCallContext] = set()

    def run(self, method, request, context: HttpCallContext | None = None):
        """One servicer method under `context` (a new HTTP context when None)."""
        context = context or HttpCallContext()
        with self._lock:
            self._calls.add(context)
        try:
            return method(request, context)
        finally:
            with self._lock:
                self._calls.discard(context)
            context.finish()

    def cancel_all(self) -> None:
        with self._lock:
            calls = list(self._calls)
        for context in calls:
            context.cancel()


class Admission:
    """The HTTP side of the one admission rule (searchd.admission): a search is admitted while an HTTP slot is open to
    it (the servicer's --max-in-flight, bulk calls leaving some to small ones; the servicer refuses past its own
    slots, gRPC's calls counted), else refused at once; admitted ones run on a thread pool of exactly that size, so
    none waits for a thread. Once `draining`, nothing more is admitted."""

    def __init__(self, slots: int, max_bulk_questions: int = MAX_BULK_QUESTIONS):
        self.slots = Slots(slots, max_bulk_questions)
        self.limiter = anyio.CapacityLimiter(slots)
        self.draining = False

    def enter(self, bulk: bool, questions: int) -> None:
        if self.draining:
            raise HttpError(503, "UNAVAILABLE", "the server is stopping; retry on another server or later")
        if not self.slots.enter(bulk, questions):
            raise HttpError(429, "RESOURCE_EXHAUSTED", "server busy: too many calls in flight, retry later")

    def leave(self, bulk: bool, questions: int) -> None:
        self.slots.leave(bulk, questions)


DISCONNECT_POLL_SECONDS = 0.1  # how soon a client's hang-up is noticed while its search runs


async def run_admitted(
    admission: Admission, calls: LiveCalls, http_request: Request, method, request, questions: int = 1
):
    """One servicer call of `questions` questions for an HTTP request, admitted or refused at once (`Admission`);
    cancelled when the client hangs up while it runs."""
    bulk = questions > FEW_QUESTIONS
    admission.enter(bulk, questions)
    context = HttpCallContext()
    outcome: dict = {}
    try:
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                while not await http_request.is_disconnected():
                    await anyio.sleep(DISCONNECT_POLL_SECONDS)
                context.cancel()

            group.start_soon(watch)
            try:  # caught here: raised inside the task group, an error would reach FastAPI as an ExceptionGroup
                outcome["result"] = await anyio.to_thread.run_sync(
                    calls.run, method, request, context, limiter=admission.limiter
                )
            except Exception as error:  # noqa: BLE001 - re-raised below, as it is
                outcome["error"] = error
            finally:
                group.cancel_scope.cancel()
    finally:
        admission.leave(bulk, questions)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def unicode_problem(value, where: str = "body") -> str | None:
    """The field of the first string in `value` (a parsed JSON body) that is not valid Unicode (a lone surrogate,
    "\\ud800", which JSON may carry and UTF-8 cannot), or None."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return where
        return None
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = ((f"[{at}]", item) for at, item in enumerate(value))
    else:
        return None
    for key, item in items:
        if str(key).startswith("["):
            inner = f"{where}{key}"
        else:
            inner = str(key) if where == "body" else f"{where}.{key}"
        found = unicode_problem(item, inner)
        if found:
            return found
    return None


class RetrieveRequest(BaseModel):
    """Search-R1's request: its questions, hits per question, and whether to return scores."""

    model_config = ConfigDict(extra="forbid")
    queries: list[StrictStr] = Field(description="Questions, answered in order (a GRPO step sends hundreds).")
    topk: StrictInt | None = Field(None, description="Hits per question [default: the server's --retrieve-topk].")
    return_scores: StrictBool = Field(False, description="Wrap each hit as {document, score}.")


class Document(BaseModel):
    id: str
    contents: str = Field(description='"Title"\\ntext, as Search-R1\'s corpora write it.')


class ScoredDocument(BaseModel):
    document: Document
    score: float


class QuestionError(BaseModel):
    index: int
    code: str
    message: str
    field: str


class RetrieveResponse(BaseModel):
    result: list[list[ScoredDocument] | list[Document]]
    errors: list[QuestionError] | None = Field(
        None, description="Questions refused on their own (their `result` list is empty); absent when none was."
    )


class ErrorBody(BaseModel):
    code: str
    message: str
    field: str


class ErrorResponse(BaseModel):
    error: ErrorBody


@dataclass(frozen=True)
class HttpOptions:
    host: str
    port: int  # the bound port (Host headers must name it)
    token: str | None = None
    topk: int = DEFAULT_TOPK
    max_connections: int = 1000  # open connections past which only /health is answered
    send_seconds: float = SEND_SECONDS  # a client taking no part of its reply this long is closed


def contents_of(title: str, content: str) -> str:
    """A hit as Search-R1's corpora write a document: the title in quotes on the first line, then the text."""
    return f'"{title}"\n{content}'


def create_app(
    servicer: SearchServicer,
    health,
    options: HttpOptions,
    calls: LiveCalls | None = None,
    admission: Admission | None = None,
    open_connections=None,
) -> FastAPI:
    """The ASGI app over `servicer` (shared with gRPC); `health()` returns the health status dict; `calls`
    tracks the requests in flight, `admission` admits them; `open_connections()` counts the open connections,
    of which past `options.max_connections` only `/health` is answered."""
    calls = calls or LiveCalls()
    admission = admission or Admission(servicer.limits.max_in_flight, servicer.limits.max_bulk_questions)
    app = FastAPI(
        title="searchd",
        version=__version__,
        description="Hybrid BM25 + dense search over medsnip corpora (the same engine as the gRPC service).",
        responses={code: {"model": ErrorResponse} for code in (400, 401, 413, 415, 421, 429, 503, 504)},
        docs_url=None,  # Swagger UI loads its scripts from a CDN: the OpenAPI document stays
        redoc_url=None,
    )
    allowed_hosts = _allowed_hosts(options.host, options.port)
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)

    def refusal(request: Request) -> HttpError | None:
        """Host, token, draining, content type and body size, before any work."""
        host = request.headers.get("host", "")
        if allowed_hosts is not None and host.lower() not in allowed_hosts:
            return HttpError(421, "INVALID_ARGUMENT", f"Host {host!r} is not this server's address", "Host")
        if options.token and request.url.path not in ("/health",) and not _authorized(request, options.token):
            return HttpError(401, "UNAUTHENTICATED", "missing or wrong bearer token", "Authorization")
        if admission.draining and request.url.path != "/health":
            return HttpError(503, "UNAVAILABLE", "the server is stopping; retry on another server or later")
        if (
            open_connections is not None
            and request.url.path != "/health"
            and open_connections() > options.max_connections
        ):
            return HttpError(503, "UNAVAILABLE", "too many open connections; retry later")
        if request.method == "POST":
            kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind != "application/json":
                message = "the body must be JSON (Content-Type: application/json)"
                return HttpError(415, "INVALID_ARGUMENT", message, "Content-Type")
            declared = request.headers.get("content-length")
            if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
                return HttpError(413, "INVALID_ARGUMENT", f"the body is over {MAX_BODY_BYTES:,} bytes", "body")
        return None

    app.add_middleware(Guard, refusal=refusal)

    @app.exception_handler(HttpError)
    async def refused(request: Request, error: HttpError):
        log_refused(request.scope, error)
        return error.response()

    @app.exception_handler(StarletteHTTPException)
    async def routing(request: Request, error: StarletteHTTPException):  # 404, 405 (Starlette's): the same shape
        if not isinstance(error, HttpError):
            code = {404: "NOT_FOUND", 405: "INVALID_ARGUMENT"}.get(error.status_code, "INVALID_ARGUMENT")
            field = "path" if error.status_code == 404 else "method" if error.status_code == 405 else ""
            error = HttpError(error.status_code, code, str(error.detail), field)
        log_refused(request.scope, error)
        return error.response()

    @app.exception_handler(RequestValidationError)
    async def malformed(request: Request, error: RequestValidationError):
        first = error.errors()[0]
        if first.get("type") == "json_invalid":
            refusal = HttpError(400, "INVALID_ARGUMENT", "the body is not valid JSON", "body")
        else:
            where = [str(part) for part in first.get("loc", ()) if part != "body"]
            field = ".".join(where) or "body"
            refusal = HttpError(400, "INVALID_ARGUMENT", f"{field}: {first.get('msg', 'invalid')}", field)
        log_refused(request.scope, refusal)
        return refusal.response()

    @app.post("/retrieve", response_model=RetrieveResponse, summary="Search-R1's retrieval call")
    async def retrieve(body: RetrieveRequest, http_request: Request):
        """Search-R1's `POST /retrieve`: the served hybrid (or the root's serve.json) for each question."""
        limits = servicer.limits
        if not body.queries:
            raise HttpError(400, "INVALID_ARGUMENT", "queries is empty: send at least one question", "queries")
        if len(body.queries) > limits.max_batch:
            raise HttpError(
                400, "INVALID_ARGUMENT", f"{len(body.queries)} queries, the limit is {limits.max_batch}", "queries"
            )
        if (field := unicode_problem(body.queries, "queries")) is not None:
            raise HttpError(400, "INVALID_ARGUMENT", f"{field} is not valid Unicode (a lone surrogate)", field)
        for at, query in enumerate(body.queries):
            if not query.strip():
                raise HttpError(400, "INVALID_ARGUMENT", f"queries[{at}] is empty", f"queries[{at}]")
            if len(query) > limits.max_query_chars:
                raise HttpError(
                    400,
                    "INVALID_ARGUMENT",
                    f"queries[{at}] has {len(query)} characters, the limit is {limits.max_query_chars}",
                    f"queries[{at}]",
                )
        topk = body.topk if body.topk is not None else options.topk
        if not 1 <= topk <= limits.max_k:
            raise HttpError(400, "INVALID_ARGUMENT", f"topk must be in 1..{limits.max_k}, got {topk}", "topk")
        batch = search_pb2.BatchSearchRequest(
            requests=[search_pb2.SearchRequest(query=q, k=topk, return_text=True) for q in body.queries]
        )
        called = run_admitted(admission, calls, http_request, servicer.BatchSearch, batch, len(body.queries))
        answers = (await called).responses
        began = time.perf_counter()
        result, errors = [], []
        for at, answer in enumerate(answers):
            if answer.error:  # this question alone was refused: an empty list, and why in `errors`
                message = answer.error.replace(f"requests[{at}]", f"queries[{at}]", 1)
                errors.append({"index": at, "code": "INVALID_ARGUMENT", "message": message, "field": f"queries[{at}]"})
            documents = [{"id": hit.id, "contents": contents_of(hit.title, hit.content)} for hit in answer.hits]
            if body.return_scores:
                scores = [hit.score for hit in answer.hits]
                result.append([{"document": d, "score": s} for d, s in zip(documents, scores, strict=True)])
            else:
                result.append(documents)
        reply = ChunkedJSON({"result": result, **({"errors": errors} if errors else {})}, options.send_seconds)
        servicer.engine.stats.timed("json", began)
        return reply

    @app.post("/search", summary="A SearchRequest as JSON (protobuf's JSON mapping); a SearchResponse back")
    async def search(body: dict, http_request: Request):
        if (field := unicode_problem(body)) is not None:
            raise HttpError(400, "INVALID_ARGUMENT", f"{field} is not valid Unicode (a lone surrogate)", field)
        request = search_pb2.SearchRequest()
        try:
            json_format.ParseDict(body, request)
        except json_format.ParseError as error:
            raise HttpError(400, "INVALID_ARGUMENT", str(error), _parse_error_field(str(error))) from None
        if not request.k:
            request.k = 10
        response = await run_admitted(admission, calls, http_request, servicer.Search, request)
        return ChunkedJSON(json_format.MessageToDict(response, preserving_proto_field_name=True), options.send_seconds)

    @app.get("/health", summary="Serving status and the generation being served")
    async def health_endpoint(request: Request):
        """Answered on the event loop, never behind searches. Under --token-file, without the token: liveness only
        (the status), no paths nor errors."""
        status = health()
        code = 200 if status["status"] == "SERVING" else 503
        if options.token and not _authorized(request, options.token):
            return JSONResponse({"status": status["status"]}, status_code=code)
        return JSONResponse(status, status_code=code)

    return app


def log_refused(scope: dict, error: HttpError) -> None:
    """The request log's line for a request refused before (or instead of) a servicer call: the servicer's line
    (searchd.server.log_request), with the HTTP status and the field at fault."""
    if error.logged:
        return
    detail = {"via": "http", "http_status": error.status, **({"field": error.field} if error.field else {})}
    log_request(f"{scope.get('method', '')} {scope.get('path', '')}", detail, time.perf_counter(), error.code)


class ChunkedJSON(Response):
    """A JSON reply (orjson) sent in chunks, each only once the client has taken the one before (uvicorn's
    flow control): a client that does not read holds at most its own reply (bounded by the servicer's
    max_reply_bytes) plus the socket's buffer, and for at most `SEND_SECONDS` a chunk; then its connection is
    closed and the reply freed."""

    media_type = "application/json"

    def __init__(self, content, send_seconds: float = SEND_SECONDS, status_code: int = 200):
        # not Response's own __init__, which would render the content again
        self.body = orjson.dumps(content)
        self.send_seconds, self.status_code = send_seconds, status_code
        self.background = None

    async def __call__(self, scope, receive, send) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(self.body)).encode())]
        await send({"type": "http.response.start", "status": self.status_code, "headers": headers})
        view = memoryview(self.body)
        for start in range(0, max(len(self.body), 1), REPLY_CHUNK_BYTES):
            chunk = bytes(view[start : start + REPLY_CHUNK_BYTES])
            more = start + REPLY_CHUNK_BYTES < len(self.body)
            message = {"type": "http.response.body", "body": chunk, "more_body": more}
            try:
                await asyncio.wait_for(send(message), self.send_seconds)
            except TimeoutError:  # the client stopped reading: returning unfinished makes uvicorn close it
                log.warning(json.dumps({"warning": f"a client took no part of its reply for {self.send_seconds:g} s"}))
                return


class Guard:
    """ASGI middleware: a request `refusal(request)` refuses is answered with its error, unread. Plain ASGI (not
    Starlette's BaseHTTPMiddleware, whose wrapped `receive` never tells the handler that its client hung up)."""

    def __init__(self, app, refusal):
        self.app, self.refusal = app, refusal

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            refused = self.refusal(Request(scope))
            if refused is not None:
                log_refused(scope, refused)
                return await refused.response()(scope, receive, send)
        return await self.app(scope, receive, send)


class BodyLimit:
    """ASGI middleware: a body (chunked ones too) is refused with 413 once it passes `limit` bytes, while it
    arrives, never read whole first."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        received = 0

        async def counted():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise HttpError(413, "INVALID_ARGUMENT", f"the body is over {self.limit:,} bytes", "body")
            return message

        await self.app(scope, counted, send)


def _authorized(request: Request, token: str) -> bool:
    given = request.headers.get("authorization", "")
    return given.startswith("Bearer ") and hmac.compare_digest(given[7:].encode(), token.encode())


def _parse_error_field(message: str) -> str:
    """The field a protobuf JSON parse error names ('Failed to parse k field: ...', 'no field named "x"')."""
    for marker in ("Failed to parse ", 'no field named "'):
        if marker in message:
            rest = message.split(marker, 1)[1]
            return rest.split(" field", 1)[0] if marker.startswith("Failed") else rest.split('"', 1)[0]
    return "body"


def _allowed_hosts(host: str, port: int) -> set[str] | None:
    """The Host headers that name this server; None when it listens on every interface (any name may
    reach it then, and the token is what protects it)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # a name: it, and nothing else
        return {f"{host.lower()}:{port}"}
    if address.is_unspecified:
        return None
    written = f"[{address}]" if address.version == 6 else str(address)
    names = {f"{written}:{port}"}
    if address.is_loopback:
        names |= {f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"}
    return names


class HttpServer:
    """uvicorn serving the app from a thread of the searchd process, on a socket bound here (port 0: a free
    one, known before any request)."""

    def __init__(
        self,
        servicer: SearchServicer,
        health,
        host: str,
        port: int,
        token: str | None = None,
        tls: tuple[bytes, bytes] | None = None,
        topk: int = DEFAULT_TOPK,
        max_connections: int = 1000,
        idle_seconds: float = 300.0,
        grace: float = 10.0,
    ):
        import uvicorn

        self.socket = bind_http_socket(host, port)
        self.port = self.socket.getsockname()[1]
        self.calls = LiveCalls()
        self.admission = Admission(servicer.limits.max_in_flight, servicer.limits.max_bulk_questions)
        app = create_app(
            servicer,
            health,
            HttpOptions(host, self.port, token, topk, max_connections, min(idle_seconds, SEND_SECONDS)),
            self.calls,
            self.admission,
            lambda: len(self._server.server_state.connections),
        )
        ssl = _tls_files(tls) if tls else {}
        self._tls_folder = os.path.dirname(ssl["ssl_keyfile"]) if ssl else None
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,  # the servicer logs each call
            lifespan="off",
            # uvicorn's own limit answers every request, /health too, 503 text/plain: searchd's protocol and Guard
            # cap connections instead (searchd.http_connections)
            limit_concurrency=None,
            http=guarded_protocol(min(idle_seconds, REQUEST_SECONDS), max_connections, max_connections + HEALTH_ROOM),
            timeout_keep_alive=min(idle_seconds, 75),
            # past the grace period searchd cancels the calls still running (they answer 503 JSON); uvicorn cancelling
            # its tasks at the same moment would answer them 500 text/plain instead
            timeout_graceful_shutdown=grace + SHUTDOWN_MARGIN,
            h11_max_incomplete_event_size=64 * 1024,  # headers larger than this end the connection
            server_header=False,
            **ssl,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name="searchd-http", daemon=True)

    def _run(self) -> None:
        asyncio.run(self._server.serve(sockets=[self.socket]))

    def start(self) -> HttpServer:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if self._tls_folder:  # uvicorn has read the key into its SSL context: no copy of it stays on disk
            shutil.rmtree(self._tls_folder, ignore_errors=True)
        if not self._server.started:
            raise RuntimeError("the HTTP server did not start")
        return self

    def begin_stop(self) -> None:
        """Stop accepting and admitting (requests on open connections get 503); admitted requests finish (uvicorn
        waits up to the grace period for them)."""
        self.admission.draining = True
        self._server.should_exit = True

    def cancel_calls(self) -> None:
        """End the requests still running (their clients get 503: the server is stopping)."""
        self.calls.cancel_all()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


def _tls_files(tls: tuple[bytes, bytes]) -> dict:
    """uvicorn takes TLS from files: the key and certificate, written private to this process (and removed
    once the server has started)."""
    import tempfile

    key, certificate = tls
    folder = tempfile.mkdtemp(prefix="searchd-tls-")
    os.chmod(folder, 0o700)
    paths = {}
    for name, data in (("ssl_keyfile", key), ("ssl_certfile", certificate)):
        path = os.path.join(folder, name)
        with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as out:
            out.write(data)
        paths[name] = path
    return paths
