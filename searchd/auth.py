"""Bearer-token access: every call but health checks must carry `authorization: Bearer <token>`."""

from __future__ import annotations

import hmac
from pathlib import Path

import grpc


class TokenInterceptor(grpc.ServerInterceptor):
    """Refuses calls without the token (UNAUTHENTICATED); health checks stay open for load balancers.
    The comparison takes the same time whatever the given token shares with the real one."""

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
