"""`SearchClient`: the Python client of searchd (any language can use protos/medsnip/v1/search.proto).

    with SearchClient("127.0.0.1:50051") as client:
        for hit in client.search("statins and myocardial infarction", k=10).hits:
            print(hit.rank, hit.id, hit.score, [(r.retriever, r.rank) for r in hit.retrievers])

Calls that fail with UNAVAILABLE (server starting, restarting, briefly unreachable) are retried with
exponential backoff. A call that fails raises a `SearchdError`, one class per row of the commands' exit-code
table, whose message is the sentence every medsnip command prints for it (no gRPC internals):

- `SearchdUnreachable`: nothing answered at the address (the commands exit 3);
- `SearchdRejected`: the server refused the request's arguments (k out of range, an empty query, an unknown
  retriever or corpus; the commands exit 2);
- `SearchdDeadline`: the call's deadline passed;
- `SearchdError` itself for the rest (a missing token, a busy server, a reply too large; exit 1).

Each is also a grpc.RpcError with its `code()` and `details()`, so code written against grpc's errors works.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
from google.protobuf import json_format

from medsnip.v1 import search_pb2, search_pb2_grpc

DEFAULT_ADDRESS = "127.0.0.1:50051"
ADDRESS_VARIABLE = "SEARCHD_ADDRESS"  # where every client and runner adapter finds searchd when given no address


def default_address() -> str:
    """$SEARCHD_ADDRESS when set (a runner that builds its retriever itself needs no argument), else 127.0.0.1:50051."""
    return os.environ.get(ADDRESS_VARIABLE) or DEFAULT_ADDRESS


# A BatchSearch answer with text can pass gRPC's 4 MB default (256 queries x 100 hits x ~1 KB).
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 256 << 20)]


FUSION_METHODS = {
    None: search_pb2.Fusion.METHOD_UNSPECIFIED,
    "rrf": search_pb2.Fusion.RRF,
    "medrag": search_pb2.Fusion.MEDRAG,
}


class SearchdError(grpc.RpcError):
    """A failed call to searchd: str() is the one sentence for it; `code()` and `details()` are gRPC's."""

    def __init__(self, address: str, code: grpc.StatusCode, details: str):
        self.address, self._code, self._details = address, code, details
        super().__init__(describe_failure(address, code, details))

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class SearchdUnreachable(SearchdError):
    """Nothing answered at the address (not started, stopped, or a wrong address)."""


class SearchdRejected(SearchdError):
    """The server refused the request's arguments (INVALID_ARGUMENT): the message says which and why."""


class SearchdDeadline(SearchdError):
    """The call's deadline passed before the answer came."""


_ERROR_CLASSES = {
    grpc.StatusCode.UNAVAILABLE: SearchdUnreachable,
    grpc.StatusCode.INVALID_ARGUMENT: SearchdRejected,
    grpc.StatusCode.DEADLINE_EXCEEDED: SearchdDeadline,
}


def searchd_error(address: str, error: grpc.RpcError) -> SearchdError:
    """grpc's error as the SearchdError of its class (one already converted comes back as it is)."""
    if isinstance(error, SearchdError):
        return error
    code, details = error.code(), error.details() or ""
    return _ERROR_CLASSES.get(code, SearchdError)(address, code, details)


class SearchClient:
    def __init__(
        self,
        address: str | None = None,
        token: str | None = None,
        tls: bool = False,
        ca_file: Path | None = None,
        retries: int = 4,
        backoff: float = 0.2,
        timeout: float | None = 60.0,
    ):
        address = address or default_address()
        if tls:
            root = Path(ca_file).read_bytes() if ca_file else None
            self._channel = grpc.secure_channel(
                address, grpc.ssl_channel_credentials(root_certificates=root), options=CHANNEL_OPTIONS
            )
        else:
            self._channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
        self.address = address
        self._stub = search_pb2_grpc.SearchServiceStub(self._channel)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self.retries, self.backoff, self.timeout = retries, backoff, timeout

    def __enter__(self) -> SearchClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _call(self, method, request, timeout: float | None):
        return self._retrying(lambda: method(request, timeout=timeout or self.timeout, metadata=self._metadata))

    def _retrying(self, attempt_call):
        """attempt_call(), retried with exponential backoff while it fails with UNAVAILABLE."""
        delay = self.backoff
        for attempt in range(self.retries + 1):
            try:
                return attempt_call()
            except grpc.RpcError as error:
                if error.code() != grpc.StatusCode.UNAVAILABLE or attempt == self.retries:
                    raise searchd_error(self.address, error) from None
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    @staticmethod
    def request(
        query: str,
        k: int = 10,
        corpora=(),
        retrievers=(),
        depth: int = 0,
        rrf_k: int = 0,
        return_text: bool = True,
        bm25_k1: float | None = None,
        bm25_b: float | None = None,
        fusion: str | None = None,
        nprobe: int | None = None,
        refine: int | None = None,
    ) -> search_pb2.SearchRequest:
        """`fusion`: "rrf" (every (corpus, retriever) list by rank), "medrag" (searchd.fusion), or None (the
        root's served fusion, medsnip.serving: RRF unless its recipe says otherwise)."""
        request = search_pb2.SearchRequest(
            query=query,
            k=k,
            corpora=list(corpora),
            retrievers=list(retrievers),
            depth=depth,
            fusion=search_pb2.Fusion(method=FUSION_METHODS[fusion], rrf_k=rrf_k),
            return_text=return_text,
        )
        if refine is not None:
            request.refine = refine
        if bm25_k1 is not None:
            request.bm25_k1 = bm25_k1
        if bm25_b is not None:
            request.bm25_b = bm25_b
        if nprobe is not None:
            request.nprobe = nprobe
        return request

    def search(self, query: str, k: int = 10, timeout: float | None = None, **options) -> search_pb2.SearchResponse:
        return self._call(self._stub.Search, self.request(query, k, **options), timeout)

    def batch_search(
        self, queries: list[str], k: int = 10, timeout: float | None = None, **options
    ) -> list[search_pb2.SearchResponse]:
        request = search_pb2.BatchSearchRequest(requests=[self.request(q, k, **options) for q in queries])
        return list(self._call(self._stub.BatchSearch, request, timeout).responses)

    def get_snippets(self, ids: list[str], timeout: float | None = None) -> search_pb2.GetSnippetsResponse:
        return self._call(self._stub.GetSnippets, search_pb2.GetSnippetsRequest(ids=list(ids)), timeout)

    def scan_snippets(
        self, corpora=(), first_chunk_only: bool = False, return_text: bool = False, page_size: int = 0
    ) -> Iterator[tuple[str, search_pb2.Snippet]]:
        """(corpus, snippet) for every snippet of `corpora` (all when empty), streamed in store order.
        A stream is not retried once started; a refused start (UNAVAILABLE) is, like other calls."""
        request = search_pb2.ScanSnippetsRequest(
            corpora=list(corpora), first_chunk_only=first_chunk_only, return_text=return_text, page_size=page_size
        )

        def start():  # the first page is where a refused or unreachable stream fails
            pages = self._stub.ScanSnippets(request, metadata=self._metadata)
            first = next(pages, None)
            return itertools.chain([first] if first is not None else [], pages)

        pages = self._retrying(start)
        while True:
            try:
                page = next(pages)
            except StopIteration:
                return
            except grpc.RpcError as error:  # the stream broke after it started
                raise searchd_error(self.address, error) from None
            for snippet in page.snippets:
                yield page.corpus, snippet

    def info(self, timeout: float | None = None) -> search_pb2.InfoResponse:
        return self._call(self._stub.Info, search_pb2.InfoRequest(), timeout)

    def call(self, method: str, request: dict | None = None, timeout: float | None = None):
        """Any method of the service by its name, with its request as a dict (protobuf's JSON mapping):
        `client.call("Info")`, `client.call("GetSnippets", {"ids": ["pubmed:1:0"]})`. Made from the
        service's descriptor, so a method added to search.proto and the server is callable here (and by
        `searchd call`) with no client code; a server-streaming method returns an iterator of responses."""
        descriptor = SERVICE.methods_by_name.get(method)
        if descriptor is None:
            raise ValueError(f"no method {method!r}; the service has {', '.join(SERVICE.methods_by_name)}")
        message = getattr(search_pb2, descriptor.input_type.name)()
        json_format.ParseDict(request or {}, message)
        stub_method = getattr(self._stub, method)
        if descriptor.server_streaming:
            return self._retrying(lambda: stub_method(message, metadata=self._metadata))
        return self._call(stub_method, message, timeout)


SERVICE = search_pb2.DESCRIPTOR.services_by_name["SearchService"]


def describe_failure(address: str, code: grpc.StatusCode, details: str) -> str:
    """One sentence for a failed call, the same in every command: who, what went wrong, what to do."""
    if code == grpc.StatusCode.UNAVAILABLE:
        return f"searchd at {address} is unreachable ({details}); start it with `searchd serve --root ROOT`"
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return f"searchd at {address} refused the call: {details} (pass --token-file)"
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return f"searchd at {address} refused the request: {details}"
    return f"searchd at {address}: {code.name}: {details}"
