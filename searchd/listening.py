"""Where searchd listens: the error of an address it cannot serve, shared by its gRPC and HTTP sides, and the HTTP
side's listening socket."""

from __future__ import annotations

import socket


class BindError(Exception):
    """The address cannot be served (port out of range, taken, or not a local address)."""


def bind_http_socket(host: str, port: int) -> socket.socket:
    """A listening socket for the HTTP side on exactly `host:port` (BindError when that cannot be)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # not SO_REUSEPORT: a taken port stays an error
    # Accepted connections inherit it. asyncio sets it on the connections of a server it binds itself, not on
    # those of a socket it is handed: without it every reply waits ~40 ms for the client's delayed ACK.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise BindError(
            f"cannot listen for HTTP on {host}:{port}: {error.strerror} "
            "(the port is taken, or the address is not local)"
        ) from error
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock
