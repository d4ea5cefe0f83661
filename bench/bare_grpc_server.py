"""A bare grpcio server with medsnip's Search method and nothing else, for the garbage-flood benchmark:
`proto` registers it as generated code does (grpcio decodes requests), `decoding` adds searchd's
DecodingInterceptor (the handler decodes them). Writes its port to PORT_FILE, serves until killed.

usage: python bench/bare_grpc_server.py proto|decoding PORT_FILE
"""

from __future__ import annotations

import sys
import time
from concurrent import futures
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from medsnip.v1 import search_pb2  # noqa: E402
from searchd.decoding import DecodingInterceptor  # noqa: E402


def answer(request: search_pb2.SearchRequest, context) -> search_pb2.SearchResponse:
    return search_pb2.SearchResponse()


def main() -> None:
    mode, port_file = sys.argv[1], Path(sys.argv[2])
    handler = grpc.method_handlers_generic_handler(
        "medsnip.v1.SearchService",
        {
            "Search": grpc.unary_unary_rpc_method_handler(
                answer,
                request_deserializer=search_pb2.SearchRequest.FromString,
                response_serializer=search_pb2.SearchResponse.SerializeToString,
            )
        },
    )
    interceptors = [DecodingInterceptor()] if mode == "decoding" else []
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), interceptors=interceptors)
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    port_file.write_text(str(port))
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
