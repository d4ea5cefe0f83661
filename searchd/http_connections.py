"""Connection hygiene for searchd's HTTP side: uvicorn's HTTP/1.1 protocol with a deadline for each request to
arrive whole and a hard cap on open connections, so that idle, silent or half-sent connections cannot hold the
server.

uvicorn closes a keep-alive connection idle between requests, but nothing ends one that never sends a request,
or sends its headers a byte at a time (each byte cancels the keep-alive timer), and its own concurrency limit
answers every request, `/health` included, with `503 text/plain` while such sockets are open. Here:

- a request must arrive whole (headers and body) within `request_seconds` of the connection opening or of the
  previous response (plus uvicorn's keep-alive time); else the connection gets `408` in searchd's error shape and
  is closed;
- past `soft_cap` open connections a new one makes room by closing the connection that has waited longest without a
  request in progress (one that never sent a whole request, or a keep-alive one between requests), if it has waited
  at least EVICT_AFTER_SECONDS (a client that has just connected gets the time to send its request), so sockets
  opened and left silent cannot lock real clients out for their whole request deadline;
- past `hard_cap` (every connection busy) a new one is answered `503` with Retry-After and closed at once; between
  the two caps only `/health` is answered (searchd.http_api.Guard);
- at shutdown an idle connection that does not close within CLOSE_SECONDS is cut (a TLS one would otherwise
  wait for a goodbye from a client that is gone, and hold the process's exit for the whole grace period).
"""

from __future__ import annotations

import asyncio
import json

from uvicorn.protocols.http.h11_impl import H11Protocol

CLOSE_SECONDS = 1.0  # how long an idle connection closed at shutdown may take to say goodbye before it is cut
EVICT_AFTER_SECONDS = 1.0  # how long a connection waits without a request before a new one may close it for room


def error_bytes(status: int, reason: str, code: str, message: str, retry: bool = False) -> bytes:
    """A whole HTTP/1.1 reply in searchd's error shape that closes the connection."""
    body = json.dumps({"error": {"code": code, "message": message, "field": ""}}).encode()
    head = [
        f"HTTP/1.1 {status} {reason}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
    ]
    if retry:
        head.append("retry-after: 1")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def guarded_protocol(request_seconds: float, soft_cap: int, hard_cap: int) -> type[H11Protocol]:
    """uvicorn's H11Protocol with the module's request deadline and connection caps."""
    # connections without a request in progress -> since when, the longest waiting first (a dict keeps insertion order)
    idle: dict[H11Protocol, float] = {}
    closing: set[H11Protocol] = set()  # closed to make room, not yet gone from `connections`

    class GuardedH11Protocol(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._deadline: asyncio.TimerHandle | None = None
            self._make_room()
            idle[self] = self.loop.time()
            if len(self.connections) > hard_cap:
                transport.write(
                    error_bytes(503, "Service Unavailable", "UNAVAILABLE", "too many open connections", retry=True)
                )
                transport.close()
                return
            self._arm(request_seconds)

        def _make_room(self) -> None:
            """Close connections idle longest (the module's rule) until the open ones are back within `soft_cap`."""
            now = self.loop.time()
            while idle and len(self.connections) - len(closing) > soft_cap:
                oldest, since = next(iter(idle.items()))
                if now - since < EVICT_AFTER_SECONDS:
                    return
                del idle[oldest]
                closing.add(oldest)
                oldest.transport.close()  # between requests: a server may close a keep-alive connection any time

        def _between_requests(self) -> bool:
            """No request in progress: none yet, or the last one answered."""
            return self.cycle is None or self.cycle.response_complete

        def _arm(self, seconds: float) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(seconds, self._request_too_slow)

        def _disarm(self) -> None:
            if getattr(self, "_deadline", None) is not None:
                self._deadline.cancel()
                self._deadline = None

        def _request_too_slow(self) -> None:
            self._deadline = None
            if self.transport.is_closing():
                return
            if self._between_requests():  # nothing sent back yet on this request
                message = f"the request did not arrive whole within {request_seconds:g} s"
                self.transport.write(error_bytes(408, "Request Timeout", "DEADLINE_EXCEEDED", message))
            self.transport.close()

        def handle_events(self) -> None:
            super().handle_events()
            if not self._between_requests():
                idle.pop(self, None)  # a request is in progress: not closed to make room
                if not self.cycle.more_body:
                    self._disarm()  # the request is in: the search's own deadline applies from here

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                idle[self] = self.loop.time()
                self._arm(self.timeout_keep_alive + request_seconds)

        def shutdown(self) -> None:
            between_requests = self._between_requests()
            super().shutdown()
            # closed by uvicorn; over TLS the close waits for the peer's close_notify, which a client that already hung
            # up never sends, and uvicorn's shutdown waited grace + margin for it (13 s)
            if between_requests:
                self.loop.call_later(CLOSE_SECONDS, self._abort_if_open)

        def _abort_if_open(self) -> None:
            if self.transport is not None and self in self.connections:
                self.transport.abort()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            idle.pop(self, None)
            closing.discard(self)
            super().connection_lost(exc)

    return GuardedH11Protocol
